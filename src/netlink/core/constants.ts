// Numbers from the kernel's uapi headers: linux/netlink.h, linux/netfilter/nfnetlink.h,
// linux/genetlink.h. Plain objects (not enums) so that Node can strip the types.

/** Netlink protocol families (linux/netlink.h). */
export const Protocol = {
  ROUTE: 0,
  NETFILTER: 12,
  GENERIC: 16,
} as const;

/** Standard message types (linux/netlink.h). */
export const NLMSG_NOOP = 1;
export const NLMSG_ERROR = 2;
export const NLMSG_DONE = 3;
export const NLMSG_OVERRUN = 4;
/** Types below this value are reserved for netlink control messages. */
export const NLMSG_MIN_TYPE = 0x10;

/** nlmsghdr flags (linux/netlink.h). */
export const NLM_F_REQUEST = 0x01;
export const NLM_F_MULTI = 0x02;
export const NLM_F_ACK = 0x04;
export const NLM_F_ECHO = 0x08;
export const NLM_F_DUMP_INTR = 0x10;
export const NLM_F_DUMP_FILTERED = 0x20;
// Modifiers to GET requests.
export const NLM_F_ROOT = 0x100;
export const NLM_F_MATCH = 0x200;
export const NLM_F_DUMP = NLM_F_ROOT | NLM_F_MATCH;
// Modifiers to NEW requests.
export const NLM_F_REPLACE = 0x100;
export const NLM_F_EXCL = 0x200;
export const NLM_F_CREATE = 0x400;
export const NLM_F_APPEND = 0x800;
// Modifiers to DELETE requests.
export const NLM_F_NONREC = 0x100;
export const NLM_F_BULK = 0x200;
// Flags on NLMSG_ERROR acknowledgements.
export const NLM_F_CAPPED = 0x100;
export const NLM_F_ACK_TLVS = 0x200;

/** Extended ACK attributes carried after a capped error (enum nlmsgerr_attrs). */
export const NLMSGERR_ATTR_MSG = 1;
export const NLMSGERR_ATTR_OFFS = 2;
export const NLMSGERR_ATTR_COOKIE = 3;
export const NLMSGERR_ATTR_POLICY = 4;
export const NLMSGERR_ATTR_MISS_TYPE = 5;
export const NLMSGERR_ATTR_MISS_NEST = 6;

/** nlattr type flags (linux/netlink.h). */
export const NLA_F_NESTED = 0x8000;
export const NLA_F_NET_BYTEORDER = 0x4000;
export const NLA_TYPE_MASK = ~(NLA_F_NESTED | NLA_F_NET_BYTEORDER) & 0xffff;

export const NLMSG_HDRLEN = 16;
export const NLA_HDRLEN = 4;

/** nfnetlink (linux/netfilter/nfnetlink.h). */
export const NFNETLINK_V0 = 0;
export const NFNL_MSG_BATCH_BEGIN = NLMSG_MIN_TYPE;
export const NFNL_MSG_BATCH_END = NLMSG_MIN_TYPE + 1;
export const NFNL_BATCH_GENID = 1;
export const NfnlSubsys = {
  NONE: 0,
  CTNETLINK: 1,
  CTNETLINK_EXP: 2,
  QUEUE: 3,
  ULOG: 4,
  OSF: 5,
  IPSET: 6,
  ACCT: 7,
  CTNETLINK_TIMEOUT: 8,
  CTHELPER: 9,
  NFTABLES: 10,
  NFT_COMPAT: 11,
  HOOK: 12,
} as const;

/** Generic netlink controller (linux/genetlink.h). */
export const GENL_ID_CTRL = NLMSG_MIN_TYPE;
export const GENL_HDRLEN = 4;
export const CTRL_CMD_GETFAMILY = 3;
export const CTRL_ATTR_FAMILY_ID = 1;
export const CTRL_ATTR_FAMILY_NAME = 2;
export const CTRL_ATTR_VERSION = 3;
export const CTRL_ATTR_HDRSIZE = 4;
export const CTRL_ATTR_MAXATTR = 5;
export const CTRL_ATTR_MCAST_GROUPS = 7;
export const CTRL_ATTR_MCAST_GRP_NAME = 1;
export const CTRL_ATTR_MCAST_GRP_ID = 2;

/** Address families used in nfgenmsg and elsewhere (linux/socket.h). */
export const AF_UNSPEC = 0;
export const AF_INET = 2;
export const AF_INET6 = 10;
export const NFPROTO_INET = 1;
