// `kube-proxy-ts trace` checked against real packets for every policy combination the
// nftables kernel tests cover (nft-proxier*.test.ts): the daemon (bin/kube-proxy-ts.js, nftables
// mode, fed from a manifest directory) predicts, then the same packet is sent and must land as
// predicted: on one of the endpoints listed, masqueraded or not as said, or refused/dropped
// for the reason given. ClusterIP, NodePort and no endpoints from the client and a pod are in
// explain-trace.test.ts; here: externalIP, LB with source ranges, eTP/iTP Local, affinity,
// terminating endpoints, detect-local, an unexposed port, an unallocated service IP, and
// masquerade-all.
import { join } from 'node:path';
import test from 'ava';
import type { ExecutionContext } from 'ava';
import type { TraceResult } from '../../src/explain/trace.ts';
import { CLIENT_IP, ECHO, makeCluster, NODE_IP, podIP } from '../helpers/cluster.ts';
import type { Cluster } from '../helpers/cluster.ts';
import { pollUntil, runDaemon } from '../helpers/daemon-process.ts';
import { writeServiceManifests } from '../helpers/manifests.ts';
import { nodeDaemonArgs, startDaemon, tempDir } from '../helpers/standalone.ts';
import { ep, svc } from '../unit/model/helpers.ts';
import type { EpOpts } from '../unit/model/helpers.ts';

const TCP = (port: number, nodePort?: number) => [
  { name: 'http', protocol: 'TCP', port, targetPort: 8080, ...(nodePort ? { nodePort } : {}) },
];
/** pod i's endpoint, on this node (node-a) or another. */
const at = (i: number, node: 'node-a' | 'node-b', o: EpOpts = {}) => ep(podIP(i), { node, ...o });

interface Daemon {
  trace(from: string, to: string): Promise<TraceResult>;
}

async function startProgrammed(t: ExecutionContext, c: Cluster, dir: string, extra: string[] = []): Promise<Daemon> {
  const sock = join(dir, 'control.sock');
  const d = startDaemon(
    t,
    c.node,
    nodeDaemonArgs('nftables', { manifestDir: dir }, ['--control-socket', sock, ...extra]),
  );
  const trace = async (from: string, to: string): Promise<TraceResult> => {
    const r = await runDaemon(c.node, [
      'trace',
      '--from',
      from,
      '--to',
      `${to}/tcp`,
      '-o',
      'json',
      '--control-socket',
      sock,
    ]);
    if (r.code !== 0) throw new Error(`trace ${from} -> ${to}: exit ${r.code}: ${r.stderr}`);
    return JSON.parse(r.stdout) as TraceResult;
  };
  try {
    // Programmed once the first Service answers through its cluster IP.
    await pollUntil(
      'the daemon to program the Services',
      async () =>
        (await c.clientAgent.call<string>(ECHO, 'tcp', '10.96.0.1', 80)).startsWith('pod') ? true : undefined,
      20_000,
    );
  } catch (e) {
    t.log(d.log());
    throw e;
  }
  return { trace };
}

/**
 * Asks trace about a TCP connection from `who` to `to` (ip:port), sends `n` such connections
 * and checks that they landed as predicted. Returns the prediction for further checks.
 */
async function agree(
  t: ExecutionContext,
  c: Cluster,
  d: Daemon,
  who: 'client' | number,
  to: string,
  expect: TraceResult['verdict'],
  n = 6,
): Promise<TraceResult> {
  const src = who === 'client' ? CLIENT_IP : podIP(who);
  const label = `${who === 'client' ? 'client' : `pod${who + 1}`} -> ${to}`;
  const p = await d.trace(src, to);
  t.is(p.verdict, expect, `${label}: trace said ${p.verdict}: ${p.reason}`);
  const agent = who === 'client' ? c.clientAgent : c.podAgents[who]!;
  const [host, port] = to.split(':') as [string, string];
  if (p.verdict !== 'dnat') {
    // One connection is enough to see a drop (it times out) or a refusal.
    const got = await agent.call<string>(ECHO, 'tcp', host, Number(port));
    t.is(got, p.verdict === 'reject' ? 'ECONNREFUSED' : 'ETIMEDOUT', `${label}: ${p.reason}`);
    return p;
  }
  const listed = new Set(p.endpoints.map((e) => e.endpoint));
  for (const a of await agent.call<string[]>(ECHO, 'tcpMany', host, Number(port), n)) {
    const [pod, peer] = a.split(' ');
    t.regex(a, /^pod\d /, `${label}: answered (${a})`);
    const i = Number(pod!.slice(3)) - 1;
    t.true(
      listed.has(`${podIP(i)}:8080`),
      `${label}: ${a} landed on an endpoint trace listed (${[...listed].join(', ')})`,
    );
    const hairpin = p.endpoints.find((e) => e.endpoint === `${podIP(i)}:8080`)?.hairpin === true;
    const masqueraded = peer !== src;
    t.is(masqueraded, p.masquerade!.yes || hairpin, `${label}: ${a}; trace: ${p.masquerade!.why}`);
  }
  return p;
}

