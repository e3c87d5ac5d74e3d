// The userspace mode's data path: sockets and connections behind the ProxyPorts interface.
import { UserspaceProxyPorts } from './ports.ts';
import type { ProxyPorts, ProxyPortsOptions } from './types.ts';

export type * from './types.ts';
export { DEFAULT_TCP_IDLE_TIMEOUT_MS } from './ports.ts';
export { DEFAULT_MAX_UDP_ASSOCIATIONS } from './udp-proxy.ts';
export { ENDPOINT_DIAL_TIMEOUTS_MS } from './tcp-dial.ts';
export { PortRangeExhaustedError } from './port-allocator.ts';

export function createProxyPorts(opts: ProxyPortsOptions): ProxyPorts {
  return new UserspaceProxyPorts(opts);
}
