// One semantic at a time, as upstream's iptables proxier writes it: the rules a Service gets,
// as iptables-save lines. Chain names come from names.ts (checked against upstream's own
// names in names.test.ts and overall.test.ts).
import test from 'ava';
import { endpointChainName, hash16 } from '../../../../src/proxier/iptables/index.ts';
import { chainLines, cluster, ep, node, NODE, saveText, slice, svc } from './harness.ts';

const H = hash16('default/s:ptcp');
const SVC = `KUBE-SVC-${H}`;
const SVL = `KUBE-SVL-${H}`;
const EXT = `KUBE-EXT-${H}`;
const FW = `KUBE-FW-${H}`;
const sep = (key: string, proto = 'tcp', port = 'default/s:p') =>
  endpointChainName({ portName: port, protocol: proto as 'tcp' }, { key });
const PORTS = [{ name: 'p', protocol: 'TCP', port: 8080 }];

test('ClusterIP with several endpoints: statistic probabilities 1/4, 1/3, 1/2 as iptables prints them', (t) => {
  const c = cluster();
  c.onService(undefined, svc('s', { clusterIP: '172.30.0.10' }));
  c.onEndpointSlice(
    slice(
      's-1',
      's',
      ['10.1.0.1', '10.1.0.2', '10.1.0.3', '10.1.0.4'].map((ip) => ep(ip)),
      { ports: PORTS },
    ),
    false,
  );
  const text = saveText(c.checkout().desired);
  t.deepEqual(chainLines(text, SVC), [
    `-A ${SVC} ! -s 10.0.0.0/8 -d 172.30.0.10/32 -p tcp -m comment --comment "default/s:p cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ`,
    `-A ${SVC} -m comment --comment "default/s:p -> 10.1.0.1:8080" -m statistic --mode random --probability 0.25000000000 -j ${sep('10.1.0.1:8080')}`,
    `-A ${SVC} -m comment --comment "default/s:p -> 10.1.0.2:8080" -m statistic --mode random --probability 0.33333333349 -j ${sep('10.1.0.2:8080')}`,
    `-A ${SVC} -m comment --comment "default/s:p -> 10.1.0.3:8080" -m statistic --mode random --probability 0.50000000000 -j ${sep('10.1.0.3:8080')}`,
    `-A ${SVC} -m comment --comment "default/s:p -> 10.1.0.4:8080" -j ${sep('10.1.0.4:8080')}`,
  ]);
  t.deepEqual(chainLines(text, sep('10.1.0.2:8080')), [
    `-A ${sep('10.1.0.2:8080')} -s 10.1.0.2/32 -m comment --comment "default/s:p" -j KUBE-MARK-MASQ`,
    `-A ${sep('10.1.0.2:8080')} -p tcp -m comment --comment "default/s:p" -m tcp -j DNAT --to-destination 10.1.0.2:8080`,
  ]);
});

test('ClientIP affinity: recent --rcheck per endpoint before the random pick, --set in each KUBE-SEP', (t) => {
  const c = cluster();
  c.onService(undefined, svc('s', { clusterIP: '172.30.0.10', affinity: 'ClientIP', timeout: 300 }));
  c.onEndpointSlice(slice('s-1', 's', [ep('10.1.0.1'), ep('10.1.0.2')], { ports: PORTS }), false);
  const text = saveText(c.checkout().desired);
  const [a, b] = [sep('10.1.0.1:8080'), sep('10.1.0.2:8080')];
  t.deepEqual(chainLines(text, SVC).slice(1), [
    `-A ${SVC} -m comment --comment "default/s:p -> 10.1.0.1:8080" -m recent --rcheck --seconds 300 --reap --name ${a} --mask 255.255.255.255 --rsource -j ${a}`,
    `-A ${SVC} -m comment --comment "default/s:p -> 10.1.0.2:8080" -m recent --rcheck --seconds 300 --reap --name ${b} --mask 255.255.255.255 --rsource -j ${b}`,
    `-A ${SVC} -m comment --comment "default/s:p -> 10.1.0.1:8080" -m statistic --mode random --probability 0.50000000000 -j ${a}`,
    `-A ${SVC} -m comment --comment "default/s:p -> 10.1.0.2:8080" -j ${b}`,
  ]);
  t.deepEqual(
    chainLines(text, b)[1],
    `-A ${b} -p tcp -m comment --comment "default/s:p" -m recent --set --name ${b} --mask 255.255.255.255 --rsource -m tcp -j DNAT --to-destination 10.1.0.2:8080`,
  );
});

