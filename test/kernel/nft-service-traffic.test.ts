// Per-Service traffic counters in nftables mode (--service-traffic-metrics), counted by the
// kernel for real packets: each counter rises by exactly what was sent, per frontend kind;
// without the flag the table holds no counter at all, and turning it off removes them.
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { ECHO, makeCluster, NODE_IP, NODE_IP6, podIP, podIP6 } from '../helpers/cluster.ts';
import type { Cluster } from '../helpers/cluster.ts';
import { NFT_BINARIES, roundTrip } from './nft-binaries.ts';
import { ep, slice, svc } from '../unit/model/helpers.ts';

const P = new URL('./scenarios/nft-proxier.ts', import.meta.url).href;
const MODEL = { clusterCIDRs: ['10.244.0.0/16'], serviceCIDRs: ['10.96.0.0/16'] };
type Counts = Record<string, { packets?: number; bytes?: number; connections?: number }>;

const ID = 'default/dns:p/UDP';
/** "hello" in one IPv4 UDP datagram: 20 (IP) + 8 (UDP) + 5 bytes, as nf_tables counts a packet. */
const DATAGRAM = 33;

const service = svc('dns', {
  clusterIP: '10.96.0.53',
  type: 'NodePort',
  externalIPs: ['10.50.0.53'],
  ports: [{ name: 'p', protocol: 'UDP', port: 53, nodePort: 30053 }],
});
const endpoints = slice('dns-1', 'dns', [ep(podIP(0)), ep(podIP(1))], {
  ports: [{ name: 'p', protocol: 'UDP', port: 8080 }],
});
const web = svc('web', { clusterIP: '10.96.0.80', ports: [{ name: 'p', protocol: 'TCP', port: 80 }] });
const webEndpoints = slice('web-1', 'web', [ep(podIP(0)), ep(podIP(1))]);

async function cluster(t: ExecutionContext, label: string, serviceTraffic: boolean): Promise<Cluster> {
  const c = await makeCluster(t, label, 2);
  await c.nodeAgent.call(P, 'start', { ...MODEL, serviceTraffic });
  const r = await c.nodeAgent.call<{ errors: string[] }>(P, 'apply', {
    services: [service, web],
    slices: [endpoints, webEndpoints],
  });
  t.deepEqual(r.errors, []);
  return c;
}

const counts = (c: Cluster) => c.nodeAgent.call<Counts>(P, 'traffic');
const udp = (c: Cluster, who: 'client' | 'node', ip: string, port: number, srcPort: number) =>
  (who === 'client' ? c.clientAgent : c.nodeAgent).call<string>(ECHO, 'udp', ip, port, srcPort);

test.serial('counters rise by exactly the datagrams and flows sent, per frontend kind', async (t) => {
  const c = await cluster(t, 'trf', true);
  const zero = await counts(c);
  t.deepEqual(zero[`${ID}|cluster-ip`], { packets: 0, bytes: 0, connections: 0 });
  t.deepEqual(zero[`${ID}|external`], { packets: 0, bytes: 0, connections: 0 });
  t.deepEqual(zero[`${ID}|node-port`], { packets: 0, bytes: 0, connections: 0 });

  // Cluster IP from outside: 4 flows of one datagram, then one flow of 3 (one source port).
  for (let i = 0; i < 4; i++) t.regex(await udp(c, 'client', '10.96.0.53', 53, 41000 + i), /^pod[12] /);
  for (let i = 0; i < 3; i++) t.regex(await udp(c, 'client', '10.96.0.53', 53, 41100), /^pod[12] /);
  // The node itself (output path, not forwarded): 2 flows.
  for (let i = 0; i < 2; i++) t.regex(await udp(c, 'node', '10.96.0.53', 53, 41200 + i), /^pod[12] /);
  // A pod (forwarded, as the client's): 1 flow.
  t.regex(await c.podAgents[1]!.call<string>(ECHO, 'udp', '10.96.0.53', 53, 41250), /^pod[12] /);
  // External IP: 2 flows; node port: 3 flows.
  for (let i = 0; i < 2; i++) t.regex(await udp(c, 'client', '10.50.0.53', 53, 41300 + i), /^pod[12] /);
  for (let i = 0; i < 3; i++) t.regex(await udp(c, 'client', NODE_IP, 30053, 41400 + i), /^pod[12] /);

  const after = await counts(c);
  t.deepEqual(after[`${ID}|cluster-ip`], { packets: 10, bytes: 10 * DATAGRAM, connections: 8 });
  t.deepEqual(after[`${ID}|external`], { packets: 2, bytes: 2 * DATAGRAM, connections: 2 });
  t.deepEqual(after[`${ID}|node-port`], { packets: 3, bytes: 3 * DATAGRAM, connections: 3 });

  // A full sync (the periodic one) leaves the counts alone.
  await c.nodeAgent.call(P, 'apply', {}, true);
  t.deepEqual((await counts(c))[`${ID}|cluster-ip`], { packets: 10, bytes: 10 * DATAGRAM, connections: 8 });

  // TCP: one connection each, however many packets a connection takes.
  const answers = await c.clientAgent.call<string[]>(ECHO, 'tcpMany', '10.96.0.80', 80, 5);
  t.true(
    answers.every((a) => /^pod[12] /.test(a)),
    answers.join(', '),
  );
  const tcp = (await counts(c))['default/web:p/TCP|cluster-ip']!;
  t.is(tcp.connections, 5);
  t.true(tcp.packets! >= 5 * 3, `at least SYN, ACK and FIN per connection: ${tcp.packets}`);

  // nft prints the counting ruleset cleanly and loads its printout back (every binary at hand).
  for (const [i, nft] of NFT_BINARIES.entries()) await roundTrip(t, nft, c.node, `trf-rt-${i}`);
});

