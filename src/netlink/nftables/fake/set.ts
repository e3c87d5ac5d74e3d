// FakeNft's rules for sets and maps: removal refused (EBUSY) while a rule uses the set; adding
// a set again with other types fails (EEXIST), as in the kernel.

import { isRemoval } from '../object.ts';
import { sameType } from '../set.ts';
import type { NftSetLike } from '../types.ts';
import type { Applier } from './state.ts';
import { fail, missing, newHandle, setInUse } from './state.ts';

export const applySet: Applier<NftSetLike> = (s, op) => {
  const { verb, obj } = op;
  const name = obj.name ?? [...s.sets.values()].find((x) => x.def.handle === obj.handle)?.def.name;
  const cur = name !== undefined ? s.sets.get(name) : undefined;
  if (isRemoval(verb)) {
    if (!cur) return missing(op);
    if (setInUse(s, cur.def.name)) fail(op, 'EBUSY', 'set is used by a rule');
    s.sets.delete(cur.def.name);
    return;
  }
  if (verb === 'flush') {
    if (!cur) return missing(op);
    cur.elements = new Map();
    return;
  }
  if (cur) {
    if (verb === 'create') fail(op, 'EEXIST');
    if (!sameType(cur.def, obj)) fail(op, 'EEXIST', 'exists with another type');
    return;
  }
  s.sets.set(obj.name, { def: { ...obj, handle: newHandle(s) }, elements: new Map() });
};
