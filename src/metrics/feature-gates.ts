// component-base's kubernetes_feature_enabled: one series per known feature gate, labelled with
// its name and stage (ALPHA, BETA, DEPRECATED, or "" for GA), 1 when it is on.

import { Gauge, type Registry } from 'prom-client';

export interface FeatureGateSample {
  readonly name: string;
  readonly stage: string;
  readonly enabled: boolean;
}

export function registerFeatureGates(registry: Registry, gates: readonly FeatureGateSample[]): void {
  const g = new Gauge({
    name: 'kubernetes_feature_enabled',
    help: 'This metric records the data about the stage and enablement of a k8s feature.',
    labelNames: ['name', 'stage'] as const,
    registers: [registry],
  });
  for (const s of gates) g.set({ name: s.name, stage: s.stage }, s.enabled ? 1 : 0);
}
