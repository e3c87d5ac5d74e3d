// The IPVS proxier over fakes: what each Service type programs, incremental syncs touching
// only what changed, add-before-remove, graceful termination on a fake clock, restart
// recovery, drift repair on full syncs, cleanup and start-up errors.
import test from 'ava';
import { NODE } from '../../model/helpers.ts';
import { nullLogger } from '../../../../src/base/logger.ts';
import { IpvsProxier, IpvsSyncError } from '../../../../src/proxier/ipvs/index.ts';
import { NodePortAddressPicker } from '../../../../src/proxier/ipvs/plan.ts';
import { ep, harness, NODE_IP, slice, svc } from './harness.ts';

const TCP = (port: number, nodePort?: number) => ({
  name: 'p',
  protocol: 'TCP',
  port,
  ...(nodePort ? { nodePort } : {}),
});

test('ClusterIP: one VS with masq real servers, VIP on kube-ipvs0, KUBE-CLUSTER-IP and KUBE-IPVS-IPS, sysctls', async (t) => {
  const h = harness();
  h.tracker.onService(undefined, svc('web'));
  h.tracker.onEndpointSlice(slice('web-1', 'web', [ep('10.0.0.1'), ep('10.0.0.2')]), false);
  const r = await h.sync();
  t.true(r.full);
  t.deepEqual(h.vs(), [
    'TCP 10.96.0.10:80 -> 10.0.0.1:8080 1',
    'TCP 10.96.0.10:80 -> 10.0.0.2:8080 1',
    'TCP 10.96.0.10:80 rr',
  ]);
  t.deepEqual(h.addrs(), ['10.96.0.10']);
  t.deepEqual(h.set('KUBE-CLUSTER-IP'), ['10.96.0.10,tcp:80']);
  t.deepEqual(h.set('KUBE-IPVS-IPS'), ['10.96.0.10']);
  t.deepEqual(h.set('KUBE-LOOP-BACK'), []);
  t.is(h.ipsetK.dump('KUBE-NODE-PORT-TCP')?.type, 'bitmap:port');
  t.is(h.ipsetK.dump('KUBE-LOAD-BALANCER-SOURCE-CIDR')?.type, 'hash:ip,port,net');
  t.deepEqual(Object.fromEntries(h.sysctl.values), {
    'net/ipv4/vs/conntrack': 1,
    'net/ipv4/vs/expire_nodest_conn': 1,
    'net/ipv4/vs/expire_quiescent_template': 1,
    'net/ipv4/ip_forward': 1,
  });
  const d = h.dest('TCP 10.96.0.10:80', '10.0.0.1:8080');
  t.is(d?.forward, 'masq');
});

test('NodePort with externalTrafficPolicy=Local: a VS per node address with local endpoints, bitmap entries, KUBE-LOOP-BACK', async (t) => {
  const h = harness();
  h.tracker.onService(undefined, svc('np', { type: 'NodePort', ports: [TCP(80, 30080)], eTP: 'Local' }));
  h.tracker.onEndpointSlice(
    slice('np-1', 'np', [ep('10.0.0.1', { node: NODE }), ep('10.0.1.1', { node: 'other' })]),
    false,
  );
  await h.sync();
  t.deepEqual(h.vs(), [
    'TCP 10.96.0.10:80 -> 10.0.0.1:8080 1',
    'TCP 10.96.0.10:80 -> 10.0.1.1:8080 1',
    'TCP 10.96.0.10:80 rr',
    `TCP ${NODE_IP}:30080 -> 10.0.0.1:8080 1`,
    `TCP ${NODE_IP}:30080 rr`,
  ]);
  t.deepEqual(h.set('KUBE-NODE-PORT-TCP'), ['30080']);
  t.deepEqual(h.set('KUBE-NODE-PORT-LOCAL-TCP'), ['30080']);
  t.deepEqual(h.set('KUBE-LOOP-BACK'), ['10.0.0.1,tcp:8080,10.0.0.1']);
  // The node IP is never bound on kube-ipvs0.
  t.deepEqual(h.addrs(), ['10.96.0.10']);
});

