// FakeNft's rules for chains: removal by name or handle, refused (EBUSY) while a rule or a
// verdict map element still points at the chain; adding a base chain again with another hook fails.

import { isRemoval } from '../object.ts';
import type { NftChain } from '../types.ts';
import type { Applier } from './state.ts';
import { chainInUse, fail, missing, newHandle } from './state.ts';

export const applyChain: Applier<NftChain> = (s, op) => {
  const { verb, obj } = op;
  const name = obj.name ?? [...s.chains.values()].find((c) => c.chain.handle === obj.handle)?.chain.name;
  const cur = name !== undefined ? s.chains.get(name) : undefined;
  if (isRemoval(verb)) {
    if (!cur) return missing(op);
    if (chainInUse(s, cur.chain.name)) fail(op, 'EBUSY', 'chain is the target of a jump, goto or verdict map element');
    s.chains.delete(cur.chain.name);
    return;
  }
  if (verb === 'flush') {
    if (!cur) return missing(op);
    cur.rules = [];
    return;
  }
  if (cur) {
    if (verb === 'create') fail(op, 'EEXIST');
    const otherBase = obj.base !== undefined && JSON.stringify(cur.chain.base) !== JSON.stringify(obj.base);
    if (otherBase) fail(op, 'EOPNOTSUPP', 'base chain spec differs');
    return;
  }
  s.chains.set(obj.name, { chain: { ...obj, handle: newHandle(s) }, rules: [] });
};
