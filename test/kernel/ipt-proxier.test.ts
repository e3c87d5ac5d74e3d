// The iptables proxier against the machine's kernel, proven with real packets: a node
// namespace runs the model and the proxier, pods answer with their name and the source they
// saw, an external client connects. iptables-nft-save (an independent reader) shows the rules.
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { ECHO, makeCluster, NODE_IP, podGateway, podIP } from '../helpers/cluster.ts';
import type { Cluster } from '../helpers/cluster.ts';
import { ep, slice, svc } from '../unit/model/helpers.ts';

const P = new URL('./scenarios/ipt-proxier.ts', import.meta.url).href;
const MODEL = { clusterCIDRs: ['10.244.0.0/16'], serviceCIDRs: ['10.96.0.0/16'] };
const tcpPort = (port: number, nodePort?: number) => [{ name: 'p', protocol: 'TCP', port, ...(nodePort ? { nodePort } : {}) }];

async function cluster(t: ExecutionContext, label: string, pods = 3, model: object = MODEL): Promise<Cluster> {
  const c = await makeCluster(t, label, pods);
  await c.nodeAgent.call(P, 'start', model);
  return c;
}

const apply = (c: Cluster, change: object, full = false) => c.nodeAgent.call<{ errors: string[]; full: boolean }>(P, 'apply', change, full);
const from = (c: Cluster, who: 'client' | number) => (who === 'client' ? c.clientAgent : c.podAgents[who]!);
const tcp = (c: Cluster, who: 'client' | number, ip: string, port: number) => from(c, who).call<string>(ECHO, 'tcp', ip, port);
const tcpMany = (c: Cluster, who: 'client' | number, ip: string, port: number, n: number) => from(c, who).call<string[]>(ECHO, 'tcpMany', ip, port, n);
const pods = (answers: string[]) => new Set(answers.map((a) => a.split(' ')[0]));

/** iptables-nft-save of the node, without counters and comments lines. */
async function save(c: Cluster, tool = 'iptables-nft-save'): Promise<string> {
  const r = await c.node.exec(tool, []);
  if (r.code !== 0) throw new Error(`${tool}: ${r.stderr}`);
  return r.stdout
    .split('\n')
    .filter((l) => !l.startsWith('#'))
    .map((l) => l.replace(/\[\d+:\d+\]/, ''))
    .join('\n');
}

const web3 = {
  services: [svc('web', { clusterIP: '10.96.0.10', type: 'NodePort', ports: tcpPort(80, 30080) })],
  slices: [slice('web-1', 'web', [ep(podIP(0)), ep(podIP(1)), ep(podIP(2))])],
};

test.serial('ClusterIP and NodePort: balanced over the endpoints, masqueraded from outside, hairpin masqueraded', async (t) => {
  const c = await cluster(t, 'ipt-np');
  const r = await apply(c, web3);
  t.deepEqual(r.errors, []);
  const text = await save(c);
  t.regex(text, /-A KUBE-SERVICES -d 10\.96\.0\.10\/32 -p tcp -m comment --comment "default\/web:p cluster IP" -m tcp --dport 80 -j KUBE-SVC-/);
  t.regex(text, /-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES/);

  const viaVip = await tcpMany(c, 'client', '10.96.0.10', 80, 15);
  t.true(viaVip.every((a) => /^pod[123] 10\.244\.[123]\.1$/.test(a)), `answers: ${viaVip.join(', ')}`);
  t.true(pods(viaVip).size >= 2, 'random balancing reached more than one endpoint');

  const viaNodePort = await tcpMany(c, 'client', NODE_IP, 30080, 6);
  t.true(viaNodePort.every((a) => /^pod[123] 10\.244\.[123]\.1$/.test(a)), `node port answers: ${viaNodePort.join(', ')}`);

  const fromPod1 = await tcpMany(c, 0, '10.96.0.10', 80, 15);
  for (const a of fromPod1) {
    const [name, src] = a.split(' ');
    t.is(src, name === 'pod1' ? podGateway(0) : podIP(0), `answer ${a}`);
  }
  t.deepEqual(await c.nodeAgent.call<string[]>(P, 'warnings'), []);
});

test.serial('no endpoints: REJECT, from outside and from a pod', async (t) => {
  const c = await cluster(t, 'ipt-rej', 1);
  await apply(c, {
    services: [svc('web', { clusterIP: '10.96.0.10' }), svc('empty', { clusterIP: '10.96.0.11' })],
    slices: [slice('web-1', 'web', [ep(podIP(0))])],
  });
  t.is(await tcp(c, 'client', '10.96.0.10', 80), `pod1 ${podGateway(0)}`);
  t.is(await tcp(c, 'client', '10.96.0.11', 80), 'ECONNREFUSED', 'a Service without endpoints rejects');
  t.is(await tcp(c, 0, '10.96.0.11', 80), 'ECONNREFUSED', 'also from a pod');
});
