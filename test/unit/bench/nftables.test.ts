// The nftables benchmark's pure parts: the workload harness against FakeNft and the
// upstream-shaped text generator. The module itself needs root and namespaces; its smoke run
// (`npm run bench -- --quick nftables`) takes about 35 s on the shared 2-CPU machine, over the
// 30 s budget for a unit test, so it is not run here.
import test from 'ava';
import { FakeNft } from '../../../src/netlink/nftables/fake/index.ts';
import { TABLE } from '../../../src/proxier/nftables/index.ts';
import { REGISTRY } from '../../../test/bench/run.ts';
import {
  changedService,
  clusterIP,
  endpointIP,
  extraIP,
  Harness,
  timedNft,
} from '../../../test/bench/nftables-workload.ts';
import { serviceChain, upstreamChangeText, upstreamFullText } from '../../../test/bench/nftables-upstream.ts';

test('workload addresses: distinct endpoints, cluster IPs from 10.96.0.1, changes spare the first and last Service', (t) => {
  t.is(clusterIP(0), '10.96.0.1');
  t.is(clusterIP(255), '10.96.1.0');
  t.is(endpointIP(0, 0), '100.64.0.1');
  t.is(endpointIP(1, 0), '100.64.0.11');
  const all = new Set<string>();
  for (let i = 0; i < 50; i++) for (let e = 0; e < 10; e++) all.add(endpointIP(i, e));
  t.is(all.size, 500);
  t.false(all.has(extraIP(0)));
  for (let r = 0; r < 40; r++) {
    const i = changedService(r, 1_000);
    t.true(i > 0 && i < 999);
  }
});

test('harness on FakeNft: one full sync, then each change is one partial batch whose text names the new endpoint', async (t) => {
  const h = new Harness(new FakeNft({ family: 'ip', table: TABLE }), 30, { keepTransactions: true });
  const full = await h.fullSync();
  t.is(full.services, 30);
  t.is(full.servicePorts, 30);
  t.true(full.batches.length >= 1);
  t.is(h.transactions.length, full.batches.length);
  const text = h.transactions.map((tx) => tx.toString()).join('');
  t.regex(text, new RegExp(`^add table ip ${TABLE}`, 'm'));
  t.notRegex(text, /# ERROR/);
  const c = await h.change(0);
  t.is(c.servicesChanged, 1);
  t.is(c.batches.length, 1);
  t.true(h.transactions[h.transactions.length - 1]!.toString().includes(extraIP(0)));
});

test('harness splits a full sync under a small batch limit, as the daemon asks it to', async (t) => {
  const h = new Harness(new FakeNft({ family: 'ip', table: TABLE }), 200, { maxBatchBytes: 64 * 1024 });
  const full = await h.fullSync();
  t.true(full.batches.length > 1, `${full.batches.length} batch(es)`);
});

test('timedNft times run() and forwards everything else to the client', async (t) => {
  const fake = new FakeNft({ family: 'ip', table: TABLE });
  const { nft, batches, transactions } = timedNft(fake, true);
  t.deepEqual(nft.scope, fake.scope);
  const tx = nft.newTransaction();
  tx.add({ kind: 'table' });
  await nft.run(tx);
  t.is(batches.length, 1);
  t.is(transactions[0], tx);
  t.is(fake.generationId, 1);
  t.deepEqual(await nft.list('chain'), []);
});

test('upstream-shaped text: a chain per Service and per endpoint, numgen vmap over the endpoints, one more after a change', (t) => {
  const text = upstreamFullText(3);
  t.is(text.match(/^add chain ip kube-proxy service-[0-9A-F]{8}-/gm)?.length, 3);
  t.is(text.match(/^add chain ip kube-proxy endpoint-[0-9A-F]{8}-/gm)?.length, 30);
  t.is(text.match(/numgen random mod 10 vmap \{ 0 : goto endpoint-/g)?.length, 3);
  t.regex(
    text,
    new RegExp(
      `add element ip kube-proxy service-ips \\{ ${clusterIP(2).replace(/\./g, '\\.')} \\. tcp \\. 80 : goto ${serviceChain(2).replace(/[./]/g, '\\$&')} \\}`,
    ),
  );
  t.regex(text, /dnat to 100\.64\.0\.1:8080/);
  const added = new Map<number, string[]>();
  const change = upstreamChangeText(3, 0, added);
  t.regex(change, /numgen random mod 11 vmap/);
  t.true(change.includes(extraIP(0)));
  t.regex(upstreamChangeText(3, 1, new Map([[changedService(1, 3), [extraIP(0)]]])), /numgen random mod 12 vmap/);
});

test('the suite runs this module as "nftables", needing root', async (t) => {
  const entry = REGISTRY.find((e) => e.name === 'nftables');
  t.truthy(entry);
  t.true((await entry!.load()).needsRoot);
});
