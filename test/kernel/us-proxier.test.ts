// The userspace proxier against the machine's kernel, proven with real packets: the node
// namespace runs the model, the proxier and its proxy sockets; pods answer with their name and
// the source they saw; a client outside, a pod and the node itself connect. iptables-nft-save
// (an independent reader) shows upstream's KUBE-PORTALS / KUBE-NODEPORT rules.
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { ECHO, makeCluster, NODE_IP, NODE_IP6, podIP, podIP6 } from '../helpers/cluster.ts';
import type { Cluster } from '../helpers/cluster.ts';
import { ep, node, slice, svc } from '../unit/model/helpers.ts';

const P = new URL('./scenarios/us-proxier.ts', import.meta.url).href;
const MODEL = { clusterCIDRs: ['10.244.0.0/16'], serviceCIDRs: ['10.96.0.0/16'] };
const NODE = node('node-a', { internal: [NODE_IP] });

async function cluster(t: ExecutionContext, label: string, pods = 3, model: object = MODEL): Promise<Cluster> {
  const c = await makeCluster(t, label, pods);
  t.teardown(() => c.nodeAgent.call(P, 'stop').catch(() => undefined));
  await c.nodeAgent.call(P, 'start', model);
  return c;
}

const apply = (c: Cluster, change: object) => c.nodeAgent.call<{ errors: string[] }>(P, 'apply', change);
const from = (c: Cluster, who: 'client' | 'node' | number) =>
  who === 'client' ? c.clientAgent : who === 'node' ? c.nodeAgent : c.podAgents[who]!;
const tcp = (c: Cluster, who: 'client' | 'node' | number, ip: string, port: number) =>
  from(c, who).call<string>(ECHO, 'tcp', ip, port);
const tcpMany = (c: Cluster, who: 'client' | 'node' | number, ip: string, port: number, n: number) =>
  from(c, who).call<string[]>(ECHO, 'tcpMany', ip, port, n);
const udp = (c: Cluster, who: 'client' | 'node' | number, ip: string, port: number) =>
  from(c, who).call<string>(ECHO, 'udp', ip, port);
/** The pods that answered, sorted. */
const pods = (answers: string[]) => [...new Set(answers.map((a) => a.split(' ')[0]))].sort();

async function save(c: Cluster, tool = 'iptables-nft-save'): Promise<string> {
  const r = await c.node.exec(tool, []);
  if (r.code !== 0) throw new Error(`${tool}: ${r.stderr}`);
  return r.stdout
    .split('\n')
    .filter((l) => !l.startsWith('#'))
    .map((l) => l.replace(/\[\d+:\d+\]/, ''))
    .join('\n');
}

const ssh = svc('ssh-service1', {
  clusterIP: '10.96.0.10',
  type: 'NodePort',
  ports: [{ protocol: 'TCP', port: 2222, nodePort: 30239 }],
});
const three = slice('ssh-1', 'ssh-service1', [ep(podIP(0)), ep(podIP(1)), ep(podIP(2))], {
  ports: [{ protocol: 'TCP', port: 8080 }],
});

