// src/netlink/nfacct against the machine's kernel in a fresh namespace: create, read counters
// (one object and the dump), the kernel's answers to a second create and to deleting an object
// a rule counts in, delete. The `nfacct` tool reads the objects back independently.
import test from 'ava';
import { netnsFor } from '../helpers/netns.ts';
import type * as Scenario from './scenarios/nfacct.ts';

const S = new URL('./scenarios/nfacct.ts', import.meta.url).href;
type Outcome = Scenario.Outcome;

const value = (o: Outcome | undefined): unknown => (o?.ok ? o.value : o?.error.code);

test('create, read, count, refuse, delete: what the kernel and the nfacct tool say', async (t) => {
  const ns = await netnsFor(t, 'nfacct');
  const a = await ns.agent();
  const run = (list: Scenario.Call[]) => a.call<Outcome[]>(S, 'calls', list);

  const made = await run([
    ['add', 'kpts_a'],
    ['ensure', 'kpts_a'],
    ['ensure', 'kpts_b'],
    ['add', 'kpts_a'],
    ['get', 'kpts_a'],
  ]);
  t.deepEqual(made.map(value), [null, null, null, 'EBUSY', { name: 'kpts_a', packets: '0', bytes: '0', use: 1 }]);
  t.regex(await ns.run('nfacct', 'list'), /= kpts_a;\n.*= kpts_b;/);

  // A rule counts in kpts_a: three one-byte UDP datagrams to the loopback (28 + 1 bytes each).
  await ns.run('iptables-nft', '-A', 'OUTPUT', '-o', 'lo', '-p', 'udp', '-m', 'nfacct', '--nfacct-name', 'kpts_a');
  const send =
    'import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\nfor _ in range(3): s.sendto(b"x", ("127.0.0.1", 9))';
  await ns.run('python3', '-c', send);
  const [got, list, busy] = await run([['get', 'kpts_a'], ['list'], ['del', 'kpts_a']]);
  t.like(value(got), { name: 'kpts_a', packets: '3', bytes: '87', use: 2 });
  t.is(
    /pkts = 0*(\d+), bytes = 0*(\d+) \} = kpts_a;/
      .exec(await ns.run('nfacct', 'list'))
      ?.slice(1)
      .join(' '),
    '3 87',
  );
  t.deepEqual(
    (value(list) as { name: string }[]).map((c) => c.name),
    ['kpts_a', 'kpts_b'],
  );
  t.is(value(busy), 'EBUSY', 'an object a rule counts in is not deleted');

  await ns.run('iptables-nft', '-F', 'OUTPUT');
  const gone = await run([
    ['del', 'kpts_a'],
    ['get', 'kpts_a'],
    ['del', 'kpts_a'],
    ['del', 'kpts_a', { missingOk: true }],
  ]);
  t.deepEqual(gone.map(value), [null, 'ENOENT', 'ENOENT', null]);
  t.notRegex(await ns.run('nfacct', 'list'), /kpts_a/);
});
