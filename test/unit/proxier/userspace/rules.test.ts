// The userspace mode's rules as iptables-save prints them (save.ts renders; the kernel test
// checks the same text against the real iptables-nft-save).
import test from 'ava';
import { ruleLine } from '../../../../src/netlink/nftables/iptables/save.ts';
import type { IptRule } from '../../../../src/netlink/nftables/iptables/rule.ts';
import {
  hostIPOf,
  jumps,
  portalComment,
  servicePortRules,
  type RuleContext,
} from '../../../../src/proxier/userspace/rules.ts';
import { servicePort } from '../iptables/fixtures.ts';

const lines = (rules: readonly IptRule[], family: 'IPv4' | 'IPv6' = 'IPv4'): string[] =>
  rules.map((r) => `${r.table} ${ruleLine(r, family)}`);

const v4: RuleContext = { family: 'IPv4', listenIP: '0.0.0.0', hostIP: '10.0.0.5' };

test("the issue's example: ClusterIP and NodePort of an unnamed port", (t) => {
  const p = servicePort({
    namespace: 'default',
    name: 'ssh-service1',
    portName: '',
    clusterIP: '10.254.132.107',
    port: 2222,
    nodePort: 30239,
    type: 'NodePort',
  });
  t.deepEqual(lines(servicePortRules(p, 36463, v4)), [
    'nat -A KUBE-PORTALS-CONTAINER -d 10.254.132.107/32 -p tcp -m comment --comment "default/ssh-service1:" -m tcp --dport 2222 -j REDIRECT --to-ports 36463',
    'nat -A KUBE-PORTALS-HOST -d 10.254.132.107/32 -p tcp -m comment --comment "default/ssh-service1:" -m tcp --dport 2222 -j DNAT --to-destination 10.0.0.5:36463',
    'nat -A KUBE-NODEPORT-CONTAINER -p tcp -m comment --comment "default/ssh-service1:" -m tcp --dport 30239 -j REDIRECT --to-ports 36463',
    'nat -A KUBE-NODEPORT-HOST -p tcp -m comment --comment "default/ssh-service1:" -m tcp --dport 30239 -j DNAT --to-destination 10.0.0.5:36463',
    'filter -A KUBE-NODEPORT-NON-LOCAL -p tcp -m comment --comment "default/ssh-service1:" -m tcp --dport 36463 -m conntrack --ctstate NEW -j ACCEPT',
  ]);
});

test('external IPs: physdev and dst-LOCAL variants from containers, dst-LOCAL only from the host', (t) => {
  const p = servicePort({ namespace: 'ns', name: 'web', portName: 'http', externalIPs: ['192.0.2.7'], port: 80 });
  t.deepEqual(lines(servicePortRules(p, 40000, v4)).slice(2), [
    'nat -A KUBE-PORTALS-CONTAINER -d 192.0.2.7/32 -p tcp -m comment --comment "ns/web:http" -m tcp --dport 80 -m physdev ! --physdev-is-in -j REDIRECT --to-ports 40000',
    'nat -A KUBE-PORTALS-CONTAINER -d 192.0.2.7/32 -p tcp -m comment --comment "ns/web:http" -m tcp --dport 80 -m addrtype --dst-type LOCAL -j REDIRECT --to-ports 40000',
    'nat -A KUBE-PORTALS-HOST -d 192.0.2.7/32 -p tcp -m comment --comment "ns/web:http" -m tcp --dport 80 -m addrtype --dst-type LOCAL -j DNAT --to-destination 10.0.0.5:40000',
  ]);
});

test('load-balancer IPs are portals like the cluster IP; UDP in every match', (t) => {
  const p = servicePort({
    namespace: 'ns',
    name: 'dns',
    portName: 'dns',
    protocol: 'UDP',
    port: 53,
    loadBalancerVIPs: ['203.0.113.9'],
  });
  t.deepEqual(lines(servicePortRules(p, 41000, v4)).slice(2), [
    'nat -A KUBE-PORTALS-CONTAINER -d 203.0.113.9/32 -p udp -m comment --comment "ns/dns:dns" -m udp --dport 53 -j REDIRECT --to-ports 41000',
    'nat -A KUBE-PORTALS-HOST -d 203.0.113.9/32 -p udp -m comment --comment "ns/dns:dns" -m udp --dport 53 -j DNAT --to-destination 10.0.0.5:41000',
  ]);
});

