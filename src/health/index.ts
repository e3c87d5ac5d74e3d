export {
  ProxyHealth,
  startProxyHealthServer,
  TO_BE_DELETED_TAINT,
  type HealthAnswer,
  type HealthCounters,
  type ProxyHealthOptions,
  type ProxyHealthServerOptions,
} from './proxy-health.ts';
export {
  ServiceHealthServers,
  type ServiceHealthEntry,
  type ServiceHealthOptions,
  type ServiceHealthStatus,
} from './service-health.ts';
export { nodeHttpListen, type HttpHandler, type HttpListener, type ListenFn } from './http.ts';
export { formatGoTime } from './go-time.ts';
