// FakeNft's rules for elements: keyed by their encoded key bytes (so equal keys written
// differently collide, as in the kernel), checked by the production encoder, and a verdict
// element needs its chain.

import { errorMessage } from '../../../base/errors.ts';
import { encodeElement } from '../element-encode.ts';
import { isRemoval, NftValidationError } from '../object.ts';
import type { NftElement } from '../types.ts';
import { isVerdict } from '../verdict.ts';
import type { Applier } from './state.ts';
import { fail, missing } from './state.ts';

const KEYS_ONLY = { withData: false };
const WITH_DATA = { withData: true };

export const applyElement: Applier<NftElement> = (s, op) => {
  const { verb, obj } = op;
  const set = s.sets.get(obj.set);
  if (!set) return missing(op, 'no such set');
  let key: string;
  try {
    key = encodeElement(set.def, { kind: 'element', set: obj.set, key: obj.key }, KEYS_ONLY)
      .map((b) => Buffer.from(b).toString('hex'))
      .join('');
    if (!isRemoval(verb)) encodeElement(set.def, obj, WITH_DATA);
  } catch (e) {
    throw new NftValidationError(`${verb} element ${obj.set}: ${errorMessage(e)}`, { cause: e });
  }
  const cur = set.elements.get(key);
  if (isRemoval(verb)) {
    if (!cur) return missing(op, 'no such element');
    set.elements.delete(key);
    return;
  }
  const v = obj.value;
  if (v && isVerdict(v) && 'chain' in v && !s.chains.has(v.chain)) fail(op, 'ENOENT', `no chain ${v.chain}`);
  if (cur) {
    if (verb === 'create') fail(op, 'EEXIST');
    if (JSON.stringify(cur.value) !== JSON.stringify(obj.value)) fail(op, 'EEXIST', 'element exists with other data');
  }
  set.elements.set(key, obj);
};
