// What every proxier mode must do with real packets, as one suite parameterised by mode: the same
// cluster, the same packets, the same expected landing. A mode's test file calls proxierSemantics
// with its node-side scenario and adds, through `inspect`, checks of what only it writes (the
// iptables-nft-save text, the nftables table); everything else of a mode stays in its own file.
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { CLIENT_IP, ECHO, makeCluster, NODE_IP, NODE_IP6, podGateway, podIP, podIP6 } from '../helpers/cluster.ts';
import type { Cluster } from '../helpers/cluster.ts';
import { ep, node, slice, svc } from '../unit/model/helpers.ts';
import type { SyncReportLike } from './scenarios/nft-proxier-types.ts';

export const MODEL = { clusterCIDRs: ['10.244.0.0/16'], serviceCIDRs: ['10.96.0.0/16'] };

export const tcpPort = (port: number, nodePort?: number) => [
  { name: 'p', protocol: 'TCP', port, ...(nodePort ? { nodePort } : {}) },
];

/** The cluster's traffic helpers, bound to one mode's node-side scenario (its module URL). */
export function driver(scenario: string) {
  const from = (c: Cluster, who: 'client' | number) => (who === 'client' ? c.clientAgent : c.podAgents[who]!);
  return {
    async cluster(t: ExecutionContext, label: string, pods = 3, model: object = MODEL): Promise<Cluster> {
      const c = await makeCluster(t, label, pods);
      await c.nodeAgent.call(scenario, 'start', model);
      return c;
    },
    apply: (c: Cluster, change: object, full = false) =>
      c.nodeAgent.call<SyncReportLike>(scenario, 'apply', change, full),
    tcp: (c: Cluster, who: 'client' | number, ip: string, port: number) =>
      from(c, who).call<string>(ECHO, 'tcp', ip, port),
    tcpMany: (c: Cluster, who: 'client' | number, ip: string, port: number, n: number) =>
      from(c, who).call<string[]>(ECHO, 'tcpMany', ip, port, n),
  };
}

/** The endpoints (pod names) and the sources they saw, from echo answers "podN source". */
export const pods = (answers: string[]) => new Set(answers.map((a) => a.split(' ')[0]));
export const sources = (answers: string[]) => new Set(answers.map((a) => a.split(' ')[1]));

type Check = (t: ExecutionContext, c: Cluster) => Promise<void>;

export interface ModeUnderTest {
  /** Prefix of the clusters' labels (namespace names must differ between the modes' files). */
  label: string;
  /** URL of the node-side scenario module (start, apply, cleanup, warnings). */
  scenario: string;
  /** Checks of this mode's own rules, run at the end of the scenario of the same name. */
  inspect?: {
    clusterIPAndNodePort?: Check;
    noEndpoints?: Check;
    affinity?: Check;
    ipv6?: Check;
  };
}