test('nodePortAddresses limits NodePort VSes to matching node addresses; SCTP uses hash:ip,port entries', async (t) => {
  const h = harness({}, { nodePortAddresses: ['192.168.2.0/24'] });
  h.routeK.addLink('eth1', undefined);
  h.routeK.addAddr('eth1', '192.168.2.5', 24);
  h.tracker.onService(
    undefined,
    svc('s', { type: 'NodePort', ports: [{ name: 'p', protocol: 'SCTP', port: 9, nodePort: 30009 }] }),
  );
  await h.sync();
  t.deepEqual(
    h.vs().filter((l) => l.includes(':30009')),
    ['SCTP 192.168.2.5:30009 rr'],
  );
  t.deepEqual(h.set('KUBE-NODE-PORT-SCTP-HASH'), ['192.168.2.5,sctp:30009']);
});

test("nodePortAddresses CIDRs match kube-ipvs0's addresses too, as bound when a sync starts (upstream GetNodeIPs); matchAll never does", async (t) => {
  const np = (name: string, clusterIP: string, nodePort: number) =>
    svc(name, { clusterIP, type: 'NodePort', ports: [TCP(80, nodePort)] });
  const nodePortVss = (h: ReturnType<typeof harness>) =>
    h.vs().filter((l) => / \S+:3\d{4} rr$/.test(l) && !l.includes('->'));
  const h = harness({}, { nodePortAddresses: ['10.96.0.0/16', '192.168.1.0/24'] });
  h.tracker.onService(undefined, np('a', '10.96.0.10', 30080));
  await h.sync();
  // kube-ipvs0 was empty when the sync started: the node's address only.
  t.deepEqual(nodePortVss(h), [`TCP ${NODE_IP}:30080 rr`]);
  // The next sync (here an unrelated change) finds 10.96.0.10 bound and in the CIDRs.
  h.tracker.onService(undefined, np('b', '10.97.0.1', 30081));
  await h.sync();
  t.deepEqual(nodePortVss(h), [
    'TCP 10.96.0.10:30080 rr',
    'TCP 10.96.0.10:30081 rr',
    `TCP ${NODE_IP}:30080 rr`,
    `TCP ${NODE_IP}:30081 rr`,
  ]);
  // A full sync reads them from the kernel: the same.
  await h.full();
  t.is(nodePortVss(h).length, 4);
  // The VIP goes: its node-port VSes go at the sync after it was unbound.
  h.tracker.onService(np('a', '10.96.0.10', 30080), undefined);
  await h.sync();
  await h.sync();
  t.deepEqual(nodePortVss(h), [`TCP ${NODE_IP}:30081 rr`]);

  // Without CIDRs: the node's addresses only, never kube-ipvs0's.
  const all = harness();
  all.tracker.onService(undefined, np('a', '10.96.0.10', 30080));
  await all.sync();
  await all.full();
  t.deepEqual(nodePortVss(all), [`TCP ${NODE_IP}:30080 rr`]);
});

test('NodePortAddressPicker: CIDR matches remembered per CIDR set, loopback left out, matchAll passes the node addresses', (t) => {
  const p = new NodePortAddressPicker();
  const npa = (cidrs: string[]) => ({
    matchAll: false,
    cidrs,
    primary: false,
    containsIPv4Loopback: false,
    localhost: false,
  });
  const bound = new Set(['10.96.0.10', '10.97.0.1', '127.0.0.5']);
  t.deepEqual(p.pick(npa(['10.96.0.0/16', '127.0.0.0/8']), ['192.168.1.10'], bound), ['10.96.0.10']);
  t.deepEqual(p.pick(npa(['10.97.0.0/16', '192.168.0.0/16']), ['192.168.1.10'], bound), ['10.97.0.1', '192.168.1.10']);
  const all = { matchAll: true, cidrs: ['0.0.0.0/0'], primary: false, containsIPv4Loopback: true, localhost: false };
  t.deepEqual(p.pick(all, ['192.168.1.10'], bound), ['192.168.1.10']);
});

