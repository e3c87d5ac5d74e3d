// The cluster of upstream's TestOverallIPTablesRules (a ClusterIP Service, a LoadBalancer
// with eTP=Local whose only endpoint is elsewhere, a NodePort, a NodePort with an external IP
// and a local endpoint, a LoadBalancer with source ranges and ClientIP affinity, and a
// Service without endpoints): the whole ruleset as iptables-save prints it. The expected text
// is written from upstream's documented rules, in iptables-save's layout (chains sorted,
// -s/-d/-p first, addresses with their prefix); with both of upstream's nfacct objects, as its
// fake proxier has them (harness.ts).
import test from 'ava';
import { cluster, dedent, ep, saveText, slice, svc } from './harness.ts';

const P80 = [{ name: 'p80', protocol: 'TCP', port: 80 }];

function upstreamCluster() {
  const t = cluster();
  const port = (nodePort?: number) => [{ name: 'p80', protocol: 'TCP', port: 80, ...(nodePort ? { nodePort } : {}) }];
  t.onService(undefined, svc('svc1', { ns: 'ns1', clusterIP: '172.30.0.41', ports: port() }));
  t.onService(
    undefined,
    svc('svc2', {
      ns: 'ns2',
      type: 'LoadBalancer',
      eTP: 'Local',
      clusterIP: '172.30.0.42',
      ports: port(3001),
      ingress: [{ ip: '1.2.3.4' }],
      externalIPs: ['192.168.99.22'],
      hcPort: 30000,
    }),
  );
  t.onService(undefined, svc('svc3', { ns: 'ns3', type: 'NodePort', clusterIP: '172.30.0.43', ports: port(3003) }));
  t.onService(
    undefined,
    svc('svc4', {
      ns: 'ns4',
      type: 'NodePort',
      clusterIP: '172.30.0.44',
      externalIPs: ['192.168.99.33'],
      ports: port(),
    }),
  );
  t.onService(
    undefined,
    svc('svc5', {
      ns: 'ns5',
      type: 'LoadBalancer',
      clusterIP: '172.30.0.45',
      ports: port(3002),
      ingress: [{ ip: '5.6.7.8' }],
      hcPort: 30000,
      sourceRanges: ['203.0.113.0/25'],
      affinity: 'ClientIP',
      timeout: 10800,
    }),
  );
  t.onService(undefined, svc('svc6', { ns: 'ns6', clusterIP: '172.30.0.46', ports: port() }));
  const s = (ns: string, name: string, eps: ReturnType<typeof ep>[]) =>
    t.onEndpointSlice(slice(`${name}-1`, name, eps, { ns, ports: P80 }), false);
  s('ns1', 'svc1', [ep('10.180.0.1')]);
  s('ns2', 'svc2', [ep('10.180.0.2')]); // no nodeName: not local
  s('ns3', 'svc3', [ep('10.180.0.3')]);
  s('ns4', 'svc4', [ep('10.180.0.4'), ep('10.180.0.5', { node: 'node-a' })]);
  s('ns5', 'svc5', [ep('10.180.0.3')]);
  return t;
}

const BUILTIN_JUMPS_FILTER = `
  -A INPUT -j KUBE-FIREWALL
  -A INPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL
  -A INPUT -m comment --comment "kubernetes health check service ports" -j KUBE-NODEPORTS
  -A INPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES
  -A FORWARD -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL
  -A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD
  -A FORWARD -m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
  -A FORWARD -m conntrack --ctstate NEW -m comment --comment "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES
  -A OUTPUT -j KUBE-FIREWALL
  -A OUTPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL
  -A OUTPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES`;

