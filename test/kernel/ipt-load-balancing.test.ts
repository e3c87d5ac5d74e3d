// Round-robin in iptables mode with real packets: xt_statistic's nth mode in KUBE-SVC spreads
// new connections exactly evenly, where upstream's random probabilities only do on average.
// The model and the proxier run in a node namespace, three pods answer with their names, and an
// external client opens new TCP connections to the cluster IP one after the other.
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { podIP } from '../helpers/cluster.ts';
import type { Cluster } from '../helpers/cluster.ts';
import { LOAD_BALANCING_ANNOTATION } from '../../src/model/index.ts';
import { ep, slice, svc } from '../unit/model/helpers.ts';
import { driver, MODEL, tcpPort } from './proxier-semantics.ts';

const P = new URL('./scenarios/ipt-proxier.ts', import.meta.url).href;
const { cluster, apply, tcpMany } = driver(P);

function web(annotation?: string) {
  const s = svc('web', { clusterIP: '10.96.0.10', ports: tcpPort(80) });
  if (annotation !== undefined) s.metadata!.annotations = { [LOAD_BALANCING_ANNOTATION]: annotation };
  return { services: [s], slices: [slice('web-1', 'web', [ep(podIP(0)), ep(podIP(1)), ep(podIP(2))])] };
}

/** How many of `n` new connections each pod answered. */
async function spread(c: Cluster, n: number): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const a of await tcpMany(c, 'client', '10.96.0.10', 80, n)) {
    const pod = a.split(' ')[0]!;
    counts[pod] = (counts[pod] ?? 0) + 1;
  }
  return counts;
}

async function nthRules(t: ExecutionContext, c: Cluster): Promise<string[]> {
  const r = await c.node.exec('iptables-nft-save', ['-t', 'nat']);
  t.is(r.code, 0, r.stderr);
  return r.stdout.split('\n').filter((l) => l.includes('-m statistic --mode nth'));
}

test.serial('round-robin (annotation): 3 endpoints, 300 new connections -> 100/100/100 exactly', async (t) => {
  const c = await cluster(t, 'iptlb-rr', 3);
  await apply(c, web('round-robin'));
  const rules = await nthRules(t, c);
  t.is(rules.length, 2, rules.join('\n'));
  t.deepEqual(await spread(c, 300), { pod1: 100, pod2: 100, pod3: 100 });
});

test.serial('round-robin as the node default (--load-balancing), a Service asking random keeps random', async (t) => {
  const c = await cluster(t, 'iptlb-node', 3, { ...MODEL, loadBalancing: 'round-robin' });
  await apply(c, web());
  t.deepEqual(await spread(c, 30), { pod1: 10, pod2: 10, pod3: 10 });
  await apply(c, web('random'));
  t.deepEqual(await nthRules(t, c), []);
});