test("externalIPs and LoadBalancer with source ranges: sets as upstream; the node's own address is not bound again", async (t) => {
  const h = harness();
  h.tracker.onService(
    undefined,
    svc('lb', {
      type: 'LoadBalancer',
      ports: [TCP(443, 30443)],
      externalIPs: ['203.0.113.7', NODE_IP],
      ingress: [{ ip: '198.51.100.20' }],
      sourceRanges: ['192.168.1.0/24', '10.1.0.0/16'],
    }),
  );
  h.tracker.onEndpointSlice(
    slice('lb-1', 'lb', [ep('10.0.0.1')], { ports: [{ name: 'p', protocol: 'TCP', port: 8443 }] }),
    false,
  );
  await h.sync();
  t.deepEqual(h.addrs(), ['10.96.0.10', '198.51.100.20', '203.0.113.7']);
  t.deepEqual(h.set('KUBE-EXTERNAL-IP'), [`${NODE_IP},tcp:443`, '203.0.113.7,tcp:443']);
  t.deepEqual(h.set('KUBE-LOAD-BALANCER'), ['198.51.100.20,tcp:443']);
  t.deepEqual(h.set('KUBE-LOAD-BALANCER-FW'), ['198.51.100.20,tcp:443']);
  t.deepEqual(h.set('KUBE-LOAD-BALANCER-SOURCE-CIDR'), [
    '198.51.100.20,tcp:443,10.1.0.0/16',
    '198.51.100.20,tcp:443,192.168.1.0/24',
  ]);
  // A range covers the node's primary IP: the node may reach the LB IP itself.
  t.deepEqual(h.set('KUBE-LOAD-BALANCER-SOURCE-IP'), ['198.51.100.20,tcp:443,198.51.100.20']);
  t.deepEqual(h.set('KUBE-IPVS-IPS'), ['10.96.0.10', '198.51.100.20', '203.0.113.7']);
  const heads = h.vs().filter((l) => !l.includes('->'));
  t.deepEqual(heads, [
    'TCP 10.96.0.10:443 rr',
    `TCP ${NODE_IP}:30443 rr`,
    `TCP ${NODE_IP}:443 rr`,
    'TCP 198.51.100.20:443 rr',
    'TCP 203.0.113.7:443 rr',
  ]);
  t.deepEqual(h.proxier.rulesInput().noNodeAccess, []);
});

test('externalTrafficPolicy=Local LB with healthCheckNodePort: -LOCAL sets and KUBE-HEALTH-CHECK-NODE-PORT', async (t) => {
  const h = harness();
  h.tracker.onService(
    undefined,
    svc('lb', {
      type: 'LoadBalancer',
      ports: [TCP(80, 30080)],
      eTP: 'Local',
      hcPort: 32000,
      ingress: [{ ip: '198.51.100.21' }],
      externalIPs: ['203.0.113.8'],
    }),
  );
  await h.sync();
  t.deepEqual(h.set('KUBE-LOAD-BALANCER-LOCAL'), ['198.51.100.21,tcp:80']);
  t.deepEqual(h.set('KUBE-EXTERNAL-IP-LOCAL'), ['203.0.113.8,tcp:80']);
  t.deepEqual(h.set('KUBE-EXTERNAL-IP'), []);
  t.deepEqual(h.set('KUBE-HEALTH-CHECK-NODE-PORT'), ['32000']);
});

test('a health check node port whose node port matches no node address gets no KUBE-HEALTH-CHECK-NODE-PORT entry (as upstream)', async (t) => {
  const lb = (name: string, nodePort: number, hcPort: number, ip: string) =>
    svc(name, {
      type: 'LoadBalancer',
      ports: [TCP(80, nodePort)],
      eTP: 'Local',
      hcPort,
      ingress: [{ ip }],
    });
  const h = harness({}, { nodePortAddresses: ['192.0.2.0/24'] });
  h.tracker.onService(undefined, lb('lb', 30080, 32000, '198.51.100.21'));
  await h.sync();
  t.deepEqual(h.set('KUBE-HEALTH-CHECK-NODE-PORT'), []);
  t.deepEqual(h.set('KUBE-NODE-PORT-TCP'), []);
  // The rest of the port is programmed as before: its LB VS, cluster IP and bound addresses.
  t.deepEqual(h.set('KUBE-LOAD-BALANCER-LOCAL'), ['198.51.100.21,tcp:80']);
  t.deepEqual(h.set('KUBE-IPVS-IPS'), ['10.96.0.10', '198.51.100.21']);

  // An address that matches: the entry is there.
  const h2 = harness({}, { nodePortAddresses: ['192.168.1.0/24'] });
  h2.tracker.onService(undefined, lb('lb', 30080, 32000, '198.51.100.21'));
  await h2.sync();
  t.deepEqual(h2.set('KUBE-HEALTH-CHECK-NODE-PORT'), ['32000']);
});

