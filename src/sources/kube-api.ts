// The two requests a reflector needs, list and watch, over @kubernetes/client-node's own
// machinery: KubeConfig decides the server, TLS (CA, client certificates, skip-verify) and
// credentials (tokens, token files, exec and auth-provider plugins), RequestContext carries
// them, and the library's HTTP layer (undici with the kubeconfig's dispatcher) sends them.
//
// We do not use the library's ListWatch/informer (makeInformer): it stops for good on any
// error but 410 and timeouts (the caller would have to restart it), ignores lines it cannot
// decode, never asks for bookmarks or pages its lists, and its Watch hands out the
// AbortController only once response headers arrived, so a hanging request cannot be
// cancelled. The reflector (reflector.ts) owns the loop; this file only turns one request
// into JSON or a stream of events, and every error into an ApiError with the HTTP status
// (or the transport's error).

import { HttpMethod, IsomorphicFetchHttpLibrary, KubeConfig, RequestContext } from './client-node.ts';
import { errorMessage } from '../base/errors.ts';
import { tlsVerifyError } from './tls-error.ts';

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';

export interface WatchEvent {
  type: WatchEventType;
  object: unknown;
}

export type Query = Record<string, string>;

export interface KubeApi {
  /** The server URL, for logs. */
  readonly server: string;
  /** GET a JSON document; non-2xx answers throw ApiError. */
  get(path: string, query: Query, signal: AbortSignal): Promise<unknown>;
  /**
   * Opens a watch and calls onEvent for every event until the server ends the stream (the
   * promise resolves) or something fails (it rejects: ApiError for a non-2xx answer,
   * WatchDecodeError for a line that is not a watch event, else the transport's error).
   */
  watch(path: string, query: Query, signal: AbortSignal, onEvent: (e: WatchEvent) => void): Promise<void>;
}

/** A non-2xx answer. status 410 is "Gone"/"Expired"; the reason comes from the Status body. */
export class ApiError extends Error {
  readonly status: number;
  readonly reason: string | undefined;
  readonly path: string;
  /** details.causes[].reason of the Status, e.g. ResourceVersionTooLarge. */
  readonly causes: readonly string[];
  constructor(
    path: string,
    status: number,
    reason: string | undefined,
    message: string,
    causes: readonly string[] = [],
    options?: ErrorOptions,
  ) {
    super(`GET ${path}: ${status}${reason ? ` ${reason}` : ''}: ${message}`, options);
    this.name = 'ApiError';
    this.status = status;
    this.reason = reason;
    this.path = path;
    this.causes = causes;
  }
}

export class WatchDecodeError extends Error {
  constructor(path: string, line: string, options?: ErrorOptions) {
    super(`watch ${path}: undecodable event: ${line.slice(0, 200)}`, options);
    this.name = 'WatchDecodeError';
  }
}

/**
 * The server accepted a request but sent no response headers within the deadline: a hung
 * server (or a black-holed connection). Without it, undici waits its own 300 s.
 */
export class DeadlineError extends Error {
  constructor(path: string, ms: number) {
    super(`${path}: no response within ${ms} ms`);
    this.name = 'DeadlineError';
  }
}

/**
 * How long a request may wait for its response headers: lists and watch starts alike. The
 * API server sends a watch's headers at once and a page of 500 objects in milliseconds, so a
 * few seconds of silence means a hung server (detected in seconds, not after undici's 300 s).
 */
export const DEFAULT_HEADERS_TIMEOUT_MS = 5_000;

export const isGone = (e: unknown): boolean => e instanceof ApiError && e.status === 410;
export const isNotFound = (e: unknown): boolean => e instanceof ApiError && e.status === 404;
/**
 * The server has not seen our resourceVersion yet (a lagging watch cache, or an etcd
 * restored from a backup): client-go relists from scratch when this persists.
 */
export const isTooLargeResourceVersion = (e: unknown): boolean =>
  e instanceof ApiError && e.causes.includes('ResourceVersionTooLarge');

/** Builds an ApiError from a metav1.Status (an HTTP error body, or a watch ERROR event). */
export function statusError(path: string, httpStatus: number, body: unknown): ApiError {
  let reason: string | undefined;
  let message = 'no Status in the answer';
  let code = httpStatus;
  const causes: string[] = [];
  if (typeof body === 'object' && body !== null) {
    const s = body as { reason?: unknown; message?: unknown; code?: unknown; details?: { causes?: unknown } };
    if (typeof s.reason === 'string') reason = s.reason;
    if (typeof s.message === 'string') message = s.message;
    if (typeof s.code === 'number' && s.code > 0) code = s.code;
    if (Array.isArray(s.details?.causes)) {
      for (const c of s.details.causes as unknown[]) {
        const r = typeof c === 'object' && c !== null ? (c as { reason?: unknown }).reason : undefined;
        if (typeof r === 'string') causes.push(r);
      }
    }
  }
  return new ApiError(path, code, reason, message, causes);
}

const WATCH_TYPES = new Set<string>(['ADDED', 'MODIFIED', 'DELETED', 'BOOKMARK', 'ERROR']);