test.serial(
  'ClusterIP and NodePort over TCP: from outside, a pod and the node; round robin; the rules as the issue shows them',
  async (t) => {
    const c = await cluster(t, 'us-tcp');
    const r = await apply(c, { node: NODE, services: [ssh], slices: [three] });
    t.deepEqual(r.errors, []);
    const text = await save(c);
    const m =
      /-A KUBE-PORTALS-CONTAINER -d 10\.96\.0\.10\/32 -p tcp -m comment --comment "default\/ssh-service1:" -m tcp --dport 2222 -j REDIRECT --to-ports (\d+)/.exec(
        text,
      );
    t.truthy(m, text);
    const port = m![1]!;
    for (const line of [
      `-A KUBE-PORTALS-HOST -d 10.96.0.10/32 -p tcp -m comment --comment "default/ssh-service1:" -m tcp --dport 2222 -j DNAT --to-destination ${NODE_IP}:${port}`,
      `-A KUBE-NODEPORT-CONTAINER -p tcp -m comment --comment "default/ssh-service1:" -m tcp --dport 30239 -j REDIRECT --to-ports ${port}`,
      `-A KUBE-NODEPORT-HOST -p tcp -m comment --comment "default/ssh-service1:" -m tcp --dport 30239 -j DNAT --to-destination ${NODE_IP}:${port}`,
      `-A KUBE-NODEPORT-NON-LOCAL -p tcp -m comment --comment "default/ssh-service1:" -m tcp --dport ${port} -m conntrack --ctstate NEW -j ACCEPT`,
      '-A PREROUTING -m comment --comment "handle ClusterIPs; NOTE: this must be before the NodePort rules" -j KUBE-PORTALS-CONTAINER',
      '-A PREROUTING -m addrtype --dst-type LOCAL -m comment --comment "handle service NodePorts; NOTE: this must be the last rule in the chain" -j KUBE-NODEPORT-CONTAINER',
      '-A INPUT -m comment --comment "Ensure that non-local NodePort traffic can flow" -j KUBE-NODEPORT-NON-LOCAL',
    ])
      t.true(text.split('\n').includes(line), `missing: ${line}\n${text}`);

    const outside = await tcpMany(c, 'client', '10.96.0.10', 2222, 6);
    t.deepEqual(pods(outside), ['pod1', 'pod2', 'pod3'], `round robin: ${outside.join(', ')}`);
    // The proxy connects from the node: the endpoint sees the node's address on its link.
    t.true(
      outside.every((a) => /^pod([123]) 10\.244\.\1\.1$/.test(a)),
      outside.join(', '),
    );
    t.regex(await tcp(c, 0, '10.96.0.10', 2222), /^pod[123] 10\.244\.[123]\.[12]$/, 'from a pod');
    t.regex(await tcp(c, 'node', '10.96.0.10', 2222), /^pod[123] /, 'from the node itself (DNAT to the node IP)');
    t.regex(await tcp(c, 'client', NODE_IP, 30239), /^pod[123] /, 'node port from outside');
    t.regex(await tcp(c, 'node', NODE_IP, 30239), /^pod[123] /, 'node port from the node');
    t.regex(await tcp(c, 0, NODE_IP, 30239), /^pod[123] /, 'node port from a pod');
    t.deepEqual(await c.nodeAgent.call<string[]>(P, 'warnings'), []);
  },
);

test.serial('UDP, externalIPs and load-balancer IPs; no endpoints: refused', async (t) => {
  const c = await cluster(t, 'us-ext', 2);
  const dns = svc('dns', { clusterIP: '10.96.0.53', ports: [{ name: 'dns', protocol: 'UDP', port: 53 }] });
  const lb = svc('lb', {
    clusterIP: '10.96.0.20',
    type: 'LoadBalancer',
    ports: [{ name: 'p', protocol: 'TCP', port: 80, nodePort: 30081 }],
    externalIPs: ['10.50.0.1'],
    ingress: [{ ip: '10.60.0.1' }],
  });
  const r = await apply(c, {
    node: NODE,
    services: [dns, lb, svc('empty', { clusterIP: '10.96.0.11' })],
    slices: [
      slice('dns-1', 'dns', [ep(podIP(0))], { ports: [{ name: 'dns', port: 8080, protocol: 'UDP' }] }),
      slice('lb-1', 'lb', [ep(podIP(0)), ep(podIP(1))]),
    ],
  });
  t.deepEqual(r.errors, []);
  t.regex(await udp(c, 'client', '10.96.0.53', 53), /^pod1 /, 'UDP from outside');
  t.regex(await udp(c, 1, '10.96.0.53', 53), /^pod1 /, 'UDP from a pod');
  t.regex(await udp(c, 'node', '10.96.0.53', 53), /^pod1 /, 'UDP from the node');
  t.regex(await tcp(c, 'client', '10.50.0.1', 80), /^pod[12] /, 'external IP');
  t.regex(await tcp(c, 'client', '10.60.0.1', 80), /^pod[12] /, 'load-balancer IP');
  t.regex(await tcp(c, 'node', '10.60.0.1', 80), /^pod[12] /, 'load-balancer IP from the node');
  t.is(await tcp(c, 'client', '10.96.0.11', 80), 'ECONNRESET', 'no endpoints: the connection is reset');
  const text = await save(c);
  t.regex(
    text,
    /-A KUBE-PORTALS-CONTAINER -d 10\.50\.0\.1\/32 -p tcp -m comment --comment "default\/lb:p" -m tcp --dport 80 -m physdev ! --physdev-is-in -j REDIRECT --to-ports \d+/,
  );
  t.regex(
    text,
    /-A KUBE-PORTALS-HOST -d 10\.50\.0\.1\/32 -p tcp -m comment --comment "default\/lb:p" -m tcp --dport 80 -m addrtype --dst-type LOCAL -j DNAT --to-destination 10\.1\.0\.1:\d+/,
  );
  t.regex(
    text,
    /-A KUBE-PORTALS-CONTAINER -d 10\.96\.0\.53\/32 -p udp -m comment --comment "default\/dns:dns" -m udp --dport 53 -j REDIRECT --to-ports \d+/,
  );

  // A Service removed: its rules go, the rest stays.
  await apply(c, { services: ['default/lb'] });
  const after = await save(c);
  t.false(after.includes('default/lb:p'), after);
  t.regex(await udp(c, 'client', '10.96.0.53', 53), /^pod1 /);
});