test('session affinity is IPVS persistence with the Service timeout; the scheduler comes from the options (mh sets mh-port)', async (t) => {
  const h = harness({ scheduler: 'mh' });
  h.tracker.onService(undefined, svc('s', { affinity: 'ClientIP', timeout: 600 }));
  await h.sync();
  t.deepEqual(h.vs(), ['TCP 10.96.0.10:80 mh persistent 600 flags 16']);
  // Affinity off: the same VS is edited, not recreated.
  h.writes();
  h.tracker.onService(svc('s', { affinity: 'ClientIP', timeout: 600 }), svc('s', { rv: '2' }));
  await h.sync();
  t.deepEqual(h.vs(), ['TCP 10.96.0.10:80 mh flags 16']);
  const w = h.writes();
  t.is(w.setService, 1);
  t.is(w.newService + w.delService, 0);
});

test('an unknown scheduler is a construction error naming it', (t) => {
  const h = harness();
  const e = t.throws(
    () => new IpvsProxier({ family: 'IPv4', scheduler: 'bogus' }, { ...depsOf(h), logger: nullLogger }),
  );
  t.regex(e!.message, /unknown IPVS scheduler "bogus"/);
});

const depsOf = (h: ReturnType<typeof harness>) => h.deps;

test('a Service without endpoints keeps its VS with no real server (the kernel answers with a port-unreachable)', async (t) => {
  const h = harness();
  h.tracker.onService(undefined, svc('empty'));
  await h.sync();
  t.deepEqual(h.vs(), ['TCP 10.96.0.10:80 rr']);
});

test('internalTrafficPolicy=Local: only local endpoints; none local falls back to the cluster ones only when the port uses them (as upstream)', async (t) => {
  const h = harness();
  h.tracker.onService(undefined, svc('itp', { iTP: 'Local' }));
  h.tracker.onEndpointSlice(
    slice('itp-1', 'itp', [ep('10.0.0.1', { node: NODE }), ep('10.0.1.1', { node: 'other' })]),
    false,
  );
  await h.sync();
  t.deepEqual(h.vs(), ['TCP 10.96.0.10:80 -> 10.0.0.1:8080 1', 'TCP 10.96.0.10:80 rr']);
  h.tracker.onEndpointSlice(slice('itp-1', 'itp', [ep('10.0.1.1', { node: 'other' })], { rv: '2' }), false);
  await h.sync();
  // ClusterIP-only Service: the cluster endpoints are not "used", so the VS drains to nothing.
  t.deepEqual(h.vs(), ['TCP 10.96.0.10:80 -> 10.0.0.1:8080 0', 'TCP 10.96.0.10:80 rr']);
});

test("incremental: one new endpoint is one NEW_DEST; nothing listed (not even the node's addresses), no set written", async (t) => {
  const h = harness();
  for (let i = 0; i < 20; i++) {
    h.tracker.onService(undefined, svc(`s${i}`, { clusterIP: `10.96.1.${i}` }));
    h.tracker.onEndpointSlice(slice(`s${i}-1`, `s${i}`, [ep(`10.0.${i}.1`)]), false);
  }
  await h.sync();
  h.writes();
  h.tracker.onEndpointSlice(slice('s7-1', 's7', [ep('10.0.7.1'), ep('10.0.7.2')], { rv: '2' }), false);
  const r = await h.sync();
  t.false(r.full);
  t.is(r.servicesChanged, 1);
  const w = h.writes();
  t.deepEqual(w.ipvsOrder, ['NEW_DEST']);
  t.is(w.ipsetAdd + w.ipsetDel + w.ipsetList + w.ipsetCreate, 0);
  t.is(h.proxier.lastOps, 1, 'the one NEW_DEST: no node-address dump, whose size grows with the VIPs on kube-ipvs0');
  t.is(h.proxier.lastRequests, 1);
  // Nothing changed: no write at all.
  await h.sync();
  t.deepEqual(h.writes().ipvsOrder, []);
});

