// src/netlink/route against the machine's kernel, each test in a fresh namespace. `ip -j`
// reads the result back independently of our decoder.
//
// This kernel is built without CONFIG_DUMMY, so the dummy link itself can only be checked
// for a clear refusal here; the link and address operations run on an `ifb` link, which,
// like dummy, is a software device with no peer. Under Debian's kernel (QEMU) dummy works.
import test from 'ava';
import { netnsFor } from '../helpers/netns.ts';
import type { Netns } from '../helpers/netns.ts';
import type * as Scenario from './scenarios/route.ts';

const S = new URL('./scenarios/route.ts', import.meta.url).href;
type Outcome = Scenario.Outcome;

interface IpLink {
  ifindex: number;
  ifname: string;
  flags: string[];
  linkinfo?: { info_kind?: string };
}
interface IpAddr {
  ifindex: number;
  ifname: string;
  addr_info: { family: string; local: string; prefixlen: number; scope: string; noprefixroute?: boolean }[];
}

const ipJson = async <T>(ns: Netns, ...args: string[]): Promise<T> =>
  JSON.parse(await ns.run('ip', '-j', ...args)) as T;
const addrsOf = async (ns: Netns, dev: string): Promise<string[]> =>
  (await ipJson<IpAddr[]>(ns, 'addr', 'show', 'dev', dev))
    .flatMap((l) => l.addr_info)
    .filter((a) => a.scope !== 'link')
    .map((a) => `${a.local}/${a.prefixlen} ${a.scope}${a.noprefixroute ? ' noprefixroute' : ''}`)
    .sort();

const okValues = (t: { true(v: boolean, m?: string): void }, outcomes: Outcome[]): unknown[] =>
  outcomes.map((o, i) => {
    t.true(o.ok, `call ${i}: ${o.ok ? '' : o.error.message}`);
    return o.ok ? o.value : undefined;
  });

const errorOf = (o: Outcome | undefined): { message: string } => (o && !o.ok ? o.error : { message: 'no error' });

test('a dummy link is created, or refused with a clear error on a kernel without CONFIG_DUMMY', async (t) => {
  const ns = await netnsFor(t, 'route-dummy');
  const a = await ns.agent();
  const [r] = (await a.call<Outcome[]>(S, 'calls', [['createLink', 'kube-ipvs0', 'dummy']])) as [Outcome];
  if (r.ok) {
    const [link] = await ipJson<IpLink[]>(ns, '-d', 'link', 'show', 'kube-ipvs0');
    t.is(link!.linkinfo?.info_kind, 'dummy');
    t.log('dummy links are supported by this kernel');
  } else {
    t.like(r, { ok: false, error: { op: 'create link kube-ipvs0 type dummy' } });
    t.true(['EOPNOTSUPP', 'ENOTSUP'].includes(r.error.code ?? ''), r.error.message);
    t.log(`this kernel has no dummy links: ${r.error.message}`);
  }
});

test('create, get, set up/down and delete a link; `ip -d -j link` agrees', async (t) => {
  const ns = await netnsFor(t, 'route-link');
  const a = await ns.agent();
  const [created, again, ensured, got, missing] = okValues(
    t,
    await a.call<Outcome[]>(S, 'calls', [
      ['createLink', 'kube-ipvs0', 'ifb'],
      ['setLinkUp', 'kube-ipvs0'],
      ['ensureLink', 'kube-ipvs0', 'ifb'],
      ['getLink', 'kube-ipvs0'],
      ['getLink', 'kube-nope'],
    ]),
  ) as [
    { index: number; kind: string },
    null,
    { created: boolean },
    { index: number; up: boolean; name: string },
    null,
  ];
  void again;
  const [link] = await ipJson<IpLink[]>(ns, '-d', 'link', 'show', 'kube-ipvs0');
  t.is(link!.ifindex, created.index);
  t.is(link!.linkinfo?.info_kind, 'ifb');
  t.true(link!.flags.includes('UP'));
  t.like(got, { index: created.index, name: 'kube-ipvs0', up: true });
  t.false(ensured.created);
  t.is(missing, null);

  const [dup] = await a.call<Outcome[]>(S, 'calls', [['createLink', 'kube-ipvs0', 'ifb']]);
  t.like(dup, { ok: false, error: { code: 'EEXIST', message: 'create link kube-ipvs0 type ifb: EEXIST' } });

  okValues(t, await a.call<Outcome[]>(S, 'calls', [['setLinkUp', created.index, false]]));
  t.false((await ipJson<IpLink[]>(ns, 'link', 'show', 'kube-ipvs0'))[0]!.flags.includes('UP'));

  const [links] = okValues(t, await a.call<Outcome[]>(S, 'calls', [['listLinks']])) as [
    { index: number; name: string }[],
  ];
  const theirs = (await ipJson<IpLink[]>(ns, 'link', 'show')).map((l) => `${l.ifindex} ${l.ifname}`).sort();
  t.deepEqual(links.map((l) => `${l.index} ${l.name}`).sort(), theirs);

  okValues(t, await a.call<Outcome[]>(S, 'calls', [['deleteLink', 'kube-ipvs0']]));
  t.is((await ns.exec('ip', ['link', 'show', 'kube-ipvs0'])).code !== 0, true);
  const [gone] = await a.call<Outcome[]>(S, 'calls', [['deleteLink', 'kube-ipvs0']]);
  t.like(gone, { ok: false, error: { code: 'ENODEV', message: 'delete link kube-ipvs0: ENODEV' } });
});

