// Set and map elements several service ports may contribute (two ports of one Service share
// a cluster IP; two Services may share an endpoint IP in `hairpin`). Each element is counted
// by its contributors: it is added when the first one appears and deleted when the last one
// goes. Map elements with different data under one key are a conflict: the first owner
// keeps the key and the conflict is reported.
//
// Three kinds of contribution, so that the index holds few entries per service port (a
// daemon keeps it for the whole cluster, and every entry costs memory and GC time):
//   - one element (frontends, cluster IPs, firewall sets): one entry, keyed by its text;
//   - a frontend's slots in an endpoints map (`endpoints-N`: frontend . i -> endpoint i, for
//     i < N): one entry per frontend, whose value is the endpoint list. A frontend belongs
//     to one service port, so its slots are owned (and conflict) together;
//   - `hairpin` elements (ip . ip for every endpoint): one entry per address, keyed by the
//     address itself (the model's string), with no text built for it.
// NftElement objects are built only for what the kernel must see change.

import type { EndpointInfo } from '../../model/index.ts';
import type { NftElement, Verdict } from '../../netlink/nftables/index.ts';
import type { SyncProblem } from '../types.ts';
import { isBalancingMap, isEndpointsMap, SET } from './names.ts';

type Field = string | number;

/** One element: a verdict-map entry or a set member. */
export interface ElementContribution {
  readonly kind: 'element';
  /** Stable text of set + key, e.g. "service-ips|10.96.0.1 . tcp . 80" (elementId of the element). */
  readonly id: string;
  readonly element: NftElement;
  /** Text of the data (verdict or values; '' for a set member), to tell a changed value from the same one. */
  readonly value: string;
}

/** A frontend's endpoints in an endpoints map: slot i holds endpoints[i]. */
export interface SlotsContribution {
  readonly kind: 'slots';
  /** Map + frontend, e.g. "endpoints-3|10.96.0.1 . tcp . 80": the slots' ids without the slot number. */
  readonly id: string;
  readonly map: string;
  readonly frontend: readonly Field[];
  readonly endpoints: readonly EndpointInfo[];
}

export type Contribution = ElementContribution | SlotsContribution;

/** What one service port puts into the shared sets and maps. */
export interface PortElements {
  readonly contributions: readonly Contribution[];
  /** Endpoints whose address needs a `hairpin` element (ip . ip); an address may repeat. */
  readonly hairpin: readonly EndpointInfo[];
}

export const NO_ELEMENTS: PortElements = { contributions: [], hairpin: [] };

/** The text ids and values use: fields joined by " . ", as nft prints a concatenation. */
export const keyText = (fields: readonly Field[]): string => fields.join(' . ');

const verdictText = (v: Verdict): string => ('chain' in v ? `${v.verdict} ${v.chain}` : v.verdict);

/** `text`: keyText(key), when the caller has it already. */
export function mapElement(set: string, key: Field[], v: Verdict, text = keyText(key)): ElementContribution {
  return {
    kind: 'element',
    id: `${set}|${text}`,
    value: verdictText(v),
    element: { kind: 'element', set, key, value: v },
  };
}

export function setElement(set: string, key: Field[]): ElementContribution {
  return { kind: 'element', id: `${set}|${keyText(key)}`, value: '', element: { kind: 'element', set, key } };
}

/** `frontendText`: keyText(frontend), which the caller usually has already. */
export function slots(
  map: string,
  frontend: readonly Field[],
  frontendText: string,
  endpoints: readonly EndpointInfo[],
): SlotsContribution {
  return { kind: 'slots', id: `${map}|${frontendText}`, map, frontend, endpoints };
}

/** The element of slot i: `map frontend . i : ip . port`. */
export function slotElement(c: SlotsContribution, i: number): NftElement {
  const ep = c.endpoints[i]!;
  const f = c.frontend;
  // Built field by field: one of these per endpoint and frontend, spreads cost more.
  const key = f.length === 3 ? [f[0]!, f[1]!, f[2]!, i] : f.length === 2 ? [f[0]!, f[1]!, i] : [...f, i];
  return { kind: 'element', set: c.map, key, value: [ep.ip, ep.port] };
}

export const hairpinElement = (ip: string): NftElement => ({ kind: 'element', set: SET.hairpin, key: [ip, ip] });