test('incremental: a new Service adds its VS, dests, VIP and entries; deleting it removes them all', async (t) => {
  const h = harness();
  h.tracker.onService(undefined, svc('a', { clusterIP: '10.96.0.1' }));
  await h.sync();
  h.writes();
  h.tracker.onService(undefined, svc('b', { clusterIP: '10.96.0.2' }));
  h.tracker.onEndpointSlice(slice('b-1', 'b', [ep('10.0.0.9')]), false);
  await h.sync();
  let w = h.writes();
  t.deepEqual(w.ipvsOrder, ['NEW_SERVICE', 'NEW_DEST']);
  t.is(w.ipsetAdd, 2, 'one bulk message each for KUBE-CLUSTER-IP and KUBE-IPVS-IPS');
  t.deepEqual(h.addrs(), ['10.96.0.1', '10.96.0.2']);
  h.tracker.onService(svc('b', { clusterIP: '10.96.0.2' }), undefined);
  await h.sync();
  w = h.writes();
  t.deepEqual(w.ipvsOrder, ['DEL_SERVICE']);
  t.is(w.ipsetDel, 2);
  t.deepEqual(h.addrs(), ['10.96.0.1']);
  t.deepEqual(h.set('KUBE-CLUSTER-IP'), ['10.96.0.1,tcp:80']);
  t.deepEqual(h.vs(), ['TCP 10.96.0.1:80 rr']);
});

test('add before remove: a replaced endpoint is added before the old one is drained', async (t) => {
  const h = harness();
  h.tracker.onService(undefined, svc('web'));
  h.tracker.onEndpointSlice(slice('web-1', 'web', [ep('10.0.0.1')]), false);
  await h.sync();
  h.writes();
  h.tracker.onEndpointSlice(slice('web-1', 'web', [ep('10.0.0.2')], { rv: '2' }), false);
  await h.sync();
  t.deepEqual(h.writes().ipvsOrder, ['NEW_DEST', 'SET_DEST']);
  t.deepEqual(h.vs(), [
    'TCP 10.96.0.10:80 -> 10.0.0.1:8080 0',
    'TCP 10.96.0.10:80 -> 10.0.0.2:8080 1',
    'TCP 10.96.0.10:80 rr',
  ]);
});

test('graceful termination: weight 0, kept while connections remain, deleted when they end (fake clock)', async (t) => {
  const h = harness();
  h.tracker.onService(undefined, svc('web'));
  h.tracker.onEndpointSlice(slice('web-1', 'web', [ep('10.0.0.1'), ep('10.0.0.2')]), false);
  await h.sync();
  h.tracker.onEndpointSlice(slice('web-1', 'web', [ep('10.0.0.1')], { rv: '2' }), false);
  await h.sync();
  h.dest('TCP 10.96.0.10:80', '10.0.0.2:8080')!.activeConns = 3;
  t.is(h.dest('TCP 10.96.0.10:80', '10.0.0.2:8080')?.weight, 0);
  t.deepEqual(
    h.proxier.terminating().map((x) => x.dest),
    ['10.0.0.2:8080'],
  );
  h.clock.advance(1000);
  await h.proxier.whenIdle();
  t.truthy(h.dest('TCP 10.96.0.10:80', '10.0.0.2:8080'), 'still serving its connections');
  const d = h.dest('TCP 10.96.0.10:80', '10.0.0.2:8080')!;
  d.activeConns = 0;
  d.inactiveConns = 0;
  h.clock.advance(1000);
  await h.proxier.whenIdle();
  t.is(h.dest('TCP 10.96.0.10:80', '10.0.0.2:8080'), undefined);
  t.deepEqual(h.proxier.terminating(), []);
  t.is(h.clock.pending, 0, 'no timer left once nothing drains');
});

