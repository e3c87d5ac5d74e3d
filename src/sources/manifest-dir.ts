// The manifest-directory source (standalone mode, no cluster): every *.yaml, *.yml and
// *.json file of one directory (not of its subdirectories; names starting with "." are
// skipped), each holding one or more documents (multi-document YAML, or `kind: List` with
// items) of kind Service, EndpointSlice, Node or ServiceCIDR.
//
// Changes are seen through fs.watch (coalesced over debounceMs) and, as a fallback for
// file systems where inotify says nothing (NFS, some bind mounts, ConfigMap volumes whose
// ..data symlink is swapped), a periodic rescan. A file is re-read only when its identity
// (inode, size, mtime, ctime, in ns) changed.
//
// Broken files. A file that fails to parse is reported once, by file name and line, and
// then ignored until it changes. Its objects are NOT withdrawn: we keep the last good
// content of the broken file as well as of every other file. An editor saving a file in
// two writes, or a typo, must not take Services down; deleting the file does. An object
// that parses but is structurally invalid is skipped (logged with file and line, counted),
// and if the same object was valid in the file's last good content, that version stays.
//
// Other decisions, as `kubectl apply` would have it: a namespaced object without
// metadata.namespace is in "default"; an object defined in two files is taken from the
// first file in name order (the other is reported). Objects labelled for another proxy
// (service.kubernetes.io/service-proxy-name) or headless are skipped, as the API source's
// label selector skips them. Of the Nodes, the one named nodeName is this node's (or, with
// no nodeName, the only one).

import type { FSWatcher } from 'node:fs';
import { watch as fsWatch } from 'node:fs';
import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { Node as YamlNode } from 'yaml';
import type { Document } from 'yaml';
import { Composer, isMap, isSeq, LineCounter, Parser } from 'yaml';
import type { Clock, TimerHandle } from '../base/clock.ts';
import { systemClock } from '../base/clock.ts';
import type { Logger } from '../base/logger.ts';
import type { EndpointSlice, Node, Service, ServiceCIDR } from '../model/k8s.ts';
import type { KindObject } from './convert.ts';
import { CONVERTERS, NAMESPACED, selectedByProxy } from './convert.ts';
import { SyncWaiter } from './sync-waiter.ts';
import type { RejectCounter, Source, SourceHandler, SourceKind } from './types.ts';
import { SOURCE_KINDS } from './types.ts';
import { errorMessage } from '../base/errors.ts';
import { InputFileError, MAX_MANIFEST_BYTES, MAX_YAML_ALIASES, readInputFile } from './read-file.ts';

export interface ManifestDirSourceOptions {
  dir: string;
  /** Which Node object is this node's. Without it, the only Node (first, if several). */
  nodeName?: string;
  logger: Logger;
  clock?: Clock;
  onReject?: RejectCounter;
  /** Changes reported by fs.watch within this window are read in one scan. Default 100 ms. */
  debounceMs?: number;
  /** Rescan this often whatever fs.watch says; 0 disables. Default 5 s. */
  rescanIntervalMs?: number;
  /** Use fs.watch. Default true. */
  watch?: boolean;
  /** Files larger than this are refused (reported, last good content kept). Default MAX_MANIFEST_BYTES. */
  maxFileBytes?: number;
  /**
   * Called after the handler has been told of a scan that read or dropped a file of
   * largeFileBytes or more (default 1 MiB): the daemon gives the memory back once synced.
   */
  onLargeInput?: () => void;
  largeFileBytes?: number;
}

const EXTENSIONS = ['.yaml', '.yml', '.json'];
export { MAX_MANIFEST_BYTES };

interface ParsedObject {
  kind: SourceKind;
  key: string;
  obj: KindObject[SourceKind];
  /** JSON of obj, to tell a changed object from an unchanged one. */
  json: string;
  line: number;
}

interface FileState {
  stamp: string;
  size: bigint;
  /** Last good content; undefined if the file never parsed. */
  objects: Map<string, ParsedObject> | undefined;
  /** The current parse error, reported once. */
  error: string | undefined;
}

interface Problem {
  line: number;
  column: number;
  message: string;
}

export interface ParseResult {
  objects: ParsedObject[];
  /** Set when the file as a whole does not parse (nothing of it is usable). */
  error?: Problem;
  /** Objects skipped: file line, kind, key if known, and why. */
  rejects: { line: number; kind: string; key: string | undefined; reason: string }[];
}

const slot = (kind: string, key: string) => `${kind}\u0000${key}`;

