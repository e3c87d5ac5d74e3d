// Reads a V8 heap snapshot file (.heapsnapshot) as a stream, without holding its text: at
// 50,000 Services the daemon's snapshot is larger than V8's longest string (512 MiB), so
// readFile + JSON.parse cannot load it. Only what the summary needs is kept: each node's type,
// name and self size (typed arrays of node_count), then the strings those names refer to.
// The file is {"snapshot":{"meta":…,"node_count":…},"nodes":[…],"edges":[…],…,"strings":[…]}.

import { createReadStream } from 'node:fs';

export interface HeapBreakdown {
  /** Sum of every node's self size, bytes. */
  total: number;
  /** Node type (string, object, array, code, …) → bytes, largest first. */
  byType: [string, number][];
  /** Constructor (objects, closures) or node type → bytes and count, largest first. */
  byName: [string, { size: number; count: number }][];
  /** The largest string nodes: self size and their first 100 characters. */
  topStrings: [number, string][];
}

interface Meta {
  node_fields: string[];
  node_types: [string[], ...unknown[]];
}

const NODES_MARK = Buffer.from('"nodes":[');
const STRINGS_MARK = Buffer.from('"strings":[');
const HEAD_LIMIT = 1 << 20;

class Reader {
  phase: 'head' | 'nodes' | 'skip' | 'strings' | 'done' = 'head';
  head: Buffer[] = [];
  headBytes = 0;
  meta: Meta | undefined;
  nodeCount = 0;
  fieldCount = 0;
  iType = 0;
  iName = 0;
  iSize = 0;
  types!: Uint8Array;
  names!: Uint32Array;
  sizes!: Float64Array;
  /** Position in the flat nodes array, and the number being read. */
  at = 0;
  num = -1;
  tail = Buffer.alloc(0);
  stringIndex = 0;
  inString = false;
  escaped = false;
  parts: Buffer[] = [];
  /** String index → its text, for the indices wanted (constructor names, the largest strings). */
  wanted = new Map<number, string>();

  feed(chunk: Buffer): void {
    let buf = chunk;
    while (buf.length > 0 && this.phase !== 'done') {
      if (this.phase === 'head') buf = this.readHead(buf);
      else if (this.phase === 'nodes') buf = this.readNodes(buf);
      else if (this.phase === 'skip') buf = this.skipTo(buf);
      else buf = this.readStrings(buf);
    }
  }

  private readHead(buf: Buffer): Buffer {
    this.head.push(buf);
    this.headBytes += buf.length;
    const all = Buffer.concat(this.head);
    const i = all.indexOf(NODES_MARK);
    if (i < 0) {
      if (this.headBytes > HEAD_LIMIT) throw new Error('heap snapshot: no "nodes" array in its first MiB');
      return Buffer.alloc(0);
    }
    const text = all.subarray(0, i).toString('utf8').replace(/,\s*$/, '');
    const parsed = JSON.parse(`${text}}`) as { snapshot: { meta: Meta; node_count: number } };
    this.meta = parsed.snapshot.meta;
    this.nodeCount = parsed.snapshot.node_count;
    const f = this.meta.node_fields;
    this.fieldCount = f.length;
    [this.iType, this.iName, this.iSize] = [f.indexOf('type'), f.indexOf('name'), f.indexOf('self_size')];
    this.types = new Uint8Array(this.nodeCount);
    this.names = new Uint32Array(this.nodeCount);
    this.sizes = new Float64Array(this.nodeCount);
    this.head = [];
    this.phase = 'nodes';
    return all.subarray(i + NODES_MARK.length);
  }

  private readNodes(buf: Buffer): Buffer {
    for (let k = 0; k < buf.length; k++) {
      const c = buf[k]!;
      if (c >= 48 && c <= 57) {
        this.num = (this.num < 0 ? 0 : this.num * 10) + (c - 48);
        continue;
      }
      if (this.num >= 0) this.store(this.num);
      this.num = -1;
      if (c === 93 /* ] */) {
        if (this.at !== this.nodeCount * this.fieldCount)
          throw new Error(`heap snapshot: ${this.at} node fields, expected ${this.nodeCount * this.fieldCount}`);
        this.phase = 'skip';
        return buf.subarray(k + 1);
      }
    }
    return Buffer.alloc(0);
  }