/** One watch line: {"type": ..., "object": {...}}. Exported for tests. */
export function parseWatchLine(path: string, line: string): WatchEvent {
  let data: unknown;
  try {
    data = JSON.parse(line);
  } catch (err) {
    throw new WatchDecodeError(path, line, { cause: err });
  }
  if (typeof data !== 'object' || data === null) throw new WatchDecodeError(path, line);
  const { type, object } = data as { type?: unknown; object?: unknown };
  if (typeof type !== 'string' || !WATCH_TYPES.has(type) || typeof object !== 'object' || object === null) {
    throw new WatchDecodeError(path, line);
  }
  return { type: type as WatchEventType, object };
}

/** KubeApi over @kubernetes/client-node. */
export class ClientNodeApi implements KubeApi {
  private readonly kc: KubeConfig;
  private readonly http = new IsomorphicFetchHttpLibrary();
  private readonly headersTimeoutMs: number;

  constructor(kc: KubeConfig, opts: { headersTimeoutMs?: number } = {}) {
    this.kc = kc;
    this.headersTimeoutMs = opts.headersTimeoutMs ?? DEFAULT_HEADERS_TIMEOUT_MS;
  }

  get server(): string {
    return this.kc.getCurrentCluster()?.server ?? '(no cluster)';
  }

  private async send(path: string, query: Query, signal: AbortSignal, accept: string) {
    const cluster = this.kc.getCurrentCluster();
    if (!cluster) throw new Error('kubeconfig has no current cluster');
    const url = new URL(cluster.server.replace(/\/+$/, '') + path);
    for (const [k, v] of Object.entries(query)) url.searchParams.set(k, v);
    const ctx = new RequestContext(url.toString(), HttpMethod.GET);
    ctx.setHeaderParam('Accept', accept);
    ctx.setHeaderParam('User-Agent', 'kube-proxy-ts');
    await this.kc.applySecurityAuthentication(ctx);
    return this.withDeadline(path, ctx, signal);
  }

  /**
   * Sends with a deadline on the response headers: the request is aborted (DeadlineError)
   * if none arrive in time. The body (a list page, a watch stream) is bounded by the caller.
   */
  private async withDeadline(path: string, ctx: RequestContext, signal: AbortSignal) {
    signal.throwIfAborted();
    const deadline = new AbortController();
    const ms = this.headersTimeoutMs;
    const timer = setTimeout(() => deadline.abort(new DeadlineError(path, ms)), ms);
    ctx.setSignal(AbortSignal.any([signal, deadline.signal]));
    try {
      return await this.http.send(ctx).toPromise();
    } catch (err) {
      if (deadline.signal.aborted && !signal.aborted) throw deadline.signal.reason;
      const cluster = this.kc.getCurrentCluster();
      throw (cluster && tlsVerifyError(err, cluster, cluster.name === IN_CLUSTER)) ?? err;
    } finally {
      clearTimeout(timer);
    }
  }

  async get(path: string, query: Query, signal: AbortSignal): Promise<unknown> {
    const res = await this.send(path, query, signal, 'application/json');
    const text = await res.body.text();
    let body: unknown;
    try {
      body = text === '' ? undefined : JSON.parse(text);
    } catch (err) {
      if (res.httpStatusCode >= 200 && res.httpStatusCode < 300) {
        throw new Error(`GET ${path}: answer is not JSON: ${text.slice(0, 200)}`, { cause: err });
      }
    }
    if (res.httpStatusCode < 200 || res.httpStatusCode >= 300) throw statusError(path, res.httpStatusCode, body);
    return body;
  }

  /** POST a JSON object (Events); non-2xx answers throw ApiError. */
  async post(path: string, body: unknown, signal: AbortSignal): Promise<unknown> {
    const cluster = this.kc.getCurrentCluster();
    if (!cluster) throw new Error('kubeconfig has no current cluster');
    const ctx = new RequestContext(cluster.server.replace(/\/+$/, '') + path, HttpMethod.POST);
    ctx.setHeaderParam('Accept', 'application/json');
    ctx.setHeaderParam('Content-Type', 'application/json');
    ctx.setHeaderParam('User-Agent', 'kube-proxy-ts');
    ctx.setBody(JSON.stringify(body));
    await this.kc.applySecurityAuthentication(ctx);
    const res = await this.withDeadline(path, ctx, signal);
    const text = await res.body.text();
    let answer: unknown;
    try {
      answer = text === '' ? undefined : JSON.parse(text);
    } catch {
      answer = undefined;
    }
    if (res.httpStatusCode < 200 || res.httpStatusCode >= 300) throw statusError(path, res.httpStatusCode, answer);
    return answer;
  }