/**
 * Parses one manifest file's text. Pure; exported for tests. `previous` is the file's last
 * good content: a structurally invalid object that was valid there is carried over.
 *
 * Documents are composed and converted one at a time (yaml's Parser and Composer are
 * generators), so a file of thousands of documents never has all their syntax trees in
 * memory at once: only the compact objects it yields are kept.
 */
export function parseManifest(text: string, previous?: ReadonlyMap<string, ParsedObject>): ParseResult {
  try {
    return parseManifestText(text, previous);
  } catch (e) {
    // A parser's own limit (nesting deeper than the stack: "Maximum call stack size exceeded").
    return { objects: [], rejects: [], error: { line: 1, column: 1, message: `cannot be parsed: ${errorMessage(e)}` } };
  }
}

function parseManifestText(text: string, previous?: ReadonlyMap<string, ParsedObject>): ParseResult {
  const result: ParseResult = { objects: [], rejects: [] };
  const seen = new Set<string>();
  const json = canonicalJsonItems(text);
  if (json) {
    for (const item of json) convertItem(item, previous, seen, result);
    return result;
  }
  const lc = new LineCounter();
  const composer = new Composer({ uniqueKeys: true });
  for (const doc of composer.compose(new Parser(lc.addNewLine).parse(text))) {
    const items = documentItems(doc, lc);
    if ('error' in items) return { ...result, error: items.error };
    for (const item of items) convertItem(item, previous, seen, result);
  }
  return result;
}

/**
 * The objects of a file in canonical one-line JSON (exactly what JSON.stringify writes: no
 * whitespace, no duplicate keys, no escapes it would not write), through JSON.parse: the same
 * values the YAML parser gives, each on line 1 as there, several times faster (5,000 Services
 * with their slices, 2.6 MB: 3.2 s through YAML, 0.48 s so, conversion included). Undefined
 * for any other text, which goes through YAML for its line numbers and duplicate-key errors.
 */
function canonicalJsonItems(text: string): { raw: unknown; line: number }[] | undefined {
  const body = text.endsWith('\n') ? text.slice(0, -1) : text;
  if (body[0] !== '{' && body[0] !== '[') return undefined;
  let js: unknown;
  try {
    js = JSON.parse(body);
  } catch {
    return undefined;
  }
  if (JSON.stringify(js) !== body) return undefined;
  return listItems(js).map((raw) => ({ raw, line: 1 }));
}

/** A `kind: *List` document's items, or the document itself. */
function listItems(js: unknown): unknown[] {
  const kind =
    typeof js === 'object' && js !== null && !Array.isArray(js) ? (js as { kind?: unknown }).kind : undefined;
  const items = (js as { items?: unknown } | null)?.items;
  return typeof kind === 'string' && kind.endsWith('List') && Array.isArray(items) ? items : [js];
}

/** One document's objects (a `kind: *List` document's items) with their lines, or why it does not parse. */
function documentItems(doc: Document.Parsed, lc: LineCounter): { raw: unknown; line: number }[] | { error: Problem } {
  const lineOf = (node: { range?: [number, number, number] | null } | null | undefined, fallback = 1) =>
    node?.range ? lc.linePos(node.range[0]).line : fallback;
  const err = doc.errors[0];
  if (err) {
    const pos = lc.linePos(err.pos[0]);
    const first = err.message.split('\n')[0] ?? err.message;
    return {
      error: { line: pos.line, column: pos.col, message: first.replace(/ at line \d+, column \d+:?$/, '') },
    };
  }
  let js: unknown;
  try {
    js = doc.toJS({ maxAliasCount: MAX_YAML_ALIASES });
  } catch (e) {
    return { error: { line: lineOf(doc.contents as YamlNode | null), column: 1, message: errorMessage(e) } };
  }
  if (js === null || js === undefined) return [];
  const docLine = lineOf(doc.contents as YamlNode | null);
  const kind = typeof js === 'object' && !Array.isArray(js) ? (js as { kind?: unknown }).kind : undefined;
  if (typeof kind === 'string' && kind.endsWith('List') && Array.isArray((js as { items?: unknown }).items)) {
    const seq = isMap(doc.contents) ? doc.contents.get('items', true) : undefined;
    return (js as { items: unknown[] }).items.map((raw, i) => {
      const node = isSeq(seq) ? (seq.items[i] as YamlNode | undefined) : undefined;
      return { raw, line: lineOf(node, docLine) };
    });
  }
  return [{ raw: js, line: docLine }];
}

