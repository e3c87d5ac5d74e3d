// A Service asked (kube-proxy-ts.io/load-balancing) for a load balancing the running mode
// cannot honour, or for an unknown value: said once per Service and value, as a warning line
// and a Warning Event on the Service; the Service gets what one without the annotation gets.
// Every sync checks the Service ports it changed (`check`), in every mode alike, so the memory
// of what was said is here.

import type { Logger } from '../base/logger.ts';
import type { EventSink } from '../sources/events.ts';
import { LOAD_BALANCING_SUPPORT } from '../proxier/types.ts';
import type { LoadBalancingNotice, ProxyMode } from '../proxier/types.ts';
import { resolveLoadBalancing } from '../model/index.ts';
import type { ChangeSet, DesiredState, LoadBalancing } from '../model/index.ts';

/** Services remembered; past it the memory starts over (a few repeated lines, never unbounded growth). */
const MAX_REMEMBERED = 10_000;

export class LoadBalancingNotices {
  private readonly log: Logger;
  private readonly said = new Set<string>();
  /** Set once the API client exists (standalone mode has none: log lines only). */
  events: EventSink | undefined;

  constructor(log: Logger) {
    this.log = log;
  }

  readonly notice: LoadBalancingNotice = (service, asked, reason) => {
    const key = `${service.namespace}/${service.name}|${asked}`;
    if (this.said.has(key)) return;
    if (this.said.size >= MAX_REMEMBERED) this.said.clear();
    this.said.add(key);
    const note = `load balancing ${JSON.stringify(asked)} not applied: ${reason}; the node's default is used (--load-balancing, else the mode's own)`;
    this.log.warn('Service load balancing not applied', {
      service: `${service.namespace}/${service.name}`,
      reason: note,
    });
    this.events?.eventf(
      { kind: 'Service', namespace: service.namespace, name: service.name },
      'Warning',
      'LoadBalancingUnsupported',
      'Sync',
      note,
    );
  };
}

/**
 * Tells `notice` of each Service port this sync changed (every port on a full sync) whose
 * annotation the running mode refuses or does not know.
 */
export function checkLoadBalancing(
  mode: ProxyMode,
  nodeDefault: LoadBalancing | undefined,
  desired: DesiredState,
  change: ChangeSet,
  notice: LoadBalancingNotice,
): void {
  const ids = change.full ? desired.services.keys() : change.services.values();
  for (const id of ids) {
    const info = desired.services.get(id);
    if (info?.loadBalancingAsked === undefined) continue;
    const r = resolveLoadBalancing(LOAD_BALANCING_SUPPORT[mode], info.loadBalancingAsked, nodeDefault);
    if (r.unsupported !== undefined) notice(info, info.loadBalancingAsked, r.unsupported);
  }
}
