// The nftables proxier's policies, proven with real packets (issue 4): SCTP, terminating
// endpoints, topology hints, node ports on localhost and nodePortAddresses, the
// externalTrafficPolicy=Local short-circuit, and --masquerade-all. Same set-up as
// nft-proxier.test.ts: the node namespace runs the model and the proxier, pods answer
// "<name> <source they saw>", and each test asserts which endpoint answered and whether the
// source was masqueraded (the node's address on that pod's link) or kept.
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { CLIENT_IP, ECHO, makeCluster, NODE_IP, podGateway, podIP } from '../helpers/cluster.ts';
import type { Cluster } from '../helpers/cluster.ts';
import type { Service } from '../../src/model/k8s.ts';
import { ep, node, slice, svc } from '../unit/model/helpers.ts';

const P = new URL('./scenarios/nft-proxier.ts', import.meta.url).href;
const MODEL = { clusterCIDRs: ['10.244.0.0/16'], serviceCIDRs: ['10.96.0.0/16'] };
const NODE_GW_IP = '10.9.0.1';

async function cluster(t: ExecutionContext, label: string, pods: number, model: object = MODEL): Promise<Cluster> {
  const c = await makeCluster(t, label, pods);
  await c.nodeAgent.call(P, 'start', model);
  return c;
}

const apply = async (t: ExecutionContext, c: Cluster, change: object): Promise<void> => {
  const r = await c.nodeAgent.call<{ errors: string[] }>(P, 'apply', change);
  t.deepEqual(r.errors, [], 'the sync succeeded');
};

/** Who sends: the external client, the node itself, or pod i (0-based; pods count as local pods). */
type Who = 'client' | 'node' | number;
const agent = (c: Cluster, who: Who) =>
  who === 'client' ? c.clientAgent : who === 'node' ? c.nodeAgent : c.podAgents[who]!;
const tcp = (c: Cluster, who: Who, ip: string, port: number) => agent(c, who).call<string>(ECHO, 'tcp', ip, port);
const tcpMany = (c: Cluster, who: Who, ip: string, port: number, n: number) =>
  agent(c, who).call<string[]>(ECHO, 'tcpMany', ip, port, n);
const udp = (c: Cluster, who: Who, ip: string, port: number) => agent(c, who).call<string>(ECHO, 'udp', ip, port);
/** Each round of a test gives its own firstSrcPort, so no request reuses an earlier round's conntrack entry. */
const udpMany = (c: Cluster, who: Who, ip: string, port: number, n: number, firstSrcPort: number) =>
  agent(c, who).call<string[]>(ECHO, 'udpMany', ip, port, n, firstSrcPort);

const pods = (answers: readonly string[]): Set<string> => new Set(answers.map((a) => a.split(' ')[0]!));
const list = (answers: readonly string[]): string => answers.join(', ');
const podIndex = (answer: string): number => Number(/^pod(\d+) /.exec(answer)?.[1] ?? 0) - 1;
/** The answering pod saw the node's address on its own link: the source was masqueraded. */
const masqueraded = (a: string): boolean =>
  podIndex(a) >= 0 && a === `pod${podIndex(a) + 1} ${podGateway(podIndex(a))}`;
/** The answering pod saw `source` itself: not masqueraded. */
const sawSource =
  (source: string) =>
  (a: string): boolean =>
    podIndex(a) >= 0 && a.split(' ')[1] === source;

function allMatch(t: ExecutionContext, answers: readonly string[], ok: (a: string) => boolean, what: string): void {
  t.true(answers.length > 0 && answers.every(ok), `${what}: ${list(answers)}`);
}

/** TCP and UDP on the same port number (a Service may use one node port for both protocols). */
const tcpUdp = (port: number, nodePort?: number) => [
  { name: 'p', protocol: 'TCP', port, ...(nodePort ? { nodePort } : {}) },
  { name: 'u', protocol: 'UDP', port, ...(nodePort ? { nodePort } : {}) },
];
const TCP_UDP_TARGETS = {
  ports: [
    { name: 'p', protocol: 'TCP', port: 8080 },
    { name: 'u', protocol: 'UDP', port: 8080 },
  ],
};

const withSpec = (s: Service, extra: Record<string, unknown>): Service => ({ ...s, spec: { ...s.spec, ...extra } });