test('masqueradeAll marks every packet to the cluster IP; no detect-local match', (t) => {
  const c = cluster({ masqueradeAll: true });
  c.onService(undefined, svc('s', { clusterIP: '172.30.0.10' }));
  c.onEndpointSlice(slice('s-1', 's', [ep('10.1.0.1')], { ports: PORTS }), false);
  t.is(
    chainLines(saveText(c.checkout().desired), SVC)[0],
    `-A ${SVC} -d 172.30.0.10/32 -p tcp -m comment --comment "default/s:p cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ`,
  );
});

const detectCases = [
  { mode: 'BridgeInterface' as const, opts: { bridgeInterface: 'cbr0' }, not: '! -i cbr0', is: '-i cbr0' },
  { mode: 'InterfaceNamePrefix' as const, opts: { interfaceNamePrefix: 'veth' }, not: '! -i veth+', is: '-i veth+' },
  { mode: 'NodeCIDR' as const, opts: {}, not: '! -s 10.244.1.0/24', is: '-s 10.244.1.0/24' },
];
for (const d of detectCases) {
  test(`detect-local ${d.mode}: "${d.not}" masquerades off-node traffic, "${d.is}" short-circuits pod traffic in KUBE-EXT`, (t) => {
    const c = cluster({ detectLocalMode: d.mode, ...d.opts });
    c.onNode(node(NODE, { internal: ['192.168.0.2'], podCIDRs: ['10.244.1.0/24'] }));
    c.onService(
      undefined,
      svc('s', {
        type: 'NodePort',
        eTP: 'Local',
        clusterIP: '172.30.0.10',
        ports: [{ name: 'p', protocol: 'TCP', port: 80, nodePort: 30080 }],
      }),
    );
    c.onEndpointSlice(slice('s-1', 's', [ep('10.244.1.5', { node: NODE })], { ports: PORTS }), false);
    const text = saveText(c.checkout().desired);
    const masq = chainLines(text, SVC)[0]!;
    t.true(masq.includes(` ${d.not} `) && masq.endsWith('-j KUBE-MARK-MASQ'), masq);
    t.true(
      chainLines(text, EXT)[0]!.includes(
        ` ${d.is} -m comment --comment "pod traffic for default/s:p external destinations" -j ${SVC}`,
      ),
      chainLines(text, EXT)[0],
    );
  });
}

test('detect-local None: no masquerade rule for the cluster IP and no pod short-circuit', (t) => {
  const c = cluster({ detectLocalMode: 'None' });
  c.onService(
    undefined,
    svc('s', {
      type: 'NodePort',
      eTP: 'Local',
      clusterIP: '172.30.0.10',
      ports: [{ name: 'p', protocol: 'TCP', port: 80, nodePort: 30080 }],
    }),
  );
  c.onEndpointSlice(slice('s-1', 's', [ep('10.1.0.1', { node: NODE })], { ports: PORTS }), false);
  const text = saveText(c.checkout().desired);
  t.false(chainLines(text, SVC).some((l) => l.includes('KUBE-MARK-MASQ')));
  t.deepEqual(chainLines(text, EXT), [
    `-A ${EXT} -m comment --comment "masquerade LOCAL traffic for default/s:p external destinations" -m addrtype --src-type LOCAL -j KUBE-MARK-MASQ`,
    `-A ${EXT} -m comment --comment "route LOCAL traffic for default/s:p external destinations" -m addrtype --src-type LOCAL -j ${SVC}`,
    `-A ${EXT} -j ${SVL}`,
  ]);
});