/** Endpoint lists compare by what the slots hold: address and port, in order. */
function sameEndpoints(a: readonly EndpointInfo[], b: readonly EndpointInfo[]): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i]!.ip !== b[i]!.ip || a[i]!.port !== b[i]!.port) return false;
  return true;
}

type Value = string | readonly EndpointInfo[];

const valueOf = (c: Contribution): Value => (c.kind === 'element' ? c.value : c.endpoints);

function sameValue(a: Value, b: Value): boolean {
  return typeof a === 'string' || typeof b === 'string' ? a === b : sameEndpoints(a, b);
}

const valueText = (v: Value): string => (typeof v === 'string' ? v : v.map((e) => `${e.ip} . ${e.port}`).join(', '));

/**
 * What the index keeps per entry: its data and who contributes it. Not the elements
 * themselves: a contribution is rebuilt by planning the port again when it changes, which
 * keeps the index small.
 */
interface Entry {
  value: Value;
  owners: Owners;
}

/**
 * One owner (the common case) or several: a set, so that an element shared by thousands of
 * service ports (many Services selecting one pod) costs each of them O(1), not a copy of the list.
 */
type Owners = string | Set<string>;

const hasOwner = (o: Owners, owner: string): boolean => (typeof o === 'string' ? o === owner : o.has(owner));
const ownerList = (o: Owners): string[] => (typeof o === 'string' ? [o] : [...o]);

/** `o` with `owner` added (a set is changed in place). */
function withOwner(o: Owners, owner: string): Owners {
  if (typeof o === 'string') return new Set([o, owner]);
  o.add(owner);
  return o;
}

/** The owners left when `owner` goes (a set is changed in place); undefined when nobody is left. */
function withoutOwner(o: Owners, owner: string): Owners | undefined {
  if (typeof o === 'string') return undefined;
  o.delete(owner);
  return o.size === 1 ? o.values().next().value! : o;
}

export interface ElementDelta {
  add: NftElement[];
  /** Elements whose data changed: deleted and re-added in the same transaction. */
  replace: NftElement[];
  remove: NftElement[];
  conflicts: SyncProblem[];
}

export const emptyDelta = (): ElementDelta => ({ add: [], replace: [], remove: [], conflicts: [] });

function pushAll(c: Contribution, out: NftElement[]): void {
  if (c.kind === 'element') out.push(c.element);
  else for (let i = 0; i < c.endpoints.length; i++) out.push(slotElement(c, i));
}

/**
 * The same key with new data: an element is replaced; of a frontend's slots, only those that
 * changed, and slots past a shorter list removed (a balancing map's list changes length).
 */
function pushReplaced(before: Contribution, after: Contribution, delta: ElementDelta): void {
  if (after.kind === 'element' || before.kind === 'element') {
    pushAll(after, delta.replace);
    return;
  }
  const a = before.endpoints;
  const b = after.endpoints;
  for (let i = 0; i < b.length; i++) {
    if (i >= a.length) delta.add.push(slotElement(after, i));
    else if (a[i]!.ip !== b[i]!.ip || a[i]!.port !== b[i]!.port) delta.replace.push(slotElement(after, i));
  }
  for (let i = b.length; i < a.length; i++) delta.remove.push(slotElement(before, i));
}

export class ElementIndex {
  private readonly entries = new Map<string, Entry>();
  /** Endpoint address -> the service ports that want its `hairpin` element. */
  private readonly hairpin = new Map<string, Owners>();

  /** Entries held: elements, frontends' slot lists and hairpin addresses. */
  get size(): number {
    return this.entries.size + this.hairpin.size;
  }

  /**
   * Whether some service port wants this element (read back from the kernel), whatever its
   * data: an element of a shared set or map, a slot of a frontend, or a hairpin pair.
   */
  wants(set: string, key: readonly unknown[]): boolean {
    if (set === SET.hairpin)
      return key.length === 2 && key[0] === key[1] && typeof key[0] === 'string' && this.hairpin.has(key[0]);
    if (!isEndpointsMap(set) && !isBalancingMap(set)) return this.entries.has(`${set}|${keyText(key as Field[])}`);
    // A slot: "map|frontend" holds a list, and the slot number must be inside it.
    const slot = key[key.length - 1];
    // A balancing map's key is the slot alone; an endpoints map's is frontend . slot.
    if (typeof slot !== 'number' || key.length < (isBalancingMap(set) ? 1 : 2)) return false;
    const list = this.entries.get(`${set}|${keyText(key.slice(0, -1) as Field[])}`)?.value;
    return list !== undefined && typeof list !== 'string' && slot < list.length;
  }