test.serial(
  'SCTP: ClusterIP and NodePort answered by the endpoints, masqueraded from outside; no endpoints: rejected',
  async (t) => {
    const c = await cluster(t, 'sctp', 2);
    const modes = await Promise.all(c.podAgents.map((a, i) => a.call<string>(ECHO, 'serveSctp', `pod${i + 1}`, 8080)));
    t.log(
      `SCTP backends use ${modes[0]} mode (kernel: SCTP sockets; raw: hand-made INIT/INIT-ACK, the kernel lacking SCTP)`,
    );
    const sctpPort = (port: number, nodePort?: number) => [
      { name: 's', protocol: 'SCTP', port, ...(nodePort ? { nodePort } : {}) },
    ];
    await apply(t, c, {
      services: [
        svc('sig', { clusterIP: '10.96.0.80', type: 'NodePort', ports: sctpPort(9000, 30900) }),
        svc('sig-empty', { clusterIP: '10.96.0.81', ports: sctpPort(9000) }),
      ],
      slices: [
        slice('sig-1', 'sig', [ep(podIP(0)), ep(podIP(1))], { ports: [{ name: 's', protocol: 'SCTP', port: 8080 }] }),
      ],
    });
    const sctpMany = (who: Who, ip: string, port: number, n: number) =>
      agent(c, who).call<string[]>(ECHO, 'sctpMany', ip, port, n);

    const viaVip = await sctpMany('client', '10.96.0.80', 9000, 16);
    allMatch(t, viaVip, masqueraded, 'cluster IP from outside: an endpoint answers, masqueraded');
    t.is(pods(viaVip).size, 2, `balanced over both endpoints: ${list(viaVip)}`);

    allMatch(t, await sctpMany('client', NODE_IP, 30900, 4), masqueraded, 'node port: answered, masqueraded');

    // From a pod: its own address is kept, except when it lands on itself (hairpin).
    const fromPod = await sctpMany(0, '10.96.0.80', 9000, 8);
    allMatch(t, fromPod, (a) => (podIndex(a) === 0 ? masqueraded(a) : sawSource(podIP(0))(a)), 'from pod1');

    t.is(
      await agent(c, 'client').call<string>(ECHO, 'sctp', '10.96.0.81', 9000),
      'ECONNREFUSED',
      'a Service without endpoints rejects SCTP too',
    );
  },
);

test.serial(
  'terminating endpoints: used only while no endpoint is ready; Local traffic falls back on its own',
  async (t) => {
    const c = await cluster(t, 'term', 3);
    const terminating = { ready: false, serving: true, terminating: true };
    const gone = { ready: false, serving: false, terminating: true };
    const s = svc('term', { clusterIP: '10.96.0.90', ports: tcpUdp(80) });
    const round = (eps: ReturnType<typeof ep>[]) =>
      apply(t, c, { services: [s], slices: [slice('term-1', 'term', eps, TCP_UDP_TARGETS)] });

    // Only terminating endpoints: the serving ones still get traffic, the non-serving one none.
    await round([ep(podIP(0), terminating), ep(podIP(1), terminating), ep(podIP(2), gone)]);
    const onlyTerminating = [
      ...(await tcpMany(c, 'client', '10.96.0.90', 80, 16)),
      ...(await udpMany(c, 'client', '10.96.0.90', 80, 16, 41000)),
    ];
    allMatch(
      t,
      onlyTerminating,
      (a) => /^pod[12] /.test(a) && masqueraded(a),
      'serving-terminating endpoints answer (TCP then UDP)',
    );
    t.is(pods(onlyTerminating).size, 2, 'both serving endpoints are used');

    // A ready endpoint appears: the terminating ones get nothing more.
    await round([ep(podIP(0), terminating), ep(podIP(1), terminating), ep(podIP(2))]);
    const withReady = [
      ...(await tcpMany(c, 'client', '10.96.0.90', 80, 12)),
      ...(await udpMany(c, 'client', '10.96.0.90', 80, 12, 42000)),
    ];
    allMatch(t, withReady, (a) => a.startsWith('pod3 '), 'only the ready endpoint');

    // Nothing serving: no usable endpoint anywhere, so the Service rejects.
    await round([ep(podIP(0), gone), ep(podIP(1), gone), ep(podIP(2), gone)]);
    t.is(await tcp(c, 'client', '10.96.0.90', 80), 'ECONNREFUSED', 'no serving endpoint: rejected');

    // externalTrafficPolicy=Local: the node's only endpoint is terminating, a remote one is ready.
    // External traffic falls back to the local terminating endpoint (client source kept), while
    // cluster traffic uses the ready remote one: each policy falls back on its own, as upstream.
    const loc = svc('term-local', {
      clusterIP: '10.96.0.91',
      type: 'NodePort',
      ports: tcpUdp(80, 30091),
      eTP: 'Local',
    });
    await apply(t, c, {
      node: node('node-a', { internal: [NODE_IP] }),
      services: [loc],
      slices: [
        slice(
          'term-local-1',
          'term-local',
          [ep(podIP(0), { ...terminating, node: 'node-a' }), ep(podIP(1), { node: 'node-b' })],
          TCP_UDP_TARGETS,
        ),
      ],
    });
    const external = [
      ...(await tcpMany(c, 'client', NODE_IP, 30091, 8)),
      ...(await udpMany(c, 'client', NODE_IP, 30091, 8, 43000)),
    ];
    allMatch(t, external, sawSource(CLIENT_IP), 'external: client source kept');
    t.deepEqual([...pods(external)], ['pod1'], `external: the local terminating endpoint only: ${list(external)}`);
    const internal = [
      ...(await tcpMany(c, 'client', '10.96.0.91', 80, 8)),
      ...(await udpMany(c, 'client', '10.96.0.91', 80, 8, 43100)),
    ];
    t.deepEqual([...pods(internal)], ['pod2'], `cluster IP: the ready endpoint only: ${list(internal)}`);
  },
);