test('service addresses on kube-ipvs0: /32 and /128, EEXIST, noprefixroute, delete; `ip -j addr` agrees', async (t) => {
  const ns = await netnsFor(t, 'route-addr');
  const a = await ns.agent();
  okValues(
    t,
    await a.call<Outcome[]>(S, 'calls', [
      ['createLink', 'kube-ipvs0', 'ifb'],
      ['addAddress', 'kube-ipvs0', '10.96.0.1'],
      ['addAddress', 'kube-ipvs0', '10.96.0.10'],
      ['addAddress', 'kube-ipvs0', 'fd00::1', { noPrefixRoute: true }],
      ['addAddress', 'kube-ipvs0', 'fd00::2'],
      ['setLinkUp', 'kube-ipvs0'],
    ]),
  );
  t.deepEqual(await addrsOf(ns, 'kube-ipvs0'), [
    '10.96.0.1/32 global',
    '10.96.0.10/32 global',
    'fd00::1/128 global noprefixroute',
    'fd00::2/128 global',
  ]);
  const v6routes = await ns.run('ip', '-6', 'route', 'show', 'table', 'main');
  t.false(v6routes.includes('fd00::1 '), 'noprefixroute: no /128 route for fd00::1');
  t.true(v6routes.includes('fd00::2 '), 'without it the kernel adds one for fd00::2');

  const r = await a.call<Outcome[]>(S, 'calls', [
    ['addAddress', 'kube-ipvs0', '10.96.0.1'],
    ['ensureAddress', 'kube-ipvs0', '10.96.0.1'],
    ['ensureAddress', 'kube-ipvs0', '10.96.0.2'],
    ['deleteAddress', 'kube-ipvs0', '10.96.0.10'],
    ['deleteAddress', 'kube-ipvs0', '10.96.0.10'],
    ['listAddresses', { link: 'kube-ipvs0', family: 'IPv4' }],
    ['addAddress', 'kube-nope', '10.96.0.3'],
  ]);
  // The kernel's own words (its extended ACK) follow the errno where its version has them.
  t.like(r[0], { ok: false, error: { code: 'EEXIST' } });
  t.regex(
    errorOf(r[0]).message,
    /^add address 10\.96\.0\.1\/32 to kube-ipvs0: EEXIST( \(ipv4: Address already assigned\))?$/,
  );
  t.deepEqual(
    [r[1], r[2], r[3]],
    [
      { ok: true, value: true },
      { ok: true, value: false },
      { ok: true, value: null },
    ],
  );
  t.like(r[4], { ok: false, error: { code: 'EADDRNOTAVAIL' } });
  t.regex(
    errorOf(r[4]).message,
    /^delete address 10\.96\.0\.10\/32 from kube-ipvs0: EADDRNOTAVAIL( \(ipv4: Address not found\))?$/,
  );
  t.like(r[6], { ok: false, error: { code: 'ENODEV', message: 'add address 10.96.0.3 to kube-nope: ENODEV' } });
  const listed = (r[5] as { ok: true; value: { address: string; prefixLen: number; scope: number }[] }).value;
  t.deepEqual(listed.map((x) => `${x.address}/${x.prefixLen} ${x.scope}`).sort(), ['10.96.0.1/32 0', '10.96.0.2/32 0']);
  t.deepEqual(await addrsOf(ns, 'kube-ipvs0'), [
    '10.96.0.1/32 global',
    '10.96.0.2/32 global',
    'fd00::1/128 global noprefixroute',
    'fd00::2/128 global',
  ]);
});

test('node addresses for NodePorts: every link but kube-ipvs0, no loopback, no IPv6 link-local', async (t) => {
  const ns = await netnsFor(t, 'route-node');
  await ns.run('ip', 'link', 'add', 'eth-a', 'type', 'veth', 'peer', 'name', 'eth-b');
  await ns.run('ip', 'addr', 'add', '192.168.50.2/24', 'dev', 'eth-a');
  await ns.run('ip', 'addr', 'add', '172.16.0.9/16', 'dev', 'eth-b');
  await ns.run('ip', 'addr', 'add', 'fd01::2/64', 'dev', 'eth-a');
  await ns.run('ip', 'link', 'set', 'eth-a', 'up');
  await ns.run('ip', 'link', 'set', 'eth-b', 'up');
  await ns.run('ip', 'link', 'add', 'kube-ipvs0', 'type', 'ifb');
  await ns.run('ip', 'addr', 'add', '10.96.0.1/32', 'dev', 'kube-ipvs0');
  await ns.run('ip', 'addr', 'add', '172.16.0.9/32', 'dev', 'kube-ipvs0');
  await ns.run('ip', 'link', 'set', 'kube-ipvs0', 'up');
  const a = await ns.agent();
  const [v4all, v4, v6] = okValues(
    t,
    await a.call<Outcome[]>(S, 'calls', [
      ['nodeAddresses', 'IPv4'],
      ['nodeAddresses', 'IPv4', { exceptLink: 'kube-ipvs0' }],
      ['nodeAddresses', 'IPv6', { exceptLink: 'kube-ipvs0' }],
    ]),
  );
  t.deepEqual(v4all, ['10.96.0.1', '172.16.0.9', '192.168.50.2']);
  t.deepEqual(v4, ['172.16.0.9', '192.168.50.2'], 'an address also on another link stays');
  t.deepEqual(v6, ['fd01::2']);
  // The same selection computed from `ip -j addr`.
  const theirs = (await ipJson<IpAddr[]>(ns, 'addr', 'show'))
    .filter((l) => l.ifname !== 'kube-ipvs0')
    .flatMap((l) => l.addr_info)
    .filter((x) => x.family === 'inet' && x.scope !== 'host')
    .map((x) => x.local);
  t.deepEqual([...new Set(theirs)].sort(), v4);
});
