// The ranges cluster IPs are allocated from: ServiceCIDR objects when the cluster has them
// (networking.k8s.io/v1), else the configured --service-cluster-ip-range equivalent. Proxiers
// use them to reject traffic to unallocated service IPs instead of letting it leak out.

import { parseCIDR } from '../base/ip.ts';
import { arr, isObject, str } from './guards.ts';
import type { Issues } from './issues.ts';
import type { ModelOptions } from './types.ts';

export function serviceCIDRsOf(objects: readonly unknown[], opts: ModelOptions, issues: Issues): string[] {
  const raw: unknown[] = [];
  for (const o of objects) {
    const spec = isObject(o) && isObject(o['spec']) ? o['spec'] : {};
    raw.push(...arr(spec['cidrs']));
  }
  const source = raw.length > 0 ? raw : (opts.serviceCIDRs ?? []);
  const out = new Set<string>();
  for (const r of source) {
    const text = str(r);
    const c = text.includes('/') ? parseCIDR(text) : undefined;
    if (!c) issues.add('invalid-cidr', `service CIDR '${String(r)}'`);
    else if (c.family === opts.family) out.add(c.text);
  }
  return [...out].sort();
}