  /**
   * Moves `owner` from its old contributions to its new ones and records in `delta` what
   * the kernel must see change.
   */
  update(owner: string, before: PortElements, after: PortElements, delta: ElementDelta): void {
    this.updateEntries(owner, before.contributions, after.contributions, delta);
    this.updateHairpin(owner, before.hairpin, after.hairpin, delta);
  }

  private updateEntries(
    owner: string,
    before: readonly Contribution[],
    after: readonly Contribution[],
    delta: ElementDelta,
  ): void {
    if (before.length === 0) {
      // A new owner (every port of a full sync): no per-call map, which costs more than the
      // work itself at tens of thousands of ports.
      // Indexed loops: this runs for every service port of a full sync.
      for (let i = 0; i < after.length; i++) this.take(owner, after[i]!, delta);
      return;
    }
    const next = new Map<string, Contribution>();
    for (const c of after) next.set(c.id, c);
    // A port may list one element twice (an external IP that is also a load-balancer IP):
    // each id is settled once.
    const settled = new Set<string>();
    for (const c of before) {
      if (settled.has(c.id)) continue;
      settled.add(c.id);
      const n = next.get(c.id);
      const value = valueOf(c);
      if (n && sameValue(valueOf(n), value)) {
        next.delete(c.id);
        continue;
      }
      const e = this.entries.get(c.id);
      if (!e || !hasOwner(e.owners, owner) || !sameValue(e.value, value)) continue;
      const rest = withoutOwner(e.owners, owner);
      if (rest !== undefined) {
        e.owners = rest;
        continue;
      }
      this.entries.delete(c.id);
      if (n) {
        // Same key, new value, no one else holds it: replace in place.
        this.entries.set(c.id, { value: valueOf(n), owners: owner });
        pushReplaced(c, n, delta);
        next.delete(c.id);
      } else pushAll(c, delta.remove);
    }
    for (const c of next.values()) this.take(owner, c, delta);
  }

  /** `owner` contributes `c`: a new entry, one more owner of the same one, or a conflict. */
  private take(owner: string, c: Contribution, delta: ElementDelta): void {
    const e = this.entries.get(c.id);
    const value = valueOf(c);
    if (!e) {
      this.entries.set(c.id, { value, owners: owner });
      pushAll(c, delta.add);
    } else if (sameValue(e.value, value)) {
      if (!hasOwner(e.owners, owner)) e.owners = withOwner(e.owners, owner);
    } else if (!hasOwner(e.owners, owner)) {
      delta.conflicts.push({
        what: `${c.id}: wanted by ${owner} as ${valueText(value)}, held by ${ownerList(e.owners).join(', ')} as ${valueText(e.value)}`,
      });
    }
  }

  private updateHairpin(
    owner: string,
    before: readonly EndpointInfo[],
    after: readonly EndpointInfo[],
    delta: ElementDelta,
  ): void {
    if (before.length === 0) {
      for (let i = 0; i < after.length; i++) this.takeHairpin(owner, after[i]!.ip, delta);
      return;
    }
    const keep = new Set<string>();
    for (const ep of after) keep.add(ep.ip);
    for (const ep of before) {
      if (keep.has(ep.ip)) continue;
      const o = this.hairpin.get(ep.ip);
      if (o === undefined || !hasOwner(o, owner)) continue; // gone already (an address listed twice)
      const rest = withoutOwner(o, owner);
      if (rest !== undefined) this.hairpin.set(ep.ip, rest);
      else {
        this.hairpin.delete(ep.ip);
        delta.remove.push(hairpinElement(ep.ip));
      }
    }
    for (const ep of after) this.takeHairpin(owner, ep.ip, delta);
  }

  private takeHairpin(owner: string, ip: string, delta: ElementDelta): void {
    const o = this.hairpin.get(ip);
    if (o === undefined) {
      this.hairpin.set(ip, owner);
      delta.add.push(hairpinElement(ip));
    } else if (!hasOwner(o, owner)) this.hairpin.set(ip, withOwner(o, owner));
  }
}