/** Converts one object to its compact form into `result` (or records why it was skipped). */
function convertItem(
  { raw, line }: { raw: unknown; line: number },
  previous: ReadonlyMap<string, ParsedObject> | undefined,
  seen: Set<string>,
  result: ParseResult,
): void {
  const kind = typeof raw === 'object' && raw !== null ? (raw as { kind?: unknown }).kind : undefined;
  if (typeof kind !== 'string' || !(SOURCE_KINDS as readonly string[]).includes(kind)) {
    result.rejects.push({
      line,
      kind: typeof kind === 'string' ? kind : '(none)',
      key: undefined,
      reason: typeof kind === 'string' ? `unsupported kind ${kind}` : 'no kind',
    });
    return;
  }
  const k = kind as SourceKind;
  let input = raw as Record<string, unknown>;
  const meta = input['metadata'];
  if (NAMESPACED[k] && typeof meta === 'object' && meta !== null && !Array.isArray(meta)) {
    const m = meta as Record<string, unknown>;
    if (m['namespace'] === undefined || m['namespace'] === null)
      input = { ...input, metadata: { ...m, namespace: 'default' } };
  }
  const c = CONVERTERS[k](input);
  if (!c.ok) {
    result.rejects.push({ line, kind: k, key: c.key, reason: c.reason });
    const had = c.key !== undefined ? previous?.get(slot(k, c.key)) : undefined;
    if (had && !seen.has(slot(k, had.key))) {
      seen.add(slot(k, had.key));
      result.objects.push(had);
    }
    return;
  }
  if (seen.has(slot(k, c.key))) {
    result.rejects.push({ line, kind: k, key: c.key, reason: 'defined twice in this file' });
    return;
  }
  seen.add(slot(k, c.key));
  result.objects.push({ kind: k, key: c.key, obj: c.obj, json: JSON.stringify(c.obj), line });
}

export class ManifestDirSource implements Source {
  private readonly o: ManifestDirSourceOptions;
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly files = new Map<string, FileState>();
  private handler: SourceHandler | undefined;
  private controller: AbortController | undefined;
  private watcher: FSWatcher | undefined;
  private debounce: TimerHandle | undefined;
  private rescan: TimerHandle | undefined;
  private scanning: Promise<void> | undefined;
  private again = false;
  private synced = false;
  private dirError: string | undefined;
  private readonly waiter = new SyncWaiter();
  /** What the handler holds: slot -> object. */
  private delivered = new Map<string, ParsedObject>();
  private deliveredNode: ParsedObject | undefined;
  private deliveredCidrsOnce = false;
  private scans = 0;

  constructor(opts: ManifestDirSourceOptions) {
    this.o = opts;
    this.clock = opts.clock ?? systemClock;
    this.log = opts.logger.child({ component: 'manifest-source', dir: opts.dir });
  }

  async start(handler: SourceHandler): Promise<void> {
    if (this.controller) throw new Error('ManifestDirSource already started');
    this.handler = handler;
    this.controller = new AbortController();
    this.startWatching();
    await this.scan();
    this.armRescan();
  }

  async stop(): Promise<void> {
    this.controller?.abort();
    this.watcher?.close();
    this.watcher = undefined;
    this.debounce?.cancel();
    this.rescan?.cancel();
    this.waiter.close(new Error('source stopped'));
    await this.scanning;
  }

  hasSynced(): boolean {
    return this.synced;
  }

  waitForSync(signal?: AbortSignal): Promise<void> {
    return this.waiter.wait(signal);
  }

  /** Number of completed scans (for tests and diagnostics). */
  get scanCount(): number {
    return this.scans;
  }

  /** Reads the directory now (and again after the current scan, if one is running). */
  scan(): Promise<void> {
    if (this.controller?.signal.aborted) return Promise.resolve();
    if (this.scanning) {
      this.again = true;
      return this.scanning;
    }
    this.scanning = (async () => {
      try {
        do {
          this.again = false;
          try {
            await this.scanOnce();
          } catch (err) {
            // Nothing in a scan should throw; if something does, the next scan tries again.
            this.log.error('manifest scan failed', { error: String(err) });
          }
          this.scans++;
        } while (this.again && !this.controller?.signal.aborted);
      } finally {
        this.scanning = undefined;
      }
    })();
    return this.scanning;
  }