test('graceful termination is bounded: a server with stuck connections goes after the grace period', async (t) => {
  const h = harness({ gracefulTerminationMs: 10_000 });
  h.tracker.onService(undefined, svc('web'));
  h.tracker.onEndpointSlice(slice('web-1', 'web', [ep('10.0.0.1'), ep('10.0.0.2')]), false);
  await h.sync();
  h.tracker.onEndpointSlice(slice('web-1', 'web', [ep('10.0.0.1')], { rv: '2' }), false);
  await h.sync();
  h.dest('TCP 10.96.0.10:80', '10.0.0.2:8080')!.activeConns = 1;
  for (let i = 0; i < 9; i++) {
    h.clock.advance(1000);
    await h.proxier.whenIdle();
  }
  t.truthy(h.dest('TCP 10.96.0.10:80', '10.0.0.2:8080'));
  h.clock.advance(1000);
  await h.proxier.whenIdle();
  t.is(h.dest('TCP 10.96.0.10:80', '10.0.0.2:8080'), undefined);
});

test('a draining server whose endpoint comes back gets weight 1 again and leaves the queue', async (t) => {
  const h = harness();
  h.tracker.onService(undefined, svc('web'));
  h.tracker.onEndpointSlice(slice('web-1', 'web', [ep('10.0.0.1'), ep('10.0.0.2')]), false);
  await h.sync();
  h.dest('TCP 10.96.0.10:80', '10.0.0.2:8080')!.activeConns = 1;
  h.tracker.onEndpointSlice(slice('web-1', 'web', [ep('10.0.0.1')], { rv: '2' }), false);
  await h.sync();
  h.tracker.onEndpointSlice(slice('web-1', 'web', [ep('10.0.0.1'), ep('10.0.0.2')], { rv: '3' }), false);
  await h.sync();
  t.is(h.dest('TCP 10.96.0.10:80', '10.0.0.2:8080')?.weight, 1);
  t.deepEqual(h.proxier.terminating(), []);
});

test('UDP real servers are deleted at once', async (t) => {
  const h = harness();
  h.tracker.onService(undefined, svc('dns', { ports: [{ name: 'p', protocol: 'UDP', port: 53 }] }));
  h.tracker.onEndpointSlice(
    slice('dns-1', 'dns', [ep('10.0.0.1'), ep('10.0.0.2')], { ports: [{ name: 'p', protocol: 'UDP', port: 5353 }] }),
    false,
  );
  await h.sync();
  h.writes();
  h.tracker.onEndpointSlice(
    slice('dns-1', 'dns', [ep('10.0.0.1')], { rv: '2', ports: [{ name: 'p', protocol: 'UDP', port: 5353 }] }),
    false,
  );
  await h.sync();
  t.deepEqual(h.writes().ipvsOrder, ['DEL_DEST']);
  t.deepEqual(h.vs(), ['UDP 10.96.0.10:53 -> 10.0.0.1:5353 1', 'UDP 10.96.0.10:53 rr']);
});

test('restart recovery: a real server left at weight 0 whose endpoint is ready gets its weight back (issue 108319)', async (t) => {
  const h = harness();
  h.tracker.onService(undefined, svc('web'));
  h.tracker.onEndpointSlice(slice('web-1', 'web', [ep('10.0.0.1'), ep('10.0.0.2')]), false);
  await h.sync();
  // The previous daemon drained 10.0.0.2, then died; a new one starts on the same kernel.
  h.dest('TCP 10.96.0.10:80', '10.0.0.2:8080')!.weight = 0;
  h.dest('TCP 10.96.0.10:80', '10.0.0.1:8080')!.weight = 0;
  h.dest('TCP 10.96.0.10:80', '10.0.0.1:8080')!.activeConns = 2;
  const fresh = new IpvsProxier({ family: 'IPv4' }, depsOf(h));
  h.tracker.onEndpointSlice(slice('web-1', 'web', [ep('10.0.0.2')], { rv: '2' }), false);
  h.tracker.requestFullSync();
  const { desired, change } = h.tracker.checkout();
  h.writes();
  await fresh.sync(desired, change, new AbortController().signal);
  t.is(h.dest('TCP 10.96.0.10:80', '10.0.0.2:8080')?.weight, 1);
  // The other one, gone from the endpoints and at weight 0 already, is tracked for deletion.
  t.deepEqual(
    fresh.terminating().map((x) => x.dest),
    ['10.0.0.1:8080'],
  );
  // The scheduler probe (delete, add, delete 198.51.100.0:20000), then one weight fix; nothing recreated.
  t.deepEqual(
    h.writes().ipvsOrder.filter((c) => !c.startsWith('GET')),
    ['DEL_SERVICE', 'NEW_SERVICE', 'DEL_SERVICE', 'SET_DEST'],
  );
});