test.serial(
  'a restart replaces the rules of the previous sockets; --cleanup removes ours and nothing else',
  async (t) => {
    const c = await cluster(t, 'us-clean');
    await c.node.run('iptables-nft', '-t', 'nat', '-A', 'PREROUTING', '-s', '192.0.2.1/32', '-j', 'ACCEPT');
    await c.node.run('iptables-nft', '-A', 'INPUT', '-s', '192.0.2.2/32', '-j', 'DROP');
    await apply(c, { node: NODE, services: [ssh], slices: [three] });
    const portOf = (text: string) => /--dport 2222 -j REDIRECT --to-ports (\d+)/.exec(text)?.[1];
    const first = portOf(await save(c));
    await c.nodeAgent.call(P, 'start', MODEL);
    await apply(c, { node: NODE, services: [ssh], slices: [three] });
    const text = await save(c);
    t.is(text.split('\n').filter((l) => l.includes('--dport 2222 -j REDIRECT')).length, 1, text);
    t.is(text.split('\n').filter((l) => l.includes('-j KUBE-PORTALS-CONTAINER')).length, 1, 'one jump');
    t.not(portOf(text), undefined);
    t.log(`proxy port before the restart ${first}, after ${portOf(text)}`);
    t.regex(await tcp(c, 'client', '10.96.0.10', 2222), /^pod[123] /);

    await c.nodeAgent.call(P, 'cleanup');
    await c.nodeAgent.call(P, 'cleanup');
    const left = await save(c);
    t.deepEqual(
      left.split('\n').filter((l) => /KUBE-(PORTALS|NODEPORT)/.test(l)),
      [],
      left,
    );
    t.true(left.includes('-A PREROUTING -s 192.0.2.1/32 -j ACCEPT'));
    t.true(left.includes('-A INPUT -s 192.0.2.2/32 -j DROP'));
  },
);

test.serial(
  'a UDP client keeping its source port across a restart reaches the new socket (stale conntrack entries deleted)',
  async (t) => {
    const c = await cluster(t, 'us-udpct', 1);
    const dns = svc('dns', { clusterIP: '10.96.0.53', ports: [{ name: 'dns', protocol: 'UDP', port: 53 }] });
    const eps = slice('dns-1', 'dns', [ep(podIP(0))], { ports: [{ name: 'dns', port: 8080, protocol: 'UDP' }] });
    await apply(c, { node: NODE, services: [dns], slices: [eps] });
    const ask = () => c.clientAgent.call<string>(ECHO, 'udp', '10.96.0.53', 53, 40053);
    t.regex(await ask(), /^pod1 /);
    await c.nodeAgent.call(P, 'start', MODEL);
    const r = await apply(c, { node: NODE, services: [dns], slices: [eps] });
    t.deepEqual(r.errors, []);
    t.regex(await ask(), /^pod1 /, 'the same client address and port, after the sockets moved');
  },
);

