// The policy cases of `kube-proxy-ts trace` against real packets, in every proxy mode: the
// daemon (manifest directory, node-a of a namespace cluster) predicts, then the same
// connection is made and must land as predicted: on one of the endpoints listed, masqueraded
// or not as said; refused (reject), lost (drop), or routed on untouched to the cluster's
// upstream router `gw`, which answers every service address in this test (so "untouched" is
// told apart from a drop). What each mode does is written here, case by case, from the
// mode's rules and upstream's (not from src/explain/modes.ts, which it checks).
//
// Run by explain-trace-policies.test.ts (nftables, iptables, userspace in namespaces) and by
// test/vm/scenarios/ipvs-trace.ts (IPVS, Debian's kernel under QEMU).
import { askDaemon } from '../../src/control/client.ts';
import type { TraceResult } from '../../src/explain/trace.ts';
import type { ProxyMode } from '../../src/proxier/types.ts';
import { CLIENT_IP, ECHO, NODE_IP, podIP } from '../helpers/cluster.ts';
import type { Cluster } from '../helpers/cluster.ts';
import { ep, svc } from '../unit/model/helpers.ts';
import type { EpOpts } from '../unit/model/helpers.ts';
import type { Endpoint, Service } from '../../src/model/k8s.ts';

/** The assertions used (ava's ExecutionContext has them; the VM scenario maps them to node:assert). */
export interface Check {
  is(actual: unknown, expected: unknown, message?: string): unknown;
  regex(s: string, re: RegExp, message?: string): unknown;
  true(v: unknown, message?: string): unknown;
  false(v: unknown, message?: string): unknown;
  deepEqual(actual: unknown, expected: unknown, message?: string): unknown;
}

export interface PolicyEnv {
  readonly c: Cluster;
  /** trace of a TCP connection from `from` to `to` (ip:port), as the daemon answers it. */
  trace(from: string, to: string): Promise<TraceResult>;
}

/** What trace answers over the control socket (the CLI prints this object with -o json). */
export function traceOver(sock: string): PolicyEnv['trace'] {
  return async (from, to) => {
    const [host, port] = to.split(':') as [string, string];
    return (await askDaemon(sock, { op: 'trace', from, to: host, port: Number(port), protocol: 'TCP' })) as TraceResult;
  };
}

const TCP = (port: number, nodePort?: number) => [
  { name: 'http', protocol: 'TCP', port, targetPort: 8080, ...(nodePort ? { nodePort } : {}) },
];
/** pod i's endpoint, on this node (node-a) or another. */
const at = (i: number, node: 'node-a' | 'node-b', o: EpOpts = {}) => ep(podIP(i), { node, ...o });

export const POLICY_SERVICES: readonly { svc: Service; eps: Endpoint[] }[] = [
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
];

/** `gw` answers every service address (and the ports used here) as "gw <peer>": where untouched packets end. */
export async function gatewayAnswers(c: Cluster): Promise<void> {
  await c.gw.run('ip', 'route', 'add', 'local', '10.96.0.0/16', 'dev', 'lo');
  await c.gw.run('ip', 'route', 'add', 'default', 'via', '10.9.0.1');
  const agent = await c.gw.agent();
  for (const port of [80, 81]) await agent.call(ECHO, 'serve', 'gw', port);
}

type Fate = 'fwd' | 'drop' | 'reject' | 'untouched';

/** The fate of one case in each mode: fwd is to an endpoint (DNAT, or the userspace proxy socket). */
type ByMode<T> = Readonly<Record<ProxyMode, T>>;
const all = <T>(v: T): ByMode<T> => ({ nftables: v, iptables: v, ipvs: v, userspace: v });

/** What a refused connection looks like: the kernel's refusal, or the userspace proxy's reset of an accepted one. */
function refused(mode: ProxyMode, got: string): boolean {
  return mode === 'userspace' ? got === 'ECONNRESET' || got === '' : got === 'ECONNREFUSED';
}

/**
 * Asks trace about a TCP connection from `who` to `to` (ip:port), checks the verdict the mode
 * gives, sends `n` such connections and checks that they landed as predicted. Returns the prediction.
 */
