// Chain names against the ones upstream's own tests and docs show for known inputs.
import test from 'ava';
import {
  endpointChainName,
  hash16,
  isServicePortChain,
  portChainNames,
} from '../../../../src/proxier/iptables/names.ts';
import { servicePort } from './fixtures.ts';

test('ns1/svc1:p80 tcp has upstream’s KUBE-SVC/SVL/EXT/FW names', (t) => {
  const n = portChainNames(servicePort({ namespace: 'ns1', name: 'svc1', portName: 'p80' }));
  t.is(n.portName, 'ns1/svc1:p80');
  t.is(n.svc, 'KUBE-SVC-XPGD46QRK7WJZT7O');
  t.is(n.svl, 'KUBE-SVL-XPGD46QRK7WJZT7O');
  t.is(n.ext, 'KUBE-EXT-XPGD46QRK7WJZT7O');
  t.is(n.fw, 'KUBE-FW-XPGD46QRK7WJZT7O');
});

test('endpoint chains hash the endpoint too (upstream KUBE-SEP names)', (t) => {
  const n = portChainNames(servicePort({ namespace: 'ns1', name: 'svc1', portName: 'p80' }));
  t.is(endpointChainName(n, { key: '10.180.0.1:80' }), 'KUBE-SEP-SXIVWICOYRO3J4NJ');
});

test('default/kubernetes:https is KUBE-SVC-NPX46M4PTMTKRN6Y, as on every cluster', (t) => {
  t.is(
    portChainNames(servicePort({ namespace: 'default', name: 'kubernetes', portName: 'https' })).svc,
    'KUBE-SVC-NPX46M4PTMTKRN6Y',
  );
});

test('an unnamed port hashes "ns/name" and the protocol is lower case', (t) => {
  const n = portChainNames(servicePort({ namespace: 'ns1', name: 'svc1', portName: '', protocol: 'UDP' }));
  t.is(n.portName, 'ns1/svc1');
  t.is(n.protocol, 'udp');
  t.is(n.svc, `KUBE-SVC-${hash16('ns1/svc1udp')}`);
});

test('hash16 is the first 16 characters of RFC 4648 base32 of sha256', (t) => {
  // As Python's base64.b32encode(hashlib.sha256(b'').digest())[:16] gives it.
  t.is(hash16(''), '4OYMIQUY7QOBJGX3');
  t.regex(hash16('anything'), /^[A-Z2-7]{16}$/);
});

test('service port chains are recognised by prefix; fixed chains are not', (t) => {
  for (const name of ['KUBE-SVC-XPGD46QRK7WJZT7O', 'KUBE-SVL-X', 'KUBE-EXT-X', 'KUBE-FW-X', 'KUBE-SEP-X'])
    t.true(isServicePortChain(name));
  for (const name of ['KUBE-SERVICES', 'KUBE-NODEPORTS', 'KUBE-MARK-MASQ', 'KUBE-FORWARD'])
    t.false(isServicePortChain(name));
});