test('a specific --bind-address: DNAT to it from containers too, and it is the host IP', (t) => {
  const ctx: RuleContext = { family: 'IPv4', listenIP: '10.0.0.9', hostIP: hostIPOf('10.0.0.9', '10.0.0.5') };
  const p = servicePort({ namespace: 'ns', name: 'a', portName: '', port: 80 });
  t.deepEqual(lines(servicePortRules(p, 42000, ctx)), [
    'nat -A KUBE-PORTALS-CONTAINER -d 172.30.0.41/32 -p tcp -m comment --comment "ns/a:" -m tcp --dport 80 -j DNAT --to-destination 10.0.0.9:42000',
    'nat -A KUBE-PORTALS-HOST -d 172.30.0.41/32 -p tcp -m comment --comment "ns/a:" -m tcp --dport 80 -j DNAT --to-destination 10.0.0.9:42000',
  ]);
});

test('IPv6: /128 and bracketed DNAT destinations', (t) => {
  const ctx: RuleContext = { family: 'IPv6', listenIP: '::', hostIP: 'fd00::5' };
  const p = servicePort({
    namespace: 'ns',
    name: 'v6',
    portName: 'p',
    family: 'IPv6',
    clusterIP: 'fd00:10::1',
    port: 8080,
    nodePort: 30080,
  });
  t.deepEqual(lines(servicePortRules(p, 43000, ctx), 'IPv6'), [
    'nat -A KUBE-PORTALS-CONTAINER -d fd00:10::1/128 -p tcp -m comment --comment "ns/v6:p" -m tcp --dport 8080 -j REDIRECT --to-ports 43000',
    'nat -A KUBE-PORTALS-HOST -d fd00:10::1/128 -p tcp -m comment --comment "ns/v6:p" -m tcp --dport 8080 -j DNAT --to-destination [fd00::5]:43000',
    'nat -A KUBE-NODEPORT-CONTAINER -p tcp -m comment --comment "ns/v6:p" -m tcp --dport 30080 -j REDIRECT --to-ports 43000',
    'nat -A KUBE-NODEPORT-HOST -p tcp -m comment --comment "ns/v6:p" -m tcp --dport 30080 -j DNAT --to-destination [fd00::5]:43000',
    'filter -A KUBE-NODEPORT-NON-LOCAL -p tcp -m comment --comment "ns/v6:p" -m tcp --dport 43000 -m conntrack --ctstate NEW -j ACCEPT',
  ]);
});

test('no node IP: only the rules for traffic from pods and the network', (t) => {
  const ctx: RuleContext = { family: 'IPv4', listenIP: '0.0.0.0', hostIP: hostIPOf('0.0.0.0', '') };
  const p = servicePort({ namespace: 'ns', name: 'a', portName: '', nodePort: 30001 });
  t.deepEqual(
    servicePortRules(p, 42000, ctx).map((r) => r.chain),
    ['KUBE-PORTALS-CONTAINER', 'KUBE-NODEPORT-CONTAINER', 'KUBE-NODEPORT-NON-LOCAL'],
  );
});

test('SCTP ports get no rules (upstream had no SCTP proxy socket)', (t) => {
  t.deepEqual(servicePortRules(servicePort({ namespace: 'n', name: 's', portName: '', protocol: 'SCTP' }), 1, v4), []);
});

test("upstream's jumps: the portal jump before the node-port one in PREROUTING and OUTPUT", (t) => {
  t.deepEqual(lines(jumps()), [
    'nat -A PREROUTING -m comment --comment "handle ClusterIPs; NOTE: this must be before the NodePort rules" -j KUBE-PORTALS-CONTAINER',
    'nat -A PREROUTING -m addrtype --dst-type LOCAL -m comment --comment "handle service NodePorts; NOTE: this must be the last rule in the chain" -j KUBE-NODEPORT-CONTAINER',
    'nat -A OUTPUT -m comment --comment "handle ClusterIPs; NOTE: this must be before the NodePort rules" -j KUBE-PORTALS-HOST',
    'nat -A OUTPUT -m addrtype --dst-type LOCAL -m comment --comment "handle service NodePorts; NOTE: this must be the last rule in the chain" -j KUBE-NODEPORT-HOST',
    'filter -A INPUT -m comment --comment "Ensure that non-local NodePort traffic can flow" -j KUBE-NODEPORT-NON-LOCAL',
  ]);
});

test('comments: "ns/name:port", with the trailing colon for an unnamed port', (t) => {
  t.is(portalComment({ namespace: 'default', name: 'ssh-service1', portName: '' }), 'default/ssh-service1:');
  t.is(portalComment({ namespace: 'a', name: 'b', portName: 'https' }), 'a/b:https');
});
