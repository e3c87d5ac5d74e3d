// The companion rules as data: upstream's chains, jumps and rules in upstream's order, rendered
// the way iptables-save prints them.
import test from 'ava';
import { companionRules, toIptablesSave } from '../../../../src/proxier/ipvs/rules.ts';
import { SetName } from '../../../../src/proxier/ipvs/index.ts';
import type { LocalDetector } from '../../../../src/model/index.ts';

const noDetect: LocalDetector = { mode: 'ClusterCIDR', cidrs: [], interfaceName: '', implemented: false };
const clusterCIDR: LocalDetector = {
  mode: 'ClusterCIDR',
  cidrs: ['10.244.0.0/16'],
  interfaceName: '',
  implemented: true,
};

test('a ClusterIP-only node: the static chains and the KUBE-CLUSTER-IP rules (no local detector: src,dst)', (t) => {
  const r = companionRules({
    family: 'IPv4',
    nonEmptySets: new Set([SetName.CLUSTER_IP, SetName.IPVS_IPS]),
    noNodeAccess: [],
    masqueradeAll: false,
    detectLocal: noDetect,
  });
  t.is(
    toIptablesSave(r),
    `*nat
:KUBE-SERVICES - [0:0]
:KUBE-POSTROUTING - [0:0]
:KUBE-NODE-PORT - [0:0]
:KUBE-LOAD-BALANCER - [0:0]
:KUBE-MARK-MASQ - [0:0]
-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
-A KUBE-SERVICES -s 127.0.0.0/8 -j RETURN
-A KUBE-SERVICES -m comment --comment "Kubernetes service cluster ip + port for masquerade purpose" -m set --match-set KUBE-CLUSTER-IP src,dst -j KUBE-MARK-MASQ
-A KUBE-SERVICES -m addrtype --dst-type LOCAL -j KUBE-NODE-PORT
-A KUBE-LOAD-BALANCER -j KUBE-MARK-MASQ
-A KUBE-SERVICES -m set --match-set KUBE-CLUSTER-IP dst,dst -j ACCEPT
-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN
-A KUBE-POSTROUTING -j MARK --set-xmark 0x4000/0x0
-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000
COMMIT
*filter
:KUBE-FORWARD - [0:0]
:KUBE-NODE-PORT - [0:0]
:KUBE-PROXY-FIREWALL - [0:0]
:KUBE-SOURCE-RANGES-FIREWALL - [0:0]
:KUBE-IPVS-FILTER - [0:0]
:KUBE-IPVS-OUT-FILTER - [0:0]
-A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD
-A INPUT -m comment --comment "kubernetes health check rules" -j KUBE-NODE-PORT
-A INPUT -m comment --comment "kube-proxy firewall rules" -j KUBE-PROXY-FIREWALL
-A FORWARD -m comment --comment "kube-proxy firewall rules" -j KUBE-PROXY-FIREWALL
-A INPUT -m comment --comment "kubernetes ipvs access filter" -j KUBE-IPVS-FILTER
-A OUTPUT -m comment --comment "kubernetes ipvs access filter" -j KUBE-IPVS-OUT-FILTER
-A KUBE-SOURCE-RANGES-FIREWALL -j DROP
-A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x4000/0x4000 -j ACCEPT
-A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A KUBE-NODE-PORT -m comment --comment "Kubernetes health check node port" -m set --match-set KUBE-HEALTH-CHECK-NODE-PORT dst -j ACCEPT
-A KUBE-IPVS-FILTER -m set --match-set KUBE-LOAD-BALANCER dst,dst -j RETURN
-A KUBE-IPVS-FILTER -m set --match-set KUBE-CLUSTER-IP dst,dst -j RETURN
-A KUBE-IPVS-FILTER -m set --match-set KUBE-EXTERNAL-IP dst,dst -j RETURN
-A KUBE-IPVS-FILTER -m set --match-set KUBE-EXTERNAL-IP-LOCAL dst,dst -j RETURN
-A KUBE-IPVS-FILTER -m set --match-set KUBE-HEALTH-CHECK-NODE-PORT dst -j RETURN
-A KUBE-IPVS-FILTER -m conntrack --ctstate NEW -m set --match-set KUBE-IPVS-IPS dst -j REJECT --reject-with icmp-port-unreachable
COMMIT
`,
  );
});

