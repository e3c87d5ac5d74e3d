// The real daemon in IPVS mode against Debian's 6.1 kernel, inside the QEMU VM (run by
// run-cases.ts from ipvs-daemon.test.ts). Unlike ipvs-proxier.ts, nothing is driven in-process:
// the daemon runs as the packaged binary runs it (this repository's Node 24 with the V8 flags
// of src/daemon/v8-options.ts, bin/kube-proxy-ts.js, `--proxy-mode ipvs`), in its own network
// namespace "node", fed by the test API server (test/helpers/fake-apiserver.ts, the real
// list/watch protocol) through a kubeconfig with a bearer token: every Service, EndpointSlice
// and Node change below is an API write the daemon sees as a watch event. Every assertion
// reads the kernel with an independent tool run in that namespace (ipvsadm -Ln, ipset list,
// iptables-nft-save, ip6tables-nft-save, conntrack -L, ip addr) or sends real packets.
//
//   guest root namespace: this process and the API server (192.168.9.1) ── vapi ── api0 (192.168.9.2, node)
//
//   client (192.168.7.2, 192.168.7.3, fd00:7::2) ── vclient ── node (192.168.7.1, fd00:7::1; daemon, kube-ipvs0)
//      │ frompods 192.168.8.2                                   │ 10.0.0.1, fd00:10::1; 10.0.1.0/24 via 10.0.0.2
//      │                                                      vpods
//      │                                                        │
//      └── toclient 192.168.8.1 ── pods: 10.0.0.2, 10.0.0.3, 10.0.0.4, fd00:10::2, fd00:10::3, and 10.0.1.2
//                                 (TCP 8080 "<local> <peer>", TCP 8081 greeting + echo, UDP 5353 "<addr> <peer>")
//
// 10.0.1.2 stands for a pod on another node (its EndpointSlice entry says nodeName node-b; the
// daemon is node-a): this node reaches it by a route, but its replies take the other node's
// way, straight to the client (a policy route in pods: from 10.0.1.2 via toclient), as they
// would in a cluster. An externalTrafficPolicy=Local Service whose only endpoint is that pod
// forwards no external traffic: the companion rules drop the client's connection before IPVS
// (KUBE-NO-LOCAL-ENDPOINTS), while the VSes keep the fallback for this node's pods.
//
// The node namespace has IPv6 forwarding on, as a node's network plugin sets it: the daemon
// writes net/ipv4/ip_forward (as upstream's IPVS mode) but nothing for IPv6. The client is
// outside --cluster-cidr, so its ClusterIP traffic is masqueraded to the node (upstream's
// `! -s CLUSTER-CIDR ... KUBE-CLUSTER-IP ... -j KUBE-MARK-MASQ`).
//
// Conntrack on 6.1 in IPVS mode (what the UDP cases found): when a real server is deleted,
// IPVS itself expires its connections and their conntrack entries (expire_nodest_conn=1,
// which the daemon sets, and the kernel's expire_nodest_conn work, since 5.9), and while a UDP
// virtual server has no real server IPVS drops datagrams before conntrack confirms an entry.
// So for endpoint replacement the flusher finds nothing left (matched=0); its own deletions
// are shown on an entry IPVS has no connection for (made with conntrack -I), as a kernel
// before 5.9 would leave behind.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import readline from 'node:readline';
import { DAEMON_V8_OPTIONS } from '../../../src/daemon/v8-options.ts';
import { FakeApiServer } from '../../helpers/fake-apiserver.ts';
import type { KObject } from '../../helpers/fake-apiserver.ts';
import type { VmCase } from '../run-cases.ts';
import { ip, ipvsadmLines, must, run } from './vm-shell.ts';
import type { Run } from './vm-shell.ts';

const NODE_BIN = process.execPath;
const BIN = new URL('../../../bin/kube-proxy-ts.js', import.meta.url).pathname;
const AGENT = new URL('./ipvs-daemon-agent.mjs', import.meta.url).pathname;
const RUN_DIR = process.env.RUN_DIR ?? '/tmp';
const WORK = '/tmp/kpts-ipvs-daemon';
const KUBECONFIG = join(WORK, 'kubeconfig');
const API_HOST = '192.168.9.1';
const API_TOKEN = 'kube-proxy-vm-token';
const NODE_NAME = 'node-a';
const NODE_IP = '192.168.7.1';
const NODE_IP6 = 'fd00:7::1';
/** The client's second address: outside the load balancer's source ranges. */
const CLIENT_OTHER = '192.168.7.3';
/** A pod of another node (see the top). */
const REMOTE_POD = '10.0.1.2';
const CLUSTER_CIDR4 = '10.244.0.0/16';
const CLUSTER_CIDR6 = 'fd00:244::/56';
const DAEMON_ARGS = [
  '--proxy-mode',
  'ipvs',
  '--kubeconfig',
  KUBECONFIG,
  '--hostname-override',
  NODE_NAME,
  // Both families: the cluster CIDRs say which ones the node serves (src/daemon/families.ts).
  '--cluster-cidr',
  `${CLUSTER_CIDR4},${CLUSTER_CIDR6}`,
  '--v',
  '2',
  // Per-Service traffic counters (issue 19), read from IPVS stats at scrape time.
  '--service-traffic-metrics',
];

/** A tool inside the node namespace. */
const inNode = (cmd: string, ...a: string[]): Promise<Run> => run('/usr/sbin/ip', ['netns', 'exec', 'node', cmd, ...a]);
async function mustInNode(cmd: string, ...a: string[]): Promise<string> {
  const r = await inNode(cmd, ...a);
  if (r.code !== 0) throw new Error(`(node) ${cmd} ${a.join(' ')} exited ${r.code}: ${r.stderr.trim()}`);
  return r.stdout;
}

/** `ipvsadm -Ln` lines of the node, squeezed, headers dropped, connection counters cut off. */
const ipvsShape = async (...args: string[]): Promise<string[]> =>
  ipvsadmLines(await mustInNode('/usr/sbin/ipvsadm', '-Ln', ...args), { counters: false });

/** One virtual server's lines ("TCP 10.96.0.10:80 rr", then its real servers sorted); [] when absent. */
async function vs(proto: 'TCP' | 'UDP', addr: string): Promise<string[]> {
  const r = await inNode('/usr/sbin/ipvsadm', '-Ln', proto === 'TCP' ? '-t' : '-u', addr);
  if (r.code !== 0) return [];
  const lines = ipvsadmLines(r.stdout, { counters: false });
  return [lines[0]!, ...lines.slice(1).sort()];
}

async function ipsetMembers(name: string): Promise<string[]> {
  const out = await mustInNode('/usr/sbin/ipset', 'list', name);
  const i = out.indexOf('Members:\n');
  return out
    .slice(i + 9)
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean)
    .sort();
}

/** `ipset list -t` of the node as name -> { type, header }. */
async function ipsetHeaders(): Promise<Map<string, { type: string; header: string }>> {
  const out = await mustInNode('/usr/sbin/ipset', 'list', '-t');
  const m = new Map<string, { type: string; header: string }>();
  for (const block of out.split(/\n(?=Name: )/)) {
    const name = /^Name: (\S+)/m.exec(block)?.[1];
    if (name)
      m.set(name, { type: /^Type: (\S+)/m.exec(block)?.[1] ?? '', header: /^Header: (.*)$/m.exec(block)?.[1] ?? '' });
  }
  return m;
}

/** iptables-nft-save / ip6tables-nft-save of the node, counters cut off. */
async function save(family: 4 | 6): Promise<string> {
  return (await mustInNode(family === 4 ? '/usr/sbin/iptables-nft-save' : '/usr/sbin/ip6tables-nft-save')).replace(
    / \[\d+:\d+\]/g,
    '',
  );
}

/** Per table: our chains (":KUBE-..." declarations) and every rule line that mentions KUBE-. */
function kubeShape(text: string): Record<string, { chains: string[]; rules: string[] }> {
  const out: Record<string, { chains: string[]; rules: string[] }> = {};
  let table = '';
  for (const l of text.split('\n')) {
    if (l.startsWith('*')) {
      table = l.slice(1);
      out[table] = { chains: [], rules: [] };
    } else if (l.startsWith(':KUBE-')) out[table]!.chains.push(l.split(' ')[0]!.slice(1));
    else if (l.startsWith('-A ') && l.includes('KUBE-')) out[table]!.rules.push(l);
  }
  for (const t of Object.values(out)) {
    t.chains.sort();
    t.rules.sort();
  }
  for (const [k, v] of Object.entries(out)) if (v.chains.length === 0 && v.rules.length === 0) delete out[k];
  return out;
}

/** The IPv6 text written as IPv4 would be: set names, loopback range, cluster CIDR, ICMP reject type. */
const v6AsV4 = (text: string): string =>
  text
    .replaceAll('KUBE-6-', 'KUBE-')
    .replaceAll('::1/128', '127.0.0.0/8')
    .replaceAll(CLUSTER_CIDR6, CLUSTER_CIDR4)
    .replaceAll('icmp6-port-unreachable', 'icmp-port-unreachable');

interface CtEntry {
  id: string;
  proto: string;
  orig: { src: string; dst: string; sport: string; dport: string };
  reply: { src: string; dst: string; sport: string; dport: string };
  line: string;
}

/** `conntrack -L -o id` of the node, parsed (first src/dst/ports: original, second: reply). */
async function conntrack(...args: string[]): Promise<CtEntry[]> {
  const r = await inNode('/usr/sbin/conntrack', '-L', '-o', 'id', ...args);
  if (r.code !== 0) throw new Error(`conntrack -L: ${r.stderr}`);
  return r.stdout
    .split('\n')
    .filter((l) => l.includes('src='))
    .map((line) => {
      const all = (k: string): string[] => [...line.matchAll(new RegExp(`\\b${k}=(\\S+)`, 'g'))].map((m) => m[1]!);
      const [s, d, sp, dp] = [all('src'), all('dst'), all('sport'), all('dport')];
      return {
        id: /\bid=(\d+)/.exec(line)?.[1] ?? '',
        proto: line.split(/\s+/)[0]!,
        orig: { src: s[0]!, dst: d[0]!, sport: sp[0] ?? '', dport: dp[0] ?? '' },
        reply: { src: s[1]!, dst: d[1]!, sport: sp[1] ?? '', dport: dp[1] ?? '' },
        line,
      };
    });
}

/** Thrown by an until() check to stop waiting at once (the daemon died). */
class GiveUp extends Error {}

