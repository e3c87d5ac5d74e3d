// loadBalancerSourceRanges and traffic from the node itself, with real packets (issue 16
// item 9), as upstream's nftables firewall chain decides it: a range holding the node's IP
// admits the node, also when its connection to a VIP the node holds locally leaves with the
// VIP as source; a range without it keeps the node out. Nested ranges program cleanly.
// Set-up as in nft-proxier.test.ts (helpers/cluster.ts); the node's IP is NODE_IP (its Node
// object's InternalIP).
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { CLIENT_IP, ECHO, makeCluster, NODE_IP, podIP } from '../helpers/cluster.ts';
import type { Cluster } from '../helpers/cluster.ts';
import { ep, node, slice, svc } from '../unit/model/helpers.ts';

const P = new URL('./scenarios/nft-proxier.ts', import.meta.url).href;
const MODEL = { clusterCIDRs: ['10.244.0.0/16'], serviceCIDRs: ['10.96.0.0/16'] };
/** Held by the node as a local address, as a VIP-like load balancer does. */
const LOCAL_VIP = '10.60.0.1';
/** Not a local address; the node reaches it from its own IP (a host route with `src NODE_IP`). */
const REMOTE_VIP = '10.60.0.2';

const apply = async (t: ExecutionContext, c: Cluster, change: object): Promise<void> => {
  const r = await c.nodeAgent.call<{ errors: string[] }>(P, 'apply', change);
  t.deepEqual(r.errors, [], 'the sync succeeded');
};
const tcp = (c: Cluster, who: 'client' | 'node', ip: string) =>
  (who === 'client' ? c.clientAgent : c.nodeAgent).call<string>(ECHO, 'tcp', ip, 80);
const answered = /^pod[12] /;

async function lbCluster(t: ExecutionContext): Promise<{ c: Cluster; lb: (ranges: string[]) => Promise<void> }> {
  const c = await makeCluster(t, 'fw', 2);
  // On loopback (this kernel has no dummy links); local all the same.
  await c.node.run('ip', 'link', 'set', 'lo', 'up');
  await c.node.run('ip', 'addr', 'add', `${LOCAL_VIP}/32`, 'dev', 'lo');
  await c.node.run('ip', 'route', 'add', `${REMOTE_VIP}/32`, 'dev', 'to-client', 'src', NODE_IP);
  await c.nodeAgent.call(P, 'start', MODEL);
  const ingress = [{ ip: LOCAL_VIP }, { ip: REMOTE_VIP }];
  const lb = (ranges: string[]) =>
    apply(t, c, {
      node: node('node-a', { internal: [NODE_IP] }),
      services: [
        svc('lb', {
          clusterIP: '10.96.0.20',
          type: 'LoadBalancer',
          ports: [{ name: 'p', protocol: 'TCP', port: 80, nodePort: 30080 }],
          ingress,
          sourceRanges: ranges,
        }),
      ],
      slices: [slice('lb-1', 'lb', [ep(podIP(0)), ep(podIP(1))])],
    });
  return { c, lb };
}

test.serial(
  'source ranges holding the node IP admit the node, also to a VIP it holds locally (source = the VIP)',
  async (t) => {
    const { c, lb } = await lbCluster(t);
    await lb([`${NODE_IP}/32`]);
    t.regex(await tcp(c, 'node', REMOTE_VIP), answered, 'node -> VIP from the node IP: allowed');
    t.regex(
      await tcp(c, 'node', LOCAL_VIP),
      answered,
      'node -> a VIP it holds (source = the VIP): allowed, as upstream',
    );
    t.is(await tcp(c, 'client', LOCAL_VIP), 'ETIMEDOUT', 'the client is outside the ranges: dropped');
    t.is(await tcp(c, 'client', REMOTE_VIP), 'ETIMEDOUT', 'the client is outside the ranges: dropped (second VIP)');
  },
);

test.serial('source ranges without the node IP keep the node out, whatever source its connection uses', async (t) => {
  const { c, lb } = await lbCluster(t);
  await lb([`${CLIENT_IP}/32`]);
  t.is(await tcp(c, 'node', REMOTE_VIP), 'ETIMEDOUT', 'node -> VIP from the node IP: dropped');
  t.is(await tcp(c, 'node', LOCAL_VIP), 'ETIMEDOUT', 'node -> a VIP it holds: dropped');
  t.regex(await tcp(c, 'client', REMOTE_VIP), answered, 'the client is inside the ranges');
  // A range holding the VIP itself (but not the node IP) admits the node's VIP-sourced connection, as upstream's set
  // does.
  await lb([`${CLIENT_IP}/32`, '10.60.0.0/24']);
  t.regex(await tcp(c, 'node', LOCAL_VIP), answered, 'node -> local VIP, the VIP inside a range: allowed');
  t.is(await tcp(c, 'node', REMOTE_VIP), 'ETIMEDOUT', 'node -> VIP from the node IP, still outside: dropped');
});

test.serial('nested source ranges (and VIPs inside them) are programmed; the widest one decides', async (t) => {
  const { c, lb } = await lbCluster(t);
  // 10.0.0.0/8 holds the node IP, so the VIPs are admitted too; they and 10.1.0.0/24 lie inside it.
  await lb(['10.1.0.0/24', '10.0.0.0/8', `${CLIENT_IP}/32`]);
  t.regex(await tcp(c, 'client', LOCAL_VIP), answered, 'client inside the ranges');
  t.regex(await tcp(c, 'node', LOCAL_VIP), answered, 'node -> local VIP');
  // Narrowed again: the elements of the wide range go, the client is out.
  await lb(['192.0.2.0/24', '192.0.2.0/25']);
  t.is(await tcp(c, 'client', LOCAL_VIP), 'ETIMEDOUT', 'client outside the narrowed ranges: dropped');
  t.is(await tcp(c, 'node', LOCAL_VIP), 'ETIMEDOUT', 'node outside the narrowed ranges: dropped');
});