async function agree(
  t: Check,
  env: PolicyEnv,
  mode: ProxyMode,
  who: 'client' | number,
  to: string,
  expect: Fate,
  n = 6,
): Promise<TraceResult> {
  const { c } = env;
  const src = who === 'client' ? CLIENT_IP : podIP(who);
  const label = `${mode}: ${who === 'client' ? 'client' : `pod${who + 1}`} -> ${to}`;
  const p = await env.trace(src, to);
  const verdict = expect === 'fwd' ? (mode === 'userspace' ? 'proxy' : 'dnat') : expect;
  t.is(p.verdict, verdict, `${label}: trace said ${p.verdict}: ${p.reason}`);
  const agent = who === 'client' ? c.clientAgent : c.podAgents[who]!;
  const [host, port] = to.split(':') as [string, string];
  if (p.verdict === 'untouched') {
    // Routed on as any packet: the upstream router answers, seeing the client itself.
    t.is(await agent.call<string>(ECHO, 'tcp', host, Number(port)), `gw ${src}`, `${label}: ${p.reason}`);
    return p;
  }
  if (p.verdict === 'drop' || p.verdict === 'reject') {
    // One connection is enough to see a drop (it times out) or a refusal.
    const got = await agent.call<string>(ECHO, 'tcp', host, Number(port));
    if (p.verdict === 'drop') t.is(got, 'ETIMEDOUT', `${label}: ${p.reason}`);
    else t.true(refused(mode, got), `${label}: refused as trace said (got ${JSON.stringify(got)}): ${p.reason}`);
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

const endpointsOf = (p: TraceResult): string[] => p.endpoints.map((e) => e.endpoint).sort();

/** Every case, in `mode`; the daemon must have programmed POLICY_SERVICES and the gateway must answer. */
export async function runPolicyCases(t: Check, env: PolicyEnv, mode: ProxyMode): Promise<void> {
  const { c } = env;
  const us = mode === 'userspace';
  const go = (who: 'client' | number, to: string, expect: ByMode<Fate>, n?: number) =>
    agree(t, env, mode, who, to, expect[mode], n);

  // externalIP from outside: masqueraded, both endpoints.
  const ext = await go('client', '10.50.0.1:80', all('fwd'));
  t.is(ext.frontend?.kind, 'external-ip');
  t.is(ext.endpoints.length, 2);

  // LB IP: an allowed source reaches it; another range's Service drops it (the userspace mode has no source ranges).
  t.is((await go('client', '10.60.0.1:80', all('fwd'))).frontend?.kind, 'load-balancer');
  const closed = await go('client', '10.60.0.2:80', { ...all<Fate>('drop'), userspace: 'fwd' });
  if (!us) t.regex(closed.reason, /loadBalancerSourceRanges/);
  // Source ranges guard the LB IP only: its node port still answers.
  await go('client', `${NODE_IP}:30004`, all('fwd'));

  // eTP=Local from outside: the local endpoint only, the client's address kept; none local:
  // dropped (IPVS too, by KUBE-NO-LOCAL-ENDPOINTS: its fallback to the cluster endpoints is for
  // this node's pods and the node; userspace: no policies, the node's address).
  const local = await go('client', `${NODE_IP}:30005`, all('fwd'));
  t.deepEqual(endpointsOf(local), us ? [`${podIP(0)}:8080`, `${podIP(1)}:8080`] : [`${podIP(0)}:8080`]);
  t.is(local.masquerade!.yes, us);
  t.is((await go('client', '10.50.0.5:80', all('fwd'))).masquerade!.yes, us);
  const etpNone = await go('client', `${NODE_IP}:30006`, {
    nftables: 'drop',
    iptables: 'drop',
    ipvs: 'drop',
    userspace: 'fwd',
  });
  if (etpNone.verdict === 'drop') t.regex(etpNone.reason, /Local and no endpoint on this node/);
  else t.deepEqual(endpointsOf(etpNone), [`${podIP(1)}:8080`, `${podIP(2)}:8080`]);
  // The cluster IP of an eTP=Local Service still uses every endpoint.
  t.is((await go('client', '10.96.0.5:80', all('fwd'))).endpoints.length, 2);

  // iTP=Local: the local endpoint only, from a pod (not masqueraded: detect-local) and from
  // outside; none local: dropped (IPVS: nothing to fall back to, an empty virtual server
  // refuses). The userspace proxy has no cluster endpoints for such a Service: it resets.
  const itp = await go(2, '10.96.0.7:80', { ...all<Fate>('fwd'), userspace: 'reject' });
  if (!us) {
    t.deepEqual(endpointsOf(itp), [`${podIP(0)}:8080`]);
    t.false(itp.masquerade!.yes);
  }
  await go('client', '10.96.0.7:80', { ...all<Fate>('fwd'), userspace: 'reject' });
  const itpNone = await go('client', '10.96.0.8:80', {
    nftables: 'drop',
    iptables: 'drop',
    ipvs: 'reject',
    userspace: 'reject',
  });
  if (itpNone.verdict === 'drop') t.regex(itpNone.reason, /Local and no endpoint on this node/);

  // Session affinity: every connection of one client lands on the same endpoint.
  const sticky = await go('client', '10.96.0.9:80', all('fwd'), 8);
  t.is(sticky.endpoints.length, 3);
  const again = await c.clientAgent.call<string[]>(ECHO, 'tcpMany', '10.96.0.9', 80, 8);
  t.is(new Set(again.map((a) => a.split(' ')[0])).size, 1, `${mode}: one endpoint for one client: ${again.join(', ')}`);

  // Terminating: no ready endpoint, so the serving terminating one (not the non-serving one).
  t.deepEqual(endpointsOf(await go('client', '10.96.0.10:80', all('fwd'))), [`${podIP(0)}:8080`]);

  // Detect-local: a pod's own address is kept, except to itself (hairpin, masqueraded); userspace: never kept.
  // (pod1 is web's endpoint on this node: IPVS masquerades hairpin connections to local endpoints only.)
  const self = await go(0, '10.96.0.1:80', all('fwd'), 8);
  t.is(self.masquerade!.yes, us);
  t.deepEqual(
    self.endpoints.filter((e) => e.hairpin).map((e) => e.endpoint),
    us ? [] : [`${podIP(0)}:8080`],
  );

  // No endpoints: refused in every mode.
  t.regex((await go('client', '10.96.0.11:80', all('reject'))).reason, /no ready/);
  // A port the Service does not expose: refused where a rule says so, else routed on untouched.
  const port = await go('client', '10.96.0.1:81', {
    nftables: 'reject',
    iptables: 'untouched',
    ipvs: 'reject',
    userspace: 'untouched',
  });
  t.regex(port.reason, /exposes no TCP port 81/);
  // An unallocated service IP: dropped by the nftables mode only.
  const unalloc = await go('client', '10.96.0.99:80', {
    nftables: 'drop',
    iptables: 'untouched',
    ipvs: 'untouched',
    userspace: 'untouched',
  });
  t.regex(unalloc.reason, /unallocated service IP/);
  // Not a Service at all: untouched (the pod answers directly).
  const direct = await env.trace(CLIENT_IP, `${podIP(0)}:8080`);
  t.is(direct.verdict, 'untouched');
  t.is(await c.clientAgent.call<string>(ECHO, 'tcp', podIP(0), 8080), `pod1 ${CLIENT_IP}`);
}
