// trace from the model: the frontend a packet hits, masquerade and why, the endpoints and
// their probabilities, and every drop/reject reason the nftables ruleset has; then what
// each other mode does instead (explain/modes.ts), case by case.
import test from 'ava';
import type { IPFamily } from '../../../src/base/ip.ts';
import { TRACE_TRAITS } from '../../../src/explain/modes.ts';
import { trace } from '../../../src/explain/trace.ts';
import type { TraceQuery, TraceResult } from '../../../src/explain/trace.ts';
import { formatTrace } from '../../../src/explain/format.ts';
import type { DesiredState } from '../../../src/model/index.ts';
import type { ProxyMode } from '../../../src/proxier/types.ts';
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

const ctx = (mode: ProxyMode = 'nftables') => ({
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
  t.regex(ipvs.reason, /KUBE-NO-LOCAL-ENDPOINTS/);
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

/** Each policy case in each mode: the verdict and what the reason must name. */
const BY_MODE: readonly {
  name: string;
  q: TraceQuery;
  want: Record<ProxyMode, [TraceResult['verdict'], RegExp]>;
}[] = [
  {
    name: 'a port the cluster IP does not expose',
    q: q('10.244.1.9', '10.96.0.10', 81),
    want: {
      nftables: ['reject', /exposes no TCP port 81 \(cluster-ips-check\)/],
      iptables: ['untouched', /exposes no TCP port 81 \(iptables mode has no rule/],
      ipvs: ['reject', /exposes no TCP port 81 .*KUBE-IPVS-FILTER REJECT/],
      userspace: ['untouched', /exposes no TCP port 81 \(userspace mode has portal rules only/],
    },
  },
  {
    name: 'an unallocated service IP',
    q: q('10.244.1.9', '10.96.9.9', 80),
    want: {
      nftables: ['drop', /unallocated service IP; cluster-ips-check/],
      iptables: ['untouched', /unallocated service IP; iptables mode has no rule/],
      ipvs: ['untouched', /unallocated service IP; IPVS mode binds only allocated/],
      userspace: ['untouched', /unallocated service IP; userspace mode has no rule/],
    },
  },
  {
    name: 'no endpoints',
    q: q('10.244.1.9', '10.96.0.30', 80),
    want: {
      nftables: ['reject', /no ready .*reject-chain/],
      iptables: ['reject', /no ready .*KUBE-SERVICES .*REJECT/],
      ipvs: ['reject', /no ready .*no real server/],
      userspace: ['reject', /no ready .*resets it/],
    },
  },
  {
    name: 'a source outside loadBalancerSourceRanges',
    q: q('192.0.2.1', '203.0.113.5', 443),
    want: {
      nftables: ['drop', /outside loadBalancerSourceRanges .*firewall-check/],
      iptables: ['drop', /outside loadBalancerSourceRanges .*KUBE-PROXY-FIREWALL DROP/],
      ipvs: ['drop', /outside loadBalancerSourceRanges .*KUBE-SOURCE-RANGES-FIREWALL DROP/],
      userspace: ['proxy', /redirected to the daemon's proxy socket/],
    },
  },
  {
    name: 'externalTrafficPolicy=Local without a local endpoint, from outside',
    q: q('198.51.100.1', NODE_IP, 30081),
    want: {
      nftables: ['drop', /externalTrafficPolicy=Local and no endpoint on this node/],
      iptables: ['drop', /externalTrafficPolicy=Local and no endpoint on this node.*has no local endpoints/],
      ipvs: ['drop', /an external source is dropped .*KUBE-NO-LOCAL-ENDPOINTS/],
      userspace: ['proxy', /one of 1 cluster endpoint/],
    },
  },
  {
    name: 'a cluster IP with endpoints',
    q: q('10.244.1.9', '10.96.0.10', 80),
    want: {
      nftables: ['dnat', /cluster-ip 10\.96\.0\.10:80\/TCP .*: to one of 2 cluster/],
      iptables: ['dnat', /: to one of 2 cluster/],
      ipvs: ['dnat', /: to one of 2 cluster/],
      userspace: ['proxy', /proxy socket, which connects to one of 2 cluster/],
    },
  },
  {
    name: 'SCTP',
    q: q('10.244.1.9', '10.96.0.10', 80, { protocol: 'SCTP' }),
    want: {
      nftables: ['reject', /exposes no SCTP port 80/],
      iptables: ['untouched', /exposes no SCTP port 80/],
      ipvs: ['reject', /exposes no SCTP port 80/],
      userspace: ['untouched', /userspace mode does not handle SCTP/],
    },
  },
];

for (const c of BY_MODE) {
  test(`each mode's verdict: ${c.name}`, (t) => {
    for (const [mode, [verdict, reason]] of Object.entries(c.want) as [ProxyMode, [TraceResult['verdict'], RegExp]][]) {
      const r = trace(ctx(mode), c.q);
      t.is(r.verdict, verdict, `${mode}: ${r.reason}`);
      t.regex(r.reason, reason, mode);
    }
  });
}

test('every mode has trace traits; an unknown mode is named', (t) => {
  t.deepEqual(Object.keys(TRACE_TRAITS).sort(), ['iptables', 'ipvs', 'nftables', 'userspace']);
  t.throws(() => trace(ctx('kernelspace' as ProxyMode), q('10.244.1.9', '10.96.0.10', 80)), {
    message: /no trace traits for proxy mode kernelspace/,
  });
});

test('userspace: always the cluster endpoints, seen from the node; iTP=Local leaves its socket without backends', (t) => {
  const { t: tr } = newTracker({ clusterCIDRs: ['10.244.0.0/16'], serviceCIDRs: ['10.96.0.0/12'] });
  tr.onNode(node('node-a', { internal: [NODE_IP] }));
  tr.onService(undefined, svc('itp', { clusterIP: '10.96.0.50', iTP: 'Local' }));
  tr.onEndpointSlice(slice('itp-1', 'itp', [ep('10.244.1.1', { node: 'node-a' })]), false);
  const states = new Map<IPFamily, DesiredState>([['IPv4', tr.checkout().desired]]);
  const us = trace({ states, localAddresses: [NODE_IP], mode: 'userspace' }, q('10.244.1.9', '10.96.0.50', 80));
  t.is(us.verdict, 'reject');
  t.regex(us.reason, /internalTrafficPolicy=Local/);
  const nft = trace({ states, localAddresses: [NODE_IP], mode: 'nftables' }, q('10.244.1.9', '10.96.0.50', 80));
  t.is(nft.verdict, 'dnat');
  const web = trace(ctx('userspace'), q('10.244.1.1', '10.96.0.10', 80));
  t.true(web.masquerade!.yes);
  t.regex(web.masquerade!.why, /proxy socket/);
  t.false(web.notes.some((n) => /hairpin/.test(n)));
  t.regex(formatTrace(web), /verdict: PROXY: /);
});

test('IPVS: a Local policy with nothing to fall back to leaves the virtual server empty: rejected', (t) => {
  const { t: tr } = newTracker({ clusterCIDRs: ['10.244.0.0/16'], serviceCIDRs: ['10.96.0.0/12'] });
  tr.onNode(node('node-a', { internal: [NODE_IP] }));
  tr.onService(undefined, svc('itp', { clusterIP: '10.96.0.50', iTP: 'Local' }));
  tr.onEndpointSlice(slice('itp-1', 'itp', [ep('10.244.2.1', { node: 'node-b' })]), false);
  const states = new Map<IPFamily, DesiredState>([['IPv4', tr.checkout().desired]]);
  const r = trace({ states, localAddresses: [NODE_IP], mode: 'ipvs' }, q('10.244.1.9', '10.96.0.50', 80));
  t.is(r.verdict, 'reject');
  t.regex(r.reason, /no cluster endpoint to fall back to/);
  t.is(
    trace({ states, localAddresses: [NODE_IP], mode: 'nftables' }, q('10.244.1.9', '10.96.0.50', 80)).verdict,
    'drop',
  );
});

test('hairpin: every endpoint (nftables, iptables), local endpoints only (IPVS: KUBE-LOOP-BACK), none (userspace)', (t) => {
  const hair = (mode: ProxyMode, from: string) =>
    trace(ctx(mode), q(from, '10.96.0.10', 80))
      .endpoints.filter((e) => e.hairpin)
      .map((e) => e.endpoint);
  t.deepEqual(hair('nftables', '10.244.2.1'), ['10.244.2.1:8080']);
  t.deepEqual(hair('iptables', '10.244.2.1'), ['10.244.2.1:8080']);
  t.deepEqual(hair('ipvs', '10.244.2.1'), [], 'node-b endpoint: not in KUBE-LOOP-BACK');
  t.deepEqual(hair('ipvs', '10.244.1.1'), ['10.244.1.1:8080']);
  t.deepEqual(hair('userspace', '10.244.1.1'), []);
});

test('detect-local ClusterCIDR: trace names and applies the first cluster CIDR of the family only', (t) => {
  const { t: tr } = newTracker({ clusterCIDRs: ['10.244.0.0/16', '10.245.0.0/16'], serviceCIDRs: ['10.96.0.0/12'] });
  tr.onNode(node('node-a', { internal: [NODE_IP] }));
  tr.onService(undefined, svc('web', { clusterIP: '10.96.0.60' }));
  tr.onEndpointSlice(slice('web-1', 'web', [ep('10.244.1.1', { node: 'node-a' })]), false);
  const states = new Map<IPFamily, DesiredState>([['IPv4', tr.checkout().desired]]);
  for (const mode of ['nftables', 'iptables', 'ipvs'] as const) {
    const r = trace({ states, localAddresses: [NODE_IP], mode }, q('10.245.0.9', '10.96.0.60', 80));
    t.true(r.masquerade!.yes, mode);
    t.regex(r.masquerade!.why, /detect-local ClusterCIDR 10\.244\.0\.0\/16\)/, mode);
  }
});

test('load balancing: trace says the algorithm and each endpoint share (consistent-hash: the table share)', (t) => {
  const { t: tr } = newTracker({ clusterCIDRs: ['10.244.0.0/16'], serviceCIDRs: ['10.96.0.0/12'] });
  tr.onNode(node('node-a', { internal: [NODE_IP] }));
  const annotated = (name: string, clusterIP: string, how: string) => {
    const s = svc(name, { clusterIP });
    s.metadata!.annotations = { 'kube-proxy-ts.io/load-balancing': how };
    return s;
  };
  tr.onService(undefined, annotated('ch', '10.96.0.50', 'consistent-hash'));
  tr.onEndpointSlice(slice('ch-1', 'ch', [ep('10.244.1.1'), ep('10.244.1.2'), ep('10.244.1.3')]), false);
  tr.onService(undefined, annotated('lc', '10.96.0.51', 'least-connection'));
  tr.onEndpointSlice(slice('lc-1', 'lc', [ep('10.244.1.1'), ep('10.244.1.2')]), false);
  const c = { states: new Map<IPFamily, DesiredState>([['IPv4', tr.checkout().desired]]), localAddresses: [NODE_IP] };

  const ch = trace({ ...c, mode: 'nftables' }, q('10.0.0.1', '10.96.0.50', 80));
  const shares = ch.endpoints.map((e) => e.probability);
  t.true(Math.abs(shares.reduce((a, b) => a + b, 0) - 1) < 1e-9);
  t.true(
    shares.every((s) => Math.abs(s - 1 / 3) < 0.01 && s !== 1 / 3),
    `table shares ${shares.join(', ')}`,
  );
  t.true(
    ch.notes.some((n) => /load balancing consistent-hash \(annotation\): jhash/.test(n)),
    ch.notes.join(' | '),
  );

  const lc = trace(
    { ...c, mode: 'nftables', balancing: { loadBalancing: 'round-robin' } },
    q('10.0.0.1', '10.96.0.51', 80),
  );
  t.deepEqual(
    lc.endpoints.map((e) => e.probability),
    [0.5, 0.5],
  );
  t.true(
    lc.notes.some((n) => /load balancing round-robin \(node default\): the port's own chain: numgen inc/.test(n)) &&
      lc.notes.some((n) =>
        /refused annotation "least-connection": least-connection is not supported in nftables mode/.test(n),
      ),
    lc.notes.join(' | '),
  );
  t.regex(formatTrace(lc), /load balancing/);
});
