// A small but real Kubernetes API server for tests: node:http(s) on 127.0.0.1 (or opts.host), an ephemeral
// port, speaking the list/watch protocol the way kube-apiserver does, so that the real
// @kubernetes/client-node runs against it unmodified.
//
// What it speaks:
//   GET  /api/v1/{plural}, /api/v1/namespaces/{ns}/{plural}               (core group)
//   GET  /apis/{group}/{version}/{plural}, .../namespaces/{ns}/{plural}    (named groups)
//   GET  .../{plural}/{name}                                              (one object)
//   list:  labelSelector, fieldSelector (metadata.name, metadata.namespace), limit + continue
//          (pages are served from a snapshot at the first page's resourceVersion);
//          answers {kind: XList, metadata: {resourceVersion, continue?}, items}
//   watch: ?watch=true&resourceVersion=N: every change after N, then live changes, as
//          newline-delimited JSON events in a chunked response (ADDED, MODIFIED, DELETED,
//          BOOKMARK when allowWatchBookmarks=true, ERROR with a 410 Status when N has been
//          compacted away); resourceVersion "" or "0" starts with synthetic ADDEDs of the
//          current state; a selector change turns MODIFIED into ADDED/DELETED as the real
//          server does; timeoutSeconds ends the stream cleanly.
//   Errors are metav1.Status bodies with the HTTP code (404 for an unserved resource, 410
//   Expired for a stale continue token, 401 without the bearer token when one is required).
//
// What tests control: mutations (create/update/upsert/remove, each taking the next global
// resourceVersion), compact(), bookmark(), dropWatches() (cut every open watch mid-stream,
// no terminating chunk), closeWatches() (clean end), stallWatches() (open, silent for good),
// down (every request's connection is reset), hung (accepts, never answers), responseDelayMs
// (slow answers), failNext(), disableResource(), goneStorm() (every watch answered 410 while
// lists still work), and a request log.