  private store(v: number): void {
    const node = Math.floor(this.at / this.fieldCount);
    const field = this.at % this.fieldCount;
    if (field === this.iType) this.types[node] = v;
    else if (field === this.iName) this.names[node] = v;
    else if (field === this.iSize) this.sizes[node] = v;
    this.at++;
  }

  private skipTo(buf: Buffer): Buffer {
    const joined = Buffer.concat([this.tail, buf]);
    const i = joined.indexOf(STRINGS_MARK);
    if (i < 0) {
      this.tail = joined.subarray(Math.max(0, joined.length - STRINGS_MARK.length));
      return Buffer.alloc(0);
    }
    this.tail = Buffer.alloc(0);
    this.phase = 'strings';
    return joined.subarray(i + STRINGS_MARK.length);
  }

  /** Between strings: skips separators; inside one: finds its closing quote (not escaped). */
  private readStrings(buf: Buffer): Buffer {
    let start = 0;
    for (let k = 0; k < buf.length; k++) {
      const c = buf[k]!;
      if (!this.inString) {
        if (c === 34 /* " */) {
          this.inString = true;
          start = k + 1;
        } else if (c === 93 /* ] */) {
          this.phase = 'done';
          return Buffer.alloc(0);
        }
        continue;
      }
      if (this.escaped) this.escaped = false;
      else if (c === 92 /* \ */) this.escaped = true;
      else if (c === 34) {
        this.endString(buf.subarray(start, k));
        this.inString = false;
      }
    }
    if (this.inString && this.wanted.has(this.stringIndex)) this.parts.push(Buffer.from(buf.subarray(start)));
    return Buffer.alloc(0);
  }

  private endString(last: Buffer): void {
    if (this.wanted.has(this.stringIndex)) {
      const raw = Buffer.concat([...this.parts, last]).toString('utf8');
      this.wanted.set(this.stringIndex, JSON.parse(`"${raw}"`) as string);
    }
    this.parts = [];
    this.stringIndex++;
  }
}

/** Self sizes by node type and by constructor (as DevTools' summary view), and the `top` largest strings. */
export async function readHeapSnapshot(file: string, top = 0, chunkBytes = 1 << 20): Promise<HeapBreakdown> {
  const r = new Reader();
  let typeNames: string[] = [];
  for await (const chunk of createReadStream(file, { highWaterMark: chunkBytes })) {
    r.feed(chunk as Buffer);
    if (r.phase === 'skip' && typeNames.length === 0) {
      // The nodes are read: the strings to keep are known before the strings array begins.
      typeNames = r.meta!.node_types[0];
      for (let i = 0; i < r.nodeCount; i++) {
        const t = typeNames[r.types[i]!];
        if (t === 'object' || t === 'closure') r.wanted.set(r.names[i]!, '');
      }
      for (const i of largest(r, typeNames.indexOf('string'), top)) r.wanted.set(r.names[i]!, '');
    }
  }
  if (r.phase !== 'done') throw new Error(`heap snapshot ${file} is incomplete (stopped in ${r.phase})`);
  const byType = new Map<string, number>();
  const byName = new Map<string, { size: number; count: number }>();
  let total = 0;
  for (let i = 0; i < r.nodeCount; i++) {
    const type = typeNames[r.types[i]!]!;
    const size = r.sizes[i]!;
    total += size;
    byType.set(type, (byType.get(type) ?? 0) + size);
    const name = type === 'object' || type === 'closure' ? `${type}:${r.wanted.get(r.names[i]!) ?? ''}` : type;
    const e = byName.get(name) ?? { size: 0, count: 0 };
    e.size += size;
    e.count++;
    byName.set(name, e);
  }
  const topStrings = largest(r, typeNames.indexOf('string'), top).map((i): [number, string] => [
    r.sizes[i]!,
    (r.wanted.get(r.names[i]!) ?? '').slice(0, 100),
  ]);
  return {
    total,
    byType: [...byType].sort((a, b) => b[1] - a[1]),
    byName: [...byName].sort((a, b) => b[1].size - a[1].size),
    topStrings,
  };
}

function largest(r: Reader, stringType: number, top: number): number[] {
  if (top <= 0) return [];
  const found: number[] = [];
  for (let i = 0; i < r.nodeCount; i++) if (r.types[i] === stringType) found.push(i);
  return found.sort((a, b) => r.sizes[b]! - r.sizes[a]!).slice(0, top);
}
