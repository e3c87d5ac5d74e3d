// IPVS mode on Debian's 6.1 kernel (inside the QEMU VM, run by run-cases.ts from
// ipvs-local-policy.test.ts): a Local traffic policy (internal and external) with no usable
// local endpoint and remote terminating endpoints around (issue 16 item 9). Upstream's
// syncEndpoint sends such a VS to the local endpoints when there are any (ready ones, else
// local serving-terminating ones) and otherwise to the cluster endpoints (PR 97081): ready
// ones, else serving-terminating ones anywhere; a ClusterIP-only Service with
// internalTrafficPolicy=Local has no cluster endpoints, so its VS stays empty. An endpoint
// whose `serving` condition is unset is serving (the API's default, as upstream reads it).
//
// The VM's root namespace is the node "node-a"; backends 10.0.0.2-4 in namespace "pods", the
// client 192.168.7.2 in "client". Endpoints say which node they are on; the proxier is driven
// directly (model + IpvsProxier) with its companion rules written over nfnetlink and
// detect-local by cluster CIDR 10.0.0.0/16. Read back with ipvsadm and real TCP connections.
//
// The last cases are upstream's TestTerminatingEndpointsTrafficPolicyLocal Service (a
// LoadBalancer with externalTrafficPolicy=Local, internalTrafficPolicy=Cluster). 10.0.1.5 is a
// pod of node-b: the node routes to it, and its replies come back through this node (so IPVS
// would complete a connection an external client made to it). Upstream's IPVS syncEndpoint
// gives the external VSes (LB IP, node port) the local endpoints when there are any, else the
// cluster endpoints (PR 97081: pods of this node reach the LB IP through IPVS too). The
// documented policy forwards no external traffic without a local endpoint: the frontends that
// fell back are in KUBE-NO-LOCAL-ENDPOINTS and a filter rule drops new connections to them from
// anything but this node's pods and the node itself. 10.0.3.2 stands for a pod of this node
// (inside the cluster CIDR; an address in the client namespace, so the same agent connects from
// it, routed back through the node). With no usable endpoint anywhere the VSes stay without
// real servers and IPVS answers ICMP port unreachable. The health check node port counts local
// ready endpoints only (upstream LocalReadyEndpoints).

import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { systemClock } from '../../../src/base/clock.ts';
import { nullLogger } from '../../../src/base/logger.ts';
import { ChangeTracker, serviceKey } from '../../../src/model/index.ts';
import { connect as netlink, Protocol } from '../../../src/netlink/core/index.ts';
import { openIpset } from '../../../src/netlink/ipset/index.ts';
import { NftClient } from '../../../src/netlink/nftables/index.ts';
import { CompanionWriter, IpvsProxier } from '../../../src/proxier/ipvs/index.ts';
import { ep, node, slice, svc } from '../../unit/model/helpers.ts';
import type { EpOpts } from '../../unit/model/helpers.ts';
import type { VmCase } from '../run-cases.ts';
import { NODE_IP, PodsAndClient } from './pods-and-client.ts';
import { openIpvsDeps } from './ipvs-deps.ts';
import { ip, must } from './vm-shell.ts';

const LOCAL: EpOpts = { node: 'node-a' };
const REMOTE: EpOpts = { node: 'node-b' };
const TERMINATING: EpOpts = { ready: false, serving: true, terminating: true };
/** `serving` left out: the API (and upstream) read it as true. */
const TERMINATING_SERVING_UNSET: EpOpts = { ready: false, terminating: true };
const GONE: EpOpts = { ready: false, serving: false, terminating: true };
/** A pod of node-b, reached through this node; its replies come back through it too. */
const REMOTE_POD = '10.0.1.5';
/** A pod of this node (detect-local: inside the cluster CIDR), in the client namespace. */
const LOCAL_POD = '10.0.3.2';
const CLUSTER_CIDR = '10.0.0.0/16';

/** The real servers of one TCP VS with weight > 0 ("10.0.0.2:8080"), sorted. */
async function realServers(vip: string, port: number): Promise<string[]> {
  const out = await must('/usr/sbin/ipvsadm', '-Ln', '-t', `${vip}:${port}`);
  return out
    .split('\n')
    .map((l) => l.trim().split(/\s+/))
    .filter((f) => f[0] === '->' && f[1] !== 'RemoteAddress:Port' && f[3] !== '0')
    .map((f) => f[1]!)
    .sort();
}

