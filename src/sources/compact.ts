// The model's compact form of an API object: a copy that keeps only the fields a shape names
// (the fields of model/k8s.ts, which is all kube-proxy semantics read), with the strings that
// repeat across thousands of objects (node names, zones, namespaces, protocols…) shared, and
// the few distinct endpoint condition objects shared too. The parsed JSON it came from is then
// garbage: at 10,000 Services × 10 endpoints a targetRef, managedFields or an ownerReference
// per object would otherwise stay in memory for the daemon's life.
//
// Only structure is selected here, never validated beyond what convert.ts checks: a value whose
// JSON type is not the one the shape expects is kept as it is (toPlain), so that the model sees
// it and reports it exactly as before.

/** A field kept as it is; 'shared' also interns it when it is a string. */
export type Shape = 'keep' | 'shared' | 'conditions' | { readonly [field: string]: Shape } | readonly [Shape];

const MAX_DEPTH = 32;

/** RFC 3339 at second precision, as metav1.Time marshals (2006-01-02T15:04:05Z). */
export function rfc3339(d: Date): string | undefined {
  if (Number.isNaN(d.getTime())) return undefined;
  const iso = d.toISOString();
  return iso.endsWith('.000Z') ? `${iso.slice(0, -5)}Z` : iso;
}

/**
 * A JSON-shaped deep copy: Dates become RFC 3339 strings; undefined, functions and symbols
 * are dropped (exactOptionalPropertyTypes: absent, never present-and-undefined); class
 * instances become plain objects. Depth is bounded against hostile input.
 */
export function toPlain(v: unknown, depth = 0): unknown {
  if (depth > MAX_DEPTH) return undefined;
  if (v === null || typeof v === 'string' || typeof v === 'boolean') return v;
  if (typeof v === 'number') return Number.isFinite(v) ? v : undefined;
  if (typeof v === 'bigint') return Number(v);
  if (v instanceof Date) return rfc3339(v);
  if (Array.isArray(v)) return exactArray(v, (item) => toPlain(item, depth + 1));
  if (typeof v === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, val] of Object.entries(v)) {
      const p = toPlain(val, depth + 1);
      if (p !== undefined) out[k] = p;
    }
    return out;
  }
  return undefined;
}

/**
 * The mapped items, undefined ones left out, in an array of exactly that length: push() onto
 * [] reserves 17 slots at once, 152 bytes for an endpoint's one address, 100,000 times over.
 * Array.from(v, f) grows its result as push() does (measured on Node 24: 80 bytes for a
 * one-item array, 232 for ten items); map() allocates the length it knows (56 and 128).
 */
function exactArray(v: readonly unknown[], f: (x: unknown) => unknown): unknown[] {
  const out = v.map((x) => f(x));
  return out.includes(undefined) ? out.filter((x) => x !== undefined) : out;
}

export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Date);
}

/**
 * Interned strings, bounded: values that repeat (there are few distinct ones) are shared;
 * when a cluster has more distinct values than this, the table starts over, so unique
 * values can never make it grow without bound.
 */
const INTERN_LIMIT = 16_384;
let interned = new Map<string, string>();

export function intern(s: string): string {
  const had = interned.get(s);
  if (had !== undefined) return had;
  if (interned.size >= INTERN_LIMIT) interned = new Map();
  interned.set(s, s);
  return s;
}

/** The 27 combinations of ready/serving/terminating (true, false, absent), each one object. */
const conditionObjects = new Map<string, Readonly<Record<string, boolean>>>();
const CONDITION_KEYS = ['ready', 'serving', 'terminating'] as const;

function sharedConditions(v: Record<string, unknown>): unknown {
  let key = '';
  for (const [k, val] of Object.entries(v)) {
    if (val === undefined) continue;
    if (!(CONDITION_KEYS as readonly string[]).includes(k) || typeof val !== 'boolean') return toPlain(v);
  }
  const out: Record<string, boolean> = {};
  for (const k of CONDITION_KEYS) {
    const val = v[k];
    if (typeof val === 'boolean') out[k] = val;
    key += val === true ? 't' : val === false ? 'f' : '-';
  }
  let shared = conditionObjects.get(key);
  if (shared === undefined) {
    shared = Object.freeze(out);
    conditionObjects.set(key, shared);
  }
  return shared;
}

/** The compact copy of `v` as `shape` says; undefined when nothing of it is kept. */
export function compact(v: unknown, shape: Shape, depth = 0): unknown {
  if (depth > MAX_DEPTH) return undefined;
  if (shape === 'keep') return toPlain(v, depth);
  if (shape === 'shared') return typeof v === 'string' ? intern(v) : toPlain(v, depth);
  if (shape === 'conditions') return isRecord(v) ? sharedConditions(v) : toPlain(v, depth);
  if (Array.isArray(shape)) {
    if (!Array.isArray(v)) return toPlain(v, depth);
    const item = shape[0] as Shape;
    return exactArray(v, (x) => compact(x, item, depth + 1));
  }
  if (!isRecord(v)) return toPlain(v, depth);
  const out: Record<string, unknown> = {};
  for (const field of Object.keys(shape)) {
    const val = v[field];
    if (val === undefined) continue;
    const c = compact(val, (shape as Record<string, Shape>)[field]!, depth + 1);
    if (c !== undefined) out[field] = c;
  }
  return out;
}
