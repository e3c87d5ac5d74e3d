// Numbers from linux/netfilter/ipset/ip_set.h (and ip_set_hash.h, ip_set_bitmap.h,
// ip_set_list.h). Plain objects, so that Node can strip the types.

/** The protocol version we speak (IPSET_PROTOCOL); the kernel accepts 6 and 7. */
export const IPSET_PROTOCOL = 7;
export const IPSET_PROTOCOL_MIN = 6;
/** Set names are at most 31 bytes plus the NUL (IPSET_MAXNAMELEN). */
export const IPSET_MAXNAMELEN = 32;

export const IpsetCmd = {
  PROTOCOL: 1,
  CREATE: 2,
  DESTROY: 3,
  FLUSH: 4,
  RENAME: 5,
  SWAP: 6,
  LIST: 7,
  SAVE: 8,
  ADD: 9,
  DEL: 10,
  TEST: 11,
  HEADER: 12,
  TYPE: 13,
  GET_BYNAME: 14,
  GET_BYINDEX: 15,
} as const;

/** Command-level attributes. */
export const IpsetAttr = {
  PROTOCOL: 1,
  SETNAME: 2,
  TYPENAME: 3,
  SETNAME2: 3,
  REVISION: 4,
  FAMILY: 5,
  FLAGS: 6,
  DATA: 7,
  ADT: 8,
  LINENO: 9,
  PROTOCOL_MIN: 10,
  REVISION_MIN: 10,
  INDEX: 11,
} as const;

/** Attributes inside IPSET_ATTR_DATA: create-time (CADT and CREATE) and entry (ADT) ones. */
export const IpsetDataAttr = {
  IP: 1,
  IP_TO: 2,
  CIDR: 3,
  PORT: 4,
  PORT_TO: 5,
  TIMEOUT: 6,
  PROTO: 7,
  CADT_FLAGS: 8,
  LINENO: 9,
  MARK: 10,
  MARKMASK: 11,
  // create-only
  INITVAL: 17,
  HASHSIZE: 18,
  MAXELEM: 19,
  NETMASK: 20,
  BUCKETSIZE: 21,
  RESIZE: 22,
  SIZE: 23,
  // kernel-only (in LIST replies)
  ELEMENTS: 24,
  REFERENCES: 25,
  MEMSIZE: 26,
  // entry-only
  ETHER: 17,
  NAME: 18,
  NAMEREF: 19,
  IP2: 20,
  CIDR2: 21,
  IP2_TO: 22,
  IFACE: 23,
  BYTES: 24,
  PACKETS: 25,
  COMMENT: 26,
  SKBMARK: 27,
  SKBPRIO: 28,
  SKBQUEUE: 29,
  PAD: 30,
} as const;

/** Inside IPSET_ATTR_IP / IPSET_ATTR_IP2. */
export const IPSET_ATTR_IPADDR_IPV4 = 1;
export const IPSET_ATTR_IPADDR_IPV6 = 2;

/** IPSET_ATTR_FLAGS bits (command level). */
export const IPSET_FLAG_EXIST = 1 << 0;
export const IPSET_FLAG_LIST_SETNAME = 1 << 1;
export const IPSET_FLAG_LIST_HEADER = 1 << 2;

/** IPSET_ATTR_CADT_FLAGS bits (create and entry level). */
export const IPSET_FLAG_NOMATCH = 1 << 2;
export const IPSET_FLAG_WITH_COUNTERS = 1 << 3;
export const IPSET_FLAG_WITH_COMMENT = 1 << 4;
export const IPSET_FLAG_WITH_FORCEADD = 1 << 5;

/** NFPROTO_* values used as the set family (IPSET_ATTR_FAMILY). */
export const NFPROTO_UNSPEC = 0;
export const NFPROTO_IPV4 = 2;
export const NFPROTO_IPV6 = 10;

export const IPSET_ERR_PRIVATE = 4096;
export const IPSET_ERR_TYPE_SPECIFIC = 4352;

/** Generic errors (enum ipset_errno), 4097 and up. */
export const IPSET_ERRORS: readonly string[] = [
  'IPSET_ERR_PRIVATE',
  'IPSET_ERR_PROTOCOL',
  'IPSET_ERR_FIND_TYPE',
  'IPSET_ERR_MAX_SETS',
  'IPSET_ERR_BUSY',
  'IPSET_ERR_EXIST_SETNAME2',
  'IPSET_ERR_TYPE_MISMATCH',
  'IPSET_ERR_EXIST',
  'IPSET_ERR_INVALID_CIDR',
  'IPSET_ERR_INVALID_NETMASK',
  'IPSET_ERR_INVALID_FAMILY',
  'IPSET_ERR_TIMEOUT',
  'IPSET_ERR_REFERENCED',
  'IPSET_ERR_IPADDR_IPV4',
  'IPSET_ERR_IPADDR_IPV6',
  'IPSET_ERR_COUNTER',
  'IPSET_ERR_COMMENT',
  'IPSET_ERR_INVALID_MARKMASK',
  'IPSET_ERR_SKBINFO',
];

/** Type-specific errors, 4352 and up: the same numbers mean different things per family of types. */
export const IPSET_HASH_ERRORS: readonly string[] = [
  'IPSET_ERR_HASH_FULL',
  'IPSET_ERR_HASH_ELEM',
  'IPSET_ERR_INVALID_PROTO',
  'IPSET_ERR_MISSING_PROTO',
  'IPSET_ERR_HASH_RANGE_UNSUPPORTED',
  'IPSET_ERR_HASH_RANGE',
];
export const IPSET_BITMAP_ERRORS: readonly string[] = ['IPSET_ERR_BITMAP_RANGE', 'IPSET_ERR_BITMAP_RANGE_SIZE'];
export const IPSET_LIST_ERRORS: readonly string[] = [
  'IPSET_ERR_NAME',
  'IPSET_ERR_LOOP',
  'IPSET_ERR_BEFORE',
  'IPSET_ERR_NAMEREF',
  'IPSET_ERR_LIST_FULL',
  'IPSET_ERR_REF_EXIST',
];