test('full sync repairs drift: deleted VS, real server, VIP and set entry come back; strangers of our family go; fwmark and excluded stay', async (t) => {
  const h = harness({ excludeCIDRs: ['10.200.0.0/16'] });
  h.tracker.onService(undefined, svc('web'));
  h.tracker.onService(undefined, svc('api', { clusterIP: '10.96.0.11' }));
  h.tracker.onEndpointSlice(slice('web-1', 'web', [ep('10.0.0.1'), ep('10.0.0.2')]), false);
  await h.sync();
  const before = h.vs();
  // By hand: delete a VS, a real server, a VIP and a set entry; add a stranger VS.
  h.ipvsFake.services.delete([...h.ipvsFake.services.keys()].find((k) => k.includes('10.96.0.11'))!);
  const web = [...h.ipvsFake.services.values()].find((e) => 'address' in e.svc && e.svc.address === '10.96.0.10')!;
  web.dests.delete('10.0.0.2:8080');
  const link = [...h.routeK.links.values()].find((l) => l.name === 'kube-ipvs0')!;
  h.routeK.addrs.splice(
    h.routeK.addrs.findIndex((a) => a.index === link.index),
    1,
  );
  await h.ipset.del('KUBE-CLUSTER-IP', { ip: '10.96.0.10', proto: 'tcp', port: 80 });
  const ipvs = h.ipvs;
  await ipvs.addService({ family: 'IPv4', protocol: 'tcp', address: '10.99.0.1', port: 1, scheduler: 'rr' });
  await ipvs.addService({ family: 'IPv4', protocol: 'tcp', address: '10.200.0.1', port: 1, scheduler: 'rr' });
  await ipvs.addService({ family: 'IPv4', fwmark: 9, scheduler: 'rr' });
  // An incremental sync with no change trusts its mirror and does nothing.
  await h.sync();
  t.notDeepEqual(h.vs(), before);
  const r = await h.full();
  t.true(r.full);
  t.deepEqual(h.vs(), [...before, 'TCP 10.200.0.1:1 rr'].sort());
  t.deepEqual(h.addrs(), ['10.96.0.10', '10.96.0.11']);
  t.deepEqual(h.set('KUBE-CLUSTER-IP'), ['10.96.0.10,tcp:80', '10.96.0.11,tcp:80']);
  t.true([...h.ipvsFake.services.values()].some((e) => 'fwmark' in e.svc));
});

test('a failed kernel call fails the sync with a named error and makes the next sync full', async (t) => {
  const h = harness();
  h.tracker.onService(undefined, svc('web'));
  await h.sync();
  // Someone deletes kube-ipvs0: binding the next VIP fails.
  await depsOf(h).route.deleteLink('kube-ipvs0');
  h.tracker.onService(undefined, svc('api', { clusterIP: '10.96.0.11' }));
  const e = await t.throwsAsync(h.sync(), { instanceOf: IpvsSyncError });
  t.regex(e!.message, /bind 10\.96\.0\.11 on kube-ipvs0/);
  const r = await h.sync();
  t.true(r.full);
  t.deepEqual(h.addrs(), ['10.96.0.10', '10.96.0.11']);
});

test('node addresses changing re-plans NodePort VSes at the next full sync (incremental ones do not read them)', async (t) => {
  const h = harness();
  h.tracker.onService(undefined, svc('np', { type: 'NodePort', ports: [TCP(80, 30080)] }));
  await h.sync();
  h.routeK.addLink('eth1', undefined);
  h.routeK.addAddr('eth1', '192.168.9.9', 24);
  h.tracker.onService(undefined, svc('other', { clusterIP: '10.96.0.99' }));
  t.false((await h.sync()).full);
  t.deepEqual(
    h.vs().filter((l) => l.includes('30080')),
    [`TCP ${NODE_IP}:30080 rr`],
  );
  t.true((await h.full()).full);
  t.deepEqual(
    h.vs().filter((l) => l.includes('30080')),
    [`TCP ${NODE_IP}:30080 rr`, 'TCP 192.168.9.9:30080 rr'],
  );
  // Gone again: the next full sync removes its VS.
  h.routeK.addrs.splice(
    h.routeK.addrs.findIndex((a) => a.bytes.join('.') === '192.168.9.9'),
    1,
  );
  await h.full();
  t.deepEqual(
    h.vs().filter((l) => l.includes('30080')),
    [`TCP ${NODE_IP}:30080 rr`],
  );
});

