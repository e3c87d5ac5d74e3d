// The metrics port's ops pages and the feature-gate metric, wired from the configuration:
// /statusz and /flagz when their component-base gates are on (as upstream), /metrics/slis with
// the /healthz "ping" check counted, and kubernetes_feature_enabled for every known gate.

import { featureEnabled, featureGateStates } from '../config/feature-gates.ts';
import { FEATURE_GATES_VERSION } from '../config/feature-gates-v1.37.ts';
import type { ProxyConfig } from '../config/index.ts';
import { registerFeatureGates } from '../metrics/feature-gates.ts';
import type { ProxyMetrics } from '../metrics/index.ts';
import { opsRoutes, type OpsRoutes } from '../metrics/ops-endpoints.ts';
import { createSliMetrics } from '../metrics/slis.ts';
import { flagzValues } from './flagz.ts';

export interface MetricsOps {
  routes: OpsRoutes;
  onHealthz: () => void;
}

/**
 * What the metrics port serves, as statusz lists it (by first segment); upstream installs
 * /statusz after taking the list, so it is not in it.
 */
const servedPaths = (flagz: boolean): string[] =>
  ['/configz', '/healthz', '/healthz/ping', '/metrics', '/metrics/slis', '/proxyMode'].concat(flagz ? ['/flagz'] : []);

export function metricsOps(
  config: ProxyConfig,
  deps: { version: string; configFile?: string; metrics: ProxyMetrics; startMs?: number },
): MetricsOps {
  registerFeatureGates(deps.metrics.registry, featureGateStates(config.featureGates));
  const slis = createSliMetrics();
  const startMs = deps.startMs ?? Date.now() - process.uptime() * 1000;
  const statusz = featureEnabled(config.featureGates, 'ComponentStatusz');
  const flagz = featureEnabled(config.featureGates, 'ComponentFlagz');
  const paths = servedPaths(flagz);
  const routes = opsRoutes({
    component: 'kube-proxy',
    slis,
    ...(statusz
      ? {
          statusz: () => ({
            startMs,
            nowMs: Date.now(),
            runtimeVersion: process.version,
            binaryVersion: deps.version,
            emulationVersion: FEATURE_GATES_VERSION,
            paths,
          }),
        }
      : {}),
    ...(flagz ? { flagz: () => flagzValues(config, deps.configFile) } : {}),
  });
  return { routes, onHealthz: () => slis.observe('ping', 'healthz', true) };
}
