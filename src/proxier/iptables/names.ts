// Chain names exactly as upstream's iptables proxier makes them (pkg/proxy/iptables
// portProtoHash, servicePortEndpointChainName), so that `iptables-save` shows the same
// KUBE-SVC-… names upstream would for the same Service port: the first 16 characters of the
// standard base32 (RFC 4648, with the A-Z2-7 alphabet) of
//   sha256(servicePortName + protocol)            for KUBE-SVC-/SVL-/EXT-/FW-
//   sha256(servicePortName + protocol + endpoint) for KUBE-SEP-
// where servicePortName is "ns/name" or "ns/name:portName", protocol is lower case ("tcp")
// and endpoint is "ip:port" ("[ip]:port" for IPv6).

import { hash } from 'node:crypto';
import type { EndpointInfo, ServicePortInfo } from '../../model/index.ts';

/** The fixed chains (upstream's constants). */
export const Chain = {
  SERVICES: 'KUBE-SERVICES',
  EXTERNAL_SERVICES: 'KUBE-EXTERNAL-SERVICES',
  NODE_PORTS: 'KUBE-NODEPORTS',
  POSTROUTING: 'KUBE-POSTROUTING',
  MARK_MASQ: 'KUBE-MARK-MASQ',
  FORWARD: 'KUBE-FORWARD',
  PROXY_FIREWALL: 'KUBE-PROXY-FIREWALL',
  CANARY: 'KUBE-PROXY-CANARY',
  /** The anti-martian chain (kubelet's duplicate); holds a rule only with localhost node ports. */
  FIREWALL: 'KUBE-FIREWALL',
} as const;

/**
 * upstream's nfacct objects (pkg/proxy/metrics): the kernel counts what two rules match in them,
 * and the iptables metrics read them back. Shared by both IP families.
 */
export const NfacctCounter = {
  /** On KUBE-FORWARD's INVALID drop. */
  INVALID_DROPPED: 'ct_state_invalid_dropped_pkts',
  /** On each node port's 127.0.0.0/8 rule in KUBE-NODEPORTS. */
  LOCALHOST_ACCEPTED: 'localhost_nps_accepted_pkts',
} as const;

/** Prefixes of the chains a service port owns (upstream isServiceChainName). */
export const PORT_CHAIN_PREFIXES = ['KUBE-SVC-', 'KUBE-SVL-', 'KUBE-EXT-', 'KUBE-FW-', 'KUBE-SEP-'] as const;

/** A chain of one service port (its own chains are deleted when no port wants them). */
export function isServicePortChain(name: string): boolean {
  return PORT_CHAIN_PREFIXES.some((p) => name.startsWith(p));
}

const BASE32 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';

/** The first 16 characters of base32(sha256(text)): 10 bytes of the digest make exactly 16. */
export function hash16(text: string): string {
  // The one-shot hash: a Hash object per name costs more than the digest (100,000 names per full sync).
  const d = hash('sha256', text, 'buffer');
  let out = '';
  let bits = 0;
  let acc = 0;
  for (let i = 0; i < 10; i++) {
    acc = ((acc << 8) | d[i]!) & 0xfff; // at most 4 bits wait over from before, plus 8 new
    bits += 8;
    while (bits >= 5) {
      bits -= 5;
      out += BASE32[(acc >> bits) & 31];
    }
  }
  return out;
}

/** upstream ServicePortName.String(): "ns/name", with ":portName" when the port has a name. */
export function servicePortName(p: Pick<ServicePortInfo, 'namespace' | 'name' | 'portName'>): string {
  return p.portName === '' ? `${p.namespace}/${p.name}` : `${p.namespace}/${p.name}:${p.portName}`;
}

/** The names of a service port's chains (all computed; which exist depends on the port). */
export interface PortChainNames {
  /** "ns/name:port", the text of upstream's comments. */
  readonly portName: string;
  /** "tcp", "udp" or "sctp". */
  readonly protocol: 'tcp' | 'udp' | 'sctp';
  readonly svc: string;
  readonly svl: string;
  readonly ext: string;
  readonly fw: string;
}

export function portChainNames(p: ServicePortInfo): PortChainNames {
  const portName = servicePortName(p);
  const protocol = p.protocol.toLowerCase() as PortChainNames['protocol'];
  const h = hash16(portName + protocol);
  return { portName, protocol, svc: `KUBE-SVC-${h}`, svl: `KUBE-SVL-${h}`, ext: `KUBE-EXT-${h}`, fw: `KUBE-FW-${h}` };
}

/** KUBE-SEP-… of one endpoint of a service port. */
export function endpointChainName(
  names: Pick<PortChainNames, 'portName' | 'protocol'>,
  ep: Pick<EndpointInfo, 'key'>,
): string {
  return `KUBE-SEP-${hash16(names.portName + names.protocol + ep.key)}`;
}