test('eTP=Local with a local endpoint: KUBE-EXT ends in KUBE-SVL, which holds only the local endpoint', (t) => {
  const c = cluster();
  c.onService(
    undefined,
    svc('s', {
      type: 'LoadBalancer',
      eTP: 'Local',
      clusterIP: '172.30.0.10',
      hcPort: 32000,
      ingress: [{ ip: '1.2.3.4' }],
      ports: [{ name: 'p', protocol: 'TCP', port: 80, nodePort: 30080 }],
    }),
  );
  c.onEndpointSlice(
    slice('s-1', 's', [ep('10.1.0.1', { node: NODE }), ep('10.1.0.2', { node: 'other' })], { ports: PORTS }),
    false,
  );
  const text = saveText(c.checkout().desired);
  t.is(chainLines(text, EXT).at(-1), `-A ${EXT} -j ${SVL}`);
  t.deepEqual(chainLines(text, SVL), [
    `-A ${SVL} -m comment --comment "default/s:p -> 10.1.0.1:8080" -j ${sep('10.1.0.1:8080')}`,
  ]);
  t.is(chainLines(text, SVC).length, 3, 'the cluster chain keeps both endpoints for internal traffic');
  t.false(text.includes('-A KUBE-EXTERNAL-SERVICES '), 'nothing dropped: there is a local endpoint');
  t.true(
    text.includes(
      '-A KUBE-NODEPORTS -p tcp -m comment --comment "default/s:p health check node port" -m tcp --dport 32000 -j ACCEPT',
    ),
  );
});

test('iTP=Local: the cluster IP goes to KUBE-SVL; without local endpoints it is dropped in filter', (t) => {
  const c = cluster();
  c.onService(undefined, svc('s', { iTP: 'Local', clusterIP: '172.30.0.10' }));
  c.onEndpointSlice(slice('s-1', 's', [ep('10.1.0.1', { node: NODE })], { ports: PORTS }), false);
  const text = saveText(c.checkout().desired);
  t.true(
    text.includes(
      `-A KUBE-SERVICES -d 172.30.0.10/32 -p tcp -m comment --comment "default/s:p cluster IP" -m tcp --dport 80 -j ${SVL}`,
    ),
  );
  t.is(
    chainLines(text, SVL)[0],
    `-A ${SVL} ! -s 10.0.0.0/8 -d 172.30.0.10/32 -p tcp -m comment --comment "default/s:p cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ`,
  );
  t.deepEqual(chainLines(text, SVC), [], 'no cluster chain: nothing uses it');

  c.onEndpointSlice(slice('s-1', 's', [ep('10.1.0.1', { node: 'other' })], { ports: PORTS }), false);
  const none = saveText(c.checkout().desired);
  t.true(
    none.includes(
      '-A KUBE-SERVICES -d 172.30.0.10/32 -p tcp -m comment --comment "default/s:p has no local endpoints" -m tcp --dport 80 -j DROP',
    ),
  );
  t.false(none.includes(SVL));
});

test('no endpoints: REJECT for the cluster IP, external IPs, LB IPs and the node port, and no nat rule', (t) => {
  const c = cluster();
  c.onService(
    undefined,
    svc('s', {
      type: 'LoadBalancer',
      clusterIP: '172.30.0.10',
      externalIPs: ['192.168.9.9'],
      ingress: [{ ip: '1.2.3.4' }],
      ports: [{ name: 'p', protocol: 'TCP', port: 80, nodePort: 30080 }],
    }),
  );
  const text = saveText(c.checkout().desired);
  const reject = '-j REJECT --reject-with icmp-port-unreachable';
  const noEp = '-m comment --comment "default/s:p has no endpoints"';
  t.true(text.includes(`-A KUBE-SERVICES -d 172.30.0.10/32 -p tcp ${noEp} -m tcp --dport 80 ${reject}`));
  t.true(text.includes(`-A KUBE-EXTERNAL-SERVICES -d 192.168.9.9/32 -p tcp ${noEp} -m tcp --dport 80 ${reject}`));
  t.true(text.includes(`-A KUBE-EXTERNAL-SERVICES -d 1.2.3.4/32 -p tcp ${noEp} -m tcp --dport 80 ${reject}`));
  t.true(
    text.includes(
      `-A KUBE-EXTERNAL-SERVICES -p tcp ${noEp} -m addrtype --dst-type LOCAL -m tcp --dport 30080 ${reject}`,
    ),
  );
  t.false(text.includes(H), 'no chain of the Service');
});

