// A Service asked (kube-proxy-ts.io/load-balancing) for a load balancing the running mode
// cannot honour, or for an unknown value: said once per Service and value, as a warning line
// and a Warning Event on the Service; the Service gets what one without the annotation gets. Proxiers call
// `notice` on every sync that plans such a port, so the memory of what was said is here.

import type { Logger } from '../base/logger.ts';
import type { EventSink } from '../sources/events.ts';
import type { LoadBalancingNotice } from '../proxier/types.ts';

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
