// upstream's two nfacct counting rules: written only for the objects the kernel has (its
// fallback where nfacct is missing: no counting rule, the plain ones unchanged), the localhost
// one only for IPv4 with localhost node ports, before each node port's own rule.
import test from 'ava';
import { hash16, NfacctCounter } from '../../../../src/proxier/iptables/index.ts';
import { chainLines, cluster, ep, saveText, slice, svc } from './harness.ts';

const EXT = `KUBE-EXT-${hash16('default/s:ptcp')}`;
const PLAIN = `-A KUBE-NODEPORTS -p tcp -m comment --comment "default/s:p" -m tcp --dport 30080 -j ${EXT}`;
const COUNTED = `-A KUBE-NODEPORTS -d 127.0.0.0/8 -p tcp -m comment --comment "default/s:p" -m tcp --dport 30080 -m nfacct --nfacct-name  localhost_nps_accepted_pkts -j ${EXT}`;
const INVALID = '-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP';
const INVALID_COUNTED =
  '-A KUBE-FORWARD -m conntrack --ctstate INVALID -m nfacct --nfacct-name  ct_state_invalid_dropped_pkts -j DROP';

function nodePortCluster(o: Parameters<typeof cluster>[0] = {}, withEndpoints = true) {
  const c = cluster(o);
  c.onService(
    undefined,
    svc('s', { type: 'NodePort', ports: [{ name: 'p', protocol: 'TCP', port: 80, nodePort: 30080 }] }),
  );
  if (withEndpoints)
    c.onEndpointSlice(
      slice('s-1', 's', [ep('10.1.0.1')], { ports: [{ name: 'p', protocol: 'TCP', port: 8080 }] }),
      false,
    );
  return c.checkout().desired;
}

test('both objects: the localhost rule precedes each node port rule, the INVALID drop counts', (t) => {
  const text = saveText(nodePortCluster());
  t.deepEqual(chainLines(text, 'KUBE-NODEPORTS'), [COUNTED, PLAIN]);
  t.deepEqual(chainLines(text, 'KUBE-FORWARD')[0], INVALID_COUNTED);
});

test('no nfacct in the kernel: no counting rule, the rest as before', (t) => {
  const text = saveText(nodePortCluster(), { nfacctCounters: new Set() });
  t.deepEqual(chainLines(text, 'KUBE-NODEPORTS'), [PLAIN]);
  t.deepEqual(chainLines(text, 'KUBE-FORWARD')[0], INVALID);
  t.false(text.includes('nfacct'));
});

test('each rule needs its own object', (t) => {
  const invalidOnly = saveText(nodePortCluster(), { nfacctCounters: new Set([NfacctCounter.INVALID_DROPPED]) });
  t.deepEqual(chainLines(invalidOnly, 'KUBE-NODEPORTS'), [PLAIN]);
  t.deepEqual(chainLines(invalidOnly, 'KUBE-FORWARD')[0], INVALID_COUNTED);
  const localOnly = saveText(nodePortCluster(), { nfacctCounters: new Set([NfacctCounter.LOCALHOST_ACCEPTED]) });
  t.deepEqual(chainLines(localOnly, 'KUBE-NODEPORTS'), [COUNTED, PLAIN]);
  t.deepEqual(chainLines(localOnly, 'KUBE-FORWARD')[0], INVALID);
});

test('no localhost rule without localhost node ports, without endpoints, or on IPv6', (t) => {
  t.deepEqual(chainLines(saveText(nodePortCluster(), { localhostNodePorts: false }), 'KUBE-NODEPORTS'), [PLAIN]);
  t.deepEqual(chainLines(saveText(nodePortCluster({ nodePortAddresses: ['192.168.0.0/24'] })), 'KUBE-NODEPORTS'), [
    PLAIN,
  ]);
  t.false(saveText(nodePortCluster({}, false)).includes('localhost_nps_accepted_pkts'));
  const v6 = saveText(nodePortCluster({ family: 'IPv6', clusterCIDRs: ['fd00:10::/64'] }, false));
  t.false(v6.includes('localhost_nps_accepted_pkts'));
  t.true(v6.includes(INVALID_COUNTED), 'the INVALID drop counts in both families');
});

test('with nf_conntrack_tcp_be_liberal there is no INVALID drop to count', (t) => {
  t.false(saveText(nodePortCluster(), { conntrackTCPLiberal: true }).includes('ct_state_invalid_dropped_pkts'));
});
