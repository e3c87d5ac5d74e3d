// IPVS mode derives no kernel name from a Kubernetes name (services are keyed by address,
// port and protocol); its ipset names are fixed and must fit ipset's 31 bytes in both families.
import test from 'ava';
import { ipsetName, SETS } from '../../../../src/proxier/ipvs/names.ts';

test('every ipset name fits IPSET_MAXNAMELEN - 1 bytes, in ASCII, and they are distinct', (t) => {
  const names = SETS.flatMap((s) => [ipsetName(s.key, 'IPv4'), ipsetName(s.key, 'IPv6')]);
  for (const n of names) {
    t.true(Buffer.byteLength(n) <= 31, n);
    t.regex(n, /^[A-Z0-9-]+$/);
  }
  t.is(new Set(names).size, names.length);
});
