// nfnetlink_acct (NFNL_SUBSYS_ACCT = 7): the kernel's named packet/byte counters that the
// xt_nfacct match feeds. Numbers from linux/netfilter/nfnetlink_acct.h.

/** NFACCT_NAME_MAX: names are at most 31 bytes and a NUL. */
export const NFACCT_NAME_MAX = 32;

/** enum nfnl_acct_msg_types. */
export const NfacctCmd = {
  NEW: 0,
  GET: 1,
  GET_CTRZERO: 2,
  DEL: 3,
  OVERQUOTA: 4,
} as const;

/** enum nfnl_acct_type. Counters are big-endian u64, USE and FLAGS big-endian u32. */
export const NfacctAttr = {
  NAME: 1,
  PKTS: 2,
  BYTES: 3,
  USE: 4,
  FLAGS: 5,
  QUOTA: 6,
  FILTER: 7,
  PAD: 8,
} as const;
