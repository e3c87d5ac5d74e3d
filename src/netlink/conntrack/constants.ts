// ctnetlink numbers, transcribed from linux/netfilter/nfnetlink_conntrack.h and
// linux/netfilter/nf_conntrack_common.h (uapi, as installed with kernel 6.18 headers).
// Plain objects, not enums, so that Node can strip the types.
//
// CTA_FILTER_F_* are the exception: the kernel does not export them in uapi. They are
// copied from net/netfilter/nf_conntrack_netlink.c (present since 5.8; unchanged up to
// 6.18) and libnetfilter_conntrack's copy of the same list; see filter.ts.

/** enum cntl_msg_types. */
export const CtMsg = {
  NEW: 0,
  GET: 1,
  DELETE: 2,
  GET_CTRZERO: 3,
  GET_STATS_CPU: 4,
  GET_STATS: 5,
  GET_DYING: 6,
  GET_UNCONFIRMED: 7,
} as const;

/** enum ctattr_type: the top-level attributes of a conntrack entry. */
export const CTA = {
  TUPLE_ORIG: 1,
  TUPLE_REPLY: 2,
  STATUS: 3,
  PROTOINFO: 4,
  HELP: 5,
  NAT_SRC: 6,
  TIMEOUT: 7,
  MARK: 8,
  COUNTERS_ORIG: 9,
  COUNTERS_REPLY: 10,
  USE: 11,
  ID: 12,
  NAT_DST: 13,
  TUPLE_MASTER: 14,
  SEQ_ADJ_ORIG: 15,
  SEQ_ADJ_REPLY: 16,
  SECMARK: 17,
  ZONE: 18,
  SECCTX: 19,
  TIMESTAMP: 20,
  MARK_MASK: 21,
  LABELS: 22,
  LABELS_MASK: 23,
  SYNPROXY: 24,
  FILTER: 25,
  STATUS_MASK: 26,
} as const;

/** enum ctattr_tuple. */
export const CTA_TUPLE = { IP: 1, PROTO: 2, ZONE: 3 } as const;

/** enum ctattr_ip. */
export const CTA_IP = { V4_SRC: 1, V4_DST: 2, V6_SRC: 3, V6_DST: 4 } as const;

/** enum ctattr_l4proto. */
export const CTA_PROTO = {
  NUM: 1,
  SRC_PORT: 2,
  DST_PORT: 3,
  ICMP_ID: 4,
  ICMP_TYPE: 5,
  ICMP_CODE: 6,
  ICMPV6_ID: 7,
  ICMPV6_TYPE: 8,
  ICMPV6_CODE: 9,
} as const;

/** enum ctattr_protoinfo and its TCP / SCTP children. */
export const CTA_PROTOINFO = { TCP: 1, DCCP: 2, SCTP: 3 } as const;
export const CTA_PROTOINFO_TCP = {
  STATE: 1,
  WSCALE_ORIGINAL: 2,
  WSCALE_REPLY: 3,
  FLAGS_ORIGINAL: 4,
  FLAGS_REPLY: 5,
} as const;
export const CTA_PROTOINFO_SCTP = { STATE: 1, VTAG_ORIGINAL: 2, VTAG_REPLY: 3 } as const;

/** enum ctattr_counters. */
export const CTA_COUNTERS = { PACKETS: 1, BYTES: 2, PACKETS32: 3, BYTES32: 4 } as const;

/** enum ctattr_tstamp. */
export const CTA_TIMESTAMP = { START: 1, STOP: 2 } as const;

/** enum ctattr_stats_cpu (IPCTNL_MSG_CT_GET_STATS_CPU, one message per CPU). */
export const CTA_STATS = {
  SEARCHED: 1,
  FOUND: 2,
  NEW: 3,
  INVALID: 4,
  IGNORE: 5,
  DELETE: 6,
  DELETE_LIST: 7,
  INSERT: 8,
  INSERT_FAILED: 9,
  DROP: 10,
  EARLY_DROP: 11,
  ERROR: 12,
  SEARCH_RESTART: 13,
  CLASH_RESOLVE: 14,
  CHAIN_TOOLONG: 15,
} as const;

