// The IPv6 proxier: KUBE-6- set names (cut to 31 characters), inet6 sets, IPv6 VSes and VIPs.
import test from 'ava';
import { NODE, node } from '../../model/helpers.ts';
import { ep, harness, slice, svc } from './harness.ts';

test('IPv6: VSes, inet6 sets named KUBE-6-..., and the IPv4 state left alone', async (t) => {
  const h = harness({ family: 'IPv6' }, { family: 'IPv6' });
  h.routeK.addAddr('eth0', 'fd00::10', 64);
  h.tracker.onNode(node(NODE, { internal: ['fd00::10'] }));
  h.tracker.onService(
    undefined,
    svc('v6', {
      clusterIPs: ['fd00:96::10'],
      type: 'LoadBalancer',
      ports: [{ name: 'p', protocol: 'TCP', port: 80, nodePort: 30080 }],
      ingress: [{ ip: 'fd00:51::20' }],
      sourceRanges: ['fd00:10::/64'],
    }),
  );
  h.tracker.onEndpointSlice(slice('v6-1', 'v6', [ep('fd00:244::2')], { addressType: 'IPv6' }), false);
  // Someone else's IPv4 VS: not our family, never touched.
  await h.ipvs.addService({ family: 'IPv4', protocol: 'tcp', address: '10.1.1.1', port: 1, scheduler: 'rr' });
  await h.sync();
  const lines = h.vs();
  t.true(lines.includes('TCP [fd00:96::10]:80 -> fd00:244::2:8080 1'), lines.join('\n'));
  t.true(lines.includes('TCP [fd00::10]:30080 rr'), lines.join('\n'));
  t.true(lines.includes('TCP 10.1.1.1:1 rr'));
  t.deepEqual(h.set('KUBE-6-CLUSTER-IP'), ['fd00:96::10,tcp:80']);
  t.deepEqual(h.set('KUBE-6-LOAD-BALANCER-SOURCE-CID'), ['fd00:51::20,tcp:80,fd00:10::/64']);
  t.deepEqual(h.set('KUBE-6-NODE-PORT-TCP'), ['30080']);
  t.is(h.ipsetK.dump('KUBE-CLUSTER-IP'), undefined, 'no IPv4 sets from an IPv6 proxier');
  await h.proxier.cleanup();
  t.deepEqual(h.vs(), ['TCP 10.1.1.1:1 rr']);
});
