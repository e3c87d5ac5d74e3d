// The published DesiredState: one object per tracker, its maps updated in place by checkout so
// that a small change costs a small update. Values inside are replaced, never mutated.

import type { IPFamily } from '../base/ip.ts';
import type { ServiceKey, ServicePortId } from './ids.ts';
import type {
  DesiredState,
  EndpointInfo,
  EndpointSelection,
  HealthCheckInfo,
  MasqueradePolicy,
  NodeInfo,
  NodePortAddresses,
  ServicePortInfo,
} from './types.ts';

export class PublishedState implements DesiredState {
  readonly family: IPFamily;
  node: NodeInfo;
  nodePortAddresses: NodePortAddresses;
  masquerade: MasqueradePolicy;
  serviceCIDRs: readonly string[];
  readonly services = new Map<ServicePortId, ServicePortInfo>();
  readonly endpoints = new Map<ServicePortId, readonly EndpointInfo[]>();
  readonly selections = new Map<ServicePortId, EndpointSelection>();
  readonly healthChecks = new Map<ServiceKey, HealthCheckInfo>();
  generation = 0;

  constructor(
    family: IPFamily,
    node: NodeInfo,
    nodePortAddresses: NodePortAddresses,
    masquerade: MasqueradePolicy,
    serviceCIDRs: readonly string[],
  ) {
    this.family = family;
    this.node = node;
    this.nodePortAddresses = nodePortAddresses;
    this.masquerade = masquerade;
    this.serviceCIDRs = serviceCIDRs;
  }
}
