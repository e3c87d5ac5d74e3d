// nf_tables announcements (src/netlink/nftables/monitor.ts) from the machine's kernel, in a
// fresh namespace: a removed rule names the chain it jumped to (the announcement carries the
// whole rule), which is how the drift watch (proxier/drift/chain-watch.ts) tells our jump
// removed from a built-in chain from anyone else's rule there.
import test from 'ava';
import { netnsFor } from '../helpers/netns.ts';
import type { NftChange } from '../../src/netlink/nftables/index.ts';

const S = new URL('./scenarios/nft-monitor.ts', import.meta.url).href;

test('a removed rule of nat PREROUTING names its jump; an added one and a non-jump do not', async (t) => {
  const ns = await netnsFor(t, 'nft-mon');
  const a = await ns.agent();
  const r = await a.call<{ changes: NftChange[]; errors: string[] }>(S, 'ruleChanges');
  t.deepEqual(r.errors, []);
  const seen = r.changes.map((c) => `${c.added ? '+' : '-'}${c.family} ${c.table} ${c.object} ${c.jump ?? '-'}`);
  t.deepEqual(seen, [
    '+ip nat PREROUTING -',
    '+ip nat PREROUTING -',
    '-ip nat PREROUTING KUBE-SERVICES',
    '-ip nat PREROUTING -',
  ]);
});
