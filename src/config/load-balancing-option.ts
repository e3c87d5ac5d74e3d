// --load-balancing for the proxiers that pick per Service port (nftables, iptables, IPVS):
// unset in the config = no option, each mode's upstream behaviour.

import type { ProxyConfig } from './types.ts';
import type { LoadBalancing } from '../model/index.ts';

export function lbOption(config: ProxyConfig): { loadBalancing?: LoadBalancing } {
  const lb = config.kubeProxyTS.loadBalancing;
  return lb === '' ? {} : { loadBalancing: lb };
}
