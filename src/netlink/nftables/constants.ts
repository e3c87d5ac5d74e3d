// Numbers transcribed from linux/netfilter/nf_tables.h (uapi), plus the few nft/libnftnl
// userspace numbers (datatype ids, udata TLV types, expression type ids) that the kernel
// stores opaquely and `nft` needs to print our objects. Plain objects, not enums, so Node
// can strip the types.

/** enum nf_tables_msg_types. DESTROY* (kernel 6.3+) are newer than Debian 12's header. */
export const NftMsg = {
  NEWTABLE: 0,
  GETTABLE: 1,
  DELTABLE: 2,
  NEWCHAIN: 3,
  GETCHAIN: 4,
  DELCHAIN: 5,
  NEWRULE: 6,
  GETRULE: 7,
  DELRULE: 8,
  NEWSET: 9,
  GETSET: 10,
  DELSET: 11,
  NEWSETELEM: 12,
  GETSETELEM: 13,
  DELSETELEM: 14,
  NEWGEN: 15,
  GETGEN: 16,
  // Kernel 6.3+: like DEL*, but a missing object is not an error.
  DESTROYTABLE: 26,
  DESTROYCHAIN: 27,
  DESTROYRULE: 28,
  DESTROYSET: 29,
  DESTROYSETELEM: 30,
} as const;

/** Address families in nfgenmsg (NFPROTO_*). */
export const NFPROTO = { inet: 1, ip: 2, arp: 3, netdev: 5, bridge: 7, ip6: 10 } as const;
export type Family = keyof typeof NFPROTO;
export const familyName = (n: number): Family | undefined =>
  (Object.keys(NFPROTO) as Family[]).find((k) => NFPROTO[k] === n);

export const NFTA_LIST_ELEM = 1;

export const NFTA_HOOK_HOOKNUM = 1;
export const NFTA_HOOK_PRIORITY = 2;
export const NFTA_HOOK_DEV = 3;

export const NFTA_TABLE_NAME = 1;
export const NFTA_TABLE_FLAGS = 2;
export const NFTA_TABLE_USE = 3;
export const NFTA_TABLE_HANDLE = 4;
export const NFTA_TABLE_USERDATA = 6;

export const NFTA_CHAIN_TABLE = 1;
export const NFTA_CHAIN_HANDLE = 2;
export const NFTA_CHAIN_NAME = 3;
export const NFTA_CHAIN_HOOK = 4;
export const NFTA_CHAIN_POLICY = 5;
export const NFTA_CHAIN_USE = 6;
export const NFTA_CHAIN_TYPE = 7;
export const NFTA_CHAIN_FLAGS = 10;
export const NFTA_CHAIN_USERDATA = 12;

export const NFTA_RULE_TABLE = 1;
export const NFTA_RULE_CHAIN = 2;
export const NFTA_RULE_HANDLE = 3;
export const NFTA_RULE_EXPRESSIONS = 4;
export const NFTA_RULE_POSITION = 6;
export const NFTA_RULE_USERDATA = 7;
export const NFTA_RULE_ID = 9;

export const NFT_SET_ANONYMOUS = 0x1;
export const NFT_SET_CONSTANT = 0x2;
export const NFT_SET_INTERVAL = 0x4;
export const NFT_SET_MAP = 0x8;
export const NFT_SET_TIMEOUT = 0x10;
export const NFT_SET_EVAL = 0x20;
export const NFT_SET_OBJECT = 0x40;
export const NFT_SET_CONCAT = 0x80;

export const NFTA_SET_TABLE = 1;
export const NFTA_SET_NAME = 2;
export const NFTA_SET_FLAGS = 3;
export const NFTA_SET_KEY_TYPE = 4;
export const NFTA_SET_KEY_LEN = 5;
export const NFTA_SET_DATA_TYPE = 6;
export const NFTA_SET_DATA_LEN = 7;
export const NFTA_SET_POLICY = 8;
export const NFTA_SET_DESC = 9;
export const NFTA_SET_ID = 10;
export const NFTA_SET_TIMEOUT = 11;
export const NFTA_SET_GC_INTERVAL = 12;
export const NFTA_SET_USERDATA = 13;
export const NFTA_SET_HANDLE = 16;

export const NFTA_SET_DESC_SIZE = 1;
export const NFTA_SET_DESC_CONCAT = 2;
export const NFTA_SET_FIELD_LEN = 1;

export const NFT_SET_ELEM_INTERVAL_END = 0x1;
export const NFTA_SET_ELEM_KEY = 1;
export const NFTA_SET_ELEM_DATA = 2;
export const NFTA_SET_ELEM_FLAGS = 3;
export const NFTA_SET_ELEM_TIMEOUT = 4;
export const NFTA_SET_ELEM_EXPIRATION = 5;
export const NFTA_SET_ELEM_USERDATA = 6;
export const NFTA_SET_ELEM_KEY_END = 10;

export const NFTA_SET_ELEM_LIST_TABLE = 1;
export const NFTA_SET_ELEM_LIST_SET = 2;
export const NFTA_SET_ELEM_LIST_ELEMENTS = 3;
export const NFTA_SET_ELEM_LIST_SET_ID = 4;

export const NFT_DATA_VALUE = 0;
export const NFT_DATA_VERDICT = 0xffffff00;
export const NFTA_DATA_VALUE = 1;
export const NFTA_DATA_VERDICT = 2;
export const NFTA_VERDICT_CODE = 1;
export const NFTA_VERDICT_CHAIN = 2;

export const NFTA_EXPR_NAME = 1;
export const NFTA_EXPR_DATA = 2;

export const NFTA_GEN_ID = 1;

/** enum nft_registers: the verdict register, 4 x 128-bit (legacy) and 16 x 32-bit registers. */
export const NFT_REG_VERDICT = 0;
export const NFT_REG_1 = 1;
export const NFT_REG32_00 = 8;

/** enum nft_verdicts plus the netfilter verdicts NF_DROP (0) and NF_ACCEPT (1). */
export const VerdictCode = {
  drop: 0,
  accept: 1,
  continue: -1,
  break: -2,
  jump: -3,
  goto: -4,
  return: -5,
} as const;

/** Hooks (NF_INET_* and NF_NETDEV_INGRESS share numbers where they overlap). */
export const HOOKS = { prerouting: 0, input: 1, forward: 2, output: 3, postrouting: 4, ingress: 0 } as const;
export type Hook = keyof typeof HOOKS;

/** linux/netfilter/nf_nat.h NF_NAT_RANGE_* flags. */
export const NF_NAT_RANGE_MAP_IPS = 1;
export const NF_NAT_RANGE_PROTO_SPECIFIED = 2;
export const NF_NAT_RANGE_PROTO_RANDOM = 4;
export const NF_NAT_RANGE_PERSISTENT = 8;
export const NF_NAT_RANGE_PROTO_RANDOM_FULLY = 16;