test.serial('trace predicts what real packets meet, policy by policy', async (t) => {
  const c = await makeCluster(t, 'xtp', 3);
  const dir = await tempDir(t, 'trace');
  await writeServiceManifests(dir, [
    { svc: svc('web', { clusterIP: '10.96.0.1', ports: TCP(80) }), eps: [at(0, 'node-a'), at(1, 'node-b')] },
    {
      svc: svc('ext', { clusterIP: '10.96.0.2', ports: TCP(80), externalIPs: ['10.50.0.1'] }),
      eps: [at(0, 'node-a'), at(1, 'node-b')],
    },
    {
      svc: svc('lb', {
        clusterIP: '10.96.0.3',
        type: 'LoadBalancer',
        ports: TCP(80, 30003),
        ingress: [{ ip: '10.60.0.1' }],
        sourceRanges: [`${CLIENT_IP}/32`],
      }),
      eps: [at(0, 'node-a'), at(1, 'node-b')],
    },
    {
      svc: svc('lb-closed', {
        clusterIP: '10.96.0.4',
        type: 'LoadBalancer',
        ports: TCP(80, 30004),
        ingress: [{ ip: '10.60.0.2' }],
        sourceRanges: ['192.0.2.0/24'],
      }),
      eps: [at(0, 'node-a')],
    },
    {
      svc: svc('etp', {
        clusterIP: '10.96.0.5',
        type: 'NodePort',
        ports: TCP(80, 30005),
        eTP: 'Local',
        externalIPs: ['10.50.0.5'],
      }),
      eps: [at(0, 'node-a'), at(1, 'node-b')],
    },
    {
      svc: svc('etp-none', { clusterIP: '10.96.0.6', type: 'NodePort', ports: TCP(80, 30006), eTP: 'Local' }),
      eps: [at(1, 'node-b'), at(2, 'node-b')],
    },
    {
      svc: svc('itp', { clusterIP: '10.96.0.7', ports: TCP(80), iTP: 'Local' }),
      eps: [at(0, 'node-a'), at(1, 'node-b')],
    },
    { svc: svc('itp-none', { clusterIP: '10.96.0.8', ports: TCP(80), iTP: 'Local' }), eps: [at(1, 'node-b')] },
    {
      svc: svc('sticky', { clusterIP: '10.96.0.9', ports: TCP(80), affinity: 'ClientIP', timeout: 600 }),
      eps: [at(0, 'node-a'), at(1, 'node-b'), at(2, 'node-b')],
    },
    {
      svc: svc('term', { clusterIP: '10.96.0.10', ports: TCP(80) }),
      eps: [
        at(0, 'node-a', { ready: false, serving: true, terminating: true }),
        at(1, 'node-b', { ready: false, serving: false, terminating: true }),
      ],
    },
    { svc: svc('empty', { clusterIP: '10.96.0.11', ports: TCP(80) }), eps: [] },
  ]);
  const d = await startProgrammed(t, c, dir);

  // externalIP from outside: masqueraded, both endpoints.
  const ext = await agree(t, c, d, 'client', '10.50.0.1:80', 'dnat');
  t.is(ext.frontend?.kind, 'external-ip');
  t.is(ext.endpoints.length, 2);

  // LB IP: an allowed source reaches it, another range's Service drops it (firewall-check).
  t.is((await agree(t, c, d, 'client', '10.60.0.1:80', 'dnat')).frontend?.kind, 'load-balancer');
  t.regex((await agree(t, c, d, 'client', '10.60.0.2:80', 'drop')).reason, /loadBalancerSourceRanges/);
  // Source ranges guard the LB IP only: its node port still answers.
  await agree(t, c, d, 'client', `${NODE_IP}:30004`, 'dnat');

  // eTP=Local from outside: the local endpoint only, the client's address kept; from a pod
  // (short-circuit) any endpoint; none local: dropped.
  const local = await agree(t, c, d, 'client', `${NODE_IP}:30005`, 'dnat');
  t.deepEqual(
    local.endpoints.map((e) => e.endpoint),
    [`${podIP(0)}:8080`],
  );
  t.false(local.masquerade!.yes);
  t.false((await agree(t, c, d, 'client', '10.50.0.5:80', 'dnat')).masquerade!.yes);
  t.regex((await agree(t, c, d, 'client', `${NODE_IP}:30006`, 'drop')).reason, /Local and no endpoint on this node/);
  // The cluster IP of an eTP=Local Service still uses every endpoint.
  t.is((await agree(t, c, d, 'client', '10.96.0.5:80', 'dnat')).endpoints.length, 2);

  // iTP=Local: the local endpoint only, from a pod (not masqueraded: detect-local) and from
  // outside; none local: dropped.
  const itp = await agree(t, c, d, 2, '10.96.0.7:80', 'dnat');
  t.deepEqual(
    itp.endpoints.map((e) => e.endpoint),
    [`${podIP(0)}:8080`],
  );
  t.false(itp.masquerade!.yes);
  await agree(t, c, d, 'client', '10.96.0.7:80', 'dnat');
  t.regex((await agree(t, c, d, 'client', '10.96.0.8:80', 'drop')).reason, /Local and no endpoint on this node/);

  // Session affinity: every connection of one client lands on the same endpoint.
  const sticky = await agree(t, c, d, 'client', '10.96.0.9:80', 'dnat', 8);
  t.is(sticky.endpoints.length, 3);
  const again = await c.clientAgent.call<string[]>(ECHO, 'tcpMany', '10.96.0.9', 80, 8);
  t.is(new Set(again.map((a) => a.split(' ')[0])).size, 1, `one endpoint for one client: ${again.join(', ')}`);

  // Terminating: no ready endpoint, so the serving terminating one (not the non-serving one).
  const term = await agree(t, c, d, 'client', '10.96.0.10:80', 'dnat');
  t.deepEqual(
    term.endpoints.map((e) => e.endpoint),
    [`${podIP(0)}:8080`],
  );

  // Detect-local: a pod's own address is kept, except to itself (hairpin, masqueraded).
  t.false((await agree(t, c, d, 1, '10.96.0.1:80', 'dnat', 8)).masquerade!.yes);

  // Refused and dropped: no endpoints, a port the Service does not expose, an unallocated service IP.
  t.regex((await agree(t, c, d, 'client', '10.96.0.11:80', 'reject')).reason, /no ready/);
  t.regex((await agree(t, c, d, 'client', '10.96.0.1:81', 'reject')).reason, /exposes no TCP port 81/);
  t.regex((await agree(t, c, d, 'client', '10.96.0.99:80', 'drop')).reason, /unallocated service IP/);
  // Not a Service at all: untouched (the pod answers directly).
  t.is((await d.trace(CLIENT_IP, `${podIP(0)}:8080`)).verdict, 'untouched');
});

test.serial('masquerade-all: trace says masqueraded from a pod too, and it is', async (t) => {
  const c = await makeCluster(t, 'xtm', 2);
  const dir = await tempDir(t, 'trace-ma');
  await writeServiceManifests(dir, [
    { svc: svc('web', { clusterIP: '10.96.0.1', ports: TCP(80) }), eps: [at(0, 'node-a'), at(1, 'node-b')] },
  ]);
  const d = await startProgrammed(t, c, dir, ['--masquerade-all']);
  const p = await agree(t, c, d, 1, '10.96.0.1:80', 'dnat', 8);
  t.true(p.masquerade!.yes);
  t.regex(p.masquerade!.why, /masquerade-all|masqueradeAll/i);
});
