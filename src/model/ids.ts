// Branded identifiers. A ServiceKey names a Service ("ns/name"); a ServicePortId names one
// port of it ("ns/name:portName/PROTO"), the unit upstream's ServicePortName keys on and the
// unit a proxier programs. Both sides of the join use the same id: Service.spec.ports carry
// (name, protocol), and so do EndpointSlice.ports, which is how endpoints find their port.

export type ServiceKey = string & { readonly __brand: 'ServiceKey' };
export type ServicePortId = string & { readonly __brand: 'ServicePortId' };

export type Protocol = 'TCP' | 'UDP' | 'SCTP';

export const PROTOCOLS: ReadonlySet<string> = new Set<Protocol>(['TCP', 'UDP', 'SCTP']);

export const serviceKey = (namespace: string, name: string): ServiceKey => `${namespace}/${name}` as ServiceKey;

export const servicePortId = (key: ServiceKey, portName: string, protocol: Protocol): ServicePortId =>
  `${key}:${portName}/${protocol}` as ServicePortId;

/** The Service a port id belongs to: everything before the last ':' (names hold no ':'). */
export function serviceKeyOf(id: ServicePortId): ServiceKey {
  return id.slice(0, id.lastIndexOf(':')) as ServiceKey;
}

/** "ip:port" for IPv4, "[ip]:port" for IPv6: how endpoints are told apart (upstream Endpoint.String). */
// Built with join, which makes one flat string: `${ip}:${port}` makes a concatenation object
// and its left half, two objects per endpoint that a large cluster keeps, and that V8 copies
// into a flat string anyway the first time the key is compared.
export const endpointKey = (ip: string, port: number): string =>
  ip.includes(':') ? ['[', ip, ']:', port].join('') : [ip, port].join(':');
