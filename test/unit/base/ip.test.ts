import test from 'ava';
import {
  cidrContains,
  cidrLast,
  compareIP,
  ipFromBytes,
  isLoopback,
  parseCIDR,
  parseCIDRBytes,
  parseIP,
} from '../../../src/base/ip.ts';

const valid: [string, string, string][] = [
  ['10.96.0.1', 'IPv4', '10.96.0.1'],
  ['0.0.0.0', 'IPv4', '0.0.0.0'],
  ['255.255.255.255', 'IPv4', '255.255.255.255'],
  ['::1', 'IPv6', '::1'],
  ['::', 'IPv6', '::'],
  ['FD00:0:0:0:0:0:0:1', 'IPv6', 'fd00::1'],
  ['2001:db8:0:0:1:0:0:1', 'IPv6', '2001:db8::1:0:0:1'],
  ['1:2:3:4:5:6:7::', 'IPv6', '1:2:3:4:5:6:7:0'],
  ['::ffff:10.0.0.1', 'IPv6', '::ffff:a00:1'],
];
for (const [text, family, canonical] of valid) {
  test(`parses ${text}`, (t) => {
    const ip = parseIP(text);
    t.is(ip?.family, family as 'IPv4' | 'IPv6');
    t.is(ip?.text, canonical);
    t.deepEqual(ipFromBytes(ip!.bytes).text, canonical);
  });
}

for (const text of [
  '',
  '10.0.0',
  '10.0.0.256',
  '010.0.0.1',
  '1.2.3.4/32',
  'fe80::1%eth0',
  '1:::2',
  ':1',
  '1:2:3:4:5:6:7:8:9',
  'g::1',
  ' 10.0.0.1',
  '10.0.0.1 ',
]) {
  test(`rejects ${JSON.stringify(text)}`, (t) => {
    t.is(parseIP(text), undefined);
  });
}

test('CIDRs: host bits cleared, containment, last address, bad prefixes rejected', (t) => {
  const c = parseCIDR('10.244.3.7/16')!;
  t.is(c.text, '10.244.0.0/16');
  t.true(cidrContains(c, parseIP('10.244.255.1')!));
  t.false(cidrContains(c, parseIP('10.245.0.1')!));
  t.false(cidrContains(c, parseIP('::1')!));
  t.is(cidrLast(c).text, '10.244.255.255');
  t.is(cidrLast(parseCIDR('fd00::/120')!).text, 'fd00::ff');
  t.is(parseCIDR('10.0.0.1')!.text, '10.0.0.1/32');
  t.is(parseCIDR('0.0.0.0/0')!.prefix, 0);
  t.is(parseCIDR('10.0.0.0/33'), undefined);
  t.is(parseCIDR('10.0.0.0/-1'), undefined);
  t.is(parseCIDR('10.0.0.0/'), undefined);
});

test('loopback and ordering', (t) => {
  t.true(isLoopback(parseIP('127.0.0.53')!));
  t.true(isLoopback(parseIP('::1')!));
  t.false(isLoopback(parseIP('::2')!));
  t.true(compareIP(parseIP('10.0.0.2')!, parseIP('10.0.0.10')!) < 0);
  t.true(compareIP(parseIP('10.0.0.2')!, parseIP('::1')!) < 0);
});

test('parseCIDRBytes gives the family, network bytes and prefix of parseCIDR, without the texts', (t) => {
  const inputs = [
    '10.244.3.7',
    '10.244.3.7/32',
    '10.244.3.7/16',
    '10.244.3.7/0',
    '192.168.1.200/27',
    'fd00::1',
    'fd00::1/64',
    '::ffff:10.0.0.1',
    '10.0.0.1/33',
    '10.0.0.1/',
    '10.0.0.1/x',
    '010.0.0.1',
    '10.0.0',
    '',
    'fd00::/129',
  ];
  for (const text of inputs) {
    const c = parseCIDR(text);
    t.deepEqual(parseCIDRBytes(text), c && { family: c.family, bytes: c.addr.bytes, prefix: c.prefix }, text);
  }
});
