// CIDR containment on text, for choosing the node addresses node ports answer on.
import { cidrContains, parseCIDR, parseIP } from '../../base/ip.ts';

export function cidrContainsText(cidr: string, ip: string): boolean {
  const c = parseCIDR(cidr);
  const a = parseIP(ip);
  return !!c && !!a && cidrContains(c, a);
}
