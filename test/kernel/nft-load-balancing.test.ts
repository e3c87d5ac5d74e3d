// Per-Service load balancing in nftables mode (docs/load-balancing.md), with real packets:
// round-robin spreads new connections exactly evenly; consistent-hash keeps each client on
// its endpoint across reconnects and across nodes, and an endpoint change moves few others.
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { CLIENT_IP, podIP } from '../helpers/cluster.ts';
import type { Cluster } from '../helpers/cluster.ts';
import { Netns } from '../helpers/netns.ts';
import { ep, slice, svc } from '../unit/model/helpers.ts';
import { driver } from './proxier-semantics.ts';

const P = new URL('./scenarios/nft-proxier.ts', import.meta.url).href;
const CLIENT = new URL('./scenarios/lb-client.ts', import.meta.url).href;
const { cluster, apply, tcpMany } = driver(P);
const ANNOTATION = 'kube-proxy-ts.io/load-balancing';

function balanced(name: string, clusterIP: string, how: string) {
  const s = svc(name, { clusterIP });
  s.metadata!.annotations = { [ANNOTATION]: how };
  return s;
}

const countOf = (answers: readonly string[]): Map<string, number> => {
  const m = new Map<string, number>();
  for (const a of answers) m.set(a.split(' ')[0]!, (m.get(a.split(' ')[0]!) ?? 0) + 1);
  return m;
};

test.serial('round-robin: 300 new connections over 3 endpoints land 100/100/100', async (t) => {
  const c = await cluster(t, 'lbrr');
  const r = await apply(c, {
    services: [balanced('rr', '10.96.0.20', 'round-robin')],
    slices: [slice('rr-1', 'rr', [ep(podIP(0)), ep(podIP(1)), ep(podIP(2))])],
  });
  t.deepEqual(r.errors, []);
  t.regex(await c.node.run('nft', 'list', 'table', 'ip', 'kube-proxy-ts'), /dnat ip to numgen inc mod 3 map @balance-/);
  const counts = countOf(await tcpMany(c, 'client', '10.96.0.20', 80, 300));
  t.deepEqual([...counts.entries()].sort(), [
    ['pod1', 100],
    ['pod2', 100],
    ['pod3', 100],
  ]);
});

/** 2,000 client addresses: 10.2.0.1 ... in an AnyIP range of the client, routed back by the node. */
const CLIENTS = Array.from({ length: 2000 }, (_, i) => `10.2.${Math.floor((i + 1) / 256)}.${(i + 1) % 256}`);

async function clientRange(c: Cluster): Promise<void> {
  await c.client.run('ip', 'route', 'add', 'local', '10.2.0.0/21', 'dev', 'lo');
  await c.node.run('ip', 'route', 'add', '10.2.0.0/21', 'via', CLIENT_IP);
}

const TEN = Array.from({ length: 10 }, (_, i) => i);
const chSlice = (which: readonly number[]) =>
  slice(
    'ch-1',
    'ch',
    which.map((i) => ep(podIP(i))),
  );

function moved(before: readonly string[], after: readonly string[], gone?: string): { own: number; others: number } {
  let own = 0;
  let others = 0;
  for (let i = 0; i < before.length; i++) {
    if (before[i] === after[i]) continue;
    if (before[i] === gone) own++;
    else others++;
  }
  return { own, others };
}

async function mapElements(ns: Netns, name: string): Promise<string> {
  const out = await ns.run('nft', 'list', 'map', 'ip', 'kube-proxy-ts', name);
  const m = /elements = \{([^}]*)\}/.exec(out);
  return (m?.[1] ?? '').replace(/\s+/g, ' ').trim();
}

async function secondNode(t: ExecutionContext, which: readonly number[]): Promise<Netns> {
  const nb = await Netns.create('lbch-nb');
  t.teardown(() => nb.destroy());
  const agent = await nb.agent();
  await agent.call(P, 'start', { clusterCIDRs: ['10.244.0.0/16'], serviceCIDRs: ['10.96.0.0/16'] });
  await agent.call(P, 'apply', {
    services: [balanced('ch', '10.96.0.30', 'consistent-hash')],
    slices: [chSlice(which)],
  });
  return nb;
}