// --- the client agent ------------------------------------------------------------------------

const net = new PodsAndClient();
const ask = (q: Record<string, unknown>) => net.ask(q);

/** The backends that answered n connections ("10.0.0.2"), or the error code of the first failure. */
async function backends(host: string, port: number, n = 4): Promise<string[] | string> {
  const r = await ask({ op: 'tcp', host, port, n });
  if (r.error) return String(r.code ?? r.error);
  return [...new Set((r.answers as string[]).map((a) => a.split(' ')[0]!))].sort();
}

// --- the proxier ---------------------------------------------------------------------------

let proxier: IpvsProxier;
const tracker = new ChangeTracker(
  { nodeName: 'node-a', family: 'IPv4', clusterCIDRs: [CLUSTER_CIDR] },
  { logger: nullLogger, clock: systemClock },
);
const closers: (() => void)[] = [];
let rv = 1;

/** One Service per case (its own VIP and node port: nothing drains from an earlier case). */
async function service(
  name: string,
  n: number,
  o: { nodePort: boolean },
  eps: [string, EpOpts][],
): Promise<{ vip: string; nodePort: number }> {
  const vip = `10.96.0.${n}`;
  const nodePort = 30000 + n;
  const port = { name: 'p', protocol: 'TCP', port: 80, ...(o.nodePort ? { nodePort } : {}) };
  tracker.onService(
    undefined,
    svc(name, {
      clusterIP: vip,
      type: o.nodePort ? 'NodePort' : 'ClusterIP',
      ports: [port],
      iTP: 'Local',
      ...(o.nodePort ? { eTP: 'Local' } : {}),
    }),
  );
  tracker.onEndpointSlice(
    slice(
      `${name}-1`,
      name,
      eps.map(([a, e]) => ep(a, e)),
      { rv: String(++rv), ports: [{ name: 'p', protocol: 'TCP', port: 8080 }] },
    ),
    false,
  );
  const { desired, change } = tracker.checkout();
  const r = await proxier.sync(desired, change, AbortSignal.timeout(60_000));
  assert.deepEqual(r.errors, []);
  return { vip, nodePort };
}

