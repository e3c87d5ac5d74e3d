// What the proxy sockets are asked for: one per TCP or UDP service port, balancing over the
// model's selection for cluster traffic (ready endpoints, or terminating ones when none is
// ready, topology applied), with ClientIP affinity from the Service's timeout. Pure.

import type { DesiredState } from '../../model/index.ts';
import type { ProxyPortSpec } from './proxy/types.ts';
import { portalComment } from './rules.ts';

/** `skipped(name)` hears of each SCTP port: upstream's userspace proxy had no SCTP socket either. */
export function proxySpecs(desired: DesiredState, skipped: (name: string) => void = () => {}): ProxyPortSpec[] {
  const specs: ProxyPortSpec[] = [];
  for (const [id, info] of desired.services) {
    const name = portalComment(info);
    if (info.protocol === 'SCTP') {
      skipped(name);
      continue;
    }
    const sel = desired.selections.get(id);
    specs.push({
      id,
      name,
      protocol: info.protocol,
      backends: (sel?.cluster ?? []).map((e) => ({ ip: e.ip, port: e.port })),
      affinitySeconds: info.sessionAffinity === 'ClientIP' ? info.stickyMaxAgeSeconds : 0,
    });
  }
  return specs;
}
