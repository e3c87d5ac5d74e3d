// What a full sync's committed state keeps alive: its service ports' chains, shared-rule
// handles and lazy digests, never the rules it encoded and sent (at 10,000 Services × 10 they
// were 310,000 rules, ~520 MiB, kept through a closure's shared context: BENCHMARKS.md).
// Checked with weak references to every encoded rule, after a full garbage collection.
import test from 'ava';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { NftRule } from '../../../../src/netlink/nftables/index.ts';
import {
  globalContext,
  globalRules,
  iptablesNftCodec,
  servicePortRules,
} from '../../../../src/proxier/iptables/index.ts';
import { isOurs } from '../../../../src/proxier/iptables/proxier.ts';
import { skeletonOf, unitOf } from '../../../../src/proxier/iptables/desired.ts';
import { Encoder } from '../../../../src/proxier/iptables-nft/plan-common.ts';
import { planFull } from '../../../../src/proxier/iptables-nft/plan-full.ts';
import type { UnitSource } from '../../../../src/proxier/iptables-nft/units.ts';
import { cluster, ep, slice, svc } from '../iptables/harness.ts';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

test('a full sync’s state keeps none of the rules it encoded', async (t) => {
  const tr = cluster();
  for (let i = 0; i < 20; i++) {
    const name = `svc${i}`;
    const ports = [{ name: 'p80', protocol: 'TCP', port: 80 }];
    tr.onService(undefined, svc(name, { ns: 'ns', clusterIP: `172.30.0.${i + 1}`, ports }));
    tr.onEndpointSlice(slice(`${name}-1`, name, [ep(`10.1.${i}.1`), ep(`10.1.${i}.2`)], { ns: 'ns', ports }), false);
  }
  const { desired } = tr.checkout();
  const g = globalContext(desired, []);
  const codec = iptablesNftCodec('IPv4');
  const encoded: WeakRef<NftRule>[] = [];
  const enc = new Encoder({
    ...codec,
    encode(rule) {
      const nft = codec.encode(rule);
      encoded.push(new WeakRef(nft));
      return nft;
    },
  });
  const units: UnitSource[] = [...desired.services].map(([id, info]) => ({
    id,
    unchanged: false,
    unit: () => unitOf(servicePortRules(info, desired.selections.get(id), g)),
  }));
  const { state } = await planFull({
    desired: { skeleton: skeletonOf(globalRules(g)), units },
    kernel: { tables: new Map(), rules: new Map() },
    enc,
    isOurs,
    drain: async () => {},
  });
  t.true(encoded.length > 20 * 5, `${encoded.length} rules encoded`);
  await new Promise((r) => setImmediate(r)); // weak targets are held until the job ends
  gc();
  const alive = encoded.filter((w) => w.deref() !== undefined).length;
  t.is(alive, 0, `${alive} of ${encoded.length} encoded rules still reachable`);
  t.is(state.units.size, 20); // the state itself is still here, and its digests can be made
  for (const u of state.units.values())
    for (const c of u.chains) t.not(u.content.get(`${c.table}/${c.name}`), undefined);
});
