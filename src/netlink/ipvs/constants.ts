// Numbers transcribed from /usr/include/linux/ip_vs.h (IPVS generic-netlink interface,
// IP_VS_VERSION_CODE 0x010201). Plain objects so that Node can strip the types.

export const IPVS_GENL_NAME = 'IPVS';
export const IPVS_GENL_VERSION = 1;

/** enum IPVS_CMD_*. */
export const IpvsCmd = {
  NEW_SERVICE: 1,
  SET_SERVICE: 2,
  DEL_SERVICE: 3,
  GET_SERVICE: 4,
  NEW_DEST: 5,
  SET_DEST: 6,
  DEL_DEST: 7,
  GET_DEST: 8,
  NEW_DAEMON: 9,
  DEL_DAEMON: 10,
  GET_DAEMON: 11,
  SET_CONFIG: 12,
  GET_CONFIG: 13,
  SET_INFO: 14,
  GET_INFO: 15,
  ZERO: 16,
  FLUSH: 17,
} as const;

/** enum IPVS_CMD_ATTR_*: the first level of every IPVS message. */
export const IpvsCmdAttr = {
  SERVICE: 1,
  DEST: 2,
  DAEMON: 3,
  TIMEOUT_TCP: 4,
  TIMEOUT_TCP_FIN: 5,
  TIMEOUT_UDP: 6,
} as const;

/** enum IPVS_SVC_ATTR_*, nested in IPVS_CMD_ATTR_SERVICE. */
export const IpvsSvcAttr = {
  AF: 1, // u16
  PROTOCOL: 2, // u16
  ADDR: 3, // union nf_inet_addr (16 bytes; ipvsadm and the kernel always send all 16)
  PORT: 4, // __be16
  FWMARK: 5, // u32
  SCHED_NAME: 6, // NUL-terminated, at most IP_VS_SCHEDNAME_MAXLEN - 1 characters
  FLAGS: 7, // struct ip_vs_flags { u32 flags; u32 mask }
  TIMEOUT: 8, // u32 seconds
  NETMASK: 9, // IPv4: __be32 mask; IPv6: u32 prefix length (host order)
  STATS: 10, // nested IPVS_STATS_ATTR_*
  PE_NAME: 11, // NUL-terminated
  STATS64: 12, // nested IPVS_STATS_ATTR_*, all u64
} as const;

/** enum IPVS_DEST_ATTR_*, nested in IPVS_CMD_ATTR_DEST. */
export const IpvsDestAttr = {
  ADDR: 1, // union nf_inet_addr
  PORT: 2, // __be16
  FWD_METHOD: 3, // u32: IP_VS_CONN_F_FWD_MASK bits
  WEIGHT: 4, // u32 (signed int in the kernel)
  U_THRESH: 5, // u32
  L_THRESH: 6, // u32
  ACTIVE_CONNS: 7, // u32, read-only
  INACT_CONNS: 8, // u32, read-only
  PERSIST_CONNS: 9, // u32, read-only
  STATS: 10,
  ADDR_FAMILY: 11, // u16
  STATS64: 12,
  TUN_TYPE: 13, // u8
  TUN_PORT: 14, // __be16
  TUN_FLAGS: 15, // u16
} as const;

/** enum IPVS_STATS_ATTR_*: u32 in STATS except INBYTES/OUTBYTES (u64); all u64 in STATS64. */
export const IpvsStatsAttr = {
  CONNS: 1,
  INPKTS: 2,
  OUTPKTS: 3,
  INBYTES: 4,
  OUTBYTES: 5,
  CPS: 6,
  INPPS: 7,
  OUTPPS: 8,
  INBPS: 9,
  OUTBPS: 10,
  PAD: 11,
} as const;

/** enum IPVS_INFO_ATTR_* (reply to IPVS_CMD_GET_INFO). */
export const IpvsInfoAttr = {
  VERSION: 1,
  CONN_TAB_SIZE: 2,
} as const;

/** Virtual service flags (IP_VS_SVC_F_*). */
export const IP_VS_SVC_F_PERSISTENT = 0x0001;
export const IP_VS_SVC_F_HASHED = 0x0002;
export const IP_VS_SVC_F_ONEPACKET = 0x0004;
export const IP_VS_SVC_F_SCHED1 = 0x0008;
export const IP_VS_SVC_F_SCHED2 = 0x0010;
export const IP_VS_SVC_F_SCHED3 = 0x0020;
export const IP_VS_SVC_F_SCHED_SH_FALLBACK = IP_VS_SVC_F_SCHED1;
export const IP_VS_SVC_F_SCHED_SH_PORT = IP_VS_SVC_F_SCHED2;

/** Forwarding methods (IP_VS_CONN_F_FWD_MASK values). */
export const IP_VS_CONN_F_FWD_MASK = 0x0007;
export const IP_VS_CONN_F_MASQ = 0x0000;
export const IP_VS_CONN_F_LOCALNODE = 0x0001;
export const IP_VS_CONN_F_TUNNEL = 0x0002;
export const IP_VS_CONN_F_DROUTE = 0x0003;
export const IP_VS_CONN_F_BYPASS = 0x0004;

export const IP_VS_SCHEDNAME_MAXLEN = 16;
export const IP_VS_PENAME_MAXLEN = 16;

export const IPPROTO_TCP = 6;
export const IPPROTO_UDP = 17;
export const IPPROTO_SCTP = 132;