test.serial(
  'topology hints: traffic stays on the endpoints hinted for this node or zone, else uses them all',
  async (t) => {
    const c = await cluster(t, 'topo', 3);
    const VIP = '10.96.0.100';
    const zoned = (zones: (string[] | undefined)[]) =>
      zones.map((z, i) =>
        ep(podIP(i), {
          node: i === 1 ? 'node-a' : 'node-b',
          zone: i === 2 ? 'zone-b' : 'zone-a',
          ...(z ? { zones: z } : {}),
        }),
      );
    const eps = (list: ReturnType<typeof ep>[]) => ({ slices: [slice('topo-1', 'topo', list, TCP_UDP_TARGETS)] });
    const spread = async (label: string, srcPort: number): Promise<string[]> => {
      const got = [...(await tcpMany(c, 'client', VIP, 80, 20)), ...(await udpMany(c, 'client', VIP, 80, 20, srcPort))];
      allMatch(t, got, masqueraded, `${label}: answered, masqueraded`);
      return got;
    };
    // The EndpointSlice controller sets hints for trafficDistribution: PreferClose; kube-proxy
    // then follows the hints alone (upstream topologyModeFromHints reads no Service field).
    await apply(t, c, {
      node: node('node-a', { zone: 'zone-a', internal: [NODE_IP] }),
      services: [withSpec(svc('topo', { clusterIP: VIP, ports: tcpUdp(80) }), { trafficDistribution: 'PreferClose' })],
      ...eps(zoned([['zone-a'], ['zone-a'], ['zone-b']])),
    });
    const sameZone = await spread('zone hints', 44000);
    t.deepEqual([...pods(sameZone)].sort(), ['pod1', 'pod2'], `only this zone's endpoints: ${list(sameZone)}`);

    // Hints missing on one ready endpoint: hints are ignored, every endpoint is used.
    await apply(t, c, eps(zoned([['zone-a'], ['zone-a'], undefined])));
    t.true(pods(await spread('one endpoint without hints', 44100)).has('pod3'), 'the other zone gets traffic');

    // No endpoint hinted for this node's zone: every endpoint.
    await apply(t, c, eps(zoned([['zone-b'], ['zone-c'], ['zone-b']])));
    t.deepEqual([...pods(await spread('no hint for this zone', 44200))].sort(), ['pod1', 'pod2', 'pod3']);

    // The node loses its zone label: zone hints cannot apply.
    await apply(t, c, {
      node: node('node-a', { internal: [NODE_IP] }),
      ...eps(zoned([['zone-a'], ['zone-a'], ['zone-b']])),
    });
    t.true(pods(await spread('node without a zone', 44300)).has('pod3'), 'the zone-b endpoint gets traffic');

    // Node hints (trafficDistribution PreferSameNode): only the endpoint hinted for node-a.
    await apply(t, c, {
      node: node('node-a', { zone: 'zone-a', internal: [NODE_IP] }),
      ...eps(
        [0, 1, 2].map((i) =>
          ep(podIP(i), {
            node: i === 1 ? 'node-a' : 'node-b',
            zones: ['zone-a'],
            nodes: [i === 1 ? 'node-a' : 'node-b'],
          }),
        ),
      ),
    });
    t.deepEqual([...pods(await spread('node hints', 44400))], ['pod2'], 'the endpoint hinted for this node');
  },
);

