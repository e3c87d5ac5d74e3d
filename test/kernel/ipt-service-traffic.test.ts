// Per-Service traffic counters in iptables mode (--service-traffic-metrics): new connections
// per Service port and frontend kind, from the counters of our nat capture rules, rising by
// exactly the flows sent (real packets); packets and bytes are not counted in this mode.
import test from 'ava';
import { ECHO, makeCluster, NODE_IP, podIP } from '../helpers/cluster.ts';
import { ep, slice, svc } from '../unit/model/helpers.ts';

const P = new URL('./scenarios/ipt-proxier.ts', import.meta.url).href;
const MODEL = { clusterCIDRs: ['10.244.0.0/16'], serviceCIDRs: ['10.96.0.0/16'] };
type Counts = Record<string, { packets?: number; bytes?: number; connections?: number }>;
const ID = 'default/dns:p/UDP';

test('connections per frontend kind rise by exactly the flows sent', async (t) => {
  const c = await makeCluster(t, 'itrf', 2);
  await c.nodeAgent.call(P, 'start', MODEL);
  const r = await c.nodeAgent.call<{ errors: string[] }>(P, 'apply', {
    services: [
      svc('dns', {
        clusterIP: '10.96.0.53',
        type: 'LoadBalancer',
        externalIPs: ['10.50.0.53'],
        ingress: [{ ip: '10.60.0.53' }],
        ports: [{ name: 'p', protocol: 'UDP', port: 53, nodePort: 30053 }],
      }),
    ],
    slices: [
      slice('dns-1', 'dns', [ep(podIP(0)), ep(podIP(1))], { ports: [{ name: 'p', protocol: 'UDP', port: 8080 }] }),
    ],
  });
  t.deepEqual(r.errors, []);
  const counts = () => c.nodeAgent.call<Counts>(P, 'traffic');
  t.deepEqual(await counts(), {
    [`${ID}|cluster-ip`]: { connections: 0 },
    [`${ID}|external`]: { connections: 0 },
    [`${ID}|node-port`]: { connections: 0 },
  });
  const udp = (ip: string, port: number, srcPort: number) => c.clientAgent.call<string>(ECHO, 'udp', ip, port, srcPort);
  // Cluster IP: 3 flows of one datagram, and one flow of 3 datagrams (one connection).
  for (let i = 0; i < 3; i++) t.regex(await udp('10.96.0.53', 53, 43000 + i), /^pod[12] /);
  for (let i = 0; i < 3; i++) t.regex(await udp('10.96.0.53', 53, 43100), /^pod[12] /);
  // External IP and load-balancer IP (summed as "external"), node port.
  t.regex(await udp('10.50.0.53', 53, 43200), /^pod[12] /);
  t.regex(await udp('10.60.0.53', 53, 43201), /^pod[12] /);
  for (let i = 0; i < 2; i++) t.regex(await udp(NODE_IP, 30053, 43300 + i), /^pod[12] /);
  t.deepEqual(await counts(), {
    [`${ID}|cluster-ip`]: { connections: 4 },
    [`${ID}|external`]: { connections: 2 },
    [`${ID}|node-port`]: { connections: 2 },
  });
  // An endpoint change (a partial sync) and a full sync keep the capture rules, and their counts.
  await c.nodeAgent.call(P, 'apply', {
    slices: [slice('dns-1', 'dns', [ep(podIP(0))], { ports: [{ name: 'p', protocol: 'UDP', port: 8080 }] })],
  });
  await c.nodeAgent.call(P, 'apply', {}, true);
  t.is((await counts())[`${ID}|cluster-ip`]?.connections, 4);
});
