// What differs between the IPv4 and the IPv6 table: field names, address type, reject type,
// the loopback range that never takes node ports.

import type { IPFamily } from '../../base/ip.ts';
import type { Field, Family, RejectWith } from '../../netlink/nftables/index.ts';

export interface FamilyTraits {
  readonly ipFamily: IPFamily;
  readonly nft: Family;
  readonly saddr: Field;
  readonly daddr: Field;
  readonly addrType: 'ipv4_addr' | 'ipv6_addr';
  readonly reject: RejectWith;
  readonly loopback: string;
}

export const IPV4: FamilyTraits = {
  ipFamily: 'IPv4',
  nft: 'ip',
  saddr: 'ip saddr',
  daddr: 'ip daddr',
  addrType: 'ipv4_addr',
  reject: 'icmp port-unreachable',
  loopback: '127.0.0.0/8',
};

export const IPV6: FamilyTraits = {
  ipFamily: 'IPv6',
  nft: 'ip6',
  saddr: 'ip6 saddr',
  daddr: 'ip6 daddr',
  addrType: 'ipv6_addr',
  reject: 'icmpv6 port-unreachable',
  loopback: '::1/128',
};

export const traitsOf = (f: IPFamily): FamilyTraits => (f === 'IPv4' ? IPV4 : IPV6);