test.serial(
  'node ports: never on localhost (as upstream nftables mode); nodePortAddresses picks the addresses that answer',
  async (t) => {
    const c = await cluster(t, 'npa', 2);
    const objects = {
      node: node('node-a', { internal: [NODE_IP] }),
      services: [svc('np', { clusterIP: '10.96.0.130', type: 'NodePort', ports: tcpUdp(80, 30130) })],
      slices: [slice('np-1', 'np', [ep(podIP(0)), ep(podIP(1))], TCP_UDP_TARGETS)],
    };
    await apply(t, c, objects);
    // Default (every local address): any node address answers, from outside and from the node;
    // 127.0.0.1 does not (upstream's nftables mode has no localhost node ports: nothing listens,
    // the node's stack resets the connection, a UDP datagram goes unanswered).
    t.true(masqueraded(await tcp(c, 'client', NODE_IP, 30130)), 'client → node IP');
    t.true(masqueraded(await tcp(c, 'client', NODE_GW_IP, 30130)), 'client → another node address');
    t.true(masqueraded(await tcp(c, 1, podGateway(1), 30130)), 'pod → the node address on its link');
    t.true(masqueraded(await udp(c, 'client', NODE_GW_IP, 30130)), 'UDP too');
    t.true(masqueraded(await tcp(c, 'node', NODE_IP, 30130)), 'the node itself → its own address, masqueraded');
    t.true(masqueraded(await udp(c, 'node', NODE_IP, 30130)), 'the node itself, UDP');
    t.is(await tcp(c, 'node', '127.0.0.1', 30130), 'ECONNREFUSED', 'localhost: not a node port');
    t.is(await udp(c, 'node', '127.0.0.1', 30130), 'ETIMEDOUT', 'localhost UDP: not a node port');

    // nodePortAddresses: only the client-facing network; 127.0.0.0/8 is listed but, as upstream's
    // nftables mode, never used.
    await c.nodeAgent.call(P, 'start', { ...MODEL, nodePortAddresses: ['10.1.0.0/24', '127.0.0.0/8'] });
    await apply(t, c, objects);
    t.true(masqueraded(await tcp(c, 'client', NODE_IP, 30130)), 'an address in the CIDR answers');
    t.true(masqueraded(await udp(c, 'client', NODE_IP, 30130)), 'UDP too');
    t.true(masqueraded(await tcp(c, 'node', NODE_IP, 30130)), 'also from the node itself');
    t.is(await tcp(c, 'client', NODE_GW_IP, 30130), 'ECONNREFUSED', 'an address outside the CIDRs is not a node port');
    t.is(await udp(c, 'client', NODE_GW_IP, 30130), 'ETIMEDOUT', 'nor for UDP');
    t.is(await tcp(c, 1, podGateway(1), 30130), 'ECONNREFUSED', 'nor the node address on a pod link');
    t.is(await tcp(c, 'node', '127.0.0.1', 30130), 'ECONNREFUSED', 'localhost: still not a node port');
    t.regex(await tcp(c, 'client', '10.96.0.130', 80), /^pod[12] /, 'the cluster IP is not affected');

    // "primary": the node's primary IP only.
    await c.nodeAgent.call(P, 'start', { ...MODEL, nodePortAddresses: ['primary'] });
    await apply(t, c, objects);
    t.true(masqueraded(await tcp(c, 'client', NODE_IP, 30130)), 'the primary IP answers');
    t.is(await tcp(c, 'client', NODE_GW_IP, 30130), 'ECONNREFUSED', 'another address does not');
  },
);

