// trace from the model: the frontend a packet hits, masquerade and why, the endpoints and
// their probabilities, and every drop/reject reason the nftables ruleset has.
import test from 'ava';
import type { IPFamily } from '../../../src/base/ip.ts';
import { trace } from '../../../src/explain/trace.ts';
import type { TraceQuery } from '../../../src/explain/trace.ts';
import { formatTrace } from '../../../src/explain/format.ts';
import type { DesiredState } from '../../../src/model/index.ts';
import { ep, newTracker, node, slice, svc } from '../model/helpers.ts';

const NODE_IP = '192.168.1.10';

function model(): DesiredState {
  const { t } = newTracker({ clusterCIDRs: ['10.244.0.0/16'], serviceCIDRs: ['10.96.0.0/12'] });
  t.onNode(node('node-a', { internal: [NODE_IP] }));
  t.onService(
    undefined,
    svc('web', { type: 'NodePort', ports: [{ name: 'p', protocol: 'TCP', port: 80, nodePort: 30080 }] }),
  );
  t.onEndpointSlice(
    slice('web-1', 'web', [ep('10.244.1.1', { node: 'node-a' }), ep('10.244.2.1', { node: 'node-b' })]),
    false,
  );
  t.onService(
    undefined,
    svc('loc', {
      type: 'NodePort',
      clusterIP: '10.96.0.20',
      eTP: 'Local',
      ports: [{ name: 'p', protocol: 'TCP', port: 80, nodePort: 30081 }],
    }),
  );
  t.onEndpointSlice(slice('loc-1', 'loc', [ep('10.244.2.2', { node: 'node-b' })]), false);
  t.onService(undefined, svc('empty', { clusterIP: '10.96.0.30' }));
  t.onService(
    undefined,
    svc('lb', {
      type: 'LoadBalancer',
      clusterIP: '10.96.0.40',
      ports: [{ name: 'p', protocol: 'TCP', port: 443, nodePort: 30443 }],
      ingress: [{ ip: '203.0.113.5' }],
      sourceRanges: ['198.51.100.0/24'],
    }),
  );
  t.onEndpointSlice(slice('lb-1', 'lb', [ep('10.244.1.3', { node: 'node-a' })]), false);
  return t.checkout().desired;
}

const ctx = (mode = 'nftables') => ({
  states: new Map<IPFamily, DesiredState>([['IPv4', model()]]),
  localAddresses: [NODE_IP, '127.0.0.1'],
  mode,
});
const q = (from: string, to: string, port: number, extra: Partial<TraceQuery> = {}): TraceQuery => ({
  from,
  to,
  port,
  protocol: 'TCP',
  ...extra,
});

test('cluster IP from a pod: two endpoints at 50%, not masqueraded', (t) => {
  const r = trace(ctx(), q('10.244.1.9', '10.96.0.10', 80));
  t.is(r.verdict, 'dnat');
  t.is(r.frontend?.kind, 'cluster-ip');
  t.deepEqual(
    r.endpoints.map((e) => `${e.endpoint} ${e.probability}`),
    ['10.244.1.1:8080 0.5', '10.244.2.1:8080 0.5'],
  );
  t.false(r.masquerade!.yes);
  t.regex(r.masquerade!.why, /pod network/);
  t.regex(formatTrace(r), /50\.0%/);
});

test('cluster IP from outside the pod network: masqueraded; hairpin noted', (t) => {
  t.true(trace(ctx(), q('192.168.1.99', '10.96.0.10', 80)).masquerade!.yes);
  const hair = trace(ctx(), q('10.244.1.1', '10.96.0.10', 80));
  t.true(hair.endpoints.find((e) => e.endpoint === '10.244.1.1:8080')!.hairpin);
});

test('node port with eTP=Cluster: masqueraded; with eTP=Local and no local endpoint: dropped', (t) => {
  const np = trace(ctx(), q('198.51.100.1', NODE_IP, 30080));
  t.is(np.frontend?.kind, 'node-port');
  t.true(np.masquerade!.yes);
  const local = trace(ctx(), q('198.51.100.1', NODE_IP, 30081));
  t.is(local.verdict, 'drop');
  t.regex(local.reason, /externalTrafficPolicy=Local and no endpoint on this node/);
  // From a pod on this node: the short-circuit reaches any endpoint, unmasqueraded.
  const pod = trace(ctx(), q('10.244.1.9', NODE_IP, 30081));
  t.is(pod.verdict, 'dnat');
  t.false(pod.masquerade!.yes);
  // IPVS mode: the VS falls back to the cluster endpoints for this node's pods; external sources are dropped.
  const ipvs = trace(ctx('ipvs'), q('198.51.100.1', NODE_IP, 30081));
  t.is(ipvs.verdict, 'drop');
  t.regex(ipvs.notes.join(' '), /KUBE-NO-LOCAL-ENDPOINTS/);
  const ipvsPod = trace(ctx('ipvs'), q('10.244.1.9', NODE_IP, 30081));
  t.is(ipvsPod.verdict, 'dnat');
});

test('rejects and drops: no endpoints, wrong port of a cluster IP, unallocated service IP, source range', (t) => {
  const none = trace(ctx(), q('10.244.1.9', '10.96.0.30', 80));
  t.is(none.verdict, 'reject');
  t.regex(none.reason, /no ready/);
  const port = trace(ctx(), q('10.244.1.9', '10.96.0.10', 81));
  t.is(port.verdict, 'reject');
  t.regex(port.reason, /exposes no TCP port 81/);
  const unalloc = trace(ctx(), q('10.244.1.9', '10.96.9.9', 80));
  t.is(unalloc.verdict, 'drop');
  t.regex(unalloc.reason, /unallocated service IP/);
  const fw = trace(ctx(), q('192.0.2.1', '203.0.113.5', 443));
  t.is(fw.verdict, 'drop');
  t.regex(fw.reason, /outside loadBalancerSourceRanges/);
  t.is(trace(ctx(), q('198.51.100.7', '203.0.113.5', 443)).verdict, 'dnat');
  t.is(trace(ctx(), q('10.244.1.9', '8.8.8.8', 53)).verdict, 'untouched');
  t.is(trace(ctx(), q('10.244.1.9', '10.96.0.10', 80, { protocol: 'UDP' })).verdict, 'reject');
  t.is(trace(ctx(), q('10.244.1.9', '127.0.0.1', 30080)).verdict, 'untouched', 'no node ports on loopback');
});
