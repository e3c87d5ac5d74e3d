export {
  createMetrics,
  epochSeconds,
  NETWORK_PROGRAMMING_BUCKETS,
  SYNC_DURATION_BUCKETS,
  type MetricGroup,
  type MetricsOptions,
  type ProxyMetrics,
} from './metrics.ts';
export { startMetricsServer, type MetricsServer, type MetricsServerOptions } from './server.ts';
export { NFACCT_METRICS, registerNfacctMetrics, type NfacctReader } from './nfacct.ts';
export { registerUserspaceMetrics, USERSPACE_METRICS, type BudgetSample, type UserspaceSample } from './userspace.ts';
export { HTTP_SLOT_METRICS, registerHttpSlotMetrics } from './http-slots.ts';