import { randomUUID } from 'node:crypto';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { createServer as createHttpServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';

export interface ResourceDef {
  /** '' for the core group. */
  group: string;
  version: string;
  plural: string;
  kind: string;
  namespaced: boolean;
}

export const RESOURCES: readonly ResourceDef[] = [
  { group: '', version: 'v1', plural: 'services', kind: 'Service', namespaced: true },
  { group: 'discovery.k8s.io', version: 'v1', plural: 'endpointslices', kind: 'EndpointSlice', namespaced: true },
  { group: '', version: 'v1', plural: 'nodes', kind: 'Node', namespaced: false },
  { group: 'networking.k8s.io', version: 'v1', plural: 'servicecidrs', kind: 'ServiceCIDR', namespaced: false },
];

// Test objects are free-form JSON.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type KObject = Record<string, any>;

interface Change {
  rv: number;
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  plural: string;
  key: string;
  /** The object after the change (for DELETED: its last state, with the deletion's rv). */
  obj: KObject;
  /** The object before the change (MODIFIED, DELETED). */
  prev: KObject | undefined;
}

interface Watcher {
  plural: string;
  match: (o: KObject) => boolean;
  bookmarks: boolean;
  res: ServerResponse;
  def: ResourceDef;
  timer: NodeJS.Timeout | undefined;
}

export interface LoggedRequest {
  method: string;
  path: string;
  query: Record<string, string>;
  watch: boolean;
  /** Date.now() when it arrived. */
  at: number;
}

export interface FakeApiServerOptions {
  /** The address to listen on; default 127.0.0.1 (the VM tests serve a node namespace over a veth). */
  host?: string;
  /** Serve HTTPS with this key and certificate (PEM); with clientCa, require client certificates it signed. */
  tls?: { key: string | Buffer; cert: string | Buffer; clientCa?: string | Buffer };
  /** Require "Authorization: Bearer <token>". */
  token?: string;
  /** Answer a watch from a compacted resourceVersion with HTTP 410 instead of a 200 + ERROR event. */
  goneAsHttpStatus?: boolean;
}

/**
 * A 410 storm: every watch is answered "too old resource version" whatever its
 * resourceVersion (after an etcd compaction, a confused server or proxy); lists still work.
 */
export interface GoneStorm {
  /** An ERROR event in a 200 stream (kube-apiserver's watch cache), or the watch request answered HTTP 410. */
  as: 'event' | 'http';
  /** A BOOKMARK at the current resourceVersion before the ERROR (event form): the watch looks healthy. */
  bookmarkFirst?: boolean;
  /** The 410 comes this long after the request (a watch that looks healthy by its duration). */
  delayMs?: number;
}

type Requirement = (labels: Record<string, string>) => boolean;

/** metav1.Status reasons of injected failures, as kube-apiserver names them. */
const FAILURE_REASONS: Record<number, string> = {
  401: 'Unauthorized',
  403: 'Forbidden',
  429: 'TooManyRequests',
  503: 'ServiceUnavailable',
  504: 'Timeout',
};

/** Parses a label selector (=, ==, !=, in, notin, exists, !exists). Throws on bad syntax. */
export function parseLabelSelector(sel: string): Requirement {
  const parts: string[] = [];
  let depth = 0;
  let cur = '';
  for (const ch of sel) {
    if (ch === '(') depth++;
    if (ch === ')') depth--;
    if (ch === ',' && depth === 0) {
      parts.push(cur);
      cur = '';
    } else cur += ch;
  }
  parts.push(cur);
  const reqs: Requirement[] = [];
  for (const raw of parts) {
    const p = raw.trim();
    if (p === '') continue;
    let m: RegExpMatchArray | null;
    if ((m = p.match(/^([\w./-]+)\s+(in|notin)\s+\(([^)]*)\)$/))) {
      const [, key, op, list] = m as unknown as [string, string, string, string];
      const values = new Set(list.split(',').map((v) => v.trim()));
      reqs.push(
        op === 'in'
          ? (l) => Object.hasOwn(l, key) && values.has(l[key]!)
          : (l) => !Object.hasOwn(l, key) || !values.has(l[key]!),
      );
    } else if ((m = p.match(/^!([\w./-]+)$/))) {
      const key = m[1]!;
      reqs.push((l) => !Object.hasOwn(l, key));
    } else if ((m = p.match(/^([\w./-]+)\s*(==|=|!=)\s*([\w./-]*)$/))) {
      const [, key, op, value] = m as unknown as [string, string, string, string];
      reqs.push(op === '!=' ? (l) => l[key] !== value : (l) => l[key] === value);
    } else if ((m = p.match(/^([\w./-]+)$/))) {
      const key = m[1]!;
      reqs.push((l) => Object.hasOwn(l, key));
    } else {
      throw new Error(`unable to parse requirement: ${p}`);
    }
  }
  return (labels) => reqs.every((r) => r(labels));
}

function parseFieldSelector(sel: string): (o: KObject) => boolean {
  const reqs: ((o: KObject) => boolean)[] = [];
  for (const raw of sel.split(',')) {
    const p = raw.trim();
    if (p === '') continue;
    const m = p.match(/^(metadata\.name|metadata\.namespace)\s*(==|=|!=)\s*(.*)$/);
    if (!m) throw new Error(`field label not supported: ${p}`);
    const [, field, op, value] = m as unknown as [string, string, string, string];
    const get = (o: KObject) => (field === 'metadata.name' ? o['metadata']?.name : o['metadata']?.namespace) ?? '';
    reqs.push(op === '!=' ? (o) => get(o) !== value : (o) => get(o) === value);
  }
  return (o) => reqs.every((r) => r(o));
}

const clone = (o: KObject): KObject => JSON.parse(JSON.stringify(o)) as KObject;

function apiVersionOf(def: ResourceDef): string {
  return def.group === '' ? def.version : `${def.group}/${def.version}`;
}

function keyOf(def: ResourceDef, o: KObject): string {
  const name = o['metadata']?.name;
  if (typeof name !== 'string' || name === '') throw new Error(`${def.kind} without metadata.name`);
  if (!def.namespaced) return name;
  const ns = o['metadata']?.namespace;
  if (typeof ns !== 'string' || ns === '') throw new Error(`${def.kind} ${name} without metadata.namespace`);
  return `${ns}/${name}`;
}