/** enum ctattr_stats_global (IPCTNL_MSG_CT_GET_STATS). */
export const CTA_STATS_GLOBAL = { ENTRIES: 1, MAX_ENTRIES: 2 } as const;

/** enum ctattr_filter: which fields of CTA_TUPLE_ORIG / CTA_TUPLE_REPLY a dump must match. */
export const CTA_FILTER = { ORIG_FLAGS: 1, REPLY_FLAGS: 2 } as const;

/**
 * Bits of CTA_FILTER_ORIG_FLAGS / CTA_FILTER_REPLY_FLAGS (net/netfilter/nf_conntrack_netlink.c,
 * CTA_FILTER_F_*). The kernel reads these two u32 with nla_get_u32: host byte order, unlike
 * every other ctnetlink integer.
 */
export const CTA_FILTER_F = {
  IP_SRC: 1 << 0,
  IP_DST: 1 << 1,
  TUPLE_ZONE: 1 << 2,
  PROTO_NUM: 1 << 3,
  PROTO_SRC_PORT: 1 << 4,
  PROTO_DST_PORT: 1 << 5,
  PROTO_ICMP_TYPE: 1 << 6,
  PROTO_ICMP_CODE: 1 << 7,
  PROTO_ICMP_ID: 1 << 8,
  PROTO_ICMPV6_TYPE: 1 << 9,
  PROTO_ICMPV6_CODE: 1 << 10,
  PROTO_ICMPV6_ID: 1 << 11,
} as const;

/** enum ip_conntrack_status (nf_conntrack_common.h): bits of CTA_STATUS. */
export const IPS = {
  EXPECTED: 1 << 0,
  SEEN_REPLY: 1 << 1,
  ASSURED: 1 << 2,
  CONFIRMED: 1 << 3,
  SRC_NAT: 1 << 4,
  DST_NAT: 1 << 5,
  SEQ_ADJUST: 1 << 6,
  SRC_NAT_DONE: 1 << 7,
  DST_NAT_DONE: 1 << 8,
  DYING: 1 << 9,
  FIXED_TIMEOUT: 1 << 10,
  TEMPLATE: 1 << 11,
  UNTRACKED: 1 << 12,
  HELPER: 1 << 13,
  OFFLOAD: 1 << 14,
  HW_OFFLOAD: 1 << 15,
} as const;

/** Names of the status bits, lowest first, for labels and logs. */
export const IPS_NAMES: readonly string[] = Object.keys(IPS);

/** IP protocol numbers (netinet/in.h) that conntrack tracks with their own tuple fields. */
export const IPPROTO = {
  ICMP: 1,
  TCP: 6,
  UDP: 17,
  DCCP: 33,
  GRE: 47,
  ICMPV6: 58,
  SCTP: 132,
  UDPLITE: 136,
} as const;

/** Protocols whose tuple carries ports (CTA_PROTO_SRC_PORT / DST_PORT). */
export const PORT_PROTOS: ReadonlySet<number> = new Set([
  IPPROTO.TCP,
  IPPROTO.UDP,
  IPPROTO.DCCP,
  IPPROTO.SCTP,
  IPPROTO.UDPLITE,
]);

/** enum tcp_conntrack (linux/netfilter/nf_conntrack_tcp.h), for CTA_PROTOINFO_TCP_STATE. */
export const TCP_STATE_NAMES: readonly string[] = [
  'NONE',
  'SYN_SENT',
  'SYN_RECV',
  'ESTABLISHED',
  'FIN_WAIT',
  'CLOSE_WAIT',
  'LAST_ACK',
  'TIME_WAIT',
  'CLOSE',
  'SYN_SENT2',
];
