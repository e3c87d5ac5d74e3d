// The parts of @kubernetes/client-node the daemon uses — KubeConfig (kubeconfig files, TLS,
// credentials: tokens, token files, exec and auth-provider plugins) and its HTTP request
// plumbing — without the rest. The package's main module, and its config.js through
// ./gen/index.js, load every generated API and model class: ~1,100 modules, ~80 MiB of RSS
// and ~1 s of a cold start (measured: BENCHMARKS.md, "Where the memory goes"), all for
// makeApiClient(), which we never call. A resolve hook hands config.js a two-name stand-in
// for ./gen/index.js instead; everything KubeConfig itself does is the library's own code.
//
// Imported dynamically: a static import would resolve config.js's dependencies before the hook
// exists.

import { registerHooks } from 'node:module';

const CONFIG = /\/@kubernetes\/client-node\/dist\/config\.js$/;
const GEN_STANDIN = new URL('./client-node-gen.ts', import.meta.url).href;

registerHooks({
  resolve(specifier, context, nextResolve) {
    if (specifier === './gen/index.js' && context.parentURL !== undefined && CONFIG.test(context.parentURL)) {
      return { url: GEN_STANDIN, format: 'module-typescript', shortCircuit: true };
    }
    return nextResolve(specifier, context);
  },
});

const config = await import('@kubernetes/client-node/dist/config.js');
const http = await import('@kubernetes/client-node/dist/gen/http/http.js');
const fetchLibrary = await import('@kubernetes/client-node/dist/gen/http/isomorphic-fetch.js');

export const KubeConfig = config.KubeConfig;
export type KubeConfig = InstanceType<typeof config.KubeConfig>;
export const RequestContext = http.RequestContext;
export type RequestContext = InstanceType<typeof http.RequestContext>;
export const HttpMethod = http.HttpMethod;
export const IsomorphicFetchHttpLibrary = fetchLibrary.IsomorphicFetchHttpLibrary;
