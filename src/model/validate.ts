// The API server's validation of what kube-proxy turns into kernel objects, repeated where
// objects enter the model: a manifest file, a test server or a future API change can bring
// what the real API server refuses, and nothing from outside may wedge the proxy
// (apimachinery validation IsDNS1123Label/IsDNS1035Label/IsDNS1123Subdomain, and
// ValidateEndpointIP in pkg/apis/discovery/validation).

import type { IPFamily } from '../base/ip.ts';
import { v4Number } from '../base/ip.ts';

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS1035_LABEL = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** A namespace, a port name: lower-case letters, digits and '-', at most 63. */
export const isDNS1123Label = (s: string): boolean => s.length <= 63 && DNS1123_LABEL.test(s);
/** A Service name: a DNS-1123 label that starts with a letter. */
export const isDNS1035Label = (s: string): boolean => s.length <= 63 && DNS1035_LABEL.test(s);
/** An EndpointSlice name, a node name: dot-separated labels, at most 253. */
export const isDNS1123Subdomain = (s: string): boolean => s.length <= 253 && DNS1123_SUBDOMAIN.test(s);

/**
 * Why the API server would refuse a Service or EndpointSlice port's name, or undefined when it
 * is fine. Absent or null is the unnamed port '' (the slice API defaults a nil name to "",
 * which is how a slice port without a name joins the Service port without one).
 */
export function badPortName(v: unknown): string | undefined {
  if (v === undefined || v === null || v === '') return undefined;
  if (typeof v !== 'string') return `name is a ${typeof v}, not a string`;
  return isDNS1123Label(v) ? undefined : `name ${JSON.stringify(v)} is not a DNS label`;
}

/**
 * Why an endpoint address may not be a DNAT target, or undefined when it may. The API server
 * refuses the unspecified, loopback and link-local addresses (ValidateEndpointIP); the
 * limited broadcast address is no pod's either. `ip` is canonical text of `family`.
 */
export function specialEndpointIP(ip: string, family: IPFamily): string | undefined {
  if (family === 'IPv4') {
    const n = v4Number(ip);
    if (n === 0) return 'unspecified';
    if (n >>> 24 === 127) return 'loopback';
    if (n >>> 16 === 0xa9fe) return 'link-local';
    if (n >>> 8 === 0xe00000) return 'link-local multicast';
    if (n === 0xffffffff) return 'broadcast';
    return undefined;
  }
  const lower = ip.toLowerCase();
  if (lower === '::') return 'unspecified';
  if (lower === '::1') return 'loopback';
  if (/^fe[89ab][0-9a-f]:/.test(lower)) return 'link-local';
  if (/^ff[0-9a-f]2:/.test(lower)) return 'link-local multicast';
  return undefined;
}
