// FakeNft's state and the rules every kind shares when it applies an operation to it: how a
// failure looks (the NetlinkError the kernel would return), what a missing object means
// (ENOENT, except for destroy), handles, and which rules and elements refer to a chain or set.
// Each kind's own rules live in a file of this folder, found through appliers.ts.

import { errnoNumber, NetlinkError } from '../../core/index.ts';
import type { NftExpr } from '../expr/index.ts';
import type { Verb } from '../object.ts';
import type { NftChain, NftElement, NftObject, NftRule, NftSetLike, NftTable, Scope } from '../types.ts';
import { isVerdict } from '../verdict.ts';

export interface FakeChain {
  chain: NftChain;
  rules: NftRule[];
}

export interface FakeSet {
  def: NftSetLike;
  /** Keyed by the encoded key bytes (hex), so equal keys written differently collide as in the kernel. */
  elements: Map<string, NftElement>;
}

export interface FakeState {
  table: NftTable | undefined;
  chains: Map<string, FakeChain>;
  sets: Map<string, FakeSet>;
  nextHandle: bigint;
}

/** One operation being applied, with the scope its errors name. */
export interface FakeOp<O extends NftObject = NftObject> {
  scope: Scope;
  verb: Verb;
  obj: O;
}

/** Applies one operation of its kind to the state, failing as the kernel would. */
export type Applier<O extends NftObject> = (s: FakeState, op: FakeOp<O>) => void;

export const emptyState = (): FakeState => ({ table: undefined, chains: new Map(), sets: new Map(), nextHandle: 1n });

/** A copy to apply a transaction to, so that a failure leaves the committed state alone. */
export const cloneState = (s: FakeState): FakeState => ({
  table: s.table ? { ...s.table } : undefined,
  chains: new Map([...s.chains].map(([k, v]) => [k, { chain: { ...v.chain }, rules: [...v.rules] }])),
  sets: new Map([...s.sets].map(([k, v]) => [k, { def: v.def, elements: new Map(v.elements) }])),
  nextHandle: s.nextHandle,
});

export const newHandle = (s: FakeState): bigint => s.nextHandle++;

/** Fails the operation with errno `code`, as the kernel would refuse it. */
export function fail(op: FakeOp, code: string, why?: string): never {
  const o = op.obj;
  const name = 'name' in o ? ` ${o.name}` : o.kind === 'rule' ? ` ${o.chain}` : o.kind === 'element' ? ` ${o.set}` : '';
  const { family, table } = op.scope;
  const label = `${op.verb} ${o.kind} ${family} ${table}${name}`;
  throw new NetlinkError(label, errnoNumber(code), undefined, why !== undefined ? { detail: why } : undefined);
}

/**
 * The rule for an object the operation needs and the state lacks: ENOENT, except for destroy,
 * which then does nothing. Returns only for destroy (the caller then returns too).
 */
export function missing(op: FakeOp, why?: string): void {
  if (op.verb !== 'destroy') fail(op, 'ENOENT', why);
}

/** Chains a rule's expressions jump or go to. */
export const verdictTargets = (exprs: readonly NftExpr[]): string[] =>
  exprs.flatMap((e) => (e.type === 'immediate' && 'verdict' in e && 'chain' in e.verdict ? [e.verdict.chain] : []));

/** Sets a rule's expressions look up or update. */
export const setRefs = (exprs: readonly NftExpr[]): string[] =>
  exprs.flatMap((e) => (e.type === 'lookup' || e.type === 'dynset' ? [e.set] : []));

/** Is chain `name` the target of a rule's jump or goto, or of a verdict map element? */
export function chainInUse(s: FakeState, name: string): boolean {
  for (const c of s.chains.values()) for (const r of c.rules) if (verdictTargets(r.exprs).includes(name)) return true;
  for (const set of s.sets.values()) {
    for (const e of set.elements.values())
      if (e.value && isVerdict(e.value) && 'chain' in e.value && e.value.chain === name) return true;
  }
  return false;
}

/** Is set `name` used by a rule? */
export function setInUse(s: FakeState, name: string): boolean {
  for (const c of s.chains.values()) for (const r of c.rules) if (setRefs(r.exprs).includes(name)) return true;
  return false;
}