test.serial(
  'node ports are claimed as upstream: nobody else can take one; one already taken gets no rules',
  async (t) => {
    const c = await cluster(t, 'us-claim', 1);
    t.teardown(() => c.nodeAgent.call(P, 'closeElsewhere').catch(() => undefined));
    t.is(await c.nodeAgent.call<string>(P, 'listenElsewhere', 30240), 'listening', 'taken before the Service exists');
    const np = (name: string, nodePort: number) =>
      svc(name, {
        clusterIP: name === 'a' ? '10.96.0.21' : '10.96.0.22',
        type: 'NodePort',
        ports: [{ name: 'p', protocol: 'TCP', port: 80, nodePort }],
      });
    const r = await apply(c, {
      node: NODE,
      services: [np('a', 30239), np('b', 30240)],
      slices: [slice('a-1', 'a', [ep(podIP(0))]), slice('b-1', 'b', [ep(podIP(0))])],
    });
    t.is(r.errors.length, 1, r.errors.join('; '));
    t.regex(r.errors[0]!, /^default\/b:p: its node port is not proxied: can't open node port TCP\/30240: .*EADDRINUSE/);
    t.is(await c.nodeAgent.call<string>(P, 'listenElsewhere', 30239), 'EADDRINUSE', 'a claimed node port');
    t.regex(await tcp(c, 'client', NODE_IP, 30239), /^pod1 /);
    t.regex(await tcp(c, 'client', '10.96.0.22', 80), /^pod1 /, "b's cluster IP still works");
    const text = await save(c);
    t.false(text.includes('--dport 30240'), text);
    // The Service gone, its port is free again.
    await apply(c, { services: ['default/a'] });
    await c.nodeAgent.call(P, 'closeElsewhere');
    t.is(await c.nodeAgent.call<string>(P, 'listenElsewhere', 30239), 'listening');
  },
);

test.serial('a service port whose socket cannot open (port range used up) is reported and gets no rules', async (t) => {
  const c = await makeCluster(t, 'us-full', 1);
  t.teardown(() => c.nodeAgent.call(P, 'stop').catch(() => undefined));
  await c.nodeAgent.call(P, 'start', { ...MODEL, portRange: { first: 40500, last: 40500 } });
  const r = await apply(c, {
    node: NODE,
    services: [svc('a', { clusterIP: '10.96.0.31' }), svc('b', { clusterIP: '10.96.0.32' })],
    slices: [slice('a-1', 'a', [ep(podIP(0))]), slice('b-1', 'b', [ep(podIP(0))])],
  });
  t.is(r.errors.length, 1, r.errors.join('; '));
  t.regex(r.errors[0]!, /^default\/b:p: no proxy socket, its rules are not written: .+$/);
  const text = await save(c);
  t.regex(text, /-A KUBE-PORTALS-CONTAINER -d 10\.96\.0\.31\/32 .* -j REDIRECT --to-ports 40500/);
  t.false(text.includes('10.96.0.32'), text);
  t.regex(await tcp(c, 'client', '10.96.0.31', 80), /^pod1 /);
});

test.serial('IPv6: ClusterIP and NodePort in ip6 nat, from outside and from the node', async (t) => {
  const c = await cluster(t, 'us-v6', 2, { family: 'IPv6', clusterCIDRs: ['fd44::/16'], serviceCIDRs: ['fd96::/112'] });
  const s = svc('web6', {
    clusterIPs: ['fd96::10'],
    type: 'NodePort',
    ports: [{ name: 'p', protocol: 'TCP', port: 80, nodePort: 30600 }],
  });
  const r = await apply(c, {
    node: node('node-a', { internal: [NODE_IP6] }),
    services: [{ ...s, spec: { ...s.spec, ipFamilies: ['IPv6'] } }],
    slices: [slice('web6-1', 'web6', [ep(podIP6(0)), ep(podIP6(1))], { addressType: 'IPv6' })],
  });
  t.deepEqual(r.errors, []);
  const got = await tcpMany(c, 'client', 'fd96::10', 80, 4);
  t.deepEqual(pods(got), ['pod1', 'pod2'], got.join(', '));
  t.regex(await tcp(c, 'node', 'fd96::10', 80), /^pod[12] /);
  t.regex(await tcp(c, 'client', NODE_IP6, 30600), /^pod[12] /);
  const text = await save(c, 'ip6tables-nft-save');
  t.regex(
    text,
    /-A KUBE-PORTALS-HOST -d fd96::10\/128 -p tcp -m comment --comment "default\/web6:p" -m tcp --dport 80 -j DNAT --to-destination \[fd01::1\]:\d+/,
  );
});

test.serial('explain: the proxy socket and the rules read back', async (t) => {
  const c = await cluster(t, 'us-expl', 1);
  await apply(c, {
    node: NODE,
    services: [ssh],
    slices: [slice('ssh-1', 'ssh-service1', [ep(podIP(0))], { ports: [{ protocol: 'TCP', port: 8080 }] })],
  });
  const d = await c.nodeAgent.call<{
    kernel: { where: string; key: string }[];
    expected: { where: string; key: string }[];
  }>(P, 'describe', 'default/ssh-service1', '');
  t.deepEqual(d.kernel, d.expected);
  t.regex(d.kernel[0]!.key, /^TCP 0\.0\.0\.0:\d+$/);
  t.is(d.kernel.length, 6, JSON.stringify(d.kernel));
});
