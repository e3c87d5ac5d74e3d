// IPv6, nodePortAddresses and localhost node ports, and the incremental property: a service
// port's fragment depends on that port alone.
import test from 'ava';
import { endpointChainName, hash16, servicePortRules, portContext } from '../../../../src/proxier/iptables/index.ts';
import { chainLines, cluster, ep, fragmentLines, fragments, node, NODE, saveText, slice, svc } from './harness.ts';

const NODEPORTS = '-m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain"';

test('IPv6: /128 addresses, [addr]:port DNAT, icmp6 REJECT, ::1 kept out of node ports, no martian rule', (t) => {
  const c = cluster({ family: 'IPv6', clusterCIDRs: ['fd00:10::/64'] });
  c.onService(
    undefined,
    svc('s', {
      type: 'NodePort',
      clusterIPs: ['fd00:30::10'],
      ports: [{ name: 'p', protocol: 'TCP', port: 80, nodePort: 30080 }],
      affinity: 'ClientIP',
      timeout: 60,
    }),
  );
  c.onService(undefined, svc('empty', { clusterIPs: ['fd00:30::11'] }));
  c.onEndpointSlice(
    slice('s-1', 's', [ep('fd00:10::5')], { addressType: 'IPv6', ports: [{ name: 'p', protocol: 'TCP', port: 8080 }] }),
    false,
  );
  const text = saveText(c.checkout().desired);
  const h = hash16('default/s:ptcp');
  const sep = endpointChainName({ portName: 'default/s:p', protocol: 'tcp' }, { key: '[fd00:10::5]:8080' });
  t.deepEqual(chainLines(text, `KUBE-SVC-${h}`), [
    `-A KUBE-SVC-${h} ! -s fd00:10::/64 -d fd00:30::10/128 -p tcp -m comment --comment "default/s:p cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ`,
    `-A KUBE-SVC-${h} -m comment --comment "default/s:p -> [fd00:10::5]:8080" -m recent --rcheck --seconds 60 --reap --name ${sep} --mask ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff --rsource -j ${sep}`,
    `-A KUBE-SVC-${h} -m comment --comment "default/s:p -> [fd00:10::5]:8080" -j ${sep}`,
  ]);
  t.deepEqual(chainLines(text, sep), [
    `-A ${sep} -s fd00:10::5/128 -m comment --comment "default/s:p" -j KUBE-MARK-MASQ`,
    `-A ${sep} -p tcp -m comment --comment "default/s:p" -m recent --set --name ${sep} --mask ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff --rsource -m tcp -j DNAT --to-destination [fd00:10::5]:8080`,
  ]);
  t.true(
    text.includes(
      '-A KUBE-SERVICES -d fd00:30::11/128 -p tcp -m comment --comment "default/empty:p has no endpoints" -m tcp --dport 80 -j REJECT --reject-with icmp6-port-unreachable',
    ),
  );
  t.is(
    chainLines(text, 'KUBE-SERVICES').at(-1),
    `-A KUBE-SERVICES ! -d ::1/128 ${NODEPORTS} -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS`,
  );
  t.deepEqual(chainLines(text, 'KUBE-FIREWALL'), [], 'localhost node ports are IPv4 only');
});

test('localhost node ports off: the nodeports rule leaves 127.0.0.0/8 out and there is no martian drop', (t) => {
  const text = saveText(cluster().checkout().desired, { localhostNodePorts: false });
  t.is(
    chainLines(text, 'KUBE-SERVICES').at(-1),
    `-A KUBE-SERVICES ! -d 127.0.0.0/8 ${NODEPORTS} -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS`,
  );
  t.deepEqual(chainLines(text, 'KUBE-FIREWALL'), []);
  t.true(
    text.includes(':KUBE-FIREWALL - [0:0]') && text.includes('-A INPUT -j KUBE-FIREWALL'),
    'the chain and its jumps stay, as upstream',
  );
});