async function until<T>(
  what: string,
  check: () => Promise<T | undefined | false>,
  ms: number,
  everyMs = 250,
): Promise<T> {
  const end = Date.now() + ms;
  let last: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v !== undefined && v !== false) return v;
    } catch (e) {
      if (e instanceof GiveUp) throw e;
      last = e;
    }
    if (Date.now() > end)
      throw new Error(`timed out after ${ms} ms waiting for ${what}${last ? `: ${String(last)}` : ''}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

// --- agents: JSON lines over stdin/stdout of a process in a namespace -----------------------

const children: ChildProcess[] = [];

class Agent {
  private readonly waiting = new Map<number, (v: Record<string, unknown>) => void>();
  private next = 1;
  private readonly child: ChildProcess;
  private constructor(child: ChildProcess) {
    this.child = child;
  }

  static async start(ns: string): Promise<Agent> {
    const child = spawn('/usr/sbin/ip', ['netns', 'exec', ns, NODE_BIN, AGENT, 'agent'], {
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    children.push(child);
    const a = new Agent(child);
    const rl = readline.createInterface({ input: child.stdout! });
    await new Promise<void>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`agent in ${ns} did not start`)), 90_000);
      rl.once('line', () => {
        clearTimeout(t);
        resolve();
      });
    });
    rl.on('line', (l) => {
      const v = JSON.parse(l) as Record<string, unknown>;
      if (typeof v.id === 'number') a.waiting.get(v.id)?.(v);
    });
    return a;
  }

  ask(q: Record<string, unknown>, timeoutMs = 40_000): Promise<Record<string, unknown>> {
    const id = this.next++;
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`agent did not answer ${JSON.stringify(q)}`)), timeoutMs);
      this.waiting.set(id, (v) => {
        clearTimeout(t);
        this.waiting.delete(id);
        resolve(v);
      });
      this.child.stdin!.write(JSON.stringify({ ...q, id }) + '\n');
    });
  }

  /** n connections (or datagrams) one after the other, each answered; `from`: the local address. */
  async many(op: 'tcp' | 'udp', host: string, port: number, n: number, from?: string): Promise<string[]> {
    const r = await this.ask({ op, host, port, n, ...(from ? { from } : {}) });
    if (r.error)
      throw new Error(`${op} ${host} ${port}${from ? ` from ${from}` : ''}: ${String(r.error)} (${String(r.code)})`);
    return r.answers as string[];
  }

  /** One TCP connection that must NOT be answered: its error code (the agent gives up after 4 s). */
  async unanswered(host: string, port: number, from?: string): Promise<string> {
    const r = await this.ask({ op: 'tcp', host, port, n: 1, ...(from ? { from } : {}) });
    if (!r.error)
      throw new Error(`tcp ${host} ${port}${from ? ` from ${from}` : ''} was answered: ${JSON.stringify(r.answers)}`);
    return String(r.code);
  }

  async http(
    url: string,
    from?: string,
  ): Promise<{ status: number; type: string; headers: Record<string, string>; body: string }> {
    const r = await this.ask({ op: 'http', url, ...(from ? { from } : {}) });
    if (r.error) throw new Error(`GET ${url}: ${String(r.error)} (${String(r.code)})`);
    return r as unknown as { status: number; type: string; headers: Record<string, string>; body: string };
  }
}

let client: Agent;
let nodeAgent: Agent;
const backendOf = (answer: string): string => answer.split(' ')[0]!;
const peerOf = (answer: string): string => answer.split(' ')[1]!;

// --- API objects -----------------------------------------------------------------------------

let api: FakeApiServer;

interface Svc {
  name: string;
  /** Default: LoadBalancer with ingress, NodePort with a nodePort, else ClusterIP. */
  type?: 'ClusterIP' | 'NodePort' | 'LoadBalancer';
  /** One per family, in the Service's family order. */
  clusterIPs: string[];
  protocol?: 'TCP' | 'UDP';
  port: number;
  targetPort: number;
  nodePort?: number;
  externalIPs?: string[];
  /** status.loadBalancer.ingress IPs. */
  ingress?: string[];
  loadBalancerSourceRanges?: string[];
  externalTrafficPolicyLocal?: boolean;
  healthCheckNodePort?: number;
  /** sessionAffinity ClientIP with this timeout. */
  affinitySeconds?: number;
  /** Endpoints per address type. */
  endpoints: { IPv4?: string[]; IPv6?: string[] };
  /** Endpoint address -> the node it runs on (EndpointSlice nodeName); unset: no nodeName. */
  nodes?: Record<string, string>;
}

function serviceObject(s: Svc): KObject {
  const protocol = s.protocol ?? 'TCP';
  const families = s.clusterIPs.map((a) => (a.includes(':') ? 'IPv6' : 'IPv4'));
  const type = s.type ?? (s.ingress ? 'LoadBalancer' : s.nodePort ? 'NodePort' : 'ClusterIP');
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: s.name, namespace: 'default' },
    spec: {
      type,
      clusterIP: s.clusterIPs[0],
      clusterIPs: s.clusterIPs,
      ipFamilies: families,
      ipFamilyPolicy: families.length > 1 ? 'RequireDualStack' : 'SingleStack',
      ports: [
        {
          name: 'p',
          protocol,
          port: s.port,
          targetPort: s.targetPort,
          ...(s.nodePort ? { nodePort: s.nodePort } : {}),
        },
      ],
      ...(s.externalIPs ? { externalIPs: s.externalIPs } : {}),
      ...(s.loadBalancerSourceRanges ? { loadBalancerSourceRanges: s.loadBalancerSourceRanges } : {}),
      ...(type !== 'ClusterIP' ? { externalTrafficPolicy: s.externalTrafficPolicyLocal ? 'Local' : 'Cluster' } : {}),
      ...(s.healthCheckNodePort ? { healthCheckNodePort: s.healthCheckNodePort } : {}),
      sessionAffinity: s.affinitySeconds ? 'ClientIP' : 'None',
      ...(s.affinitySeconds ? { sessionAffinityConfig: { clientIP: { timeoutSeconds: s.affinitySeconds } } } : {}),
    },
    status: { loadBalancer: s.ingress ? { ingress: s.ingress.map((ip) => ({ ip })) } : {} },
  };
}

function sliceObjects(s: Svc): KObject[] {
  const protocol = s.protocol ?? 'TCP';
  return Object.entries(s.endpoints).map(([type, addrs]) => ({
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: {
      name: `${s.name}-${type.toLowerCase()}`,
      namespace: 'default',
      labels: { 'kubernetes.io/service-name': s.name },
    },
    addressType: type,
    ports: [{ name: 'p', protocol, port: s.targetPort }],
    endpoints: addrs.map((a) => ({
      addresses: [a],
      conditions: { ready: true },
      ...(s.nodes?.[a] ? { nodeName: s.nodes[a] } : {}),
    })),
  }));
}

/** The object without what the server sets (resourceVersion, uid, creationTimestamp). */
const content = (o: KObject | undefined): string => {
  if (!o) return '';
  const { metadata, ...rest } = o;
  const { name, namespace, labels } = (metadata ?? {}) as KObject;
  return JSON.stringify({ ...rest, metadata: { name, namespace, labels } });
};

/**
 * Makes the API server hold this Service and exactly its EndpointSlices (one per address
 * type): an object is written only when it changed, so the daemon sees the watch events a
 * controller's update would make (ADDED, MODIFIED, DELETED) and no others.
 */
function put(s: Svc): void {
  const wanted = [serviceObject(s), ...sliceObjects(s)];
  for (const o of wanted) {
    const prev = api.get(String(o['kind']), `default/${String(o['metadata'].name)}`);
    if (content(prev) !== content(o)) api.upsert(o);
  }
  const names = new Set(wanted.map((o) => String(o['metadata'].name)));
  for (const [key, o] of api.list('EndpointSlice')) {
    if (o['metadata']?.labels?.['kubernetes.io/service-name'] === s.name && !names.has(String(o['metadata'].name)))
      api.remove('EndpointSlice', key);
  }
}

/** Deletes a Service and its EndpointSlices through the API. */
function removeService(name: string): void {
  api.remove('Service', `default/${name}`);
  for (const [key, o] of api.list('EndpointSlice'))
    if (o['metadata']?.labels?.['kubernetes.io/service-name'] === name) api.remove('EndpointSlice', key);
}

const WEB: Svc = {
  name: 'web',
  clusterIPs: ['10.96.0.10'],
  port: 80,
  targetPort: 8080,
  endpoints: { IPv4: ['10.0.0.2', '10.0.0.3'] },
};
const NP: Svc = {
  name: 'np',
  clusterIPs: ['10.96.0.11'],
  port: 80,
  targetPort: 8080,
  nodePort: 30080,
  endpoints: { IPv4: ['10.0.0.2', '10.0.0.3'] },
};
const LONG: Svc = {
  name: 'long',
  clusterIPs: ['10.96.0.14'],
  port: 81,
  targetPort: 8081,
  endpoints: { IPv4: ['10.0.0.4'] },
};
const DNS: Svc = {
  name: 'dns',
  clusterIPs: ['10.96.0.53'],
  protocol: 'UDP',
  port: 53,
  targetPort: 5353,
  endpoints: { IPv4: ['10.0.0.2'] },
};
const DNS2: Svc = {
  name: 'dns2',
  clusterIPs: ['10.96.0.54'],
  protocol: 'UDP',
  port: 53,
  targetPort: 5353,
  endpoints: { IPv4: ['10.0.0.4'] },
};
const DNS3: Svc = {
  name: 'dns3',
  clusterIPs: ['10.96.0.55'],
  protocol: 'UDP',
  port: 53,
  targetPort: 5353,
  endpoints: {},
};
const WEB6: Svc = {
  name: 'web6',
  clusterIPs: ['fd00:96::10', '10.96.0.16'],
  port: 80,
  targetPort: 8080,
  nodePort: 30081,
  endpoints: { IPv6: ['fd00:10::2', 'fd00:10::3'], IPv4: ['10.0.0.2'] },
};
const EXT: Svc = {
  name: 'ext',
  clusterIPs: ['10.96.0.21'],
  port: 80,
  targetPort: 8080,
  externalIPs: ['192.168.50.10'],
  endpoints: { IPv4: ['10.0.0.2', '10.0.0.3'] },
};
const LB_IP = '192.168.60.10';
const LB: Svc = {
  name: 'lb',
  clusterIPs: ['10.96.0.22'],
  port: 80,
  targetPort: 8080,
  nodePort: 30090,
  ingress: [LB_IP],
  loadBalancerSourceRanges: ['192.168.7.2/32'],
  endpoints: { IPv4: ['10.0.0.2', '10.0.0.3'] },
};
const LOCAL_LB_IP = '192.168.60.11';
const LOCAL: Svc = {
  name: 'local',
  clusterIPs: ['10.96.0.23'],
  port: 80,
  targetPort: 8080,
  nodePort: 30082,
  ingress: [LOCAL_LB_IP],
  externalTrafficPolicyLocal: true,
  healthCheckNodePort: 30083,
  endpoints: { IPv4: ['10.0.0.2', REMOTE_POD] },
  nodes: { '10.0.0.2': NODE_NAME, [REMOTE_POD]: 'node-b' },
};
const STICKY: Svc = {
  name: 'sticky',
  clusterIPs: ['10.96.0.24'],
  port: 80,
  targetPort: 8080,
  affinitySeconds: 600,
  endpoints: { IPv4: ['10.0.0.2', '10.0.0.3'] },
};

// --- the daemon --------------------------------------------------------------------------------

const DAEMON_LOG = join(RUN_DIR, 'daemon.log');
let daemon: ChildProcess | undefined;
let daemonExit: Promise<{ code: number | null; signal: NodeJS.Signals | null }> | undefined;

/** The daemon as /usr/bin/kube-proxy-ts starts it (scripts/launcher-args.ts), in the node namespace. */
function daemonCommand(args: readonly string[]): string[] {
  return ['netns', 'exec', 'node', NODE_BIN, ...DAEMON_V8_OPTIONS, BIN, ...args];
}

function startDaemon(): void {
  const fd = openSync(DAEMON_LOG, 'a');
  daemon = spawn('/usr/sbin/ip', daemonCommand(DAEMON_ARGS), { stdio: ['ignore', fd, fd] });
  closeSync(fd);
  children.push(daemon);
  daemonExit = new Promise((resolve) => daemon!.once('exit', (code, signal) => resolve({ code, signal })));
}

const daemonLog = (): string => {
  try {
    return readFileSync(DAEMON_LOG, 'utf8');
  } catch {
    return '';
  }
};
const running = (): boolean => !!daemon && daemon.exitCode === null && daemon.signalCode === null;

async function metrics(): Promise<string> {
  const r = await nodeAgent.http('http://127.0.0.1:10249/metrics');
  assert.equal(r.status, 200, r.body);
  return r.body;
}

/** A metric's value by its exact label text; 0 when the series does not exist yet. */
function metric(text: string, series: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line ? Number(line.slice(series.length + 1)) : 0;
}
const CT_DELETED = 'kubeproxyts_conntrack_entries_deleted_total{ip_family="any",protocol="udp/sctp"}';

/** Failed kernel operations and syncs the daemon logged (either family), the first ten. */
async function syncErrors(): Promise<string[]> {
  return daemonLog()
    .split('\n')
    .filter((l) => /ipvs kernel operation failed|Sync failed|sync failed|Cannot start/i.test(l))
    .slice(0, 10);
}

// Flow B and the TCP connection the replacement case opens; the removal case checks them again.
let flowB = 0;
let tcpConn = { id: 0, port: 0 };
let keepB: CtEntry | undefined;
let keepT: CtEntry | undefined;

async function startFlow(host: string, localPort: number): Promise<number> {
  const r = await client.ask({ op: 'flow', host, port: 53, localPort, everyMs: 200 });
  if (r.error) throw new Error(`flow to ${host} from ${localPort}: ${String(r.error)}`);
  return r.id as number;
}
const flowLog = async (flow: number) =>
  (await client.ask({ op: 'flowlog', flow })) as unknown as { sent: number; answers: { t: number; answer: string }[] };
/** The entries of the client's flows from one source port. */
const clientEntries = (all: CtEntry[], proto: string, sport: number): CtEntry[] =>
  all.filter((e) => e.proto === proto && e.orig.src === '192.168.7.2' && e.orig.sport === String(sport));

/** The IPv4 addresses on kube-ipvs0 ("a.b.c.d/32"). */
async function ipvs0Addrs(): Promise<string[]> {
  return [
    ...(await mustInNode('/usr/sbin/ip', '-4', '-o', 'addr', 'show', 'dev', 'kube-ipvs0')).matchAll(/ inet (\S+)/g),
  ].map((m) => m[1]!);
}

/** A virtual server's real servers with their counters: "addr:port" -> { weight, active, inactive }. */
async function destCounters(
  proto: 'TCP' | 'UDP',
  addr: string,
): Promise<Map<string, { weight: number; active: number; inactive: number }>> {
  const r = await inNode('/usr/sbin/ipvsadm', '-Ln', proto === 'TCP' ? '-t' : '-u', addr);
  const out = new Map<string, { weight: number; active: number; inactive: number }>();
  for (const l of r.stdout.split('\n')) {
    const f = l.trim().split(/\s+/);
    if (f[0] === '->' && f[1] !== 'RemoteAddress:Port')
      out.set(f[1]!, { weight: Number(f[3]), active: Number(f[4]), inactive: Number(f[5]) });
  }
  return out;
}

/** The client's TCP OutRsts (/proc/net/snmp in its namespace). */
async function clientOutRsts(): Promise<number> {
  const snmp = (await must('/usr/sbin/ip', 'netns', 'exec', 'client', '/bin/cat', '/proc/net/snmp'))
    .split('\n')
    .filter((l) => l.startsWith('Tcp:'));
  const [head, values] = [snmp[0]!.split(/\s+/), snmp[1]!.split(/\s+/)];
  return Number(values[head.indexOf('OutRsts')]);
}

/** iptables-nft-save -c of one table: the packet counter of the rule written as `rule`. */
async function packets(table: 'nat' | 'filter', rule: string): Promise<number> {
  const text = await mustInNode('/usr/sbin/iptables-nft-save', '-c', '-t', table);
  const line = text.split('\n').find((l) => l.replace(/^\[\d+:\d+\] /, '') === rule);
  if (!line) throw new Error(`no rule ${rule} in\n${text}`);
  return Number(/^\[(\d+):/.exec(line)?.[1] ?? 0);
}

/** Waits for a virtual server to have `n` lines (itself and n-1 real servers); returns them. */
const vsWith = (proto: 'TCP' | 'UDP', addr: string, n: number, ms = 30_000): Promise<string[]> =>
  until(
    `${proto} ${addr} with ${n - 1} real server(s)`,
    async () => {
      const v = await vs(proto, addr);
      return v.length === n ? v : undefined;
    },
    ms,
  );

export const cases: VmCase[] = [
  {
    name: 'setup: node, pods and client namespaces (IPv4 + IPv6), a pod of another node, backends, agents, the API server (Node, Services, EndpointSlices) and a kubeconfig, a foreign rule and IPVS service',
    timeoutMs: 180_000,
    async run(note) {
      for (const ns of ['node', 'pods', 'client']) await ip('netns', 'add', ns);
      await ip('-n', 'node', 'link', 'add', 'vpods', 'type', 'veth', 'peer', 'name', 'eth0', 'netns', 'pods');
      await ip('-n', 'node', 'link', 'add', 'vclient', 'type', 'veth', 'peer', 'name', 'eth0', 'netns', 'client');
      for (const [dev, addrs] of [
        ['vpods', ['10.0.0.1/24', 'fd00:10::1/64']],
        ['vclient', [`${NODE_IP}/24`, `${NODE_IP6}/64`]],
      ] as const) {
        for (const a of addrs)
          await ip('-n', 'node', 'addr', 'add', a, 'dev', dev, ...(a.includes(':') ? ['nodad'] : []));
        await ip('-n', 'node', 'link', 'set', dev, 'up');
      }
      await ip('-n', 'node', 'link', 'set', 'lo', 'up');
      await mustInNode('/usr/sbin/sysctl', '-qw', 'net.ipv6.conf.all.forwarding=1');
      for (const [ns, addrs, gw, gw6] of [
        [
          'pods',
          ['10.0.0.2/24', '10.0.0.3/24', '10.0.0.4/24', `${REMOTE_POD}/32`, 'fd00:10::2/64', 'fd00:10::3/64'],
          '10.0.0.1',
          'fd00:10::1',
        ],
        ['client', ['192.168.7.2/24', `${CLIENT_OTHER}/24`, 'fd00:7::2/64'], NODE_IP, NODE_IP6],
      ] as const) {
        for (const a of addrs)
          await ip('-n', ns, 'addr', 'add', a, 'dev', 'eth0', ...(a.includes(':') ? ['nodad'] : []));
        await ip('-n', ns, 'link', 'set', 'eth0', 'up');
        await ip('-n', ns, 'link', 'set', 'lo', 'up');
        await ip('-n', ns, 'route', 'add', 'default', 'via', gw);
        await ip('-n', ns, '-6', 'route', 'add', 'default', 'via', gw6);
      }
      // The pod of another node: routed to through this node; its replies go the other way.
      await ip('-n', 'node', 'route', 'add', '10.0.1.0/24', 'via', '10.0.0.2', 'dev', 'vpods');
      await ip('-n', 'pods', 'link', 'add', 'toclient', 'type', 'veth', 'peer', 'name', 'frompods', 'netns', 'client');
      await ip('-n', 'pods', 'addr', 'add', '192.168.8.1/30', 'dev', 'toclient');
      await ip('-n', 'pods', 'link', 'set', 'toclient', 'up');
      await ip('-n', 'client', 'addr', 'add', '192.168.8.2/30', 'dev', 'frompods');
      await ip('-n', 'client', 'link', 'set', 'frompods', 'up');
      await ip('-n', 'pods', 'rule', 'add', 'from', REMOTE_POD, 'lookup', '100');
      await ip('-n', 'pods', 'route', 'add', '192.168.7.0/24', 'via', '192.168.8.2', 'dev', 'toclient', 'table', '100');
      // The client takes in what arrives on its other link (as a host with asymmetric routes).
      await must(
        '/usr/sbin/ip',
        'netns',
        'exec',
        'client',
        '/usr/sbin/sysctl',
        '-qw',
        'net.ipv4.conf.all.rp_filter=0',
        'net.ipv4.conf.frompods.rp_filter=0',
      );

      const server = spawn(
        '/usr/sbin/ip',
        [
          'netns',
          'exec',
          'pods',
          NODE_BIN,
          AGENT,
          'server',
          '10.0.0.2',
          '10.0.0.3',
          '10.0.0.4',
          REMOTE_POD,
          'fd00:10::2',
          'fd00:10::3',
        ],
        {
          stdio: ['ignore', 'pipe', 'inherit'],
        },
      );
      children.push(server);
      const serverReady = new Promise<void>((resolve, reject) => {
        const t = setTimeout(() => reject(new Error('backend server did not start')), 90_000);
        server.stdout!.once('data', () => {
          clearTimeout(t);
          resolve();
        });
      });

      // The API server, in this process (the guest's root namespace), reached from the node
      // namespace over a veth. The daemon's kubeconfig names it, with a bearer token it requires.
      await ip('link', 'add', 'vapi', 'type', 'veth', 'peer', 'name', 'api0', 'netns', 'node');
      await ip('addr', 'add', `${API_HOST}/30`, 'dev', 'vapi');
      await ip('link', 'set', 'vapi', 'up');
      await ip('-n', 'node', 'addr', 'add', '192.168.9.2/30', 'dev', 'api0');
      await ip('-n', 'node', 'link', 'set', 'api0', 'up');
      api = await FakeApiServer.start({ host: API_HOST, token: API_TOKEN });
      mkdirSync(WORK, { recursive: true });
      writeFileSync(
        KUBECONFIG,
        [
          'apiVersion: v1',
          'kind: Config',
          'clusters:',
          '- name: vm',
          `  cluster: {server: "${api.url}"}`,
          'users:',
          '- name: kube-proxy',
          `  user: {token: "${API_TOKEN}"}`,
          'contexts:',
          '- name: vm',
          '  context: {cluster: vm, user: kube-proxy}',
          'current-context: vm',
          '',
        ].join('\n'),
      );
      api.create({
        apiVersion: 'v1',
        kind: 'Node',
        metadata: { name: NODE_NAME, labels: { 'kubernetes.io/hostname': NODE_NAME } },
        status: {
          addresses: [
            { type: 'InternalIP', address: NODE_IP },
            { type: 'InternalIP', address: NODE_IP6 },
            { type: 'Hostname', address: NODE_NAME },
          ],
        },
      });
      for (const s of [WEB, NP, LONG, DNS, DNS2]) put(s);

      [client, nodeAgent] = await Promise.all([Agent.start('client'), Agent.start('node'), serverReady]);

      // Things that are not ours: --cleanup must leave them.
      await mustInNode(
        '/usr/sbin/iptables-nft',
        '-t',
        'filter',
        '-A',
        'INPUT',
        '-p',
        'tcp',
        '--dport',
        '2222',
        '-j',
        'ACCEPT',
      );
      await mustInNode('/usr/sbin/ipvsadm', '-A', '-f', '7', '-s', 'rr');
      note({ uname: (await must('/bin/uname', '-r')).trim(), node: NODE_BIN, flags: DAEMON_V8_OPTIONS, api: api.url });
    },
  },
  {
    name: 'the daemon starts in IPVS mode with a kubeconfig, lists and watches the API server, reaches healthz and programs a ClusterIP and a NodePort Service: both backends answer; ipvsadm and ipset agree',
    timeoutMs: 270_000,
    async run(note) {
      const t0 = Date.now();
      startDaemon();
      const healthz = await until(
        'healthz 200',
        async () => {
          if (!running()) throw new GiveUp(`the daemon exited (${daemon?.exitCode ?? daemon?.signalCode})`);
          const r = await nodeAgent.http('http://127.0.0.1:10256/healthz');
          return r.status === 200 ? r : undefined;
        },
        180_000,
        500,
      ).catch((e: unknown) => {
        throw new Error(`${String(e)}\n--- daemon log ---\n${daemonLog().slice(-4000)}`);
      });
      const healthyMs = Date.now() - t0;
      assert.match(healthz.type, /application\/json/);
      assert.equal((JSON.parse(healthz.body) as { nodeEligible?: boolean }).nodeEligible, true);
      // healthz answers before the first sync: wait for the virtual servers (bounded).
      await until(
        'the first sync to program the ClusterIP',
        async () => (await vs('TCP', '10.96.0.10:80')).length === 3,
        90_000,
        500,
      );
      const programmedMs = Date.now() - t0;
      assert.match(daemonLog(), /kube-proxy-ts started mode=ipvs families=IPv4,IPv6/);
      // Fed by the API server: lists, then watches of Services, EndpointSlices and this Node
      // (by its name), all with the kubeconfig's token (the server answers 401 without it).
      const watchCounts = () =>
        Object.fromEntries(['Service', 'EndpointSlice', 'Node'].map((k) => [k, api.watchCount(k)]));
      const watches = await until(
        'a watch of each kind',
        () => Promise.resolve(Object.values(watchCounts()).every((n) => n === 1) && watchCounts()),
        20_000,
      ).catch((e: unknown) => {
        throw new Error(
          `${String(e)}: ${JSON.stringify(watchCounts())}; requests ${JSON.stringify(api.requests.slice(0, 20))}`,
        );
      });
      const nodeQuery = api.requests.find((r) => r.path === '/api/v1/nodes')?.query;
      assert.equal(nodeQuery?.['fieldSelector'], `metadata.name=${NODE_NAME}`);
      assert.deepEqual(await vs('TCP', '10.96.0.10:80'), [
        'TCP 10.96.0.10:80 rr',
        '-> 10.0.0.2:8080 Masq 1',
        '-> 10.0.0.3:8080 Masq 1',
      ]);
      assert.deepEqual(await vs('TCP', `${NODE_IP}:30080`), [
        `TCP ${NODE_IP}:30080 rr`,
        '-> 10.0.0.2:8080 Masq 1',
        '-> 10.0.0.3:8080 Masq 1',
      ]);
      assert.deepEqual(await vs('TCP', '10.96.0.11:80'), [
        'TCP 10.96.0.11:80 rr',
        '-> 10.0.0.2:8080 Masq 1',
        '-> 10.0.0.3:8080 Masq 1',
      ]);
      assert.deepEqual(await vs('UDP', '10.96.0.53:53'), ['UDP 10.96.0.53:53 rr', '-> 10.0.0.2:5353 Masq 1']);
      assert.ok((await ipvsShape()).includes('FWM 7 rr'), 'a foreign fwmark service stays');
      assert.deepEqual(await ipsetMembers('KUBE-CLUSTER-IP'), [
        '10.96.0.10,tcp:80',
        '10.96.0.11,tcp:80',
        '10.96.0.14,tcp:81',
        '10.96.0.53,udp:53',
        '10.96.0.54,udp:53',
      ]);
      assert.deepEqual(await ipsetMembers('KUBE-NODE-PORT-TCP'), ['30080']);

      const viaVip = await client.many('tcp', '10.96.0.10', 80, 6);
      const viaNodePort = await client.many('tcp', NODE_IP, 30080, 4);
      note({ healthyMs, programmedMs, viaVip, viaNodePort, apiRequests: api.requests.length, watches });
      assert.deepEqual(new Set(viaVip.map(backendOf)), new Set(['10.0.0.2', '10.0.0.3']), viaVip.join(', '));
      // The client is outside --cluster-cidr: upstream's `! -s CLUSTER-CIDR -m set --match-set
      // KUBE-CLUSTER-IP dst,dst -j KUBE-MARK-MASQ` masquerades it to the node's address.
      assert.ok(
        viaVip.every((a) => peerOf(a) === '10.0.0.1'),
        `ClusterIP traffic from outside the cluster CIDR masqueraded: ${viaVip.join(', ')}`,
      );
      assert.deepEqual(new Set(viaNodePort.map(backendOf)), new Set(['10.0.0.2', '10.0.0.3']), viaNodePort.join(', '));
      // The companion rules (KUBE-NODE-PORT -> KUBE-MARK-MASQ, KUBE-POSTROUTING) masquerade NodePort traffic.
      assert.ok(
        viaNodePort.every((a) => peerOf(a) === '10.0.0.1'),
        `NodePort traffic masqueraded to the node: ${viaNodePort.join(', ')}`,
      );
      // KUBE-IPVS-FILTER: a VIP answers only on service ports.
      const other = await client.ask({ op: 'tcp', host: '10.96.0.10', port: 22, n: 1 });
      assert.equal(other.code, 'ECONNREFUSED', `a non-service port of the VIP is rejected: ${JSON.stringify(other)}`);
      assert.match(await metrics(), /^kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds\{ip_family="IPv4"\} /m);
    },
  },
  {
    name: 'explain through the control socket reads the VSes back (in sync); kubeproxyts_service_connections_total counts exactly the connections made (issue 19)',
    timeoutMs: 120_000,
    async run(note) {
      const cli = async (...args: string[]): Promise<Run> =>
        run('/usr/sbin/ip', daemonCommand(args), { timeoutMs: 60_000 });
      const one = await cli('explain', 'default/web', '-o', 'json');
      assert.equal(one.code, 0, one.stderr);
      const web = (
        JSON.parse(one.stdout) as {
          ports: {
            family: string;
            kernel: { mode: string; agrees: boolean; kernel: { where: string; key: string }[] };
          }[];
        }
      ).ports;
      const v4 = web.find((p) => p.family === 'IPv4')!;
      assert.equal(v4.kernel.mode, 'ipvs');
      assert.ok(v4.kernel.agrees, JSON.stringify(v4.kernel));
      assert.ok(
        v4.kernel.kernel.some((e) => e.where === 'ipvs' && e.key === 'TCP 10.96.0.10:80'),
        JSON.stringify(v4.kernel.kernel),
      );
      const all = await cli('explain');
      assert.equal(all.code, 0, all.stderr);
      assert.match(all.stdout, /default\/web:p\/TCP\s+IPv4\s+ClusterIP .* in sync/);
      const trace = await cli('trace', '--from', '192.168.7.2', '--to', '10.96.0.10:80');
      assert.match(trace.stdout, /verdict: DNAT: cluster-ip 10\.96\.0\.10:80\/TCP of default\/web:p\/TCP/);
      const unknown = await cli('explain', 'default/nope');
      assert.equal(unknown.code, 1);

      const series = (name: string): string =>
        `kubeproxyts_service_${name}_total{namespace="default",service="web",port="p",protocol="TCP",frontend="cluster-ip"}`;
      // IPVS folds its per-CPU counters into what it reports every 2 s: a value counts once unchanged for longer.
      const settled = async (what: string): Promise<{ conns: number; packets: number }> => {
        let last = { conns: -1, packets: -1 };
        let since = Date.now();
        return until(
          what,
          async () => {
            const text = await metrics();
            const now = { conns: metric(text, series('connections')), packets: metric(text, series('packets')) };
            if (now.conns !== last.conns || now.packets !== last.packets) [last, since] = [now, Date.now()];
            return Date.now() - since > 3000 ? last : undefined;
          },
          60_000,
          500,
        );
      };
      const before = await settled('the counters to settle');
      await client.many('tcp', '10.96.0.10', 80, 6);
      const after = await settled('the counters to count the connections');
      note({ before, after });
      assert.equal(after.conns - before.conns, 6, 'one IPVS connection per TCP connection');
      assert.ok(after.packets - before.packets >= 6 * 3, 'at least SYN, ACK and FIN of each');
    },
  },
  {
    name: 'UDP endpoint replacement (issue 6): a flow from one source port moves to the new backend within a sync; the stale conntrack entries go; other flows keep theirs',
    timeoutMs: 180_000,
    async run(note) {
      // Flow A keeps sending to the UDP ClusterIP from one port through the replacement. Flow I
      // (another fixed port) sent before and is idle during it. Flow B goes to another UDP
      // Service, and one TCP connection to a third: both must keep their conntrack entries.
      const A = 40053;
      const I = 40153;
      const B = 40054;
      const flowA = await startFlow('10.96.0.53', A);
      flowB = await startFlow('10.96.0.54', B);
      const flowI = await startFlow('10.96.0.53', I);
      await until(
        'answers on flows A, B and I',
        async () =>
          (await flowLog(flowA)).answers.length >= 2 &&
          (await flowLog(flowB)).answers.length >= 2 &&
          (await flowLog(flowI)).answers.length >= 2,
        30_000,
      );
      await client.ask({ op: 'flowstop', flow: flowI });
      const tcp = await client.ask({ op: 'open', host: '10.96.0.14', port: 81 });
      assert.ok(!tcp.error, String(tcp.error));
      tcpConn = { id: tcp.id as number, port: tcp.localPort as number };
      assert.equal(backendOf(tcp.answer as string), '10.0.0.4');
      for (const f of [flowA, flowI])
        assert.ok((await flowLog(f)).answers.every((a) => backendOf(a.answer) === '10.0.0.2'));

      const before = await conntrack();
      const [staleA] = clientEntries(before, 'udp', A);
      const [staleI] = clientEntries(before, 'udp', I);
      [keepB] = clientEntries(before, 'udp', B);
      [keepT] = clientEntries(before, 'tcp', tcpConn.port);
      assert.ok(staleA && staleI && keepB && keepT, `entries before:\n${before.map((e) => e.line).join('\n')}`);
      assert.equal(staleA.reply.src, '10.0.0.2', staleA.line);
      assert.equal(staleI.reply.src, '10.0.0.2', staleI.line);
      assert.equal(keepB.reply.src, '10.0.0.4', keepB.line);
      const logAt = daemonLog().length;

      // The only endpoint is replaced: 10.0.0.2 -> 10.0.0.3.
      const t0 = Date.now();
      put({ ...DNS, endpoints: { IPv4: ['10.0.0.3'] } });
      const programmedMs = await until(
        'ipvsadm to show the new real server',
        async () => {
          const v = await vs('UDP', '10.96.0.53:53');
          return v.length === 2 && v[1] === '-> 10.0.0.3:5353 Masq 1' ? Date.now() - t0 : undefined;
        },
        30_000,
      );
      const switchedMs = await until(
        'flow A to be answered by 10.0.0.3',
        async () => {
          const a = (await flowLog(flowA)).answers.find((x) => x.t > t0 && backendOf(x.answer) === '10.0.0.3');
          return a ? a.t - t0 : undefined;
        },
        30_000,
        200,
      );
      const goneMs = await until(
        'the stale entries (reply source 10.0.0.2) to be gone',
        async () => {
          const now = await conntrack('-p', 'udp');
          return now.some((e) => e.orig.dst === '10.96.0.53' && e.reply.src === '10.0.0.2')
            ? undefined
            : Date.now() - t0;
        },
        30_000,
      );
      // The flush run for this change (logged at --v=2 once it ran).
      const flushLine = await until(
        'the flusher to run for the removed endpoint',
        () =>
          Promise.resolve(
            daemonLog()
              .slice(logAt)
              .split('\n')
              .find((l) => l.includes('Flushed stale conntrack entries') || l.includes('Conntrack flush')),
          ),
        20_000,
        500,
      );

      // The idle flow resumes from the same port: its first datagram already reaches the new backend.
      const flowI2 = await startFlow('10.96.0.53', I);
      const idle = await until(
        'answers on the resumed idle flow',
        async () => {
          const l = await flowLog(flowI2);
          return l.answers.length >= 3 ? l : undefined;
        },
        20_000,
      );
      await client.ask({ op: 'flowstop', flow: flowI2 });
      await new Promise((r) => setTimeout(r, 1000));
      const a = await flowLog(flowA);
      await client.ask({ op: 'flowstop', flow: flowA });
      const b = await flowLog(flowB);
      const after = await conntrack();
      const echo = await client.ask({ op: 'send', conn: tcpConn.id, data: 'still-there' });
      const afterSwitch = a.answers.filter((x) => x.t > t0 + switchedMs).map((x) => backendOf(x.answer));
      const [nowA] = clientEntries(after, 'udp', A);
      const [nowB] = clientEntries(after, 'udp', B);
      const [nowT] = clientEntries(after, 'tcp', tcpConn.port);
      // Who removed the stale entries: 6.1's IPVS expires the connections of a deleted real
      // server itself (expire_nodest_conn=1, which the daemon sets, and the kernel's
      // expire_nodest_conn work), dropping their conntrack entries with them; the flusher then
      // finds nothing left (matched=0) for a removed endpoint.
      const kallsyms = (
        await run('/bin/grep', ['-c', 'ip_vs_expire_nodest_conn_flush', '/proc/kallsyms'])
      ).stdout.trim();
      note({
        programmedMs,
        switchedMs,
        staleGoneMs: goneMs,
        flowA: { sent: a.sent, answered: a.answers.length },
        idleFlow: { first: idle.answers[0]?.answer, sent: idle.sent, answered: idle.answers.length },
        flushLine: flushLine.replace(/^\S+ /, ''),
        expireNodestConn: (await mustInNode('/bin/cat', '/proc/sys/net/ipv4/vs/expire_nodest_conn')).trim(),
        kernelExpireNodestConnFlush: kallsyms,
        entries: { A: nowA?.line, B: nowB?.line, T: nowT?.line },
      });
      assert.ok(
        afterSwitch.length > 0 && afterSwitch.every((x) => x === '10.0.0.3'),
        `flow A after the switch: ${afterSwitch.join(', ')}`,
      );
      assert.ok(
        switchedMs < programmedMs + 5_000,
        `flow A switched within a sync plus margin (${switchedMs} ms, programmed after ${programmedMs} ms)`,
      );
      assert.equal(backendOf(idle.answers[0]!.answer), '10.0.0.3');
      assert.ok(idle.answers.every((x) => backendOf(x.answer) === '10.0.0.3'));
      assert.ok(nowA && nowA.reply.src === '10.0.0.3', `flow A's entry now goes to the new endpoint: ${nowA?.line}`);
      assert.ok(nowB && nowB.id === keepB.id, `flow B keeps its entry (id ${keepB.id}): ${nowB?.line ?? 'gone'}`);
      assert.ok(b.answers.every((x) => backendOf(x.answer) === '10.0.0.4'));
      assert.ok(b.sent - b.answers.length <= 1, `flow B lost nothing (sent ${b.sent}, answered ${b.answers.length})`);
      assert.ok(
        nowT && nowT.id === keepT.id,
        `the TCP connection keeps its entry (id ${keepT.id}): ${nowT?.line ?? 'gone'}`,
      );
      assert.equal(echo.answer, 'still-there', 'the TCP connection still flows');
    },
  },
  {
    name: "UDP endpoint removal (issue 6), the flusher's own work: a UDP Service gains endpoints (its flow answered), then loses one; an entry IPVS does not know is deleted by dump+delete on 6.1 and counted in the metric; the others stay",
    timeoutMs: 180_000,
    async run(note) {
      // Newly active: while a UDP virtual server has no real server IPVS drops the datagram
      // (ICMP port unreachable) before conntrack confirms it, so 6.1 caches no entry to flush;
      // the flow from the same port is answered as soon as the endpoints are programmed.
      const C = 40055;
      put(DNS3);
      await until(
        'the endpoint-less virtual server',
        async () => (await vs('UDP', '10.96.0.55:53')).length === 1,
        30_000,
      );
      const flowC = await startFlow('10.96.0.55', C);
      await new Promise((r) => setTimeout(r, 1500));
      const cachedWhileEmpty = clientEntries(await conntrack('-p', 'udp'), 'udp', C).map((e) => e.line);
      const answeredWhileEmpty = (await flowLog(flowC)).answers.length;
      const t0 = Date.now();
      put({ ...DNS3, endpoints: { IPv4: ['10.0.0.3', '10.0.0.4'] } });
      const answeredMs = await until(
        'flow C to be answered',
        async () => {
          const x = (await flowLog(flowC)).answers.find((y) => y.t > t0);
          return x ? x.t - t0 : undefined;
        },
        30_000,
        200,
      );
      await client.ask({ op: 'flowstop', flow: flowC });

      // Endpoint removed, with entries IPVS has no connection for (as a kernel without the
      // expire_nodest_conn work, before 5.9, leaves behind; here made with conntrack -I): one
      // whose reply came from the removed endpoint, one from the endpoint that stays.
      const entry = (sport: number, replySrc: string) => [
        '-I',
        '-p',
        'udp',
        '-s',
        '192.168.7.9',
        '-d',
        '10.96.0.55',
        '--sport',
        String(sport),
        '--dport',
        '53',
        '--reply-src',
        replySrc,
        '--reply-dst',
        '192.168.7.9',
        '--reply-port-src',
        '5353',
        '--reply-port-dst',
        String(sport),
        '-t',
        '300',
        '-u',
        'SEEN_REPLY,ASSURED',
      ];
      await mustInNode('/usr/sbin/conntrack', ...entry(41055, '10.0.0.3'));
      await mustInNode('/usr/sbin/conntrack', ...entry(41056, '10.0.0.4'));
      const made = (await conntrack('-p', 'udp')).filter((e) => e.orig.src === '192.168.7.9');
      const stale = made.find((e) => e.orig.sport === '41055');
      const kept = made.find((e) => e.orig.sport === '41056');
      assert.ok(stale && kept, made.map((e) => e.line).join('\n'));
      const deletedBefore = metric(await metrics(), CT_DELETED);
      const logAt = daemonLog().length;
      const t1 = Date.now();
      put({ ...DNS3, endpoints: { IPv4: ['10.0.0.4'] } });
      const goneMs = await until(
        'the injected stale entry to be deleted',
        async () => ((await conntrack('-p', 'udp')).some((e) => e.id === stale.id) ? undefined : Date.now() - t1),
        30_000,
      );
      const deletedAfter = await until(
        'the deleted-entries counter to grow',
        async () => {
          const v = metric(await metrics(), CT_DELETED);
          return v > deletedBefore ? v : undefined;
        },
        20_000,
        500,
      );
      const flushLine =
        daemonLog()
          .slice(logAt)
          .split('\n')
          .find((l) => l.includes('Flushed stale conntrack entries')) ?? '';
      const after = await conntrack();
      const [nowB] = clientEntries(after, 'udp', 40054);
      const [nowT] = clientEntries(after, 'tcp', tcpConn.port);
      note({
        newlyActive: { cachedWhileEmpty, answeredWhileEmpty, answeredMs },
        removal: {
          staleGoneMs: goneMs,
          deleted: { before: deletedBefore, after: deletedAfter },
          flushLine: flushLine.replace(/^\S+ /, ''),
        },
      });
      assert.deepEqual(cachedWhileEmpty, [], 'no entry cached while the Service had no endpoint');
      assert.equal(answeredWhileEmpty, 0);
      assert.ok(
        after.some((e) => e.id === kept.id),
        `the entry of the endpoint that stays is kept: ${kept.line}`,
      );
      // (>= 1: flow C's entry, had it gone to 10.0.0.3, may be the flusher's too if it beats the kernel.)
      assert.ok(deletedAfter - deletedBefore >= 1, 'the deleted entry was counted');
      assert.match(
        flushLine,
        /matched=[1-9]\d* deleted=[1-9]\d* .*kernelFlushes=0/,
        '6.1: dump and delete (no kernel-side filtered flush)',
      );
      assert.ok(nowB && nowB.id === keepB?.id, `flow B (another Service) keeps its entry: ${nowB?.line ?? 'gone'}`);
      assert.ok(nowT && nowT.id === keepT?.id, `the TCP connection keeps its entry: ${nowT?.line ?? 'gone'}`);
      await client.ask({ op: 'flowstop', flow: flowB });
      await client.ask({ op: 'close', conn: tcpConn.id });
    },
  },
  {
    name: "IPv6 (issue 5): a dual-stack NodePort Service: the v6 VS, v6 traffic, ip6tables-nft-save companion chains shaped as IPv4's, KUBE-6- ipsets of family inet6",
    timeoutMs: 180_000,
    async run(note) {
      put(WEB6);
      const v6 = await until(
        'the IPv6 virtual server',
        async () => {
          const v = await vs('TCP', '[fd00:96::10]:80');
          return v.length === 3 ? v : undefined;
        },
        30_000,
      );
      assert.deepEqual(v6, ['TCP [fd00:96::10]:80 rr', '-> [fd00:10::2]:8080 Masq 1', '-> [fd00:10::3]:8080 Masq 1']);
      // First what the daemon said: a failed IPv6 sync (its companion rules) names the cause.
      assert.deepEqual(await syncErrors(), []);
      assert.deepEqual(await vs('TCP', `[${NODE_IP6}]:30081`), [
        `TCP [${NODE_IP6}]:30081 rr`,
        '-> [fd00:10::2]:8080 Masq 1',
        '-> [fd00:10::3]:8080 Masq 1',
      ]);
      assert.deepEqual(await vs('TCP', '10.96.0.16:80'), ['TCP 10.96.0.16:80 rr', '-> 10.0.0.2:8080 Masq 1']);
      const vip6 = await mustInNode('/usr/sbin/ip', '-6', '-o', 'addr', 'show', 'dev', 'kube-ipvs0');
      assert.match(vip6, /inet6 fd00:96::10\/128/);

      const viaVip6 = await client.many('tcp', 'fd00:96::10', 80, 6);
      const viaNodePort6 = await client.many('tcp', NODE_IP6, 30081, 4);
      const viaVip4 = await client.many('tcp', '10.96.0.16', 80, 2);
      assert.deepEqual(new Set(viaVip6.map(backendOf)), new Set(['fd00:10::2', 'fd00:10::3']), viaVip6.join(', '));
      assert.ok(
        viaVip6.every((a) => peerOf(a) === 'fd00:10::1'),
        `v6 ClusterIP traffic from outside the cluster CIDR masqueraded: ${viaVip6.join(', ')}`,
      );
      assert.deepEqual(
        new Set(viaNodePort6.map(backendOf)),
        new Set(['fd00:10::2', 'fd00:10::3']),
        viaNodePort6.join(', '),
      );
      assert.ok(
        viaNodePort6.every((a) => peerOf(a) === 'fd00:10::1'),
        `v6 NodePort traffic masqueraded to the node: ${viaNodePort6.join(', ')}`,
      );
      assert.ok(
        viaVip4.every((a) => a === '10.0.0.2 10.0.0.1'),
        viaVip4.join(', '),
      );
      // KUBE-IPVS-FILTER: a VIP answers only on service ports; elsewhere a port unreachable
      // (ICMPv6 type 1 code 4 -> ECONNREFUSED; another code would give EHOSTUNREACH & co).
      const other6 = await client.ask({ op: 'tcp', host: 'fd00:96::10', port: 22, n: 1 });
      assert.equal(
        other6.code,
        'ECONNREFUSED',
        `a non-service port of the v6 VIP is rejected as port unreachable: ${JSON.stringify(other6)}`,
      );

      // The ip6 companion rules, read back by ip6tables-nft-save, have IPv4's shape.
      const [t4, t6] = [await save(4), await save(6)];
      writeFileSync(join(RUN_DIR, 'iptables-nft-save.txt'), t4);
      writeFileSync(join(RUN_DIR, 'ip6tables-nft-save.txt'), t6);
      const s4 = kubeShape(t4);
      const s6 = kubeShape(t6);
      const s6as4 = kubeShape(v6AsV4(t6));
      const diff = (t: string) => ({
        onlyV4: (s4[t]?.rules ?? []).filter((r) => !(s6as4[t]?.rules ?? []).includes(r)),
        onlyV6: (s6as4[t]?.rules ?? []).filter((r) => !(s4[t]?.rules ?? []).includes(r)),
      });
      note({
        chains6: Object.fromEntries(Object.entries(s6).map(([k, v]) => [k, v.chains])),
        rules6: Object.fromEntries(Object.entries(s6).map(([k, v]) => [k, v.rules.length])),
        nat: diff('nat'),
        filter: diff('filter'),
        viaNodePort6,
      });
      assert.deepEqual(Object.keys(s6).sort(), ['filter', 'nat']);
      for (const t of ['nat', 'filter']) {
        assert.ok(
          (s6[t]?.chains.length ?? 0) > 0 && (s6[t]?.rules.length ?? 0) > 0,
          `ip6 ${t} has KUBE- chains and rules`,
        );
        assert.deepEqual(s6[t]!.chains, s4[t]!.chains, `ip6 ${t}: the same KUBE- chains as ip ${t}`);
        assert.deepEqual(
          diff(t),
          { onlyV4: [], onlyV6: [] },
          `ip6 ${t}: the same rules as ip ${t} (but set names KUBE-6-, ::1/128, the v6 cluster CIDR, icmp6)`,
        );
      }
      assert.ok(!t4.includes('KUBE-6-'), 'no IPv6 set in the IPv4 rules');
      assert.match(t6, /-A KUBE-SERVICES -m set --match-set KUBE-6-CLUSTER-IP dst,dst -j ACCEPT/);
      // The two xt targets whose info differs by family (ip6t MASQUERADE: struct nf_nat_range;
      // ip6t REJECT: enum ip6t_reject_with).
      assert.match(
        t6,
        /-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully/,
      );
      assert.match(
        t6,
        /-A KUBE-IPVS-FILTER -m conntrack --ctstate NEW -m set --match-set KUBE-6-IPVS-IPS dst -j REJECT --reject-with icmp6-port-unreachable/,
      );

      // Every set the ip6 rules match exists, is an IPv6 set (bitmap:port has no family), and holds the Service.
      const headers = await ipsetHeaders();
      const referenced6 = [...new Set([...t6.matchAll(/--match-set (\S+)/g)].map((m) => m[1]!))].sort();
      assert.ok(referenced6.length > 0 && referenced6.every((n) => n.startsWith('KUBE-6-')), referenced6.join(', '));
      // IPv6 names are the IPv4 ones with KUBE-6-, cut to ipset's 31 characters (as upstream).
      const twin = new Map(
        [...headers.keys()]
          .filter((n) => !n.startsWith('KUBE-6-'))
          .map((n) => [n.replace(/^KUBE-/, 'KUBE-6-').slice(0, 31), n]),
      );
      for (const name of [...headers.keys()].filter((n) => n.startsWith('KUBE-6-'))) {
        const h = headers.get(name)!;
        const v4 = headers.get(twin.get(name) ?? '');
        if (h.type !== 'bitmap:port') assert.match(h.header, /\bfamily inet6\b/, `${name}: ${h.header}`);
        assert.equal(h.type, v4?.type, `${name} has the type of its IPv4 twin`);
      }
      for (const n of referenced6) assert.ok(headers.has(n), `${n} exists`);
      assert.equal(headers.get('KUBE-6-CLUSTER-IP')?.type, 'hash:ip,port');
      assert.equal(headers.get('KUBE-6-IPVS-IPS')?.type, 'hash:ip');
      assert.deepEqual(await ipsetMembers('KUBE-6-CLUSTER-IP'), ['fd00:96::10,tcp:80']);
      assert.deepEqual(await ipsetMembers('KUBE-6-NODE-PORT-TCP'), ['30081']);
      assert.ok((await ipsetMembers('KUBE-6-IPVS-IPS')).includes('fd00:96::10'));
      assert.ok((await ipsetMembers('KUBE-CLUSTER-IP')).includes('10.96.0.16,tcp:80'));
      // Every sync of both families went through: READY (the first full sync) and no failure.
      assert.deepEqual(await syncErrors(), []);
      assert.match(daemonLog(), /First full sync done; ready/);
      assert.match(await metrics(), /^kubeproxy_sync_proxy_rules_duration_seconds_count\{ip_family="IPv6"\} [1-9]/m);
    },
  },
  {
    name: 'externalIP (issue 5): a Service with an external IP, created through the API: its VS, bound on kube-ipvs0, KUBE-EXTERNAL-IP and its rules; TCP from outside reaches both backends, masqueraded; other ports of the address are rejected',
    timeoutMs: 120_000,
    async run(note) {
      const t0 = Date.now();
      put(EXT);
      const ext = await vsWith('TCP', '192.168.50.10:80', 3);
      const programmedMs = Date.now() - t0;
      assert.deepEqual(ext, ['TCP 192.168.50.10:80 rr', '-> 10.0.0.2:8080 Masq 1', '-> 10.0.0.3:8080 Masq 1']);
      assert.deepEqual(await vs('TCP', '10.96.0.21:80'), [
        'TCP 10.96.0.21:80 rr',
        '-> 10.0.0.2:8080 Masq 1',
        '-> 10.0.0.3:8080 Masq 1',
      ]);
      assert.ok((await ipvs0Addrs()).includes('192.168.50.10/32'), 'the external IP is bound on kube-ipvs0');
      assert.deepEqual(await ipsetMembers('KUBE-EXTERNAL-IP'), ['192.168.50.10,tcp:80']);
      assert.ok((await ipsetMembers('KUBE-IPVS-IPS')).includes('192.168.50.10'));
      const nat = await mustInNode('/usr/sbin/iptables-nft-save', '-t', 'nat');
      const extRules = nat.split('\n').filter((l) => l.includes('--match-set KUBE-EXTERNAL-IP '));
      // Upstream: masquerade, then accept what comes from outside (not bridged, not from a local address) and what is
      // for a local address.
      assert.equal(extRules.length, 3, extRules.join('\n'));
      assert.match(
        extRules[0]!,
        /^-A KUBE-SERVICES -m comment --comment "[^"]+" -m set --match-set KUBE-EXTERNAL-IP dst,dst -j KUBE-MARK-MASQ$/,
      );
      assert.match(
        extRules[1]!,
        /^-A KUBE-SERVICES .*--match-set KUBE-EXTERNAL-IP dst,dst .*physdev.*--src-type LOCAL -j ACCEPT$/,
      );
      assert.match(
        extRules[2]!,
        /^-A KUBE-SERVICES .*--match-set KUBE-EXTERNAL-IP dst,dst .*--dst-type LOCAL -j ACCEPT$/,
      );

      const viaExt = await client.many('tcp', '192.168.50.10', 80, 6);
      assert.deepEqual(new Set(viaExt.map(backendOf)), new Set(['10.0.0.2', '10.0.0.3']), viaExt.join(', '));
      assert.ok(
        viaExt.every((a) => peerOf(a) === '10.0.0.1'),
        `external IP traffic masqueraded to the node (KUBE-EXTERNAL-IP -> KUBE-MARK-MASQ): ${viaExt.join(', ')}`,
      );
      const other = await client.ask({ op: 'tcp', host: '192.168.50.10', port: 22, n: 1 });
      assert.equal(
        other.code,
        'ECONNREFUSED',
        `a non-service port of the external IP is rejected: ${JSON.stringify(other)}`,
      );
      assert.deepEqual(await syncErrors(), []);
      note({ programmedMs, viaExt, rules: extRules });
    },
  },
  {
    name: "LoadBalancer with loadBalancerSourceRanges (issue 5): the ingress IP's VS; KUBE-LOAD-BALANCER, -FW, -SOURCE-CIDR and KUBE-SOURCE-RANGES-FIREWALL; a client in the range is answered (masqueraded), one outside is dropped, the node itself too (KUBE-IPVS-OUT-FILTER); the NodePort is not guarded",
    timeoutMs: 150_000,
    async run(note) {
      const t0 = Date.now();
      put(LB);
      const lb = await vsWith('TCP', `${LB_IP}:80`, 3);
      const programmedMs = Date.now() - t0;
      assert.deepEqual(lb, [`TCP ${LB_IP}:80 rr`, '-> 10.0.0.2:8080 Masq 1', '-> 10.0.0.3:8080 Masq 1']);
      assert.deepEqual(await vs('TCP', `${NODE_IP}:30090`), [
        `TCP ${NODE_IP}:30090 rr`,
        '-> 10.0.0.2:8080 Masq 1',
        '-> 10.0.0.3:8080 Masq 1',
      ]);
      assert.ok((await ipvs0Addrs()).includes(`${LB_IP}/32`), 'the LB IP is bound on kube-ipvs0');
      const sets = {
        lb: await ipsetMembers('KUBE-LOAD-BALANCER'),
        fw: await ipsetMembers('KUBE-LOAD-BALANCER-FW'),
        cidr: await ipsetMembers('KUBE-LOAD-BALANCER-SOURCE-CIDR'),
        ip: await ipsetMembers('KUBE-LOAD-BALANCER-SOURCE-IP'),
        local: await ipsetMembers('KUBE-LOAD-BALANCER-LOCAL'),
      };
      assert.deepEqual(sets.lb, [`${LB_IP},tcp:80`]);
      assert.deepEqual(sets.fw, [`${LB_IP},tcp:80`]);
      assert.deepEqual(sets.cidr, [`${LB_IP},tcp:80,192.168.7.2`], 'ipset prints a /32 net without its prefix');
      assert.deepEqual(sets.ip, [], 'the range does not cover the node (its primary IP)');
      assert.deepEqual(sets.local, []);

      const filter = (await mustInNode('/usr/sbin/iptables-nft-save', '-t', 'filter')).replace(/ \[\d+:\d+\]/g, '');
      const nat = await mustInNode('/usr/sbin/iptables-nft-save', '-t', 'nat');
      const chain = (text: string, name: string) => text.split('\n').filter((l) => l.startsWith(`-A ${name} `));
      const sourceRanges = chain(filter, 'KUBE-SOURCE-RANGES-FIREWALL');
      const dropRule = '-A KUBE-SOURCE-RANGES-FIREWALL -j DROP';
      assert.match(filter, /^-A INPUT -m comment --comment "kube-proxy firewall rules" -j KUBE-PROXY-FIREWALL$/m);
      assert.match(filter, /^-A FORWARD -m comment --comment "kube-proxy firewall rules" -j KUBE-PROXY-FIREWALL$/m);
      assert.deepEqual(
        chain(filter, 'KUBE-PROXY-FIREWALL').map((l) => l.replace(/--comment "[^"]+"/, '--comment C')),
        [
          '-A KUBE-PROXY-FIREWALL -m comment --comment C -m set --match-set KUBE-LOAD-BALANCER-FW dst,dst -j KUBE-SOURCE-RANGES-FIREWALL',
        ],
      );
      assert.deepEqual(
        sourceRanges.map((l) => l.replace(/--comment "[^"]+"/, '--comment C')),
        [
          '-A KUBE-SOURCE-RANGES-FIREWALL -m comment --comment C -m set --match-set KUBE-LOAD-BALANCER-SOURCE-CIDR dst,dst,src -j RETURN',
          dropRule,
        ],
      );
      assert.deepEqual(chain(filter, 'KUBE-IPVS-OUT-FILTER'), [
        `-A KUBE-IPVS-OUT-FILTER -s ${LB_IP}/32 -m ipvs --vproto 6 --vaddr ${LB_IP} --vport 80 -j DROP`,
      ]);
      assert.match(
        nat,
        /^-A KUBE-SERVICES -m comment --comment "[^"]+" -m set --match-set KUBE-LOAD-BALANCER dst,dst -j KUBE-LOAD-BALANCER$/m,
      );
      assert.match(nat, /^-A KUBE-LOAD-BALANCER -j KUBE-MARK-MASQ$/m);

      const droppedBefore = await packets('filter', dropRule);
      const allowed = await client.many('tcp', LB_IP, 80, 4);
      const outside = await client.unanswered(LB_IP, 80, CLIENT_OTHER);
      const droppedAfter = await packets('filter', dropRule);
      const outsideViaNodePort = await client.many('tcp', NODE_IP, 30090, 2, CLIENT_OTHER);
      const fromNode = await nodeAgent.unanswered(LB_IP, 80);
      note({
        programmedMs,
        sets,
        sourceRanges,
        outOfRange: { code: outside, dropped: droppedAfter - droppedBefore },
        fromNode,
        allowed,
        outsideViaNodePort,
        outFilter: chain(filter, 'KUBE-IPVS-OUT-FILTER'),
      });
      assert.deepEqual(new Set(allowed.map(backendOf)), new Set(['10.0.0.2', '10.0.0.3']), allowed.join(', '));
      assert.ok(
        allowed.every((a) => peerOf(a) === '10.0.0.1'),
        `LB traffic masqueraded (KUBE-LOAD-BALANCER -> KUBE-MARK-MASQ): ${allowed.join(', ')}`,
      );
      assert.equal(outside, 'ETIMEDOUT', 'a client outside the range is dropped (no answer, no reject)');
      assert.ok(
        droppedAfter > droppedBefore,
        `KUBE-SOURCE-RANGES-FIREWALL dropped it (${droppedBefore} -> ${droppedAfter} packets)`,
      );
      // As upstream: the ranges guard the LB IP; the Service's node port is open to everyone.
      assert.ok(
        outsideViaNodePort.every((a) => ['10.0.0.2', '10.0.0.3'].includes(backendOf(a))),
        outsideViaNodePort.join(', '),
      );
      // Upstream issue 119656: the node reaches a ranged LB IP only when a range covers its IP.
      assert.ok(fromNode.length > 0);
      assert.deepEqual(await syncErrors(), []);
    },
  },
  {
    name: "externalTrafficPolicy=Local (issue 5): NodePort and LB IP go only to the local endpoint, unmasqueraded; the health check node port answers 200 with localEndpoints 1; without a local endpoint: 503 with 0, the VSes fall back to the other node's pod (upstream PR 97081, for this node's pods) but the external client's connections are dropped before IPVS (KUBE-NO-LOCAL-ENDPOINTS: not answered); the old local endpoint drains at weight 0; deleting the Service removes it all",
    timeoutMs: 200_000,
    async run(note) {
      const t0 = Date.now();
      put(LOCAL);
      const np = await vsWith('TCP', `${NODE_IP}:30082`, 2);
      const programmedMs = Date.now() - t0;
      assert.deepEqual(
        np,
        [`TCP ${NODE_IP}:30082 rr`, '-> 10.0.0.2:8080 Masq 1'],
        'the NodePort VS has only the local endpoint',
      );
      assert.deepEqual(
        await vs('TCP', `${LOCAL_LB_IP}:80`),
        [`TCP ${LOCAL_LB_IP}:80 rr`, '-> 10.0.0.2:8080 Masq 1'],
        'so has the LB VS',
      );
      assert.deepEqual(
        await vs('TCP', '10.96.0.23:80'),
        ['TCP 10.96.0.23:80 rr', '-> 10.0.0.2:8080 Masq 1', `-> ${REMOTE_POD}:8080 Masq 1`],
        'the cluster IP (internalTrafficPolicy Cluster) has both',
      );
      assert.deepEqual(await ipsetMembers('KUBE-NODE-PORT-LOCAL-TCP'), ['30082']);
      assert.ok((await ipsetMembers('KUBE-NODE-PORT-TCP')).includes('30082'));
      assert.deepEqual(await ipsetMembers('KUBE-LOAD-BALANCER-LOCAL'), [`${LOCAL_LB_IP},tcp:80`]);
      assert.deepEqual(await ipsetMembers('KUBE-HEALTH-CHECK-NODE-PORT'), ['30083']);
      assert.ok(
        (await ipsetMembers('KUBE-LOOP-BACK')).includes('10.0.0.2,tcp:8080,10.0.0.2'),
        "the local endpoint's hairpin entry",
      );
      const nat = await mustInNode('/usr/sbin/iptables-nft-save', '-t', 'nat');
      const filter = await mustInNode('/usr/sbin/iptables-nft-save', '-t', 'filter');
      assert.match(
        nat,
        /^-A KUBE-NODE-PORT -p tcp -m comment --comment "[^"]+" -m set --match-set KUBE-NODE-PORT-LOCAL-TCP dst -j RETURN$/m,
      );
      assert.match(
        nat,
        /^-A KUBE-LOAD-BALANCER -m comment --comment "[^"]+" -m set --match-set KUBE-LOAD-BALANCER-LOCAL dst,dst -j RETURN$/m,
      );
      assert.match(
        filter,
        /^-A KUBE-NODE-PORT -m comment --comment "[^"]+" -m set --match-set KUBE-HEALTH-CHECK-NODE-PORT dst -j ACCEPT$/m,
      );

      const viaNodePort = await client.many('tcp', NODE_IP, 30082, 4);
      const viaLb = await client.many('tcp', LOCAL_LB_IP, 80, 4);
      const fromOther = await client.many('tcp', NODE_IP, 30082, 1, CLIENT_OTHER);
      assert.ok(
        [...viaNodePort, ...viaLb].every((a) => a === '10.0.0.2 192.168.7.2'),
        `only the local endpoint, and it sees the client: ${[...viaNodePort, ...viaLb].join(', ')}`,
      );
      assert.deepEqual(fromOther, [`10.0.0.2 ${CLIENT_OTHER}`]);

      // The health check node port: listening once the sync opened it.
      const hcUrl = `http://${NODE_IP}:30083/`;
      const up = await until(
        'the health check node port to answer 200',
        async () => {
          const r = await client.http(hcUrl);
          return r.status === 200 ? r : undefined;
        },
        30_000,
        500,
      );
      assert.match(up.type, /application\/json/);
      assert.deepEqual(JSON.parse(up.body), {
        service: { namespace: 'default', name: 'local' },
        localEndpoints: 1,
        serviceProxyHealthy: true,
      });
      assert.equal(
        up.headers['x-load-balancing-endpoint-weight'],
        '1',
        'the weight header load balancers read, as upstream sends it',
      );

      // The local endpoint goes (its slice now lists only the other node's pod).
      const t1 = Date.now();
      put({ ...LOCAL, endpoints: { IPv4: [REMOTE_POD] } });
      const served = (m: Map<string, { weight: number }>) => [...m].filter(([, d]) => d.weight > 0).map(([k]) => k);
      const npAfter = await until(
        "the NodePort VS to send to the other node's pod",
        async () => {
          const m = await destCounters('TCP', `${NODE_IP}:30082`);
          return served(m).join() === `${REMOTE_POD}:8080` ? m : undefined;
        },
        30_000,
      );
      const switchedMs = Date.now() - t1;
      const lbAfter = await destCounters('TCP', `${LOCAL_LB_IP}:80`);
      const down = await until(
        'the health check node port to answer 503',
        async () => {
          const r = await client.http(hcUrl);
          return r.status === 503 ? r : undefined;
        },
        30_000,
        500,
      );
      assert.deepEqual(JSON.parse(down.body), {
        service: { namespace: 'default', name: 'local' },
        localEndpoints: 0,
        serviceProxyHealthy: true,
      });
      assert.equal(down.headers['x-load-balancing-endpoint-weight'], '0');
      assert.deepEqual(served(lbAfter), [`${REMOTE_POD}:8080`], 'the LB VS falls back too');
      // Graceful termination: the old endpoint still has (TIME_WAIT) connections, so it stays at weight 0.
      const old = npAfter.get('10.0.0.2:8080');
      assert.ok(
        old && old.weight === 0 && old.active + old.inactive > 0,
        `the removed endpoint drains at weight 0: ${JSON.stringify(old)}`,
      );
      assert.deepEqual(await ipsetMembers('KUBE-NODE-PORT-LOCAL-TCP'), ['30082'], 'still no SNAT');
      const noLocal = await ipsetMembers('KUBE-NO-LOCAL-ENDPOINTS');
      const filterNow = await mustInNode('/usr/sbin/iptables-nft-save', '-t', 'filter');
      const rstBefore = await clientOutRsts();
      const viaNodePortNow = await client.unanswered(NODE_IP, 30082);
      const viaLbNow = await client.unanswered(LOCAL_LB_IP, 80);
      const rstAfter = await clientOutRsts();
      const remote = await destCounters('TCP', `${NODE_IP}:30082`);
      const remoteLb = await destCounters('TCP', `${LOCAL_LB_IP}:80`);
      note({
        programmedMs,
        switchedMs,
        healthCheck: {
          up: { status: up.status, body: JSON.parse(up.body), headers: up.headers },
          down: { status: down.status, body: JSON.parse(down.body) },
        },
        afterRemoval: { nodePort: Object.fromEntries(npAfter), lb: Object.fromEntries(lbAfter) },
        noLocal,
        unanswered: {
          viaNodePortNow,
          viaLbNow,
          clientRsts: rstAfter - rstBefore,
          remote: remote.get(`${REMOTE_POD}:8080`),
          remoteLb: remoteLb.get(`${REMOTE_POD}:8080`),
        },
      });
      // The frontends that fell back are listed, and one filter rule drops new connections to
      // them from outside the cluster CIDR: the client's SYNs never reach IPVS.
      assert.ok(noLocal.includes(`${NODE_IP},tcp:30082`) && noLocal.includes(`${LOCAL_LB_IP},tcp:80`), noLocal.join());
      assert.match(
        filterNow,
        /^-A KUBE-PROXY-FIREWALL ! -s \S+ -m comment --comment "[^"]+" -m set --match-set KUBE-NO-LOCAL-ENDPOINTS dst,dst -m addrtype ! --src-type LOCAL -m conntrack --ctstate NEW -j DROP$/m,
      );
      const seenBy = (m: Map<string, { active: number; inactive: number }>) =>
        (m.get(`${REMOTE_POD}:8080`)?.active ?? 0) + (m.get(`${REMOTE_POD}:8080`)?.inactive ?? 0);
      assert.equal(seenBy(remote) + seenBy(remoteLb), 0, "IPVS sent no connection to the other node's pod");

      // The Service is deleted through the API: its VSes, VIP, set entries and health check go.
      removeService('local');
      await until(
        "the Service's VSes to be deleted",
        async () =>
          (await vs('TCP', `${NODE_IP}:30082`)).length === 0 && (await vs('TCP', `${LOCAL_LB_IP}:80`)).length === 0,
        30_000,
      );
      assert.deepEqual(await vs('TCP', '10.96.0.23:80'), []);
      assert.ok(!(await ipvs0Addrs()).includes(`${LOCAL_LB_IP}/32`), 'the LB IP is unbound');
      assert.deepEqual(await ipsetMembers('KUBE-NODE-PORT-LOCAL-TCP'), []);
      assert.deepEqual(await ipsetMembers('KUBE-LOAD-BALANCER-LOCAL'), []);
      assert.deepEqual(await ipsetMembers('KUBE-HEALTH-CHECK-NODE-PORT'), []);
      assert.deepEqual(await ipsetMembers('KUBE-NO-LOCAL-ENDPOINTS'), []);
      const closed = await until(
        'the health check node port to close',
        async () => {
          const r = await client.ask({ op: 'http', url: hcUrl });
          return r.error ? String(r.code) : undefined;
        },
        20_000,
        500,
      );
      assert.equal(closed, 'ECONNREFUSED');
      assert.deepEqual(await syncErrors(), []);
    },
  },
  {
    name: "sessionAffinity ClientIP (issue 5): the VS is persistent with the Service's timeout; each client sticks to one backend, as ipvsadm -Lnc's persistence templates say; affinity removed through the API: the VS is edited in place",
    timeoutMs: 120_000,
    async run(note) {
      put(STICKY);
      const v = await vsWith('TCP', '10.96.0.24:80', 3);
      assert.deepEqual(v, [
        'TCP 10.96.0.24:80 rr persistent 600',
        '-> 10.0.0.2:8080 Masq 1',
        '-> 10.0.0.3:8080 Masq 1',
      ]);
      const a = await client.many('tcp', '10.96.0.24', 80, 6);
      const b = await client.many('tcp', '10.96.0.24', 80, 6, CLIENT_OTHER);
      const conns = (await mustInNode('/usr/sbin/ipvsadm', '-Lnc'))
        .split('\n')
        .map((l) => l.trim().replace(/\s+/g, ' '));
      // Persistence templates: client port 0; their state is NONE, or ASSURED once a connection
      // through them was confirmed (6.1: IP_VS_CTPL_S_ASSURED).
      const templates = conns.filter((l) => /^TCP \S+ (NONE|ASSURED) \S+:0 10\.96\.0\.24:80 /.test(l));
      const template = (src: string) =>
        templates
          .find((l) => l.includes(` ${src}:0 `))
          ?.split(' ')
          .at(-1);
      note({ a, b, templates });
      assert.equal(new Set(a.map(backendOf)).size, 1, `one client, one backend: ${a.join(', ')}`);
      assert.equal(new Set(b.map(backendOf)).size, 1, `the other client, one backend: ${b.join(', ')}`);
      assert.equal(template('192.168.7.2'), `${backendOf(a[0]!)}:8080`, templates.join('\n'));
      assert.equal(template(CLIENT_OTHER), `${backendOf(b[0]!)}:8080`, templates.join('\n'));
      const { affinitySeconds: _, ...plain } = STICKY;
      put(plain);
      await until(
        'the VS to lose persistence',
        async () => (await vs('TCP', '10.96.0.24:80'))[0] === 'TCP 10.96.0.24:80 rr',
        30_000,
      );
      assert.deepEqual(await vs('TCP', '10.96.0.24:80'), [
        'TCP 10.96.0.24:80 rr',
        '-> 10.0.0.2:8080 Masq 1',
        '-> 10.0.0.3:8080 Masq 1',
      ]);
      assert.deepEqual(await syncErrors(), []);
    },
  },
  {
    name: 'SIGTERM (systemctl stop) exits 0 and leaves the VSes and rules; traffic still flows; --cleanup (twice) removes ours and leaves a foreign rule and fwmark service',
    timeoutMs: 240_000,
    async run(note) {
      const vsBefore = await ipvsShape();
      const [r4, r6] = [kubeShape(await save(4)), kubeShape(await save(6))];
      const t0 = Date.now();
      daemon!.kill('SIGTERM');
      const exit = await Promise.race([
        daemonExit!,
        new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), 60_000)),
      ]);
      const stopMs = Date.now() - t0;
      assert.deepEqual(exit, { code: 0, signal: null }, daemonLog().slice(-3000));
      assert.match(daemonLog(), /Stopped; the programmed rules stay in place/);
      assert.deepEqual(await ipvsShape(), vsBefore, 'the virtual servers stay');
      assert.deepEqual(kubeShape(await save(4)), r4, 'the IPv4 companion rules stay');
      assert.deepEqual(kubeShape(await save(6)), r6, 'the IPv6 companion rules stay');
      const after4 = await client.many('tcp', '10.96.0.10', 80, 2);
      const after6 = await client.many('tcp', 'fd00:96::10', 80, 2);
      const afterNp = await client.many('tcp', NODE_IP, 30080, 1);
      assert.ok(
        after4.every((a) => ['10.0.0.2', '10.0.0.3'].includes(backendOf(a))),
        after4.join(', '),
      );
      assert.ok(
        after6.every((a) => ['fd00:10::2', 'fd00:10::3'].includes(backendOf(a))),
        after6.join(', '),
      );
      assert.equal(peerOf(afterNp[0]!), '10.0.0.1', 'NodePort masquerade still works');

      const cleanups: { code: number; ms: number; stderr: string }[] = [];
      for (let i = 0; i < 2; i++) {
        const t = Date.now();
        const r = await run('/usr/sbin/ip', daemonCommand(['--cleanup', '--v', '2']), { timeoutMs: 120_000 });
        cleanups.push({ code: r.code, ms: Date.now() - t, stderr: (r.stderr + r.stdout).slice(-3000) });
      }
      writeFileSync(join(RUN_DIR, 'cleanup.log'), cleanups.map((c) => c.stderr).join('\n----\n'));
      const vsAfter = await ipvsShape();
      const names = (await mustInNode('/usr/sbin/ipset', 'list', '-n')).split('\n').filter(Boolean);
      const [a4, a6] = [await save(4), await save(6)];
      const link = await inNode('/usr/sbin/ip', 'link', 'show', 'kube-ipvs0');
      note({ stopMs, cleanups: cleanups.map((c) => ({ code: c.code, ms: c.ms })), vsAfter, ipsets: names });
      assert.equal(cleanups[0]!.code, 0, cleanups[0]!.stderr);
      assert.equal(cleanups[1]!.code, 0, cleanups[1]!.stderr);
      assert.deepEqual(vsAfter, ['FWM 7 rr'], 'only the foreign fwmark service is left');
      assert.deepEqual(
        names.filter((n) => n.startsWith('KUBE-')),
        [],
      );
      assert.ok(!a4.includes('KUBE-'), a4);
      assert.ok(!a6.includes('KUBE-'), a6);
      assert.match(a4, /-A INPUT -p tcp -m tcp --dport 2222 -j ACCEPT/, 'the foreign rule stays');
      assert.notEqual(link.code, 0, 'kube-ipvs0 is gone');
      const refused = await client.ask({ op: 'tcp', host: '10.96.0.10', port: 80, n: 1 });
      assert.ok(refused.error, 'the ClusterIP no longer answers');
    },
  },
];

export async function teardown(): Promise<void> {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
}
