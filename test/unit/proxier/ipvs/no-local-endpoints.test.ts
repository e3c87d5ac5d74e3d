// An externalTrafficPolicy=Local Service with no usable local endpoint in IPVS mode: its external
// VSes keep upstream's fallback to the cluster endpoints (PR 97081, so this node's pods still
// reach them), and our KUBE-NO-LOCAL-ENDPOINTS set lists those frontends so that one filter rule
// drops new connections to them from external sources (the documented traffic policy). With a
// usable local endpoint, or no endpoint anywhere, nothing is listed and the rules are upstream's.
import test from 'ava';
import { companionRules, toIptablesSave } from '../../../../src/proxier/ipvs/rules.ts';
import { SetName } from '../../../../src/proxier/ipvs/index.ts';
import type { LocalDetector } from '../../../../src/model/index.ts';
import { ep, harness, NODE_IP, slice, svc } from './harness.ts';
import { NODE } from '../../model/helpers.ts';

const SET = 'KUBE-NO-LOCAL-ENDPOINTS';
const REMOTE = { node: 'node-b' };
const TERMINATING = { ready: false, serving: true, terminating: true };
const GONE = { ready: false, serving: false, terminating: true };

const lb = (proto: string, eTP: 'Local' | 'Cluster' = 'Local', rv = '1') =>
  svc('lb', {
    type: 'LoadBalancer',
    ports: [{ name: 'p', protocol: proto, port: 80, nodePort: 30080 }],
    eTP,
    hcPort: 32000,
    ingress: [{ ip: '198.51.100.21' }],
    externalIPs: ['203.0.113.8'],
    rv,
  });
const eps = (rv: string, proto: string, ...e: ReturnType<typeof ep>[]) =>
  slice('lb-1', 'lb', e, { rv, ports: [{ name: 'p', protocol: proto, port: 8080 }] });

test('only remote endpoints: the LB IP, the external IP and each node-port address are listed; the VSes keep the remote endpoint', async (t) => {
  const h = harness();
  h.tracker.onService(undefined, lb('TCP'));
  h.tracker.onEndpointSlice(eps('1', 'TCP', ep('10.0.1.5', REMOTE)), false);
  await h.sync();
  t.deepEqual(h.set(SET), [`${NODE_IP},tcp:30080`, '198.51.100.21,tcp:80', '203.0.113.8,tcp:80']);
  // Upstream's sets and real servers are unchanged: the fallback stays for this node's pods.
  t.deepEqual(h.set('KUBE-LOAD-BALANCER-LOCAL'), ['198.51.100.21,tcp:80']);
  t.true(h.vs().includes('TCP 198.51.100.21:80 -> 10.0.1.5:8080 1'), h.vs().join('\n'));
  t.true(h.vs().includes(`TCP ${NODE_IP}:30080 -> 10.0.1.5:8080 1`));
  t.true(h.proxier.rulesInput().nonEmptySets.has(SetName.NO_LOCAL_ENDPOINTS));

  // A local ready endpoint appears (incremental sync): nothing listed any more.
  h.tracker.onEndpointSlice(eps('2', 'TCP', ep('10.0.1.5', REMOTE), ep('10.0.0.4', { node: NODE })), false);
  await h.sync();
  t.deepEqual(h.set(SET), []);
  t.false(h.proxier.rulesInput().nonEmptySets.has(SetName.NO_LOCAL_ENDPOINTS));

  // Only a local serving-terminating one: it is usable (the terminating fallback), nothing listed.
  h.tracker.onEndpointSlice(
    eps('3', 'TCP', ep('10.0.1.5', REMOTE), ep('10.0.0.4', { node: NODE, ...TERMINATING })),
    false,
  );
  await h.sync();
  t.deepEqual(h.set(SET), []);

  // Back to a remote serving-terminating one only: listed again; a full sync agrees.
  h.tracker.onEndpointSlice(eps('4', 'TCP', ep('10.0.1.5', { ...REMOTE, ...TERMINATING })), false);
  await h.sync();
  t.is(h.set(SET).length, 3);
  await h.full();
  t.is(h.set(SET).length, 3);

  // No usable endpoint anywhere: the VSes have no real server and IPVS refuses; nothing listed.
  h.tracker.onEndpointSlice(eps('5', 'TCP', ep('10.0.1.5', { ...REMOTE, ...GONE })), false);
  await h.sync();
  t.deepEqual(h.set(SET), []);
});