test.serial('without the flag the table holds no counter; turning it off removes them', async (t) => {
  const c = await cluster(t, 'trf0', false);
  const text = async (): Promise<string> => JSON.stringify(await c.node.nftJson());
  t.false(/counter|traffic|count-/.test(await text()), 'no counter, traffic map or counting chain');
  t.deepEqual(await counts(c), {});

  await c.nodeAgent.call(P, 'start', { ...MODEL, serviceTraffic: true });
  await c.nodeAgent.call(P, 'apply', { services: [service], slices: [endpoints] });
  t.true((await text()).includes('traffic-cluster-ip-'), 'restarted with the flag: counted');
  t.regex(await udp(c, 'client', '10.96.0.53', 53, 42000), /^pod[12] /);
  t.is((await counts(c))[`${ID}|cluster-ip`]?.connections, 1);

  await c.nodeAgent.call(P, 'start', { ...MODEL, serviceTraffic: false });
  await c.nodeAgent.call(P, 'apply', { services: [service], slices: [endpoints] });
  t.false(/counter|traffic|count-/.test(await text()), 'restarted without the flag: all gone');
  t.regex(await udp(c, 'client', '10.96.0.53', 53, 42100), /^pod[12] /, 'and the Service still works');
});

test.serial('IPv6: the ip6 table counts connections and packets per frontend kind', async (t) => {
  const c = await makeCluster(t, 'trf6', 2);
  await c.nodeAgent.call(P, 'start', {
    family: 'IPv6',
    clusterCIDRs: ['fd44::/16'],
    serviceCIDRs: ['fd96::/112'],
    serviceTraffic: true,
  });
  const s = svc('web6', {
    clusterIPs: ['fd96::10'],
    type: 'NodePort',
    ports: [{ name: 'p', protocol: 'TCP', port: 80, nodePort: 30600 }],
  });
  const r = await c.nodeAgent.call<{ errors: string[] }>(P, 'apply', {
    services: [{ ...s, spec: { ...s.spec, ipFamilies: ['IPv6'] } }],
    slices: [slice('web6-1', 'web6', [ep(podIP6(0)), ep(podIP6(1))], { addressType: 'IPv6' })],
  });
  t.deepEqual(r.errors, []);
  const viaVip = await c.clientAgent.call<string[]>(ECHO, 'tcpMany', 'fd96::10', 80, 4);
  const viaNodePort = await c.clientAgent.call<string[]>(ECHO, 'tcpMany', NODE_IP6, 30600, 2);
  t.true(
    [...viaVip, ...viaNodePort].every((a) => /^pod[12] /.test(a)),
    [...viaVip, ...viaNodePort].join(', '),
  );
  const counts = await c.nodeAgent.call<Counts>(P, 'traffic');
  const vip = counts['default/web6:p/TCP|cluster-ip']!;
  const np = counts['default/web6:p/TCP|node-port']!;
  t.is(vip.connections, 4);
  t.is(np.connections, 2);
  t.true(vip.packets! >= 4 * 3 && np.packets! >= 2 * 3, `SYN, ACK, FIN at least: ${vip.packets}, ${np.packets}`);
  // IPv6 headers are 40 bytes: a TCP packet without payload is at least 60.
  t.true(vip.bytes! >= vip.packets! * 60, `${vip.bytes} bytes in ${vip.packets} packets`);
});