  async watch(path: string, query: Query, signal: AbortSignal, onEvent: (e: WatchEvent) => void): Promise<void> {
    const res = await this.send(path, { ...query, watch: 'true' }, signal, 'application/json');
    if (res.httpStatusCode < 200 || res.httpStatusCode >= 300) {
      const text = await res.body.text().catch(() => '');
      let body: unknown;
      try {
        body = JSON.parse(text);
      } catch {
        body = undefined;
      }
      throw statusError(path, res.httpStatusCode, body);
    }
    const stream = res.body.stream();
    if (!stream) return;
    const reader = stream.getReader();
    const decoder = new TextDecoder();
    let pending = '';
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        pending += decoder.decode(value, { stream: true });
        let nl: number;
        while ((nl = pending.indexOf('\n')) >= 0) {
          const line = pending.slice(0, nl).trim();
          pending = pending.slice(nl + 1);
          if (line !== '') onEvent(parseWatchLine(path, line));
        }
      }
      // The server ends every event with a newline; a tail without one was cut mid-event
      // and fails to decode, which the reflector treats as a broken stream (and resumes).
      const tail = (pending + decoder.decode()).trim();
      if (tail !== '') onEvent(parseWatchLine(path, tail));
    } finally {
      reader.cancel().catch(() => {});
    }
  }
}

export interface ConnectionOptions {
  /** --kubeconfig: path of a kubeconfig file. */
  kubeconfig?: string;
  /** --master: overrides the server of the kubeconfig (or is the only setting without one). */
  master?: string;
  /** Where the service account is mounted, for in-cluster config. Default: the root. */
  inClusterRoot?: string;
}

const SERVICE_ACCOUNT = '/var/run/secrets/kubernetes.io/serviceaccount';
/** The name of the cluster entry built from the service account (to name its CA file in errors). */
const IN_CLUSTER = 'inCluster';

export class KubeConfigError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'KubeConfigError';
  }
}

/**
 * Builds the client configuration as kube-proxy's createClient does: with neither a
 * kubeconfig nor a master, the in-cluster service account (KUBERNETES_SERVICE_HOST/PORT,
 * its token and CA); otherwise the kubeconfig file (if any) with its server replaced by
 * --master (if any), TLS and credentials as the kubeconfig says.
 */
export function loadKubeConfig(opts: ConnectionOptions, env: NodeJS.ProcessEnv = process.env): KubeConfig {
  const kc = new KubeConfig();
  const kubeconfig = opts.kubeconfig ?? '';
  const master = opts.master ?? '';
  if (kubeconfig === '' && master === '') {
    const host = env['KUBERNETES_SERVICE_HOST'];
    if (!host || !env['KUBERNETES_SERVICE_PORT']) {
      throw new KubeConfigError(
        'neither --kubeconfig nor --master was given, and this is not a pod (KUBERNETES_SERVICE_HOST/PORT unset)',
      );
    }
    // As rest.InClusterConfig: https to KUBERNETES_SERVICE_HOST:PORT, the service
    // account's CA, and its token re-read from the file (client-node refreshes it every
    // minute, so projected tokens that rotate keep working). Built here rather than with
    // kc.loadFromCluster() so that the environment is the one passed in.
    const root = (opts.inClusterRoot ?? '').replace(/\/+$/, '');
    kc.loadFromClusterAndUser(
      {
        name: IN_CLUSTER,
        server: `https://${host.includes(':') ? `[${host}]` : host}:${env['KUBERNETES_SERVICE_PORT']}`,
        caFile: `${root}${SERVICE_ACCOUNT}/ca.crt`,
        skipTLSVerify: false,
      },
      {
        name: 'inClusterUser',
        authProvider: { name: 'tokenFile', config: { tokenFile: `${root}${SERVICE_ACCOUNT}/token` } },
      },
    );
    return kc;
  }
  if (kubeconfig !== '') {
    try {
      kc.loadFromFile(kubeconfig);
    } catch (err) {
      throw new KubeConfigError(`cannot load kubeconfig ${kubeconfig}: ${errorMessage(err)}`, { cause: err });
    }
    const current = kc.getCurrentCluster();
    if (!current) throw new KubeConfigError(`kubeconfig ${kubeconfig} has no current context with a cluster`);
    if (master !== '') {
      kc.loadFromOptions({
        clusters: kc.clusters.map((c) => (c.name === current.name ? { ...c, server: master } : c)),
        contexts: kc.contexts,
        users: kc.users,
        currentContext: kc.currentContext,
      });
    }
    return allowPlainHttp(kc);
  }
  kc.loadFromClusterAndUser({ name: 'master', server: master, skipTLSVerify: false }, { name: 'anonymous' });
  return allowPlainHttp(kc);
}

/**
 * client-node refuses an http:// server unless skipTLSVerify is set, although there is no
 * TLS to verify. kube-proxy accepts plain HTTP (e.g. --master http://127.0.0.1:8001 through
 * `kubectl proxy`), so we set the flag for http:// servers only; https:// keeps verifying.
 */
function allowPlainHttp(kc: KubeConfig): KubeConfig {
  const current = kc.getCurrentCluster();
  if (!current || !current.server.startsWith('http:') || current.skipTLSVerify) return kc;
  kc.loadFromOptions({
    clusters: kc.clusters.map((c) => (c.name === current.name ? { ...c, skipTLSVerify: true } : c)),
    contexts: kc.contexts,
    users: kc.users,
    currentContext: kc.currentContext,
  });
  return kc;
}