test('UDP and SCTP frontends are listed with their protocol; eTP=Cluster never is', async (t) => {
  for (const proto of ['UDP', 'SCTP']) {
    const h = harness();
    h.tracker.onService(undefined, lb(proto));
    h.tracker.onEndpointSlice(eps('1', proto, ep('10.0.1.5', REMOTE)), false);
    await h.sync();
    const p = proto.toLowerCase();
    t.deepEqual(h.set(SET), [`${NODE_IP},${p}:30080`, `198.51.100.21,${p}:80`, `203.0.113.8,${p}:80`], proto);
  }
  const h = harness();
  h.tracker.onService(undefined, lb('TCP', 'Cluster'));
  h.tracker.onEndpointSlice(eps('1', 'TCP', ep('10.0.1.5', REMOTE)), false);
  await h.sync();
  t.deepEqual(h.set(SET), []);
});

const clusterCIDR: LocalDetector = {
  mode: 'ClusterCIDR',
  cidrs: ['10.0.0.0/16'],
  interfaceName: '',
  implemented: true,
};
const rulesWith = (sets: string[], detectLocal: LocalDetector) =>
  toIptablesSave(
    companionRules({
      family: 'IPv4',
      nonEmptySets: new Set(sets as SetName[]),
      noNodeAccess: [],
      masqueradeAll: false,
      detectLocal,
    }),
  )
    .split('\n')
    .filter((l) => l.includes(SET));
type SetName = (typeof SetName)[keyof typeof SetName];

test('the set in use: one DROP of new connections in KUBE-PROXY-FIREWALL, except from pods (detect-local) and the node', (t) => {
  t.deepEqual(rulesWith([SetName.CLUSTER_IP, SET], clusterCIDR), [
    '-A KUBE-PROXY-FIREWALL ! -s 10.0.0.0/16 -m comment --comment "Kubernetes service external ip + port with externalTrafficPolicy=local and no local endpoint" -m set --match-set KUBE-NO-LOCAL-ENDPOINTS dst,dst -m addrtype ! --src-type LOCAL -m conntrack --ctstate NEW -j DROP',
  ]);
  const bridge: LocalDetector = { mode: 'BridgeInterface', cidrs: [], interfaceName: 'cbr0', implemented: true };
  t.regex(rulesWith([SET], bridge)[0]!, /^-A KUBE-PROXY-FIREWALL ! -i cbr0 -m comment .* -j DROP$/);
  // Without a detector pods cannot be told apart: everything but the node is external.
  const none: LocalDetector = { mode: 'ClusterCIDR', cidrs: [], interfaceName: '', implemented: false };
  t.regex(
    rulesWith([SET], none)[0]!,
    /^-A KUBE-PROXY-FIREWALL -m comment .* -m addrtype ! --src-type LOCAL .* -j DROP$/,
  );
  // IPv6 names the KUBE-6- set.
  const v6 = companionRules({
    family: 'IPv6',
    nonEmptySets: new Set([SetName.NO_LOCAL_ENDPOINTS]),
    noNodeAccess: [],
    masqueradeAll: false,
    detectLocal: { mode: 'ClusterCIDR', cidrs: ['fd00:10::/64'], interfaceName: '', implemented: true },
  });
  t.regex(toIptablesSave(v6), /! -s fd00:10::\/64 .*--match-set KUBE-6-NO-LOCAL-ENDPOINTS dst,dst .* -j DROP\n/);
});

test("the set empty: no rule, the ruleset is upstream's", (t) => {
  t.deepEqual(rulesWith([SetName.CLUSTER_IP, SetName.LOAD_BALANCER, SetName.LOAD_BALANCER_LOCAL], clusterCIDR), []);
});
