// FakeNft's rules for tables: a removal takes every chain and set with it, flush empties
// every chain, and create refuses a table that exists.

import { isRemoval } from '../object.ts';
import type { NftTable } from '../types.ts';
import type { Applier } from './state.ts';
import { fail, missing, newHandle } from './state.ts';

export const applyTable: Applier<NftTable> = (s, op) => {
  const { verb, obj } = op;
  if (isRemoval(verb)) {
    if (!s.table) return missing(op);
    s.table = undefined;
    s.chains.clear();
    s.sets.clear();
    return;
  }
  if (verb === 'flush') {
    if (!s.table) return missing(op);
    for (const c of s.chains.values()) c.rules = [];
    return;
  }
  if (s.table && verb === 'create') fail(op, 'EEXIST');
  s.table = { ...obj, handle: s.table?.handle ?? newHandle(s) };
};
