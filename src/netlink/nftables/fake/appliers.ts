// FakeNft's rules by object kind, as objects.ts holds the production codecs by kind: the
// fake's behaviour lives here, beside the codecs and not in them.

import type { NftObject } from '../types.ts';
import { applyChain } from './chain.ts';
import { applyElement } from './element.ts';
import { applyRule } from './rule.ts';
import { applySet } from './set.ts';
import type { Applier } from './state.ts';
import { applyTable } from './table.ts';

type Kind = NftObject['kind'];

const APPLIERS: { readonly [K in Kind]: Applier<Extract<NftObject, { kind: K }>> } = {
  table: applyTable,
  chain: applyChain,
  set: applySet,
  map: applySet,
  element: applyElement,
  rule: applyRule,
};

/** The rules of `o`'s kind, for objects a transaction accepted (validated). */
export const applierOf = (o: NftObject): Applier<NftObject> => APPLIERS[o.kind] as Applier<NftObject>;