/** One TCP connection from the node itself: "<backend> <source it saw>", or the error code. */
function fromNode(host: string, port: number): Promise<string> {
  return new Promise((resolve) => {
    const s = connect(port, host);
    let d = '';
    s.setTimeout(4000, () => s.destroy(Object.assign(new Error('timeout'), { code: 'ETIMEDOUT' })));
    s.on('data', (c) => (d += String(c)));
    s.on('end', () => resolve(d.trim()));
    s.on('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? e.message));
  });
}

/** Upstream's TestTerminatingEndpointsTrafficPolicyLocal Service: LB IP, node port, eTP=Local, health check. */
async function lbService(name: string, n: number, eps: [string, EpOpts][]): Promise<{ vip: string; lbIP: string }> {
  const vip = `10.96.0.${n}`;
  const lbIP = `10.60.0.${n}`;
  tracker.onService(
    undefined,
    svc(name, {
      clusterIP: vip,
      type: 'LoadBalancer',
      ports: [{ name: 'p', protocol: 'TCP', port: 80, nodePort: 30000 + n }],
      eTP: 'Local',
      hcPort: 32000 + n,
      ingress: [{ ip: lbIP }],
    }),
  );
  tracker.onEndpointSlice(
    slice(
      `${name}-1`,
      name,
      eps.map(([a, e]) => ep(a, e)),
      { rv: String(++rv), ports: [{ name: 'p', protocol: 'TCP', port: 8080 }] },
    ),
    false,
  );
  const { desired, change } = tracker.checkout();
  const r = await proxier.sync(desired, change, AbortSignal.timeout(60_000));
  assert.deepEqual(r.errors, []);
  localEndpoints.set(name, desired.healthChecks.get(serviceKey('default', name))?.localEndpoints);
  return { vip, lbIP };
}
const localEndpoints = new Map<string, number | undefined>();

interface LbWant {
  /** Real servers of the LB-IP and node-port VSes, and of the cluster-IP VS ("10.0.0.4"). */
  external: string[];
  cluster: string[];
  /** What the external client gets from the LB IP and the node port ("10.0.0.4 192.168.7.2" or an error code). */
  client: string;
}

/** The backend of each answer ("10.0.1.5 10.0.3.2" -> "10.0.1.5"), or the error code. */
async function fromClient(host: string, port: number, local?: string): Promise<string> {
  const r = await ask({ op: 'tcp', host, port, n: 1, ...(local ? { local } : {}) });
  return r.error ? String(r.code ?? r.error) : (r.answers as string[])[0]!;
}

/**
 * The Service's VSes, then who answers: the external client (LB IP, node port), this node's pod
 * and the node itself (LB IP, node port: the external VSes' real server; cluster IP: the
 * cluster-IP VS's). The connections run side by side (a dropped one waits out its 4 s).
 */
async function expectLb(
  name: string,
  s: { vip: string; lbIP: string },
  n: number,
  want: LbWant,
  note: (v: unknown) => void,
) {
  const np = 30000 + n;
  const first = (r: Promise<string>) => r.then((a) => a.split(' ')[0]!);
  const [client, clientNodePort, podLb, podNodePort, podCluster, nodeLb, nodeNodePort, nodeCluster] = await Promise.all(
    [
      fromClient(s.lbIP, 80),
      fromClient(NODE_IP, np),
      first(fromClient(s.lbIP, 80, LOCAL_POD)),
      first(fromClient(NODE_IP, np, LOCAL_POD)),
      first(fromClient(s.vip, 80, LOCAL_POD)),
      first(fromNode(s.lbIP, 80)),
      first(fromNode(NODE_IP, np)),
      first(fromNode(s.vip, 80)),
    ],
  );
  const seen = {
    lb: await realServers(s.lbIP, 80),
    nodePort: await realServers(NODE_IP, np),
    clusterIP: await realServers(s.vip, 80),
    client,
    clientNodePort,
    pod: { lb: podLb, nodePort: podNodePort, cluster: podCluster },
    node: { lb: nodeLb, nodePort: nodeNodePort, cluster: nodeCluster },
    localEndpoints: localEndpoints.get(name),
  };
  note(seen);
  const servers = (l: string[]) => l.map((a) => `${a}:8080`);
  assert.deepEqual(seen.lb, servers(want.external), 'LB IP VS real servers');
  assert.deepEqual(seen.nodePort, servers(want.external), 'node-port VS real servers');
  assert.deepEqual(seen.clusterIP, servers(want.cluster), 'cluster-IP VS real servers');
  assert.equal(seen.client, want.client, 'the external client connecting to the LB IP');
  assert.equal(seen.clientNodePort, want.client, 'the external client connecting to the node port');
  const ext = want.external[0] ?? 'ECONNREFUSED';
  const cluster = want.cluster[0] ?? 'ECONNREFUSED';
  assert.deepEqual(seen.pod, { lb: ext, nodePort: ext, cluster }, "this node's pod connecting to each frontend");
  assert.deepEqual(seen.node, { lb: ext, nodePort: ext, cluster }, 'the node connecting to each frontend');
  assert.equal(seen.localEndpoints, 0, 'the health check node port reports 0 local (ready) endpoints');
}

/**
 * Asserts the VS real servers and who answers the client, for the cluster IP and (when given) the
 * node port. `nodePortDropped`: eTP=Local without a usable local endpoint, the node port VS
 * falls back to `want` but the external client's connection is dropped (ETIMEDOUT).
 */
async function expectBoth(
  s: { vip: string; nodePort: number },
  want: string[],
  withNodePort: boolean,
  note: (v: unknown) => void,
  nodePortDropped = false,
): Promise<void> {
  const seen: Record<string, unknown> = { clusterIP: await realServers(s.vip, 80) };
  if (withNodePort) seen['nodePort'] = await realServers(NODE_IP, s.nodePort);
  seen['answers'] = await backends(s.vip, 80);
  if (withNodePort) seen['nodePortAnswers'] = await backends(NODE_IP, s.nodePort);
  note(seen);
  const servers = want.map((a) => `${a}:8080`);
  assert.deepEqual(seen['clusterIP'], servers, 'cluster-IP VS real servers');
  if (withNodePort) assert.deepEqual(seen['nodePort'], servers, 'node-port VS real servers');
  const answered = want.length > 0 ? want : 'ECONNREFUSED';
  assert.deepEqual(seen['answers'], answered, 'cluster IP answered by');
  if (withNodePort)
    assert.deepEqual(seen['nodePortAnswers'], nodePortDropped ? 'ETIMEDOUT' : answered, 'node port answered by');
}

export const cases: VmCase[] = [
  {
    name: 'setup: pods and client namespaces, backends, the proxier with its companion rules',
    timeoutMs: 300_000,
    async run() {
      await net.start(['10.0.0.2', '10.0.0.3', '10.0.0.4', REMOTE_POD]);
      // node-b's pod: routed to through this node, and its replies (default route) back through it.
      await ip('route', 'add', '10.0.1.0/24', 'via', '10.0.0.2', 'dev', 'vpods');
      // This node's pod 10.0.3.2, behind the client link.
      await ip('-n', 'client', 'addr', 'add', `${LOCAL_POD}/32`, 'dev', 'eth0');
      await ip('route', 'add', '10.0.3.0/24', 'via', '192.168.7.2', 'dev', 'vclient');
      const { deps, close } = openIpvsDeps();
      closers.push(close);
      const nf = netlink(Protocol.NETFILTER, { timeoutMs: 120_000 });
      const ipset = openIpset({ timeoutMs: 10_000 });
      closers.push(() => nf.close(), ipset.close);
      const companion = new CompanionWriter('IPv4', {
        nat: new NftClient({ family: 'ip', table: 'nat', transport: nf, destroy: 'emulate' }),
        filter: new NftClient({ family: 'ip', table: 'filter', transport: nf, destroy: 'emulate' }),
        ipset: ipset.client,
      });
      proxier = new IpvsProxier(
        { family: 'IPv4', gracefulCheckIntervalMs: 500, gracefulTerminationMs: 60_000 },
        { ...deps, companion },
      );
      await proxier.init();
      tracker.onNode(node('node-a', { internal: [NODE_IP] }));
      // The first sync writes the companion rules: under QEMU the first use loads nft_compat and the xt modules.
      const { desired, change } = tracker.checkout();
      assert.deepEqual((await proxier.sync(desired, change, AbortSignal.timeout(240_000))).errors, []);
    },
  },
  {
    name: "iTP=Local + eTP=Local, no local endpoint, a remote ready one and a remote terminating one: the ready one (the external client's node-port connection dropped)",
    timeoutMs: 90_000,
    async run(note) {
      const s = await service('l1', 31, { nodePort: true }, [
        ['10.0.0.2', REMOTE],
        ['10.0.0.3', { ...REMOTE, ...TERMINATING }],
      ]);
      await expectBoth(s, ['10.0.0.2'], true, note, true);
    },
  },
  {
    name: "iTP=Local + eTP=Local, no local endpoint, only remote terminating ones (serving set, and unset): both serve the cluster IP (the external client's node-port connection dropped)",
    timeoutMs: 90_000,
    async run(note) {
      const s = await service('l2', 32, { nodePort: true }, [
        ['10.0.0.2', { ...REMOTE, ...TERMINATING }],
        ['10.0.0.3', { ...REMOTE, ...TERMINATING_SERVING_UNSET }],
      ]);
      await expectBoth(s, ['10.0.0.2', '10.0.0.3'], true, note, true);
    },
  },
  {
    name: "iTP=Local + eTP=Local, only a remote terminating one with serving unset: it serves (not an empty VS; the external client's node-port connection dropped)",
    timeoutMs: 90_000,
    async run(note) {
      const s = await service('l3', 33, { nodePort: true }, [
        ['10.0.0.3', { ...REMOTE, ...TERMINATING_SERVING_UNSET }],
      ]);
      await expectBoth(s, ['10.0.0.3'], true, note, true);
    },
  },
  {
    name: 'iTP=Local + eTP=Local, a local terminating endpoint and a remote ready one: the local one only',
    timeoutMs: 90_000,
    async run(note) {
      const s = await service('l4', 34, { nodePort: true }, [
        ['10.0.0.4', { ...LOCAL, ...TERMINATING }],
        ['10.0.0.2', REMOTE],
      ]);
      await expectBoth(s, ['10.0.0.4'], true, note);
    },
  },
  {
    name: "iTP=Local + eTP=Local, the local endpoint terminating and not serving, a remote terminating one: the remote one (the external client's node-port connection dropped)",
    timeoutMs: 90_000,
    async run(note) {
      const s = await service('l5', 35, { nodePort: true }, [
        ['10.0.0.4', { ...LOCAL, ...GONE }],
        ['10.0.0.3', { ...REMOTE, ...TERMINATING }],
      ]);
      await expectBoth(s, ['10.0.0.3'], true, note, true);
    },
  },
  {
    name: 'ClusterIP-only iTP=Local, remote ready and terminating endpoints only: an empty VS, connections refused',
    timeoutMs: 90_000,
    async run(note) {
      const s = await service('l6', 36, { nodePort: false }, [
        ['10.0.0.2', REMOTE],
        ['10.0.0.3', { ...REMOTE, ...TERMINATING_SERVING_UNSET }],
      ]);
      await expectBoth(s, [], false, note);
    },
  },
  {
    name: 'ClusterIP-only iTP=Local, a local terminating endpoint: it serves',
    timeoutMs: 90_000,
    async run(note) {
      const s = await service('l7', 37, { nodePort: false }, [
        ['10.0.0.4', { ...LOCAL, ...TERMINATING_SERVING_UNSET }],
        ['10.0.0.2', REMOTE],
      ]);
      await expectBoth(s, ['10.0.0.4'], false, note);
    },
  },
  {
    name: "eTP=Local LoadBalancer, only a remote serving-terminating endpoint: the external client is not answered (its connection dropped, though the reply would come back through this node); this node's pod and the node reach it through the LB IP and node port (upstream PR 97081), and through the cluster IP",
    timeoutMs: 240_000,
    async run(note) {
      const s = await lbService('t1', 41, [[REMOTE_POD, { ...REMOTE, ...TERMINATING }]]);
      await expectLb('t1', s, 41, { external: [REMOTE_POD], cluster: [REMOTE_POD], client: 'ETIMEDOUT' }, note);
    },
  },
  {
    name: 'eTP=Local LoadBalancer, only a remote ready endpoint: the same',
    timeoutMs: 90_000,
    async run(note) {
      const s = await lbService('t2', 42, [[REMOTE_POD, REMOTE]]);
      await expectLb('t2', s, 42, { external: [REMOTE_POD], cluster: [REMOTE_POD], client: 'ETIMEDOUT' }, note);
    },
  },
  {
    name: 'eTP=Local LoadBalancer, a local serving-terminating endpoint and a remote ready one: external traffic to the local one, unmasqueraded; the cluster IP to the ready one',
    timeoutMs: 90_000,
    async run(note) {
      const s = await lbService('t3', 43, [
        ['10.0.0.4', { ...LOCAL, ...TERMINATING }],
        [REMOTE_POD, REMOTE],
      ]);
      await expectLb(
        't3',
        s,
        43,
        { external: ['10.0.0.4'], cluster: [REMOTE_POD], client: '10.0.0.4 192.168.7.2' },
        note,
      );
    },
  },
  {
    name: 'eTP=Local LoadBalancer, no usable endpoint on any node: every VS stays without real servers, connections refused (ICMP port unreachable)',
    timeoutMs: 90_000,
    async run(note) {
      const s = await lbService('t4', 44, [
        ['10.0.0.4', { ...LOCAL, ...GONE }],
        [REMOTE_POD, { ...REMOTE, ...GONE }],
      ]);
      await expectLb('t4', s, 44, { external: [], cluster: [], client: 'ECONNREFUSED' }, note);
    },
  },
];

export async function teardown(): Promise<void> {
  net.stop();
  for (const c of closers) c();
  await proxier?.cleanup();
}