test.serial('consistent-hash: 2,000 clients keep their endpoint across reconnects, nodes and changes', async (t) => {
  t.timeout(240_000);
  const c = await cluster(t, 'lbch', 10);
  await clientRange(c);
  const r = await apply(c, {
    services: [balanced('ch', '10.96.0.30', 'consistent-hash')],
    slices: [chSlice(TEN)],
  });
  t.deepEqual(r.errors, []);
  const table = await c.node.run('nft', 'list', 'table', 'ip', 'kube-proxy-ts');
  t.regex(table, /dnat ip to jhash ip saddr mod 1601 seed 0x0 map @balance-/);
  const mapName = /map (balance-cluster-\S+) \{/.exec(table)?.[1] ?? '';

  const first = await c.clientAgent.call<string[]>(CLIENT, 'podPerSource', '10.96.0.30', 80, CLIENTS);
  t.true(
    first.every((p) => /^pod\d+$/.test(p)),
    `every client got an answer: ${[...new Set(first)].join(', ')}`,
  );
  t.is(countOf(first).size, 10, 'every endpoint has clients');
  const again = await c.clientAgent.call<string[]>(CLIENT, 'podPerSource', '10.96.0.30', 80, CLIENTS);
  t.deepEqual(again, first, 'each client reconnects to the same endpoint');

  // A second node with the same endpoints, listed in another order, builds the same table.
  const nb = await secondNode(t, [...TEN].reverse());
  const here = await mapElements(c.node, mapName);
  t.true(here.length > 0);
  t.is(await mapElements(nb, mapName), here, 'both nodes map every bucket to the same endpoint');
  const pickRule = (text: string): string => /jhash ip saddr mod \d+ seed 0x[0-9a-f]+/.exec(text)?.[0] ?? 'none';
  t.is(pickRule(await nb.run('nft', 'list', 'table', 'ip', 'kube-proxy-ts')), pickRule(table), 'and hash alike');

  // A restarted proxier reads the table back and leaves every bucket as it was.
  await c.nodeAgent.call(P, 'start', { clusterCIDRs: ['10.244.0.0/16'], serviceCIDRs: ['10.96.0.0/16'] });
  const restarted = await apply(
    c,
    { services: [balanced('ch', '10.96.0.30', 'consistent-hash')], slices: [chSlice(TEN)] },
    true,
  );
  t.deepEqual(restarted.errors, []);
  t.is(await mapElements(c.node, mapName), here, 'a restart keeps the table');

  // Removing 1 of 10: its clients move, at most 3 % of the others do.
  await apply(c, { slices: [chSlice(TEN.filter((i) => i !== 9))] });
  const without = await c.clientAgent.call<string[]>(CLIENT, 'podPerSource', '10.96.0.30', 80, CLIENTS);
  const m1 = moved(first, without, 'pod10');
  const ownClients = first.filter((p) => p === 'pod10').length;
  t.is(m1.own, ownClients, 'every client of the removed endpoint moved');
  t.false(without.includes('pod10'));
  t.true(
    m1.others <= 0.03 * (CLIENTS.length - ownClients),
    `others moved: ${m1.others} of ${CLIENTS.length - ownClients}`,
  );

  // Adding it back: at most 1/10 + 3 % of the clients move.
  await apply(c, { slices: [chSlice(TEN)] });
  const back = await c.clientAgent.call<string[]>(CLIENT, 'podPerSource', '10.96.0.30', 80, CLIENTS);
  const m2 = moved(without, back);
  t.true(m2.others <= (0.1 + 0.03) * CLIENTS.length, `moved on adding back: ${m2.others} of ${CLIENTS.length}`);
  t.log(`removed: ${m1.own} own + ${m1.others} others moved; added back: ${m2.others} moved`);
});
