// Links and addresses as the route client reports them: plain data.

import type { IPFamily } from '../../base/ip.ts';

export interface Link {
  index: number;
  name: string;
  /** IFLA_INFO_KIND: "dummy", "veth", "bridge" ...; absent for devices without rtnl_link_ops (lo, most NICs). */
  kind?: string;
  /** Interface flags (IFF_*). */
  flags: number;
  /** IFF_UP is set (administratively up). */
  up: boolean;
  mtu?: number;
  /** Hardware address as aa:bb:cc:dd:ee:ff. */
  mac?: string;
  operState?: string;
  /** ARPHRD_* (ifi_type). */
  linkType: number;
}

export interface Addr {
  /** The interface index the address is on. */
  index: number;
  family: IPFamily;
  /** The local address (IFA_LOCAL, else IFA_ADDRESS). */
  address: string;
  prefixLen: number;
  /** RT_SCOPE_*: 0 universe (global), 253 link, 254 host. */
  scope: number;
  /** IFA_F_* flags (IFA_FLAGS when present, else the header's byte). */
  flags: number;
  label?: string;
}

export interface AddrOptions {
  /** RT_SCOPE_*; default 0 (universe), as upstream kube-proxy's netlink.AddrAdd uses. */
  scope?: number;
  /**
   * IFA_F_NOPREFIXROUTE: no prefix route for the address. Upstream kube-proxy does not set it;
   * it only matters for IPv6 /128 (the kernel adds a /128 route in the main table otherwise).
   */
  noPrefixRoute?: boolean;
}