test('nodePortAddresses that do not match all: one nodeports rule per selected address, loopback only with localhost node ports', (t) => {
  const c = cluster({ nodePortAddresses: ['192.168.0.0/24', '127.0.0.0/8'] });
  const desired = c.checkout().desired;
  const on = saveText(desired, {}, ['192.168.0.2', '127.0.0.1']);
  t.deepEqual(chainLines(on, 'KUBE-SERVICES'), [
    `-A KUBE-SERVICES -d 192.168.0.2/32 ${NODEPORTS} -j KUBE-NODEPORTS`,
    `-A KUBE-SERVICES -d 127.0.0.1/32 ${NODEPORTS} -j KUBE-NODEPORTS`,
  ]);
  t.is(chainLines(on, 'KUBE-FIREWALL').length, 1, 'nodePortAddresses covers 127.0.0.0/8: the martian drop is there');
  const off = saveText(desired, { localhostNodePorts: false }, ['192.168.0.2', '127.0.0.1']);
  t.deepEqual(chainLines(off, 'KUBE-SERVICES'), [`-A KUBE-SERVICES -d 192.168.0.2/32 ${NODEPORTS} -j KUBE-NODEPORTS`]);

  const primary = cluster({ nodePortAddresses: ['192.168.0.0/24'] }).checkout().desired;
  t.deepEqual(
    chainLines(saveText(primary, {}, ['192.168.0.2']), 'KUBE-FIREWALL'),
    [],
    'no loopback in nodePortAddresses: no localhost node ports',
  );
});

test('the nodeports rule ends nat KUBE-SERVICES, after every Service’s captures', (t) => {
  const c = cluster();
  for (let i = 0; i < 5; i++) {
    c.onService(undefined, svc(`s${i}`, { clusterIP: `172.30.0.${i + 1}` }));
    c.onEndpointSlice(
      slice(`s${i}-1`, `s${i}`, [ep(`10.1.0.${i + 1}`)], { ports: [{ name: 'p', protocol: 'TCP', port: 8080 }] }),
      false,
    );
  }
  const lines = chainLines(saveText(c.checkout().desired), 'KUBE-SERVICES');
  t.is(lines.length, 6);
  t.true(lines.at(-1)!.includes('KUBE-NODEPORTS'));
});

test('a fragment depends on its own service port only (other Services, added or removed, change nothing)', (t) => {
  const build = (others: number) => {
    const c = cluster();
    c.onNode(node(NODE, { internal: ['192.168.0.2'] }));
    for (let i = 0; i < others; i++) {
      c.onService(
        undefined,
        svc(`o${i}`, {
          type: 'LoadBalancer',
          clusterIP: `172.30.1.${i + 1}`,
          ingress: [{ ip: `1.1.1.${i + 1}` }],
          ports: [{ name: 'p', protocol: 'TCP', port: 80, nodePort: 31000 + i }],
        }),
      );
      c.onEndpointSlice(
        slice(`o${i}-1`, `o${i}`, [ep(`10.9.0.${i + 1}`)], { ports: [{ name: 'p', protocol: 'TCP', port: 8080 }] }),
        false,
      );
    }
    c.onService(
      undefined,
      svc('me', {
        type: 'LoadBalancer',
        eTP: 'Local',
        clusterIP: '172.30.0.10',
        hcPort: 32000,
        sourceRanges: ['192.168.0.0/16'],
        affinity: 'ClientIP',
        ingress: [{ ip: '1.2.3.4' }],
        ports: [{ name: 'p', protocol: 'TCP', port: 80, nodePort: 30080 }],
      }),
    );
    c.onEndpointSlice(
      slice('me-1', 'me', [ep('10.1.0.1', { node: NODE }), ep('10.1.0.2')], {
        ports: [{ name: 'p', protocol: 'TCP', port: 8080 }],
      }),
      false,
    );
    const desired = c.checkout().desired;
    const id = [...desired.services.keys()].find((k) => k.startsWith('default/me:'))!;
    return servicePortRules(desired.services.get(id)!, desired.selections.get(id), portContext(desired));
  };
  const alone = build(0);
  t.deepEqual(build(40), alone);
  t.true(fragmentLines(alone).length > 10, 'the fragment is not trivially empty');
});

test('fragments of a dual-port Service are separate (one per service port)', (t) => {
  const c = cluster();
  c.onService(
    undefined,
    svc('s', {
      clusterIP: '172.30.0.10',
      ports: [
        { name: 'http', protocol: 'TCP', port: 80 },
        { name: 'dns', protocol: 'UDP', port: 53 },
      ],
    }),
  );
  c.onEndpointSlice(
    slice('s-1', 's', [ep('10.1.0.1')], {
      ports: [
        { name: 'http', protocol: 'TCP', port: 8080 },
        { name: 'dns', protocol: 'UDP', port: 5353 },
      ],
    }),
    false,
  );
  const fs = fragments(c.checkout().desired);
  t.is(fs.length, 2);
  t.deepEqual(
    fs.map((f) => f.chains.map((ch) => ch.name.slice(0, 9))),
    [
      ['KUBE-SVC-', 'KUBE-SEP-'],
      ['KUBE-SVC-', 'KUBE-SEP-'],
    ],
  );
});