test('cleanup removes our VSes, ipsets and kube-ipvs0, and leaves others alone', async (t) => {
  const h = harness({ excludeCIDRs: ['10.200.0.0/16'] });
  h.tracker.onService(undefined, svc('web'));
  await h.sync();
  const ipvs = h.ipvs;
  await ipvs.addService({ family: 'IPv4', protocol: 'tcp', address: '10.200.0.1', port: 1, scheduler: 'rr' });
  await h.proxier.cleanup();
  t.deepEqual(h.vs(), ['TCP 10.200.0.1:1 rr']);
  t.is(h.ipsetK.dump('KUBE-CLUSTER-IP'), undefined);
  t.is(
    [...h.routeK.links.values()].find((l) => l.name === 'kube-ipvs0'),
    undefined,
  );
  await h.proxier.cleanup();
  t.pass('twice is fine');
});

test('start-up errors name what is missing: IPVS, the scheduler, a sysctl', async (t) => {
  let h = harness();
  h.ipvsFake.available = false;
  let e = await t.throwsAsync(h.proxier.init());
  t.regex(e!.message, /IPVS mode is unavailable: get genl family IPVS: not available in this kernel: ENOENT/);
  h = harness({ scheduler: 'lblc' });
  e = await t.throwsAsync(h.proxier.init());
  t.regex(e!.message, /IPVS scheduler "lblc" is unavailable/);
  h = harness({ strictARP: true });
  h.sysctl.fail.add('net/ipv4/conf/all/arp_announce');
  e = await t.throwsAsync(h.proxier.init());
  t.regex(e!.message, /sysctl net\/ipv4\/conf\/all\/arp_announce=2/);
  h = harness({ tcpTimeoutSeconds: 1800 });
  await h.proxier.init();
  t.is(h.ipvsFake.timeouts.tcp, 1800);
  t.deepEqual(h.vs(), [], 'the scheduler probe leaves nothing behind');
});

test('a full ipset is a named sync error, not a silent drop (upstream issue 129389)', async (t) => {
  const h = harness({ ipsetMaxElem: 2 });
  for (let i = 1; i <= 3; i++) h.tracker.onService(undefined, svc(`s${i}`, { clusterIP: `10.96.0.${i}` }));
  const e = await t.throwsAsync(h.sync(), { instanceOf: IpvsSyncError });
  t.regex(e!.message, /ipset KUBE-CLUSTER-IP/);
  t.regex(e!.message, /HASH_FULL/);
  // Everything else was still written.
  t.is(h.vs().length, 3);
});

test('companion rules: written on full syncs and when they change, removed by cleanup before the sets', async (t) => {
  const calls: string[] = [];
  const sink = {
    write: (r: { rules: readonly unknown[] }) => (calls.push(`write ${r.rules.length}`), Promise.resolve(1)),
    remove: () => (calls.push('remove'), Promise.resolve()),
  };
  const h = harness();
  const p = new IpvsProxier({ family: 'IPv4' }, { ...h.deps, companion: sink });
  const sync = () => {
    const { desired, change } = h.tracker.checkout();
    return p.sync(desired, change, new AbortController().signal);
  };
  h.tracker.onService(undefined, svc('web'));
  await sync();
  t.deepEqual(calls, ['write 19']);
  // A new endpoint changes no set's emptiness: no write.
  h.tracker.onEndpointSlice(slice('web-1', 'web', [ep('10.0.0.1')]), false);
  await sync();
  t.is(calls.length, 1);
  // The first external IP fills KUBE-EXTERNAL-IP: its rules appear.
  h.tracker.onService(svc('web'), svc('web', { externalIPs: ['203.0.113.1'], rv: '2' }));
  await sync();
  t.true(calls.length === 2 && calls[1]!.startsWith('write ') && calls[1] !== 'write 19', calls.join());
  await p.cleanup();
  t.is(calls.at(-1), 'remove');
  t.is(h.ipsetK.dump('KUBE-CLUSTER-IP'), undefined);
});