test('every set in use: set rules in upstream order, local detector, external IP accepts, LB no-node-access drop', (t) => {
  const all = new Set(Object.values(SetName));
  const r = companionRules({
    family: 'IPv4',
    nonEmptySets: all,
    noNodeAccess: [{ ip: '198.51.100.20', protocol: 'tcp', port: 443 }],
    masqueradeAll: false,
    detectLocal: clusterCIDR,
    randomFully: false,
  });
  const nat = r.rules
    .filter((x) => x.table === 'nat')
    .map(
      (x) =>
        `${x.chain} ${toIptablesSave({ ...r, jumps: [], chains: [], rules: [x] })
          .split('\n')[1]!
          .replace(/^-A \S+ /, '')}`,
    );
  t.deepEqual(nat.slice(0, 10), [
    'KUBE-SERVICES -s 127.0.0.0/8 -j RETURN',
    'KUBE-POSTROUTING -m comment --comment "Kubernetes endpoints dst ip:port, source ip for solving hairpin purpose" -m set --match-set KUBE-LOOP-BACK dst,dst,src -j MASQUERADE',
    'KUBE-SERVICES -m comment --comment "Kubernetes service lb portal" -m set --match-set KUBE-LOAD-BALANCER dst,dst -j KUBE-LOAD-BALANCER',
    'KUBE-LOAD-BALANCER -m comment --comment "Kubernetes service load balancer ip + port with externalTrafficPolicy=local" -m set --match-set KUBE-LOAD-BALANCER-LOCAL dst,dst -j RETURN',
    'KUBE-NODE-PORT -p tcp -m comment --comment "Kubernetes nodeport TCP port with externalTrafficPolicy=local" -m set --match-set KUBE-NODE-PORT-LOCAL-TCP dst -j RETURN',
    'KUBE-NODE-PORT -p tcp -m comment --comment "Kubernetes nodeport TCP port for masquerade purpose" -m set --match-set KUBE-NODE-PORT-TCP dst -j KUBE-MARK-MASQ',
    'KUBE-NODE-PORT -p udp -m comment --comment "Kubernetes nodeport UDP port with externalTrafficPolicy=local" -m set --match-set KUBE-NODE-PORT-LOCAL-UDP dst -j RETURN',
    'KUBE-NODE-PORT -p udp -m comment --comment "Kubernetes nodeport UDP port for masquerade purpose" -m set --match-set KUBE-NODE-PORT-UDP dst -j KUBE-MARK-MASQ',
    'KUBE-NODE-PORT -p sctp -m comment --comment "Kubernetes nodeport SCTP port with externalTrafficPolicy=local with type \\\'hash ip:port\\\'" -m set --match-set KUBE-NODE-PORT-LOCAL-SCTP-HASH dst,dst -j RETURN',
    'KUBE-NODE-PORT -p sctp -m comment --comment "Kubernetes nodeport SCTP port for masquerade purpose with type \\\'hash ip:port\\\'" -m set --match-set KUBE-NODE-PORT-SCTP-HASH dst,dst -j KUBE-MARK-MASQ',
  ]);
  const text = toIptablesSave(r);
  t.true(
    text.includes(
      '-A KUBE-SERVICES ! -s 10.244.0.0/16 -m comment --comment "Kubernetes service cluster ip + port for masquerade purpose" -m set --match-set KUBE-CLUSTER-IP dst,dst -j KUBE-MARK-MASQ\n',
    ),
  );
  t.true(
    text.includes(
      '-A KUBE-SERVICES -m comment --comment "Kubernetes service external ip + port for masquerade and filter purpose" -m set --match-set KUBE-EXTERNAL-IP dst,dst -m physdev ! --physdev-is-in -m addrtype ! --src-type LOCAL -j ACCEPT\n',
    ),
  );
  t.true(
    text.includes(
      '-A KUBE-PROXY-FIREWALL -m comment --comment "Kubernetes service load balancer ip + port for load balancer with sourceRange" -m set --match-set KUBE-LOAD-BALANCER-FW dst,dst -j KUBE-SOURCE-RANGES-FIREWALL\n',
    ),
  );
  t.true(
    text.includes(
      '-A KUBE-IPVS-OUT-FILTER -s 198.51.100.20/32 -m ipvs --vproto 6 --vaddr 198.51.100.20 --vport 443 -j DROP\n',
    ),
  );
  t.true(text.includes('-j MASQUERADE\n'));
  t.false(text.includes('--random-fully'));
});

test('IPv6 uses the KUBE-6- set names and ::1/128; masqueradeAll marks every cluster IP packet', (t) => {
  const r = companionRules({
    family: 'IPv6',
    nonEmptySets: new Set([SetName.CLUSTER_IP, SetName.LOAD_BALANCER_SOURCE_CIDR]),
    noNodeAccess: [],
    masqueradeAll: true,
    detectLocal: clusterCIDR,
    masqueradeBit: 15,
  });
  const text = toIptablesSave(r);
  t.true(text.includes('-A KUBE-SERVICES -s ::1/128 -j RETURN\n'));
  t.true(text.includes('-m set --match-set KUBE-6-CLUSTER-IP dst,dst -j KUBE-MARK-MASQ\n'));
  t.true(
    text.includes('--match-set KUBE-6-LOAD-BALANCER-SOURCE-CID dst,dst,src -j RETURN'),
    "cut to ipset's 31 characters, as upstream",
  );
  t.true(text.includes('-j MARK --set-xmark 0x8000/0x8000\n'));
});
