// What @kubernetes/client-node's config.js takes from its ./gen/index.js (for makeApiClient,
// which the daemon never calls), without the thousand generated modules that index loads.
// See client-node.ts.
export { createConfiguration } from '@kubernetes/client-node/dist/gen/configuration.js';
export { ServerConfiguration } from '@kubernetes/client-node/dist/gen/servers.js';
