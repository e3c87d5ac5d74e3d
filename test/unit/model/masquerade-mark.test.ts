// The masquerade mark, computed once for every mode: an unsigned u32, also for bit 31.
import test from 'ava';
import { masqueradeMark } from '../../../src/model/index.ts';
import { companionRules } from '../../../src/proxier/ipvs/rules.ts';

test('masqueradeMark: 1 << bit as the kernel reads a u32; bits outside 0..31 named', (t) => {
  t.is(masqueradeMark(), 0x4000);
  t.is(masqueradeMark(0), 1);
  t.is(masqueradeMark(31), 0x8000_0000);
  t.throws(() => masqueradeMark(32), {
    instanceOf: RangeError,
    message: '--iptables-masquerade-bit 32 is not in 0..31',
  });
});

test("IPVS mode's companion rules mark with the same unsigned mark", (t) => {
  const rules = companionRules({
    family: 'IPv4',
    nonEmptySets: new Set(),
    noNodeAccess: [],
    masqueradeAll: true,
    detectLocal: { mode: 'ClusterCIDR', cidrs: [], interfaceName: '', implemented: false },
    masqueradeBit: 31,
  });
  const marks = JSON.stringify(rules.rules).match(/"(?:value|mask|mark|or|xor)":-?\d+/g) ?? [];
  t.true(marks.length > 0);
  for (const m of marks) t.false(m.includes('-'), m);
});
