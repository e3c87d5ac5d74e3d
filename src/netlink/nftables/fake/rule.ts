// FakeNft's rules for rules: handles, positions (add after, insert before), replace by handle,
// and every chain and set a rule refers to must exist.

import { isRemoval } from '../object.ts';
import type { NftRule } from '../types.ts';
import type { Applier } from './state.ts';
import { fail, missing, newHandle, setRefs, verdictTargets } from './state.ts';

export const applyRule: Applier<NftRule> = (s, op) => {
  const { verb, obj } = op;
  const c = s.chains.get(obj.chain);
  if (!c) return missing(op, 'no such chain');
  const at = obj.handle !== undefined ? c.rules.findIndex((r) => r.handle === obj.handle) : -1;
  if (isRemoval(verb)) {
    if (at < 0) return missing(op, 'no such rule');
    c.rules.splice(at, 1);
    return;
  }
  for (const t of verdictTargets(obj.exprs)) if (!s.chains.has(t)) fail(op, 'ENOENT', `no chain ${t}`);
  for (const n of setRefs(obj.exprs)) if (!s.sets.has(n)) fail(op, 'ENOENT', `no set ${n}`);
  if (verb === 'replace') {
    if (at < 0) fail(op, 'ENOENT', 'no such rule');
    c.rules[at] = { ...obj };
    return;
  }
  const added: NftRule = { ...obj, handle: newHandle(s) };
  delete added.position;
  const pos = obj.position !== undefined ? c.rules.findIndex((x) => x.handle === obj.position) : -1;
  if (obj.position !== undefined && pos < 0) fail(op, 'ENOENT', 'no rule at position');
  if (verb === 'add') c.rules.splice(pos < 0 ? c.rules.length : pos + 1, 0, added);
  else c.rules.splice(pos < 0 ? 0 : pos, 0, added);
};