test('terminating endpoints are used when none is ready (the model’s fallback), and only then', (t) => {
  const c = cluster();
  c.onService(undefined, svc('s', { clusterIP: '172.30.0.10' }));
  c.onEndpointSlice(
    slice('s-1', 's', [ep('10.1.0.1', { ready: false, serving: true, terminating: true })], { ports: PORTS }),
    false,
  );
  t.deepEqual(chainLines(saveText(c.checkout().desired), SVC).slice(1), [
    `-A ${SVC} -m comment --comment "default/s:p -> 10.1.0.1:8080" -j ${sep('10.1.0.1:8080')}`,
  ]);
  c.onEndpointSlice(
    slice('s-1', 's', [ep('10.1.0.1', { ready: false, serving: true, terminating: true }), ep('10.1.0.2')], {
      ports: PORTS,
    }),
    false,
  );
  t.deepEqual(chainLines(saveText(c.checkout().desired), SVC).slice(1), [
    `-A ${SVC} -m comment --comment "default/s:p -> 10.1.0.2:8080" -j ${sep('10.1.0.2:8080')}`,
  ]);
});

test('topology hints: only the endpoints for this node’s zone', (t) => {
  const c = cluster();
  c.onNode(node(NODE, { zone: 'zone-a', internal: ['192.168.0.2'] }));
  c.onService(undefined, svc('s', { clusterIP: '172.30.0.10' }));
  c.onEndpointSlice(
    slice(
      's-1',
      's',
      [ep('10.1.0.1', { zone: 'zone-a', zones: ['zone-a'] }), ep('10.1.0.2', { zone: 'zone-b', zones: ['zone-b'] })],
      { ports: PORTS },
    ),
    false,
  );
  const text = saveText(c.checkout().desired);
  t.deepEqual(chainLines(text, SVC).slice(1), [
    `-A ${SVC} -m comment --comment "default/s:p -> 10.1.0.1:8080" -j ${sep('10.1.0.1:8080')}`,
  ]);
  t.false(text.includes(sep('10.1.0.2:8080')));
});

test('loadBalancerSourceRanges holding the node IP also let the node reach the VIPs (upstream allowFromNode)', (t) => {
  const c = cluster();
  c.onNode(node(NODE, { internal: ['192.168.0.2'] }));
  c.onService(
    undefined,
    svc('s', {
      type: 'LoadBalancer',
      clusterIP: '172.30.0.10',
      ingress: [{ ip: '1.2.3.4' }, { ip: '1.2.3.5' }],
      sourceRanges: ['192.168.0.0/24', '203.0.113.0/25'],
      ports: [{ name: 'p', protocol: 'TCP', port: 80, nodePort: 30080 }],
    }),
  );
  c.onEndpointSlice(slice('s-1', 's', [ep('10.1.0.1')], { ports: PORTS }), false);
  const text = saveText(c.checkout().desired);
  const lb = '-m comment --comment "default/s:p loadbalancer IP"';
  t.deepEqual(chainLines(text, FW), [
    `-A ${FW} -s 192.168.0.0/24 ${lb} -j ${EXT}`,
    `-A ${FW} -s 203.0.113.0/25 ${lb} -j ${EXT}`,
    `-A ${FW} -s 1.2.3.4/32 ${lb} -j ${EXT}`,
    `-A ${FW} -s 1.2.3.5/32 ${lb} -j ${EXT}`,
    `-A ${FW} -m comment --comment "other traffic to default/s:p will be dropped by KUBE-PROXY-FIREWALL"`,
  ]);
  t.deepEqual(
    chainLines(text, 'KUBE-PROXY-FIREWALL'),
    ['1.2.3.4', '1.2.3.5'].map(
      (ip) =>
        `-A KUBE-PROXY-FIREWALL -d ${ip}/32 -p tcp -m comment --comment "default/s:p traffic not accepted by ${FW}" -m tcp --dport 80 -j DROP`,
    ),
  );
  t.true(
    text.includes(`-A KUBE-NODEPORTS -p tcp -m comment --comment "default/s:p" -m tcp --dport 30080 -j ${EXT}`),
    'node ports bypass the firewall chain',
  );
});