const EXPECTED = dedent(`
  *mangle
  :PREROUTING ACCEPT [0:0]
  :INPUT ACCEPT [0:0]
  :FORWARD ACCEPT [0:0]
  :OUTPUT ACCEPT [0:0]
  :POSTROUTING ACCEPT [0:0]
  :KUBE-PROXY-CANARY - [0:0]
  COMMIT
  *filter
  :INPUT ACCEPT [0:0]
  :FORWARD ACCEPT [0:0]
  :OUTPUT ACCEPT [0:0]
  :KUBE-EXTERNAL-SERVICES - [0:0]
  :KUBE-FIREWALL - [0:0]
  :KUBE-FORWARD - [0:0]
  :KUBE-NODEPORTS - [0:0]
  :KUBE-PROXY-CANARY - [0:0]
  :KUBE-PROXY-FIREWALL - [0:0]
  :KUBE-SERVICES - [0:0]${BUILTIN_JUMPS_FILTER}
  -A KUBE-EXTERNAL-SERVICES -d 192.168.99.22/32 -p tcp -m comment --comment "ns2/svc2:p80 has no local endpoints" -m tcp --dport 80 -j DROP
  -A KUBE-EXTERNAL-SERVICES -d 1.2.3.4/32 -p tcp -m comment --comment "ns2/svc2:p80 has no local endpoints" -m tcp --dport 80 -j DROP
  -A KUBE-EXTERNAL-SERVICES -p tcp -m comment --comment "ns2/svc2:p80 has no local endpoints" -m addrtype --dst-type LOCAL -m tcp --dport 3001 -j DROP
  -A KUBE-FIREWALL ! -s 127.0.0.0/8 -d 127.0.0.0/8 -m comment --comment "block incoming localnet connections" -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP
  -A KUBE-FORWARD -m conntrack --ctstate INVALID -m nfacct --nfacct-name  ct_state_invalid_dropped_pkts -j DROP
  -A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x4000/0x4000 -j ACCEPT
  -A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
  -A KUBE-NODEPORTS -p tcp -m comment --comment "ns2/svc2:p80 health check node port" -m tcp --dport 30000 -j ACCEPT
  -A KUBE-PROXY-FIREWALL -d 5.6.7.8/32 -p tcp -m comment --comment "ns5/svc5:p80 traffic not accepted by KUBE-FW-NUKIZ6OKUXPJNT4C" -m tcp --dport 80 -j DROP
  -A KUBE-SERVICES -d 172.30.0.46/32 -p tcp -m comment --comment "ns6/svc6:p80 has no endpoints" -m tcp --dport 80 -j REJECT --reject-with icmp-port-unreachable
  COMMIT
  *nat
  :PREROUTING ACCEPT [0:0]
  :INPUT ACCEPT [0:0]
  :OUTPUT ACCEPT [0:0]
  :POSTROUTING ACCEPT [0:0]
  :KUBE-EXT-4SW47YFZTEDKD3PK - [0:0]
  :KUBE-EXT-GNZBNJ2PO5MGZ6GT - [0:0]
  :KUBE-EXT-NUKIZ6OKUXPJNT4C - [0:0]
  :KUBE-EXT-X27LE4BHSL4DOUIK - [0:0]
  :KUBE-FW-NUKIZ6OKUXPJNT4C - [0:0]
  :KUBE-MARK-MASQ - [0:0]
  :KUBE-NODEPORTS - [0:0]
  :KUBE-POSTROUTING - [0:0]
  :KUBE-PROXY-CANARY - [0:0]
  :KUBE-SEP-C6EBXVWJJZMIWKLZ - [0:0]
  :KUBE-SEP-I77PXRDZVX7PMWMN - [0:0]
  :KUBE-SEP-OYPFS5VJICHGATKP - [0:0]
  :KUBE-SEP-RS4RBKLTHTF2IUXJ - [0:0]
  :KUBE-SEP-SXIVWICOYRO3J4NJ - [0:0]
  :KUBE-SEP-UKSFD7AGPMPPLUHC - [0:0]
  :KUBE-SERVICES - [0:0]
  :KUBE-SVC-4SW47YFZTEDKD3PK - [0:0]
  :KUBE-SVC-GNZBNJ2PO5MGZ6GT - [0:0]
  :KUBE-SVC-NUKIZ6OKUXPJNT4C - [0:0]
  :KUBE-SVC-X27LE4BHSL4DOUIK - [0:0]
  :KUBE-SVC-XPGD46QRK7WJZT7O - [0:0]
  -A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
  -A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
  -A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
  -A KUBE-EXT-4SW47YFZTEDKD3PK -m comment --comment "masquerade traffic for ns4/svc4:p80 external destinations" -j KUBE-MARK-MASQ
  -A KUBE-EXT-4SW47YFZTEDKD3PK -j KUBE-SVC-4SW47YFZTEDKD3PK
  -A KUBE-EXT-GNZBNJ2PO5MGZ6GT -s 10.0.0.0/8 -m comment --comment "pod traffic for ns2/svc2:p80 external destinations" -j KUBE-SVC-GNZBNJ2PO5MGZ6GT
  -A KUBE-EXT-GNZBNJ2PO5MGZ6GT -m comment --comment "masquerade LOCAL traffic for ns2/svc2:p80 external destinations" -m addrtype --src-type LOCAL -j KUBE-MARK-MASQ
  -A KUBE-EXT-GNZBNJ2PO5MGZ6GT -m comment --comment "route LOCAL traffic for ns2/svc2:p80 external destinations" -m addrtype --src-type LOCAL -j KUBE-SVC-GNZBNJ2PO5MGZ6GT
  -A KUBE-EXT-NUKIZ6OKUXPJNT4C -m comment --comment "masquerade traffic for ns5/svc5:p80 external destinations" -j KUBE-MARK-MASQ
  -A KUBE-EXT-NUKIZ6OKUXPJNT4C -j KUBE-SVC-NUKIZ6OKUXPJNT4C
  -A KUBE-EXT-X27LE4BHSL4DOUIK -m comment --comment "masquerade traffic for ns3/svc3:p80 external destinations" -j KUBE-MARK-MASQ
  -A KUBE-EXT-X27LE4BHSL4DOUIK -j KUBE-SVC-X27LE4BHSL4DOUIK
  -A KUBE-FW-NUKIZ6OKUXPJNT4C -s 203.0.113.0/25 -m comment --comment "ns5/svc5:p80 loadbalancer IP" -j KUBE-EXT-NUKIZ6OKUXPJNT4C
  -A KUBE-FW-NUKIZ6OKUXPJNT4C -m comment --comment "other traffic to ns5/svc5:p80 will be dropped by KUBE-PROXY-FIREWALL"
  -A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000
  -A KUBE-NODEPORTS -d 127.0.0.0/8 -p tcp -m comment --comment "ns2/svc2:p80" -m tcp --dport 3001 -m nfacct --nfacct-name  localhost_nps_accepted_pkts -j KUBE-EXT-GNZBNJ2PO5MGZ6GT
  -A KUBE-NODEPORTS -p tcp -m comment --comment "ns2/svc2:p80" -m tcp --dport 3001 -j KUBE-EXT-GNZBNJ2PO5MGZ6GT
  -A KUBE-NODEPORTS -d 127.0.0.0/8 -p tcp -m comment --comment "ns3/svc3:p80" -m tcp --dport 3003 -m nfacct --nfacct-name  localhost_nps_accepted_pkts -j KUBE-EXT-X27LE4BHSL4DOUIK
  -A KUBE-NODEPORTS -p tcp -m comment --comment "ns3/svc3:p80" -m tcp --dport 3003 -j KUBE-EXT-X27LE4BHSL4DOUIK
  -A KUBE-NODEPORTS -d 127.0.0.0/8 -p tcp -m comment --comment "ns5/svc5:p80" -m tcp --dport 3002 -m nfacct --nfacct-name  localhost_nps_accepted_pkts -j KUBE-EXT-NUKIZ6OKUXPJNT4C
  -A KUBE-NODEPORTS -p tcp -m comment --comment "ns5/svc5:p80" -m tcp --dport 3002 -j KUBE-EXT-NUKIZ6OKUXPJNT4C
  -A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN
  -A KUBE-POSTROUTING -j MARK --set-xmark 0x4000/0x0
  -A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE
  -A KUBE-SEP-C6EBXVWJJZMIWKLZ -s 10.180.0.5/32 -m comment --comment "ns4/svc4:p80" -j KUBE-MARK-MASQ
  -A KUBE-SEP-C6EBXVWJJZMIWKLZ -p tcp -m comment --comment "ns4/svc4:p80" -m tcp -j DNAT --to-destination 10.180.0.5:80
  -A KUBE-SEP-I77PXRDZVX7PMWMN -s 10.180.0.3/32 -m comment --comment "ns5/svc5:p80" -j KUBE-MARK-MASQ
  -A KUBE-SEP-I77PXRDZVX7PMWMN -p tcp -m comment --comment "ns5/svc5:p80" -m recent --set --name KUBE-SEP-I77PXRDZVX7PMWMN --mask 255.255.255.255 --rsource -m tcp -j DNAT --to-destination 10.180.0.3:80
  -A KUBE-SEP-OYPFS5VJICHGATKP -s 10.180.0.3/32 -m comment --comment "ns3/svc3:p80" -j KUBE-MARK-MASQ
  -A KUBE-SEP-OYPFS5VJICHGATKP -p tcp -m comment --comment "ns3/svc3:p80" -m tcp -j DNAT --to-destination 10.180.0.3:80
  -A KUBE-SEP-RS4RBKLTHTF2IUXJ -s 10.180.0.2/32 -m comment --comment "ns2/svc2:p80" -j KUBE-MARK-MASQ
  -A KUBE-SEP-RS4RBKLTHTF2IUXJ -p tcp -m comment --comment "ns2/svc2:p80" -m tcp -j DNAT --to-destination 10.180.0.2:80
  -A KUBE-SEP-SXIVWICOYRO3J4NJ -s 10.180.0.1/32 -m comment --comment "ns1/svc1:p80" -j KUBE-MARK-MASQ
  -A KUBE-SEP-SXIVWICOYRO3J4NJ -p tcp -m comment --comment "ns1/svc1:p80" -m tcp -j DNAT --to-destination 10.180.0.1:80
  -A KUBE-SEP-UKSFD7AGPMPPLUHC -s 10.180.0.4/32 -m comment --comment "ns4/svc4:p80" -j KUBE-MARK-MASQ
  -A KUBE-SEP-UKSFD7AGPMPPLUHC -p tcp -m comment --comment "ns4/svc4:p80" -m tcp -j DNAT --to-destination 10.180.0.4:80
  -A KUBE-SERVICES -d 172.30.0.41/32 -p tcp -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp --dport 80 -j KUBE-SVC-XPGD46QRK7WJZT7O
  -A KUBE-SERVICES -d 172.30.0.42/32 -p tcp -m comment --comment "ns2/svc2:p80 cluster IP" -m tcp --dport 80 -j KUBE-SVC-GNZBNJ2PO5MGZ6GT
  -A KUBE-SERVICES -d 192.168.99.22/32 -p tcp -m comment --comment "ns2/svc2:p80 external IP" -m tcp --dport 80 -j KUBE-EXT-GNZBNJ2PO5MGZ6GT
  -A KUBE-SERVICES -d 1.2.3.4/32 -p tcp -m comment --comment "ns2/svc2:p80 loadbalancer IP" -m tcp --dport 80 -j KUBE-EXT-GNZBNJ2PO5MGZ6GT
  -A KUBE-SERVICES -d 172.30.0.43/32 -p tcp -m comment --comment "ns3/svc3:p80 cluster IP" -m tcp --dport 80 -j KUBE-SVC-X27LE4BHSL4DOUIK
  -A KUBE-SERVICES -d 172.30.0.44/32 -p tcp -m comment --comment "ns4/svc4:p80 cluster IP" -m tcp --dport 80 -j KUBE-SVC-4SW47YFZTEDKD3PK
  -A KUBE-SERVICES -d 192.168.99.33/32 -p tcp -m comment --comment "ns4/svc4:p80 external IP" -m tcp --dport 80 -j KUBE-EXT-4SW47YFZTEDKD3PK
  -A KUBE-SERVICES -d 172.30.0.45/32 -p tcp -m comment --comment "ns5/svc5:p80 cluster IP" -m tcp --dport 80 -j KUBE-SVC-NUKIZ6OKUXPJNT4C
  -A KUBE-SERVICES -d 5.6.7.8/32 -p tcp -m comment --comment "ns5/svc5:p80 loadbalancer IP" -m tcp --dport 80 -j KUBE-FW-NUKIZ6OKUXPJNT4C
  -A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
  -A KUBE-SVC-4SW47YFZTEDKD3PK ! -s 10.0.0.0/8 -d 172.30.0.44/32 -p tcp -m comment --comment "ns4/svc4:p80 cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ
  -A KUBE-SVC-4SW47YFZTEDKD3PK -m comment --comment "ns4/svc4:p80 -> 10.180.0.4:80" -m statistic --mode random --probability 0.50000000000 -j KUBE-SEP-UKSFD7AGPMPPLUHC
  -A KUBE-SVC-4SW47YFZTEDKD3PK -m comment --comment "ns4/svc4:p80 -> 10.180.0.5:80" -j KUBE-SEP-C6EBXVWJJZMIWKLZ
  -A KUBE-SVC-GNZBNJ2PO5MGZ6GT ! -s 10.0.0.0/8 -d 172.30.0.42/32 -p tcp -m comment --comment "ns2/svc2:p80 cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ
  -A KUBE-SVC-GNZBNJ2PO5MGZ6GT -m comment --comment "ns2/svc2:p80 -> 10.180.0.2:80" -j KUBE-SEP-RS4RBKLTHTF2IUXJ
  -A KUBE-SVC-NUKIZ6OKUXPJNT4C ! -s 10.0.0.0/8 -d 172.30.0.45/32 -p tcp -m comment --comment "ns5/svc5:p80 cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ
  -A KUBE-SVC-NUKIZ6OKUXPJNT4C -m comment --comment "ns5/svc5:p80 -> 10.180.0.3:80" -m recent --rcheck --seconds 10800 --reap --name KUBE-SEP-I77PXRDZVX7PMWMN --mask 255.255.255.255 --rsource -j KUBE-SEP-I77PXRDZVX7PMWMN
  -A KUBE-SVC-NUKIZ6OKUXPJNT4C -m comment --comment "ns5/svc5:p80 -> 10.180.0.3:80" -j KUBE-SEP-I77PXRDZVX7PMWMN
  -A KUBE-SVC-X27LE4BHSL4DOUIK ! -s 10.0.0.0/8 -d 172.30.0.43/32 -p tcp -m comment --comment "ns3/svc3:p80 cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ
  -A KUBE-SVC-X27LE4BHSL4DOUIK -m comment --comment "ns3/svc3:p80 -> 10.180.0.3:80" -j KUBE-SEP-OYPFS5VJICHGATKP
  -A KUBE-SVC-XPGD46QRK7WJZT7O ! -s 10.0.0.0/8 -d 172.30.0.41/32 -p tcp -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ
  -A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 -> 10.180.0.1:80" -j KUBE-SEP-SXIVWICOYRO3J4NJ
  COMMIT
`);

test('upstream’s overall cluster: every table, chain and rule, in iptables-save’s layout', (t) => {
  const text = saveText(upstreamCluster().checkout().desired, { randomFully: false });
  t.is(text, EXPECTED);
});

test('with --random-fully (iptables-nft 1.8.9 has it) only the MASQUERADE rule changes', (t) => {
  const text = saveText(upstreamCluster().checkout().desired);
  const want = EXPECTED.replace('-j MASQUERADE\n', '-j MASQUERADE --random-fully\n');
  t.is(text, want);
});
