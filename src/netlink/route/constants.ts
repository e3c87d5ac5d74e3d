// Numbers from linux/rtnetlink.h, linux/if_link.h, linux/if_addr.h, linux/if.h.

export const RTM_NEWLINK = 16;
export const RTM_DELLINK = 17;
export const RTM_GETLINK = 18;
export const RTM_NEWADDR = 20;
export const RTM_DELADDR = 21;
export const RTM_GETADDR = 22;

/** struct ifinfomsg: family u8, pad u8, type u16, index s32, flags u32, change u32. */
export const IFINFOMSG_LEN = 16;
/** struct ifaddrmsg: family u8, prefixlen u8, flags u8, scope u8, index u32. */
export const IFADDRMSG_LEN = 8;

export const Ifla = {
  ADDRESS: 1,
  BROADCAST: 2,
  IFNAME: 3,
  MTU: 4,
  LINK: 5,
  QDISC: 6,
  MASTER: 10,
  TXQLEN: 13,
  OPERSTATE: 16,
  LINKMODE: 17,
  LINKINFO: 18,
  IFALIAS: 20,
  GROUP: 27,
  EXT_MASK: 29,
} as const;

export const IFLA_INFO_KIND = 1;
export const IFLA_INFO_DATA = 2;

/** IFLA_EXT_MASK bits. */
export const RTEXT_FILTER_VF = 1 << 0;
export const RTEXT_FILTER_SKIP_STATS = 1 << 3;

export const Ifa = {
  ADDRESS: 1,
  LOCAL: 2,
  LABEL: 3,
  BROADCAST: 4,
  ANYCAST: 5,
  CACHEINFO: 6,
  MULTICAST: 7,
  FLAGS: 8,
  RT_PRIORITY: 9,
  TARGET_NETNSID: 10,
  PROTO: 11,
} as const;

/** ifa_flags (linux/if_addr.h). */
export const IFA_F_SECONDARY = 0x01;
export const IFA_F_NODAD = 0x02;
export const IFA_F_OPTIMISTIC = 0x04;
export const IFA_F_DADFAILED = 0x08;
export const IFA_F_HOMEADDRESS = 0x10;
export const IFA_F_DEPRECATED = 0x20;
export const IFA_F_TENTATIVE = 0x40;
export const IFA_F_PERMANENT = 0x80;
export const IFA_F_MANAGETEMPADDR = 0x100;
export const IFA_F_NOPREFIXROUTE = 0x200;

/** Interface flags (linux/if.h). */
export const IFF_UP = 0x1;
export const IFF_BROADCAST = 0x2;
export const IFF_LOOPBACK = 0x8;
export const IFF_POINTOPOINT = 0x10;
export const IFF_RUNNING = 0x40;
export const IFF_NOARP = 0x80;
export const IFF_LOWER_UP = 0x10000;

/** Address scopes (enum rt_scope_t). */
export const RtScope = {
  UNIVERSE: 0,
  SITE: 200,
  LINK: 253,
  HOST: 254,
  NOWHERE: 255,
} as const;

/** IF_OPER_* (RFC 2863 operational states). */
export const OPER_STATES = ['unknown', 'notpresent', 'down', 'lowerlayerdown', 'testing', 'dormant', 'up'] as const;