test('UDP and SCTP: the protocol in every match, the names hashed with it', (t) => {
  for (const proto of ['UDP', 'SCTP']) {
    const p = proto.toLowerCase();
    const c = cluster();
    c.onService(
      undefined,
      svc('s', {
        type: 'NodePort',
        clusterIP: '172.30.0.10',
        ports: [{ name: 'p', protocol: proto, port: 53, nodePort: 30053 }],
      }),
    );
    c.onEndpointSlice(
      slice('s-1', 's', [ep('10.1.0.1')], { ports: [{ name: 'p', protocol: proto, port: 5353 }] }),
      false,
    );
    const text = saveText(c.checkout().desired);
    const h = hash16(`default/s:p${p}`);
    const e = sep('10.1.0.1:5353', p);
    t.true(
      text.includes(
        `-A KUBE-SERVICES -d 172.30.0.10/32 -p ${p} -m comment --comment "default/s:p cluster IP" -m ${p} --dport 53 -j KUBE-SVC-${h}`,
      ),
      proto,
    );
    t.true(
      text.includes(
        `-A KUBE-NODEPORTS -p ${p} -m comment --comment "default/s:p" -m ${p} --dport 30053 -j KUBE-EXT-${h}`,
      ),
      proto,
    );
    t.true(
      text.includes(
        `-A ${e} -p ${p} -m comment --comment "default/s:p" -m ${p} -j DNAT --to-destination 10.1.0.1:5353`,
      ),
      proto,
    );
  }
});

test('--iptables-masquerade-bit moves the mark everywhere', (t) => {
  const c = cluster();
  const text = saveText(c.checkout().desired, { masqueradeBit: 10 });
  t.true(text.includes('-A KUBE-MARK-MASQ -j MARK --set-xmark 0x400/0x400'));
  t.true(text.includes('-A KUBE-POSTROUTING -m mark ! --mark 0x400/0x400 -j RETURN'));
  t.true(text.includes('-A KUBE-POSTROUTING -j MARK --set-xmark 0x400/0x0'));
  t.true(
    text.includes(
      '-A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x400/0x400 -j ACCEPT',
    ),
  );
  t.throws(() => saveText(c.desired, { masqueradeBit: 32 }), { message: /masquerade-bit 32/ });
});

test('nf_conntrack_tcp_be_liberal: no INVALID drop in KUBE-FORWARD', (t) => {
  const text = saveText(cluster().checkout().desired, { conntrackTCPLiberal: true });
  t.false(text.includes('INVALID'));
});

test('more than 1000 endpoints: per-endpoint comments are left out (upstream largeClusterMode)', (t) => {
  const c = cluster();
  c.onService(undefined, svc('s', { clusterIP: '172.30.0.10' }));
  const eps = Array.from({ length: 1001 }, (_, i) => ep(`10.2.${(i + 1) >> 8}.${(i + 1) & 255}`));
  c.onEndpointSlice(slice('s-1', 's', eps, { ports: PORTS }), false);
  const text = saveText(c.checkout().desired);
  const e = sep('10.2.0.1:8080');
  t.deepEqual(chainLines(text, e), [
    `-A ${e} -s 10.2.0.1/32 -j KUBE-MARK-MASQ`,
    `-A ${e} -p tcp -m tcp -j DNAT --to-destination 10.2.0.1:8080`,
  ]);
  t.regex(
    chainLines(text, SVC)[1]!,
    new RegExp(`^-A ${SVC} -m statistic --mode random --probability 0.00099900085 -j KUBE-SEP-[A-Z2-7]{16}$`),
  );
  t.true(chainLines(text, SVC)[0]!.includes('"default/s:p cluster IP"'), 'the capture keeps its comment');
});
