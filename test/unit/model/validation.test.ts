// What the API server refuses is refused here too (names that become kernel object names,
// endpoints that are no pod's address): logged by name, counted, skipped; a good neighbour
// and what was already published are untouched.
import test from 'ava';
import type { ServicePortId } from '../../../src/model/ids.ts';
import { isDNS1035Label, isDNS1123Label, isDNS1123Subdomain, specialEndpointIP } from '../../../src/model/validate.ts';
import { ep, keys, newTracker, slice, svc } from './helpers.ts';

const GOOD = 'default/good:p/TCP' as ServicePortId;

test('DNS label and subdomain checks follow the API server', (t) => {
  t.true(isDNS1123Label('kube-system'));
  t.true(isDNS1123Label('1abc'));
  t.false(isDNS1123Label('a'.repeat(64)));
  t.false(isDNS1123Label('Abc'));
  t.false(isDNS1123Label('a\0b'));
  t.false(isDNS1123Label('é'));
  t.false(isDNS1035Label('1abc'));
  t.true(isDNS1123Subdomain('web-1.abc'));
  t.false(isDNS1123Subdomain('web-1..abc'));
});

test('special endpoint addresses are named', (t) => {
  const rows: [string, 'IPv4' | 'IPv6', string | undefined][] = [
    ['127.0.0.1', 'IPv4', 'loopback'],
    ['127.255.0.3', 'IPv4', 'loopback'],
    ['0.0.0.0', 'IPv4', 'unspecified'],
    ['169.254.10.1', 'IPv4', 'link-local'],
    ['224.0.0.5', 'IPv4', 'link-local multicast'],
    ['255.255.255.255', 'IPv4', 'broadcast'],
    ['10.0.0.1', 'IPv4', undefined],
    ['::1', 'IPv6', 'loopback'],
    ['::', 'IPv6', 'unspecified'],
    ['fe80::1', 'IPv6', 'link-local'],
    ['ff02::1', 'IPv6', 'link-local multicast'],
    ['fd00::1', 'IPv6', undefined],
  ];
  for (const [ip, family, want] of rows) t.is(specialEndpointIP(ip, family), want, ip);
});

for (const [label, name] of [
  ['a NUL byte', 'web\0x'],
  ['200 × é', 'é'.repeat(200)],
  ['a newline and ANSI escapes', 'web\n\u001b[31mFAKE'],
  ['upper case', 'Web'],
  ['64 characters', 'a'.repeat(64)],
] as const) {
  test(`a Service whose name has ${label} is logged, counted and skipped; its neighbour is untouched`, (t) => {
    const { t: tr, warnings, rejected } = newTracker();
    tr.onService(undefined, svc('good', { clusterIP: '10.96.0.1' }));
    tr.onEndpointSlice(slice('good-1', 'good', [ep('10.0.1.1')]), false);
    tr.onService(undefined, svc(name, { clusterIP: '10.96.0.2', affinity: 'ClientIP' }));
    tr.onEndpointSlice(slice('bad-1', name, [ep('10.0.1.2')]), false);
    const { desired } = tr.checkout();
    t.deepEqual([...desired.services.keys()], [GOOD]);
    t.deepEqual(keys(desired.selections.get(GOOD)?.cluster), ['10.0.1.1:8080']);
    t.deepEqual(rejected, ['Service/invalid-name', 'EndpointSlice/invalid-name']);
    t.regex(warnings()[0]!.msg, /invalid-name/);
  });
}

test('a port name the API server refuses drops that port only', (t) => {
  const { t: tr, rejected } = newTracker();
  tr.onService(
    undefined,
    svc('web', {
      ports: [
        { name: 'ok', port: 80 },
        { name: 'BAD\n', port: 81 },
      ],
    }),
  );
  const { desired } = tr.checkout();
  t.deepEqual([...desired.services.keys()], ['default/web:ok/TCP']);
  t.deepEqual(rejected, ['Service/invalid-port']);
});

test('loopback, unspecified, link-local and broadcast endpoints are refused with a clear warning', (t) => {
  const { t: tr, warnings } = newTracker();
  tr.onService(undefined, svc('good', { clusterIP: '10.96.0.1' }));
  const bad = ['127.0.0.1', '0.0.0.0', '169.254.1.1', '255.255.255.255'];
  tr.onEndpointSlice(slice('good-1', 'good', [ep('10.0.1.1'), ...bad.map((ip) => ep(ip))]), false);
  const { desired } = tr.checkout();
  t.deepEqual(keys(desired.selections.get(GOOD)?.cluster), ['10.0.1.1:8080']);
  const w = warnings();
  t.is(w.length, 1);
  for (const ip of bad) t.true(w[0]!.msg.includes(`address ${ip} is`), ip);
  t.regex(w[0]!.msg, /127\.0\.0\.1 is loopback \(the API server refuses it/);
});

test('IPv6: ::1, :: and fe80:: endpoints are refused', (t) => {
  const { t: tr } = newTracker({ family: 'IPv6' });
  tr.onService(undefined, svc('good', { clusterIP: 'fd00::10' }));
  const s = slice(
    'good-1',
    'good',
    ['fd00::1', '::1', '::', 'fe80::1'].map((ip) => ep(ip)),
    { addressType: 'IPv6' },
  );
  tr.onEndpointSlice(s, false);
  const { desired } = tr.checkout();
  t.deepEqual(keys(desired.selections.get(GOOD)?.cluster), ['[fd00::1]:8080']);
});

test('external IPs the API server refuses (loopback, unspecified, link-local) are dropped by name', (t) => {
  const { t: tr, warnings } = newTracker();
  tr.onService(undefined, svc('web', { externalIPs: ['192.0.2.10', '127.0.0.1', '0.0.0.0', '169.254.0.1'] }));
  const { desired } = tr.checkout();
  t.deepEqual(desired.services.get('default/web:p/TCP' as ServicePortId)?.externalIPs, ['192.0.2.10']);
  t.regex(warnings()[0]!.msg, /127\.0\.0\.1 is loopback/);
});