export function proxierSemantics(m: ModeUnderTest): void {
  const { cluster, apply, tcp, tcpMany } = driver(m.scenario);
  const inspect = async (name: keyof NonNullable<ModeUnderTest['inspect']>, t: ExecutionContext, c: Cluster) => {
    await m.inspect?.[name]?.(t, c);
  };

  test.serial(
    'ClusterIP and NodePort: balanced over the endpoints, masqueraded from outside, hairpin masqueraded',
    async (t) => {
      const c = await cluster(t, `${m.label}np`);
      const r = await apply(c, {
        services: [svc('web', { clusterIP: '10.96.0.10', type: 'NodePort', ports: tcpPort(80, 30080) })],
        slices: [slice('web-1', 'web', [ep(podIP(0)), ep(podIP(1)), ep(podIP(2))])],
      });
      t.deepEqual(r.errors, []);

      const viaVip = await tcpMany(c, 'client', '10.96.0.10', 80, 15);
      t.true(
        viaVip.every((a) => /^pod[123] 10\.244\.[123]\.1$/.test(a)),
        `answers: ${viaVip.join(', ')}`,
      );
      t.true(pods(viaVip).size >= 2, 'random balancing reached more than one endpoint');

      const viaNodePort = await tcpMany(c, 'client', NODE_IP, 30080, 6);
      t.true(
        viaNodePort.every((a) => /^pod[123] 10\.244\.[123]\.1$/.test(a)),
        `node port answers: ${viaNodePort.join(', ')}`,
      );

      // A pod reaching the Service: not masqueraded, except when it lands on itself (hairpin).
      const fromPod1 = await tcpMany(c, 0, '10.96.0.10', 80, 15);
      for (const a of fromPod1) {
        const [name, src] = a.split(' ');
        t.is(src, name === 'pod1' ? podGateway(0) : podIP(0), `answer ${a}`);
      }
      await inspect('clusterIPAndNodePort', t, c);
    },
  );

  test.serial('no endpoints: rejected, from outside and from a pod', async (t) => {
    const c = await cluster(t, `${m.label}rej`, 1);
    await apply(c, {
      services: [
        svc('web', { clusterIP: '10.96.0.10' }),
        svc('empty', { clusterIP: '10.96.0.11' }),
        svc('udp-empty', { clusterIP: '10.96.0.12', ports: [{ name: 'p', protocol: 'UDP', port: 53 }] }),
      ],
      slices: [slice('web-1', 'web', [ep(podIP(0))])],
    });
    t.is(await tcp(c, 'client', '10.96.0.10', 80), `pod1 ${podGateway(0)}`);
    t.is(await tcp(c, 'client', '10.96.0.11', 80), 'ECONNREFUSED', 'a Service without endpoints rejects');
    t.is(await tcp(c, 0, '10.96.0.11', 80), 'ECONNREFUSED', 'also from a pod');
    await inspect('noEndpoints', t, c);
  });

  test.serial('externalIPs and load-balancer IPs; loadBalancerSourceRanges enforced', async (t) => {
    const c = await cluster(t, `${m.label}lb`, 2);
    const lb = (ranges: string[]) =>
      svc('lb', {
        clusterIP: '10.96.0.20',
        type: 'LoadBalancer',
        ports: tcpPort(80, 30081),
        externalIPs: ['10.50.0.1'],
        ingress: [{ ip: '10.60.0.1' }],
        sourceRanges: ranges,
      });
    await apply(c, {
      services: [lb([`${CLIENT_IP}/32`])],
      slices: [slice('lb-1', 'lb', [ep(podIP(0)), ep(podIP(1))])],
    });
    t.regex(await tcp(c, 'client', '10.50.0.1', 80), /^pod[12] 10\.244\.[12]\.1$/, 'external IP, masqueraded');
    t.regex(await tcp(c, 'client', '10.60.0.1', 80), /^pod[12] 10\.244\.[12]\.1$/, 'LB IP from an allowed source');
    const r = await apply(c, { services: [lb(['192.0.2.0/24'])] });
    t.false(r.full, 'a partial sync');
    t.is(await tcp(c, 'client', '10.60.0.1', 80), 'ETIMEDOUT', 'LB IP from a source outside the ranges is dropped');
    t.regex(await tcp(c, 'client', '10.50.0.1', 80), /^pod[12] /, 'source ranges apply to the LB IP only');
  });

  test.serial(
    'externalTrafficPolicy=Local: local endpoints only, client source kept; none local: dropped',
    async (t) => {
      const c = await cluster(t, `${m.label}etp`, 2);
      const s = svc('loc', {
        clusterIP: '10.96.0.30',
        type: 'NodePort',
        ports: tcpPort(80, 30082),
        eTP: 'Local',
        externalIPs: ['10.50.0.2'],
      });
      await apply(c, {
        node: node('node-a', { internal: [NODE_IP] }),
        services: [s],
        slices: [slice('loc-1', 'loc', [ep(podIP(0), { node: 'node-a' }), ep(podIP(1), { node: 'node-b' })])],
      });
      const ext = await tcpMany(c, 'client', NODE_IP, 30082, 8);
      t.deepEqual([...pods(ext)], ['pod1'], `only the local endpoint: ${ext.join(', ')}`);
      t.deepEqual([...sources(ext)], [CLIENT_IP], 'no SNAT: the client address is preserved');
      t.deepEqual([...pods(await tcpMany(c, 'client', '10.50.0.2', 80, 4))], ['pod1']);
      t.true(pods(await tcpMany(c, 0, '10.96.0.30', 80, 12)).size === 2, 'cluster traffic uses every endpoint');

      await apply(c, { slices: [slice('loc-1', 'loc', [ep(podIP(1), { node: 'node-b' })])] });
      t.is(await tcp(c, 'client', NODE_IP, 30082), 'ETIMEDOUT', 'no local endpoint: external traffic is dropped');
      t.regex(await tcp(c, 0, '10.96.0.30', 80), /^pod2 /, 'the cluster IP still works');
    },
  );

  // Upstream's TestTerminatingEndpointsTrafficPolicyLocal flows (a LoadBalancer with
  // externalTrafficPolicy=Local): external traffic may use only this node's endpoints, ready ones
  // or else serving-terminating ones; the cluster IP (Cluster policy) uses ready endpoints
  // anywhere, else serving-terminating ones anywhere. pod1 and pod2 stand for pods on node-b.
  test.serial(
    'externalTrafficPolicy=Local with terminating endpoints: only local ones serve external traffic, the cluster IP any',
    async (t) => {
      const c = await cluster(t, `${m.label}etpt`, 3);
      const lb = svc('term', {
        clusterIP: '10.96.0.31',
        type: 'LoadBalancer',
        ports: tcpPort(80, 30083),
        eTP: 'Local',
        ingress: [{ ip: '10.60.0.3' }],
      });
      const local = { node: 'node-a' };
      const remote = { node: 'node-b' };
      const terminating = { ready: false, serving: true, terminating: true };
      const gone = { ready: false, serving: false, terminating: true };
      const external = async () => [await tcp(c, 'client', '10.60.0.3', 80), await tcp(c, 'client', NODE_IP, 30083)];
      const r = await apply(c, {
        node: node('node-a', { internal: [NODE_IP] }),
        services: [lb],
        slices: [slice('term-1', 'term', [ep(podIP(0), { ...remote, ...terminating })])],
      });
      t.deepEqual(r.errors, []);
      t.deepEqual(
        await external(),
        ['ETIMEDOUT', 'ETIMEDOUT'],
        'only a remote serving-terminating endpoint: external traffic is dropped (LB IP and node port)',
      );
      t.is(await tcp(c, 2, '10.96.0.31', 80), `pod1 ${podIP(2)}`, 'a pod reaches it through the cluster IP');

      await apply(c, { slices: [slice('term-1', 'term', [ep(podIP(1), remote)])] });
      t.deepEqual(await external(), ['ETIMEDOUT', 'ETIMEDOUT'], 'only a remote ready endpoint: dropped as well');
      t.is(await tcp(c, 2, '10.96.0.31', 80), `pod2 ${podIP(2)}`);

      await apply(c, {
        slices: [slice('term-1', 'term', [ep(podIP(2), { ...local, ...terminating }), ep(podIP(1), remote)])],
      });
      t.deepEqual(
        await external(),
        [`pod3 ${CLIENT_IP}`, `pod3 ${CLIENT_IP}`],
        'a local serving-terminating endpoint serves external traffic, unmasqueraded',
      );
      t.is(await tcp(c, 0, '10.96.0.31', 80), `pod2 ${podIP(0)}`, 'the cluster IP prefers the ready remote one');

      await apply(c, {
        slices: [slice('term-1', 'term', [ep(podIP(2), { ...local, ...gone }), ep(podIP(0), { ...remote, ...gone })])],
      });
      t.deepEqual(
        await external(),
        ['ECONNREFUSED', 'ECONNREFUSED'],
        'no usable endpoint on any node: rejected from outside',
      );
      t.is(await tcp(c, 1, '10.96.0.31', 80), 'ECONNREFUSED', 'and from a pod');
    },
  );

  test.serial('session affinity ClientIP: a client sticks to one endpoint until it goes away', async (t) => {
    const c = await cluster(t, `${m.label}aff`, 3);
    const sticky = svc('sticky', {
      clusterIP: '10.96.0.70',
      type: 'NodePort',
      ports: tcpPort(80, 30070),
      affinity: 'ClientIP',
      timeout: 600,
    });
    await apply(c, {
      services: [sticky],
      slices: [slice('sticky-1', 'sticky', [ep(podIP(0)), ep(podIP(1)), ep(podIP(2))])],
    });
    const first = await tcpMany(c, 'client', '10.96.0.70', 80, 10);
    t.is(pods(first).size, 1, `one endpoint for one client: ${first.join(', ')}`);
    const chosen = [...pods(first)][0]!;
    t.is(pods(await tcpMany(c, 'client', NODE_IP, 30070, 4)).size, 1, 'node port traffic sticks too');

    // The chosen endpoint goes away: the client moves to another one and sticks there.
    const left = [0, 1, 2].filter((i) => `pod${i + 1}` !== chosen).map((i) => ep(podIP(i)));
    await apply(c, { slices: [slice('sticky-1', 'sticky', left)] });
    const after = await tcpMany(c, 'client', '10.96.0.70', 80, 8);
    t.is(pods(after).size, 1, `sticks again: ${after.join(', ')}`);
    t.false(pods(after).has(chosen));
    await inspect('affinity', t, c);
  });

  test.serial('IPv6: ClusterIP and NodePort, masqueraded from outside, reject without endpoints', async (t) => {
    const c = await cluster(t, `${m.label}v6`, 2, {
      family: 'IPv6',
      clusterCIDRs: ['fd44::/16'],
      serviceCIDRs: ['fd96::/112'],
    });
    const v6 = (name: string, ip: string, nodePort?: number) =>
      svc(name, { clusterIPs: [ip], type: nodePort ? 'NodePort' : 'ClusterIP', ports: tcpPort(80, nodePort) });
    const withFamily = (s: ReturnType<typeof svc>) => ({ ...s, spec: { ...s.spec, ipFamilies: ['IPv6'] } });
    await apply(c, {
      services: [withFamily(v6('web6', 'fd96::10', 30600)), withFamily(v6('empty6', 'fd96::11'))],
      slices: [slice('web6-1', 'web6', [ep(podIP6(0)), ep(podIP6(1))], { addressType: 'IPv6' })],
    });
    const got = await tcpMany(c, 'client', 'fd96::10', 80, 10);
    t.true(
      got.every((a) => /^pod[12] fd44:[12]::1$/.test(a)),
      `answers: ${got.join(', ')}`,
    );
    t.true(pods(got).size === 2);
    t.regex(await tcp(c, 'client', NODE_IP6, 30600), /^pod[12] fd44:[12]::1$/);
    t.is(await tcp(c, 'client', 'fd96::11', 80), 'ECONNREFUSED');
    await inspect('ipv6', t, c);
  });
}