  private startWatching(): void {
    if (this.o.watch === false || this.watcher) return;
    try {
      const w = fsWatch(this.o.dir, { persistent: false }, () => this.kick());
      w.on('error', (err) => {
        this.log.warn('directory watch failed; relying on the periodic rescan', { error: String(err) });
        w.close();
        if (this.watcher === w) this.watcher = undefined;
      });
      this.watcher = w;
    } catch (err) {
      // Typically ENOENT: the directory does not exist yet. The rescan retries.
      this.log.debug('cannot watch the directory yet', { error: String(err) });
    }
  }

  private kick(): void {
    if (this.debounce || this.controller?.signal.aborted) return;
    this.debounce = this.clock.setTimer(this.o.debounceMs ?? 100, () => {
      this.debounce = undefined;
      void this.scan();
    });
  }

  private armRescan(): void {
    const every = this.o.rescanIntervalMs ?? 5000;
    if (every <= 0 || this.controller?.signal.aborted) return;
    this.rescan = this.clock.setTimer(every, () => {
      this.startWatching();
      void this.scan().finally(() => this.armRescan());
    });
  }

  private reject(file: string, line: number, kind: string, key: string | undefined, reason: string): void {
    this.log.warn(`${file}:${line}: skipping ${kind}${key ? ` ${key}` : ''}: ${reason}`, {
      file,
      line,
      kind,
      object: key,
      reason,
    });
    this.o.onReject?.({ kind, key, reason, origin: `${file}:${line}` });
  }

  private async scanOnce(): Promise<void> {
    let names: string[];
    try {
      names = (await readdir(this.o.dir))
        .filter((n) => !n.startsWith('.') && EXTENSIONS.some((e) => n.endsWith(e)))
        .sort();
      if (this.dirError) this.log.info('manifest directory readable again');
      this.dirError = undefined;
    } catch (err) {
      // A directory that cannot be read is a transient problem, not "everything deleted".
      const msg = String(err);
      if (msg !== this.dirError)
        this.log.warn('cannot read the manifest directory; keeping what was loaded', { error: msg });
      this.dirError = msg;
      // A watch on a directory that was removed watches nothing: make a new one when it is back.
      this.watcher?.close();
      this.watcher = undefined;
      this.finishSync();
      return;
    }
    let changed = false;
    let sawLarge = false;
    const large = BigInt(this.o.largeFileBytes ?? 1 << 20);
    const present = new Set<string>();
    for (const name of names) {
      if (this.controller?.signal.aborted) return;
      const path = join(this.o.dir, name);
      let st;
      try {
        st = await stat(path, { bigint: true });
      } catch {
        continue; // vanished between readdir and stat, or a dangling symlink
      }
      present.add(name);
      const stamp = `${st.ino}:${st.size}:${st.mtimeNs}:${st.ctimeNs}`;
      const state = this.files.get(name);
      if (state?.stamp === stamp) continue;
      const next: FileState = { stamp, size: st.size, objects: state?.objects, error: undefined };
      if (st.size >= large) sawLarge = true;
      this.files.set(name, next);
      let problem: Problem | undefined;
      let parsed: ParseResult | undefined;
      const maxBytes = this.o.maxFileBytes ?? MAX_MANIFEST_BYTES;
      let text: string | undefined;
      try {
        text = await readInputFile(path, maxBytes);
      } catch (err) {
        const message =
          err instanceof InputFileError
            ? `file ${err.message}${st.size > BigInt(maxBytes) ? ' per manifest file (split it)' : ''}`
            : `cannot read: ${errorMessage(err)}`;
        problem = { line: 1, column: 1, message };
      }
      if (text !== undefined) {
        parsed = parseManifest(text, state?.objects);
        text = undefined; // not kept while the objects are delivered
        problem = parsed.error;
      }
      if (problem || !parsed) {
        const p = problem ?? { line: 1, column: 1, message: 'unreadable' };
        const text = `${name}:${p.line}:${p.column}: ${p.message}`;
        next.error = text;
        if (text !== state?.error) {
          this.log.warn(`manifest ${text}; ignoring the file until it is fixed, keeping its last good content`, {
            file: name,
            line: p.line,
            column: p.column,
            error: p.message,
          });
          this.o.onReject?.({ kind: 'Manifest', key: undefined, reason: p.message, origin: `${name}:${p.line}` });
        }
        continue;
      }
      if (state?.error) this.log.info(`manifest ${name} parses again`, { file: name });
      for (const r of parsed.rejects) this.reject(name, r.line, r.kind, r.key, r.reason);
      next.objects = new Map(parsed.objects.map((o) => [slot(o.kind, o.key), o]));
      changed = true;
    }
    for (const name of [...this.files.keys()]) {
      if (!present.has(name)) {
        if (this.files.get(name)!.size >= large) sawLarge = true;
        this.files.delete(name);
        changed = true;
        this.log.info(`manifest ${name} removed`, { file: name });
      }
    }
    // The first scan's memory is given back by the daemon after its first sync anyway.
    const first = !this.synced;
    if (changed || first) this.deliver();
    this.finishSync();
    if (sawLarge && !first) this.o.onLargeInput?.();
  }