test.serial(
  'externalTrafficPolicy=Local: local pods and the node short-circuit to every endpoint; outside clients get local ones',
  async (t) => {
    const c = await cluster(t, 'short', 3);
    const [NP, EXT, LB] = [30140, '10.50.0.5', '10.60.0.5'];
    const s = svc('loc', {
      clusterIP: '10.96.0.140',
      type: 'LoadBalancer',
      ports: tcpUdp(80, NP),
      eTP: 'Local',
      externalIPs: [EXT],
      ingress: [{ ip: LB }],
    });
    const endpoints = (localPod: boolean) =>
      slice(
        'loc-1',
        'loc',
        [
          ep(podIP(0), { node: localPod ? 'node-a' : 'node-b' }),
          ep(podIP(1), { node: 'node-b' }),
          ep(podIP(2), { node: 'node-b' }),
        ],
        TCP_UDP_TARGETS,
      );
    await apply(t, c, { node: node('node-a', { internal: [NODE_IP] }), services: [s], slices: [endpoints(true)] });
    const frontends: [string, string, number][] = [
      ['node port', NODE_IP, NP],
      ['external IP', EXT, 80],
      ['LB IP', LB, 80],
    ];

    let srcPort = 45000;
    for (const [what, ip, port] of frontends) {
      const ext = [
        ...(await tcpMany(c, 'client', ip, port, 6)),
        ...(await udpMany(c, 'client', ip, port, 6, (srcPort += 100))),
      ];
      allMatch(
        t,
        ext,
        (a) => a === `pod1 ${CLIENT_IP}`,
        `outside → ${what}: the local endpoint only, client source kept`,
      );

      // pod2 runs on this node (pod CIDR): any endpoint, its source kept (masqueraded only when it reaches itself).
      const fromPod = [
        ...(await tcpMany(c, 1, ip, port, 20)),
        ...(await udpMany(c, 1, ip, port, 20, (srcPort += 100))),
      ];
      allMatch(t, fromPod, (a) => (podIndex(a) === 1 ? masqueraded(a) : sawSource(podIP(1))(a)), `local pod → ${what}`);
      t.true(pods(fromPod).has('pod3'), `local pod → ${what}: remote endpoints too: ${list(fromPod)}`);

      // The node itself: any endpoint, masqueraded.
      const fromNode = [
        ...(await tcpMany(c, 'node', ip, port, 20)),
        ...(await udpMany(c, 'node', ip, port, 20, (srcPort += 100))),
      ];
      allMatch(t, fromNode, masqueraded, `node → ${what}: masqueraded`);
      t.true(pods(fromNode).has('pod3'), `node → ${what}: remote endpoints too: ${list(fromNode)}`);
    }

    // No local endpoint: outside clients are dropped, local pods still reach the Service.
    await apply(t, c, { slices: [endpoints(false)] });
    for (const [what, ip, port] of frontends) {
      t.is(await tcp(c, 'client', ip, port), 'ETIMEDOUT', `outside → ${what}: dropped`);
      const fromPod = [...(await tcpMany(c, 1, ip, port, 6)), ...(await udpMany(c, 1, ip, port, 6, (srcPort += 100)))];
      allMatch(
        t,
        fromPod,
        (a) => (podIndex(a) === 1 ? masqueraded(a) : sawSource(podIP(1))(a)),
        `local pod → ${what}: still answered`,
      );
    }
    allMatch(t, await tcpMany(c, 'node', NODE_IP, NP, 4), masqueraded, 'node → node port: still answered, masqueraded');
  },
);

test.serial('masqueradeAll: pod-to-ClusterIP traffic is masqueraded too', async (t) => {
  const c = await cluster(t, 'masq', 2);
  const objects = {
    services: [svc('m', { clusterIP: '10.96.0.150', ports: tcpUdp(80) })],
    slices: [slice('m-1', 'm', [ep(podIP(0)), ep(podIP(1))], TCP_UDP_TARGETS)],
  };
  const fromPod1 = async (srcPort: number): Promise<string[]> => {
    const got = [
      ...(await tcpMany(c, 0, '10.96.0.150', 80, 16)),
      ...(await udpMany(c, 0, '10.96.0.150', 80, 16, srcPort)),
    ];
    t.true(pods(got).has('pod2'), `pod2 answered some: ${list(got)}`);
    return got;
  };
  // Without it (the default): pod1's address is kept, except when it reaches itself.
  await apply(t, c, objects);
  allMatch(
    t,
    await fromPod1(46000),
    (a) => (podIndex(a) === 0 ? masqueraded(a) : sawSource(podIP(0))(a)),
    'default: pod source kept',
  );

  await c.nodeAgent.call(P, 'start', { ...MODEL, masqueradeAll: true });
  await apply(t, c, objects);
  allMatch(t, await fromPod1(46100), masqueraded, 'masqueradeAll: every answer saw the node');
  allMatch(t, await tcpMany(c, 'client', '10.96.0.150', 80, 4), masqueraded, 'outside traffic stays masqueraded');
});
