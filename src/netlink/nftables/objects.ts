// The object kinds by name: what NftTransaction dispatches through (as expr/index.ts's
// CODECS for expressions). Each kind's module holds its whole codec.

import { chainCodec } from './chain.ts';
import { elementCodec } from './element.ts';
import type { ObjectCodec, Verb } from './object.ts';
import { ruleCodec } from './rule.ts';
import { setCodec } from './set.ts';
import { tableCodec } from './table.ts';
import type { NftObject } from './types.ts';

type Kind = NftObject['kind'];

const OBJECTS: { readonly [K in Kind]: ObjectCodec<Extract<NftObject, { kind: K }>> } = {
  table: tableCodec,
  chain: chainCodec,
  set: setCodec,
  map: setCodec,
  element: elementCodec,
  rule: ruleCodec,
};

/** The codec of `o`'s kind, for objects a transaction accepted (validated). */
export const codecOf = (o: NftObject): ObjectCodec<NftObject> => OBJECTS[o.kind] as ObjectCodec<NftObject>;

/** Why `verb` cannot apply to `o`, its kind unknown included (objects from untyped callers). */
export function invalidOperation(verb: Verb, o: NftObject): string | undefined {
  if (!Object.hasOwn(OBJECTS, o.kind)) return `unknown object kind ${String((o as { kind?: unknown }).kind)}`;
  return codecOf(o).validate(verb, o);
}