  private finishSync(): void {
    if (this.synced || !this.handler) return;
    this.synced = true;
    const handler = guardedHandler(this.handler, this.log);
    if (!this.deliveredCidrsOnce) handler.onServiceCIDRs?.([]);
    for (const kind of SOURCE_KINDS) handler.onSynced(kind);
    this.waiter.set(true);
  }

  /** Merges every file's objects and tells the handler what changed. */
  private deliver(): void {
    const handler = guardedHandler(this.handler!, this.log);
    const merged = new Map<string, ParsedObject & { file: string }>();
    const nodes: (ParsedObject & { file: string })[] = [];
    for (const [file, state] of [...this.files].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
      for (const o of state.objects?.values() ?? []) {
        if (o.kind !== 'Node' && !selectedByProxy(o.obj.metadata?.labels)) continue;
        if (o.kind === 'Node') {
          if (this.o.nodeName === undefined || o.key === this.o.nodeName) nodes.push({ ...o, file });
          continue;
        }
        const s = slot(o.kind, o.key);
        const first = merged.get(s);
        if (first) {
          this.log.warn(
            `${file}:${o.line}: ${o.kind} ${o.key} is already defined in ${first.file}:${first.line}; ignoring this one`,
            {
              file,
              line: o.line,
              kind: o.kind,
              object: o.key,
            },
          );
          continue;
        }
        merged.set(s, { ...o, file });
      }
    }
    if (nodes.length > 1) {
      this.log.warn(`${nodes.length} Node objects match; using ${nodes[0]!.key} from ${nodes[0]!.file}`, {
        nodeName: this.o.nodeName,
      });
    }
    let cidrsChanged = false;
    const prev = this.delivered;
    for (const [s, old] of prev) {
      if (merged.has(s)) continue;
      if (old.kind === 'Service') handler.onService(old.obj as Service, undefined);
      else if (old.kind === 'EndpointSlice') handler.onEndpointSlice(old.obj as EndpointSlice, undefined);
      else cidrsChanged = true;
    }
    const next = new Map<string, ParsedObject>();
    for (const [s, o] of merged) {
      const old = prev.get(s);
      const keep = old && old.json === o.json ? old : o;
      next.set(s, keep);
      if (old && old.json === o.json) continue;
      if (o.kind === 'Service') handler.onService(old?.obj as Service | undefined, o.obj as Service);
      else if (o.kind === 'EndpointSlice')
        handler.onEndpointSlice(old?.obj as EndpointSlice | undefined, o.obj as EndpointSlice);
      else cidrsChanged = true;
    }
    this.delivered = next;
    const node = nodes[0];
    if (node?.json !== this.deliveredNode?.json) {
      handler.onNode(node?.obj as Node | undefined);
      this.deliveredNode = node;
    }
    if (cidrsChanged || !this.deliveredCidrsOnce) {
      this.deliveredCidrsOnce = true;
      handler.onServiceCIDRs?.(
        [...next.values()].filter((o) => o.kind === 'ServiceCIDR').map((o) => o.obj as ServiceCIDR),
      );
    }
  }
}

/** A handler whose exceptions are logged instead of breaking the scan (see reflector.ts). */
function guardedHandler(h: SourceHandler, log: Logger): SourceHandler {
  const call = (what: string, fn: () => void) => {
    try {
      fn();
    } catch (err) {
      log.error('event handler failed', { event: what, error: String(err) });
    }
  };
  const out: SourceHandler = {
    onService: (p, c) => call('onService', () => h.onService(p, c)),
    onEndpointSlice: (p, c) => call('onEndpointSlice', () => h.onEndpointSlice(p, c)),
    onNode: (n) => call('onNode', () => h.onNode(n)),
    onSynced: (k) => call('onSynced', () => h.onSynced(k)),
  };
  const cidrs = h.onServiceCIDRs?.bind(h);
  if (cidrs) out.onServiceCIDRs = (c) => call('onServiceCIDRs', () => cidrs(c));
  return out;
}
