// The userspace mode's data path: sockets and connections behind the ProxyPorts interface.
//
// Choices where upstream (pkg/proxy/userspace) had none or we differ, all documented where made:
// - TCP: a client is reset (RST) when no endpoint answers (upstream closed it); connections idle
//   24 h are reset (DEFAULT_TCP_IDLE_TIMEOUT_MS; upstream had no limit); keep-alive after 60 s
//   on both sockets; EMFILE/ENFILE on accept sheds new connections for 1 s and logs once per 10 s
//   (upstream panicked on EMFILE while dialing).
// - UDP: at most DEFAULT_MAX_UDP_ASSOCIATIONS per port, the oldest closed for a new client
//   (upstream had no bound); an association whose socket errs (ICMP unreachable) is closed and
//   the client's next one skips session affinity.
// - Rotation: kept across endpoint updates (upstream shuffled and restarted it).
// - opts.clock drives session affinity, dial timeouts and UDP idle expiry; the TCP idle timeout
//   is the socket's own timer (Node refreshes it on every byte without a call from us).
// - stats(): accepted counts TCP connections and UDP associations; bytes are read from the
//   sockets on demand (TCP) or summed per datagram (UDP), never per chunk.
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
