// component-base's health-check SLI metrics, served on /metrics/slis from a registry of their own
// (k8s.io/component-base/metrics/prometheus/slis): the result of each health check as it ran,
// kubernetes_healthcheck (1 passed, 0 failed) and kubernetes_healthchecks_total by status, plus
// process_start_time_seconds. A DELETE on the path resets them, as upstream's handler does.

import { Counter, Gauge, Registry } from 'prom-client';

export interface SliMetrics {
  readonly registry: Registry;
  /** A health check of `type` (e.g. "healthz") named `name` (e.g. "ping") ran. */
  observe(name: string, type: string, ok: boolean): void;
  reset(): void;
}

export function createSliMetrics(startSeconds: number = Math.round(Date.now() / 1000 - process.uptime())): SliMetrics {
  const registry = new Registry();
  const registers = [registry];
  const healthcheck = new Gauge({
    name: 'kubernetes_healthcheck',
    help: 'This metric records the result of a single healthcheck.',
    labelNames: ['name', 'type'] as const,
    registers,
  });
  const total = new Counter({
    name: 'kubernetes_healthchecks_total',
    help: 'This metric records the results of all healthcheck.',
    labelNames: ['name', 'type', 'status'] as const,
    registers,
  });
  const start = new Gauge({
    name: 'process_start_time_seconds',
    help: 'Start time of the process since unix epoch in seconds.',
    registers,
  });
  start.set(startSeconds);
  return {
    registry,
    observe: (name, type, ok) => {
      healthcheck.set({ name, type }, ok ? 1 : 0);
      total.inc({ name, type, status: ok ? 'success' : 'error' });
    },
    reset: () => {
      healthcheck.reset();
      total.reset();
    },
  };
}
