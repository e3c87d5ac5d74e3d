// Upstream v1.37's word on a deprecated mode (its definition's `deprecation`, as ipvs mode's): an
// error line at start and a Warning Event on the Node (reason and action as upstream's), every start.

import type { Logger } from '../base/logger.ts';
import type { ProxyMode } from '../proxier/types.ts';
import { nodeRef, type EventSink } from '../sources/events.ts';
import { MODES } from './modes/index.ts';

export function announceDeprecations(
  mode: ProxyMode,
  log: Logger,
  events: EventSink | undefined,
  nodeName: string,
): void {
  const d = MODES[mode].deprecation;
  if (!d) return;
  log.error(d.message);
  events?.eventf(nodeRef(nodeName), 'Warning', d.reason, 'StartKubeProxy', d.message);
}
