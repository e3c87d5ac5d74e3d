// Upstream v1.37's word on a deprecated mode: in ipvs mode an error line at start and a Warning
// Event "IPVSDeprecation" on the Node (reason and action as upstream's), every start.

import type { Logger } from '../base/logger.ts';
import { nodeRef, type EventSink } from '../sources/events.ts';

export const IPVS_DEPRECATION =
  "The ipvs proxier has been deprecated and will be disabled by default in Kubernetes 1.40 and removed in Kubernetes 1.43. Migrate to the 'nftables' proxier instead.";

export function announceDeprecations(mode: string, log: Logger, events: EventSink | undefined, nodeName: string): void {
  if (mode !== 'ipvs') return;
  log.error(IPVS_DEPRECATION);
  events?.eventf(nodeRef(nodeName), 'Warning', 'IPVSDeprecation', 'StartKubeProxy', IPVS_DEPRECATION);
}