export class FakeApiServer {
  readonly url: string;
  /** Every request received, in order. */
  readonly requests: LoggedRequest[] = [];
  /** When true, every request's connection is reset as it arrives. */
  down = false;
  /** Delay before answering any request (headers included), in ms. */
  responseDelayMs = 0;
  private isHung = false;

  private readonly server: Server;
  private readonly opts: FakeApiServerOptions;
  private readonly sockets = new Set<Socket>();
  private readonly objects = new Map<string, Map<string, KObject>>();
  private history: Change[] = [];
  private rv = 100;
  private compactedRv = 0;
  private readonly watchers = new Set<Watcher>();
  private readonly disabled = new Set<string>();
  private readonly listCache = new Map<string, { rv: number; sorted: KObject[] }>();
  private failures: { status: number; count: number; pathPrefix: string; causes: string[] }[] = [];
  private storm: GoneStorm | undefined;
  /** Watches answered 410 by goneStorm(). */
  goneSent = 0;

  private constructor(server: Server, url: string, opts: FakeApiServerOptions) {
    this.server = server;
    this.url = url;
    this.opts = opts;
    for (const def of RESOURCES) this.objects.set(def.plural, new Map());
  }

  static async start(opts: FakeApiServerOptions = {}): Promise<FakeApiServer> {
    const ref: { server?: FakeApiServer } = {};
    const handler = (req: IncomingMessage, res: ServerResponse) => {
      ref.server!.handle(req, res);
    };
    const tls = opts.tls;
    const server = tls
      ? createHttpsServer(
          {
            key: tls.key,
            cert: tls.cert,
            ...(tls.clientCa ? { ca: tls.clientCa, requestCert: true, rejectUnauthorized: true } : {}),
          },
          handler,
        )
      : createHttpServer(handler);
    server.keepAliveTimeout = 1000;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, opts.host ?? '127.0.0.1', () => resolve());
    });
    const { port } = server.address() as AddressInfo;
    const host = opts.host ?? '127.0.0.1';
    const me = new FakeApiServer(
      server,
      `${opts.tls ? 'https' : 'http'}://${host.includes(':') ? `[${host}]` : host}:${port}`,
      opts,
    );
    ref.server = me;
    server.on('connection', (s: Socket) => {
      me.sockets.add(s);
      s.on('close', () => me.sockets.delete(s));
    });
    return me;
  }

  async close(): Promise<void> {
    for (const w of this.watchers) this.endWatcher(w, false);
    for (const s of this.sockets) s.destroy();
    this.server.closeAllConnections?.();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  // ---- state and mutations ------------------------------------------------------------

  /** The current global resourceVersion. */
  get resourceVersion(): string {
    return String(this.rv);
  }

  private def(kindOrPlural: string): ResourceDef {
    const def = RESOURCES.find((d) => d.kind === kindOrPlural || d.plural === kindOrPlural);
    if (!def) throw new Error(`unknown kind ${kindOrPlural}`);
    return def;
  }

  /** Current objects of a kind, by key (namespace/name or name). */
  list(kind: string): Map<string, KObject> {
    const def = this.def(kind);
    return new Map([...this.objects.get(def.plural)!].map(([k, v]) => [k, clone(v)]));
  }

  get(kind: string, key: string): KObject | undefined {
    const o = this.objects.get(this.def(kind).plural)!.get(key);
    return o ? clone(o) : undefined;
  }

  create(obj: KObject): KObject {
    const def = this.def(String(obj['kind']));
    const key = keyOf(def, obj);
    if (this.objects.get(def.plural)!.has(key)) throw new Error(`${def.kind} ${key} already exists`);
    return this.put(def, key, obj);
  }

  update(obj: KObject): KObject {
    const def = this.def(String(obj['kind']));
    const key = keyOf(def, obj);
    if (!this.objects.get(def.plural)!.has(key)) throw new Error(`${def.kind} ${key} not found`);
    return this.put(def, key, obj);
  }

  upsert(obj: KObject): KObject {
    const def = this.def(String(obj['kind']));
    return this.put(def, keyOf(def, obj), obj);
  }

  remove(kind: string, key: string): void {
    const def = this.def(kind);
    const store = this.objects.get(def.plural)!;
    const prev = store.get(key);
    if (!prev) throw new Error(`${def.kind} ${key} not found`);
    store.delete(key);
    const obj = clone(prev);
    obj['metadata'].resourceVersion = String(++this.rv);
    this.record({ rv: this.rv, type: 'DELETED', plural: def.plural, key, obj, prev });
  }

  private put(def: ResourceDef, key: string, input: KObject): KObject {
    const store = this.objects.get(def.plural)!;
    const prev = store.get(key);
    const obj = clone(input);
    obj['apiVersion'] = apiVersionOf(def);
    obj['kind'] = def.kind;
    obj['metadata'] = { ...obj['metadata'] };
    obj['metadata'].resourceVersion = String(++this.rv);
    obj['metadata'].uid = prev?.['metadata']?.uid ?? obj['metadata'].uid ?? randomUUID();
    obj['metadata'].creationTimestamp =
      prev?.['metadata']?.creationTimestamp ?? new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
    store.set(key, obj);
    this.record({ rv: this.rv, type: prev ? 'MODIFIED' : 'ADDED', plural: def.plural, key, obj: clone(obj), prev });
    return clone(obj);
  }

  private record(c: Change): void {
    this.history.push(c);
    for (const w of this.watchers) if (w.plural === c.plural) this.send(w, c);
  }

  /** Forgets history: a watch or continue token older than now gets 410 Gone. */
  compact(): void {
    this.compactedRv = this.rv;
    this.history = [];
  }

  /** Sends a BOOKMARK at the current resourceVersion to every watch that allows them. */
  bookmark(): void {
    for (const w of this.watchers) {
      if (!w.bookmarks) continue;
      this.write(w, {
        type: 'BOOKMARK',
        object: { kind: w.def.kind, apiVersion: apiVersionOf(w.def), metadata: { resourceVersion: String(this.rv) } },
      });
    }
  }

  /** Writes raw text into every open watch of a kind (to send what is not a watch event). */
  writeRaw(kind: string, text: string): void {
    const plural = this.def(kind).plural;
    for (const w of this.watchers) if (w.plural === plural && !w.res.writableEnded) w.res.write(text);
  }

  /** Number of open watch streams (optionally of one kind). */
  watchCount(kind?: string): number {
    const plural = kind ? this.def(kind).plural : undefined;
    return [...this.watchers].filter((w) => plural === undefined || w.plural === plural).length;
  }

  /** Cuts every open watch connection mid-stream (no terminating chunk). */
  dropWatches(): void {
    for (const w of [...this.watchers]) this.endWatcher(w, false);
  }

  /**
   * A hung server: it still accepts connections and reads requests but never answers them
   * (a request that arrived while hung stays unanswered for good, as one a wedged server
   * lost). Hanging cuts the open watches, as a restart that came back wedged would.
   */
  get hung(): boolean {
    return this.isHung;
  }

  set hung(on: boolean) {
    if (on && !this.isHung) this.dropWatches();
    this.isHung = on;
  }

  /**
   * Every open watch hangs mid-stream: its connection stays open but nothing more is sent on
   * it, not even the end at timeoutSeconds (a wedged server, or a middlebox that lost the
   * path). New requests, new watches included, are answered as usual.
   */
  stallWatches(): void {
    for (const w of [...this.watchers]) {
      this.watchers.delete(w);
      if (w.timer) clearTimeout(w.timer);
    }
  }

  /** Ends every open watch cleanly, as the server does at timeoutSeconds. */
  closeWatches(): void {
    for (const w of [...this.watchers]) this.endWatcher(w, true);
  }

  /**
   * Starts a 410 storm (undefined ends it). Open watches get an ERROR 410 and end, as when
   * etcd compacts past a watch; from then on every watch is answered 410 as `storm` says.
   */
  goneStorm(storm: GoneStorm | undefined): void {
    this.storm = storm;
    if (storm === undefined) return;
    for (const w of [...this.watchers]) {
      this.write(w, goneEvent(`too old resource version: ${this.rv}`));
      this.endWatcher(w, true);
    }
  }

  /** Open client connections (watches and idle keep-alive ones). */
  get openConnections(): number {
    return this.sockets.size;
  }

  /** Makes the next `count` requests whose path starts with pathPrefix fail with status. */
  failNext(count: number, status: number, pathPrefix = '/', causes: string[] = []): void {
    this.failures.push({ status, count, pathPrefix, causes });
  }

  /** Answers 404 for this kind's paths, as a server that does not serve its API. */
  disableResource(kind: string, disabled = true): void {
    const def = this.def(kind);
    if (disabled) this.disabled.add(def.plural);
    else this.disabled.delete(def.plural);
  }

  // ---- HTTP ---------------------------------------------------------------------------

  private handle(req: IncomingMessage, res: ServerResponse): void {
    if (this.down) {
      req.socket.destroy();
      return;
    }
    const url = new URL(req.url ?? '/', 'http://x');
    const query = Object.fromEntries(url.searchParams);
    const watch = query['watch'] === 'true' || query['watch'] === '1';
    this.requests.push({ method: req.method ?? 'GET', path: url.pathname, query, watch, at: Date.now() });
    if (this.isHung) return; // never answered; close() destroys the socket
    const go = () => {
      if (this.down) {
        req.socket.destroy();
        return;
      }
      try {
        this.route(req, res, url.pathname, query, watch);
      } catch (err) {
        this.status(res, 500, 'InternalError', String(err));
      }
    };
    if (this.responseDelayMs > 0) {
      const t = setTimeout(go, this.responseDelayMs);
      req.socket.once('close', () => clearTimeout(t));
    } else go();
  }

  /** events.k8s.io/v1 Events POSTed (kept in order, with the namespace of the URL), 201 as the real server. */
  readonly events: { namespace: string; event: KObject; contentType: string }[] = [];

  private createEvent(req: IncomingMessage, res: ServerResponse, namespace: string): void {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      let event: KObject;
      try {
        event = JSON.parse(body) as KObject;
      } catch {
        return this.status(res, 400, 'BadRequest', 'the body is not JSON');
      }
      if (event['metadata']?.namespace !== undefined && event['metadata'].namespace !== namespace) {
        return this.status(
          res,
          400,
          'BadRequest',
          'the namespace of the object does not match the namespace of the request',
        );
      }
      this.events.push({ namespace, event, contentType: String(req.headers['content-type'] ?? '') });
      res.writeHead(201, { 'Content-Type': 'application/json' });
      res.end(
        JSON.stringify({
          ...event,
          metadata: { ...event['metadata'], namespace, uid: randomUUID(), resourceVersion: String(++this.rv) },
        }),
      );
    });
  }

  private status(res: ServerResponse, code: number, reason: string, message: string, causes: string[] = []): void {
    if (res.headersSent) return;
    res.writeHead(code, { 'Content-Type': 'application/json' });
    const details = causes.length > 0 ? { details: { causes: causes.map((c) => ({ reason: c, message: c })) } } : {};
    res.end(
      JSON.stringify({
        kind: 'Status',
        apiVersion: 'v1',
        metadata: {},
        status: 'Failure',
        message,
        reason,
        code,
        ...details,
      }),
    );
  }

  private route(
    req: IncomingMessage,
    res: ServerResponse,
    path: string,
    query: Record<string, string>,
    watch: boolean,
  ): void {
    const eventPost = /^\/apis\/events\.k8s\.io\/v1\/namespaces\/([^/]+)\/events$/.exec(path);
    if (req.method === 'POST' && eventPost !== null) return this.createEvent(req, res, eventPost[1]!);
    if (req.method !== 'GET') return this.status(res, 405, 'MethodNotAllowed', `${req.method} is not supported`);
    if (this.opts.token !== undefined && req.headers.authorization !== `Bearer ${this.opts.token}`) {
      return this.status(res, 401, 'Unauthorized', 'Unauthorized');
    }
    const f = this.failures.find((x) => x.count > 0 && path.startsWith(x.pathPrefix));
    if (f) {
      f.count--;
      const reason = FAILURE_REASONS[f.status] ?? 'InternalError';
      return this.status(res, f.status, reason, 'injected failure', f.causes);
    }
    const m =
      path.match(/^\/api\/(v1)(?:\/namespaces\/([^/]+))?\/([^/]+)(?:\/([^/]+))?$/) ??
      path.match(/^\/apis\/([^/]+\/[^/]+)(?:\/namespaces\/([^/]+))?\/([^/]+)(?:\/([^/]+))?$/);
    if (!m) return this.status(res, 404, 'NotFound', `the server could not find the requested resource (${path})`);
    const [, gv, ns, plural, name] = m as unknown as [string, string, string | undefined, string, string | undefined];
    const def = RESOURCES.find(
      (d) => d.plural === plural && (d.group === '' ? d.version : `${d.group}/${d.version}`) === gv,
    );
    if (!def || this.disabled.has(def.plural) || (ns !== undefined && !def.namespaced)) {
      return this.status(res, 404, 'NotFound', `the server could not find the requested resource (${path})`);
    }
    let labelMatch: Requirement;
    let fieldMatch: (o: KObject) => boolean;
    try {
      labelMatch = parseLabelSelector(query['labelSelector'] ?? '');
      fieldMatch = parseFieldSelector(query['fieldSelector'] ?? '');
    } catch (err) {
      return this.status(res, 400, 'BadRequest', (err as Error).message);
    }
    const match = (o: KObject) =>
      (ns === undefined || o['metadata']?.namespace === ns) && labelMatch(o['metadata']?.labels ?? {}) && fieldMatch(o);
    if (name !== undefined) {
      if (watch) return this.status(res, 400, 'BadRequest', 'watch of a single object is not supported here');
      const key = def.namespaced ? `${ns}/${name}` : name;
      const o = this.objects.get(def.plural)!.get(key);
      if (!o) return this.status(res, 404, 'NotFound', `${def.plural} "${name}" not found`);
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify(o));
      return;
    }
    if (watch) this.startWatch(def, match, query, res);
    else this.serveList(def, match, query, res);
  }

  /** The objects of a resource as they were at rv (undoing later changes), or undefined if compacted. */
  private snapshotAt(plural: string, rv: number): Map<string, KObject> | undefined {
    if (rv < this.compactedRv) return undefined;
    const snap = new Map(this.objects.get(plural)!);
    for (let i = this.history.length - 1; i >= 0; i--) {
      const c = this.history[i]!;
      if (c.rv <= rv) break;
      if (c.plural !== plural) continue;
      if (c.type === 'ADDED') snap.delete(c.key);
      else snap.set(c.key, c.prev!);
    }
    return snap;
  }

  /** The objects as of rv in key order; the last one per kind is kept, so pages of one list cost O(page). */
  private sortedAt(plural: string, rv: number): KObject[] | undefined {
    if (rv < this.compactedRv) return undefined;
    const hit = this.listCache.get(plural);
    if (hit?.rv === rv) return hit.sorted;
    const snap = this.snapshotAt(plural, rv);
    if (!snap) return undefined;
    const sorted = [...snap.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, o]) => o);
    this.listCache.set(plural, { rv, sorted });
    return sorted;
  }

  private serveList(
    def: ResourceDef,
    match: (o: KObject) => boolean,
    query: Record<string, string>,
    res: ServerResponse,
  ): void {
    let rv = this.rv;
    let offset = 0;
    if (query['continue']) {
      try {
        const tok = JSON.parse(Buffer.from(query['continue'], 'base64url').toString()) as {
          rv: number;
          offset: number;
        };
        rv = tok.rv;
        offset = tok.offset;
      } catch {
        return this.status(res, 400, 'BadRequest', 'invalid continue token');
      }
    }
    const sorted = this.sortedAt(def.plural, rv);
    if (!sorted) {
      return this.status(
        res,
        410,
        'Expired',
        'The provided continue parameter is too old to display a consistent list result.',
      );
    }
    const all = sorted.filter(match);
    const limit = Number(query['limit'] ?? 0);
    const page = limit > 0 ? all.slice(offset, offset + limit) : all.slice(offset);
    const metadata: KObject = { resourceVersion: String(rv) };
    if (limit > 0 && offset + limit < all.length) {
      metadata['continue'] = Buffer.from(JSON.stringify({ rv, offset: offset + limit })).toString('base64url');
    }
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify({ kind: `${def.kind}List`, apiVersion: apiVersionOf(def), metadata, items: page }));
  }

  private startWatch(
    def: ResourceDef,
    match: (o: KObject) => boolean,
    query: Record<string, string>,
    res: ServerResponse,
  ): void {
    const rvParam = query['resourceVersion'] ?? '';
    if (this.storm !== undefined) return this.stormWatch(this.storm, def, query, res);
    const from = rvParam === '' || rvParam === '0' ? undefined : Number(rvParam);
    if (from !== undefined && (!Number.isFinite(from) || from < this.compactedRv)) {
      const message = `too old resource version: ${rvParam} (${this.compactedRv})`;
      if (this.opts.goneAsHttpStatus) return this.status(res, 410, 'Expired', message);
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify(goneEvent(message)) + '\n');
      return;
    }
    res.writeHead(200, { 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked' });
    res.flushHeaders();
    const w: Watcher = {
      plural: def.plural,
      match,
      bookmarks: query['allowWatchBookmarks'] === 'true',
      res,
      def,
      timer: undefined,
    };
    this.watchers.add(w);
    res.on('close', () => this.endWatcher(w, true));
    if (from === undefined) {
      for (const o of this.objects.get(def.plural)!.values()) if (match(o)) this.write(w, { type: 'ADDED', object: o });
    } else {
      for (const c of this.history) if (c.rv > from && c.plural === def.plural) this.send(w, c);
    }
    const timeout = Number(query['timeoutSeconds'] ?? 0);
    if (timeout > 0) w.timer = setTimeout(() => this.endWatcher(w, true), timeout * 1000);
  }

  /** A watch during a 410 storm: answered 410 (after a bookmark, after a delay) as the storm says. */
  private stormWatch(storm: GoneStorm, def: ResourceDef, query: Record<string, string>, res: ServerResponse): void {
    const message = `too old resource version: ${query['resourceVersion'] ?? ''} (${this.rv})`;
    const answer = () => {
      if (res.destroyed) return;
      this.goneSent++;
      if (storm.as === 'http') return this.status(res, 410, 'Expired', message);
      res.end(JSON.stringify(goneEvent(message)) + '\n');
    };
    if (storm.as === 'event') {
      res.writeHead(200, { 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked' });
      if (storm.bookmarkFirst && query['allowWatchBookmarks'] === 'true') {
        const object = {
          kind: def.kind,
          apiVersion: apiVersionOf(def),
          metadata: { resourceVersion: String(this.rv) },
        };
        res.write(JSON.stringify({ type: 'BOOKMARK', object }) + '\n');
      } else res.flushHeaders();
    }
    if ((storm.delayMs ?? 0) <= 0) return answer();
    const timer = setTimeout(answer, storm.delayMs);
    res.on('close', () => clearTimeout(timer));
  }

  /** Delivers a change through a watcher's selectors, as kube-apiserver's watch cache does. */
  private send(w: Watcher, c: Change): void {
    const now = w.match(c.obj);
    const before = c.prev !== undefined && w.match(c.prev);
    switch (c.type) {
      case 'ADDED':
        if (now) this.write(w, { type: 'ADDED', object: c.obj });
        break;
      case 'MODIFIED':
        if (now && before) this.write(w, { type: 'MODIFIED', object: c.obj });
        else if (now) this.write(w, { type: 'ADDED', object: c.obj });
        else if (before) this.write(w, { type: 'DELETED', object: c.obj });
        break;
      case 'DELETED':
        if (before) this.write(w, { type: 'DELETED', object: c.obj });
        break;
    }
  }

  private write(w: Watcher, event: KObject): void {
    if (!w.res.writableEnded && !w.res.destroyed) w.res.write(JSON.stringify(event) + '\n');
  }

  private endWatcher(w: Watcher, clean: boolean): void {
    if (!this.watchers.delete(w)) return;
    if (w.timer) clearTimeout(w.timer);
    if (clean) w.res.end();
    else w.res.socket?.destroy();
  }
}

/** The ERROR event kube-apiserver sends on a watch whose resourceVersion was compacted away. */
function goneEvent(message: string): KObject {
  return {
    type: 'ERROR',
    object: {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message,
      reason: 'Expired',
      code: 410,
    },
  };
}
