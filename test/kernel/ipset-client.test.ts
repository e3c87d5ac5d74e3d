// src/netlink/ipset against the machine's kernel, each test in a fresh namespace. The
// `ipset` tool (save, list) reads the result back independently of our decoder.
import test from 'ava';
import { netnsFor } from '../helpers/netns.ts';
import type { Netns } from '../helpers/netns.ts';
import type * as Scenario from './scenarios/ipset.ts';

const S = new URL('./scenarios/ipset.ts', import.meta.url).href;
type Outcome = Scenario.Outcome;

/** `ipset save` without the per-run noise (initval, bucketsize), lines sorted. */
async function save(ns: Netns): Promise<string[]> {
  const out = await ns.run('ipset', 'save');
  return out
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => l.replace(/ bucketsize \d+/, '').replace(/ initval 0x[0-9a-f]+/, ''))
    .sort();
}

const okValues = (t: { true(v: boolean, m?: string): void }, outcomes: Outcome[]): unknown[] =>
  outcomes.map((o, i) => {
    t.true(o.ok, `call ${i}: ${o.ok ? '' : o.error.message}`);
    return o.ok ? o.value : undefined;
  });

test('create every set type kube-proxy uses; `ipset save` shows them as the tool would have made them', async (t) => {
  const ns = await netnsFor(t, 'ipset-create');
  const a = await ns.agent();
  okValues(
    t,
    await a.call<Outcome[]>(S, 'calls', [
      ['create', 'KUBE-CLUSTER-IP', 'hash:ip,port', { hashSize: 1024, maxElem: 65536, comment: true }],
      ['create', 'KUBE-LOOP-BACK', 'hash:ip,port,ip', { hashSize: 1024, maxElem: 65536, comment: true }],
      ['create', 'KUBE-LB-SOURCE-CIDR', 'hash:ip,port,net', { comment: true }],
      ['create', 'KUBE-LB-SOURCE-IP6', 'hash:ip,port,ip', { family: 'inet6', comment: true }],
      ['create', 'KUBE-NODE-IP6', 'hash:ip', { family: 'inet6', hashSize: 4096, maxElem: 131072 }],
      ['create', 'KUBE-SOURCE-RANGES', 'hash:net', { comment: true }],
      ['create', 'KUBE-NODE-PORT-TCP', 'bitmap:port', { comment: true }],
      ['create', 'KPTS-TIMEOUT', 'hash:ip', { timeout: 600 }],
    ]),
  );
  t.deepEqual(await save(ns), [
    'create KPTS-TIMEOUT hash:ip family inet hashsize 1024 maxelem 65536 timeout 600',
    'create KUBE-CLUSTER-IP hash:ip,port family inet hashsize 1024 maxelem 65536 comment',
    'create KUBE-LB-SOURCE-CIDR hash:ip,port,net family inet hashsize 1024 maxelem 65536 comment',
    'create KUBE-LB-SOURCE-IP6 hash:ip,port,ip family inet6 hashsize 1024 maxelem 65536 comment',
    'create KUBE-LOOP-BACK hash:ip,port,ip family inet hashsize 1024 maxelem 65536 comment',
    'create KUBE-NODE-IP6 hash:ip family inet6 hashsize 4096 maxelem 131072',
    'create KUBE-NODE-PORT-TCP bitmap:port range 0-65535 comment',
    'create KUBE-SOURCE-RANGES hash:net family inet hashsize 1024 maxelem 65536 comment',
  ]);
  // Our own reading of the headers agrees.
  const [headers] = okValues(t, await a.call<Outcome[]>(S, 'calls', [['headers']])) as [
    { name: string; type: string; family: string; comment: boolean; index: number }[],
  ];
  t.deepEqual(headers.map((h) => `${h.name} ${h.type} ${h.family}${h.comment ? ' comment' : ''}`).sort(), [
    'KPTS-TIMEOUT hash:ip inet',
    'KUBE-CLUSTER-IP hash:ip,port inet comment',
    'KUBE-LB-SOURCE-CIDR hash:ip,port,net inet comment',
    'KUBE-LB-SOURCE-IP6 hash:ip,port,ip inet6 comment',
    'KUBE-LOOP-BACK hash:ip,port,ip inet comment',
    'KUBE-NODE-IP6 hash:ip inet6',
    'KUBE-NODE-PORT-TCP bitmap:port unspec comment',
    'KUBE-SOURCE-RANGES hash:net inet comment',
  ]);
  t.deepEqual(
    headers.map((h) => h.index),
    [0, 1, 2, 3, 4, 5, 6, 7],
    'indexes in creation order',
  );
});

test('entries of every type with comments: `ipset save` and our list agree', async (t) => {
  const ns = await netnsFor(t, 'ipset-entries');
  await ns.run('ipset', 'create', 'KUBE-CLUSTER-IP', 'hash:ip,port', 'comment');
  await ns.run('ipset', 'create', 'KUBE-LOOP-BACK', 'hash:ip,port,ip', 'comment');
  await ns.run('ipset', 'create', 'KUBE-LB-SRC', 'hash:ip,port,net', 'family', 'inet6');
  await ns.run('ipset', 'create', 'KUBE-SOURCE-RANGES', 'hash:net');
  await ns.run('ipset', 'create', 'KUBE-NODE-PORT-TCP', 'bitmap:port', 'range', '0-65535');
  await ns.run('ipset', 'create', 'KPTS-TIMEOUT', 'hash:ip', 'timeout', '600');
  const a = await ns.agent();
  okValues(
    t,
    await a.call<Outcome[]>(S, 'calls', [
      ['add', 'KUBE-CLUSTER-IP', { ip: '10.96.0.1', proto: 'tcp', port: 443, comment: 'default/kubernetes:https' }],
      ['add', 'KUBE-CLUSTER-IP', { ip: '10.96.0.10', proto: 'udp', port: 53 }],
      ['add', 'KUBE-CLUSTER-IP', { ip: '10.96.0.11', proto: 'sctp', port: 9 }],
      ['add', 'KUBE-LOOP-BACK', { ip: '10.244.1.5', proto: 'tcp', port: 8080, ip2: '10.244.1.5', comment: 'x' }],
      ['add', 'KUBE-LB-SRC', { ip: 'fd00::7', proto: 'tcp', port: 80, ip2: 'fd00:1::', cidr2: 64 }],
      ['add', 'KUBE-SOURCE-RANGES', { ip: '10.0.0.0', cidr: 8 }],
      ['add', 'KUBE-NODE-PORT-TCP', { port: 30080 }],
      ['add', 'KPTS-TIMEOUT', { ip: '10.1.1.1', timeout: 100 }],
    ]),
  );
  const lines = (await save(ns))
    .filter((l) => l.startsWith('add '))
    .map((l) => l.replace(/ timeout \d+/, ' timeout T'));
  t.deepEqual(lines, [
    'add KPTS-TIMEOUT 10.1.1.1 timeout T',
    'add KUBE-CLUSTER-IP 10.96.0.1,tcp:443 comment "default/kubernetes:https"',
    'add KUBE-CLUSTER-IP 10.96.0.10,udp:53',
    'add KUBE-CLUSTER-IP 10.96.0.11,sctp:9',
    'add KUBE-LB-SRC fd00::7,tcp:80,fd00:1::/64',
    'add KUBE-LOOP-BACK 10.244.1.5,tcp:8080,10.244.1.5 comment "x"',
    'add KUBE-NODE-PORT-TCP 30080',
    'add KUBE-SOURCE-RANGES 10.0.0.0/8',
  ]);
  const [sets] = okValues(t, await a.call<Outcome[]>(S, 'calls', [['list']])) as [
    { name: string; entries: Record<string, unknown>[] }[],
  ];
  const ours = sets
    .flatMap((s) =>
      s.entries.map(
        (e) => `${s.name} ${JSON.stringify({ ...e, ...(e.timeout !== undefined ? { timeout: 'T' } : {}) })}`,
      ),
    )
    .sort();
  t.deepEqual(ours, [
    'KPTS-TIMEOUT {"ip":"10.1.1.1","timeout":"T"}',
    'KUBE-CLUSTER-IP {"ip":"10.96.0.1","proto":"tcp","port":443,"comment":"default/kubernetes:https"}',
    'KUBE-CLUSTER-IP {"ip":"10.96.0.10","proto":"udp","port":53}',
    'KUBE-CLUSTER-IP {"ip":"10.96.0.11","proto":"sctp","port":9}',
    'KUBE-LB-SRC {"ip":"fd00::7","proto":"tcp","port":80,"ip2":"fd00:1::","cidr2":64}',
    'KUBE-LOOP-BACK {"ip":"10.244.1.5","proto":"tcp","port":8080,"ip2":"10.244.1.5","comment":"x"}',
    'KUBE-NODE-PORT-TCP {"port":30080}',
    'KUBE-SOURCE-RANGES {"ip":"10.0.0.0","cidr":8}',
  ]);
});

test('errors come back typed and named: IPSET_ERR_EXIST, EEXIST, ENOENT, SETNAME2, TYPE_MISMATCH, BUSY', async (t) => {
  const ns = await netnsFor(t, 'ipset-errors');
  const a = await ns.agent();
  const e = { ip: '10.0.0.1', proto: 'tcp', port: 80 };
  const r = await a.call<Outcome[]>(S, 'calls', [
    ['create', 'KUBE-CLUSTER-IP', 'hash:ip,port', {}], // 0
    ['add', 'KUBE-CLUSTER-IP', e], // 1
    ['add', 'KUBE-CLUSTER-IP', e], // 2 exists
    ['add', 'KUBE-CLUSTER-IP', e, { exist: true }], // 3 fine
    ['del', 'KUBE-CLUSTER-IP', { ...e, port: 81 }], // 4 missing
    ['del', 'KUBE-CLUSTER-IP', { ...e, port: 81 }, { exist: true }], // 5 fine
    ['test', 'KUBE-CLUSTER-IP', e], // 6 true
    ['test', 'KUBE-CLUSTER-IP', { ...e, port: 81 }], // 7 false
    ['create', 'KUBE-CLUSTER-IP', 'hash:ip,port', {}], // 8 EEXIST
    ['create', 'KUBE-CLUSTER-IP', 'hash:ip,port', { exist: true }], // 9 same set: fine
    ['destroy', 'KUBE-NOPE'], // 10 ENOENT
    ['add', 'KUBE-NOPE', e], // 11 ENOENT
    ['swap', 'KUBE-CLUSTER-IP', 'KUBE-NOPE'], // 12 SETNAME2
    ['create', 'KUBE-OTHER', 'hash:ip', {}], // 13
    ['rename', 'KUBE-CLUSTER-IP', 'KUBE-OTHER'], // 14 SETNAME2
    ['swap', 'KUBE-CLUSTER-IP', 'KUBE-OTHER'], // 15 TYPE_MISMATCH
    ['add', 'KUBE-CLUSTER-IP', { ip: 'fd00::1', proto: 'tcp', port: 80 }], // 16 wrong family
    ['getByName', 'KUBE-NOPE'], // 17 ENOENT
    ['create', 'KUBE-MAC', 'hash:mac', {}], // 18 the type is not built in this kernel
    ['get', 'KUBE-NOPE'], // 19 ENOENT from the dump
    ['addMany', 'KUBE-NOPE', [e, { ...e, port: 81 }]], // 20 ENOENT, blamed on no entry
  ]);
  const err = (i: number) => (r[i]!.ok ? undefined : (r[i] as Extract<Outcome, { ok: false }>).error);
  for (const i of [0, 1, 3, 5, 6, 7, 9, 13]) t.true(r[i]!.ok, `call ${i}: ${err(i)?.message}`);
  t.deepEqual(
    [r[6], r[7]],
    [
      { ok: true, value: true },
      { ok: true, value: false },
    ],
  );
  t.is(err(2)?.message, 'add 10.0.0.1,tcp:80 to ipset KUBE-CLUSTER-IP: IPSET_ERR_EXIST');
  t.is(err(4)?.message, 'del 10.0.0.1,tcp:81 from ipset KUBE-CLUSTER-IP: IPSET_ERR_EXIST');
  t.is(err(8)?.message, 'create ipset KUBE-CLUSTER-IP hash:ip,port family inet: EEXIST');
  t.is(err(10)?.message, 'destroy ipset KUBE-NOPE: ENOENT');
  t.is(err(11)?.code, 'ENOENT');
  t.is(err(12)?.message, 'swap ipsets KUBE-CLUSTER-IP and KUBE-NOPE: IPSET_ERR_EXIST_SETNAME2');
  t.is(err(14)?.message, 'rename ipset KUBE-CLUSTER-IP to KUBE-OTHER: IPSET_ERR_EXIST_SETNAME2');
  t.is(err(15)?.code, 'IPSET_ERR_TYPE_MISMATCH');
  t.is(err(16)?.code, 'IPSET_ERR_PROTOCOL', 'an IPv6 address in an inet set is refused by the attribute policy');
  t.is(err(17)?.code, 'ENOENT');
  t.is(err(18)?.message, 'get ipset type hash:mac family inet: IPSET_ERR_FIND_TYPE');
  t.is(err(19)?.message, 'list ipset KUBE-NOPE: ENOENT');
  t.is(err(20)?.message, 'add 2 entries (10.0.0.1,tcp:80 ...) to ipset KUBE-NOPE: ENOENT');

  // A set referenced from a list:set cannot be destroyed.
  await ns.run('ipset', 'create', 'KPTS-LIST', 'list:set');
  await ns.run('ipset', 'add', 'KPTS-LIST', 'KUBE-OTHER');
  const [busy] = await a.call<Outcome[]>(S, 'calls', [['destroy', 'KUBE-OTHER']]);
  t.like(busy, { ok: false, error: { code: 'IPSET_ERR_BUSY', op: 'destroy ipset KUBE-OTHER' } });
});

test('swap, rename, flush and destroy, read back with `ipset list -n` and `ipset save`', async (t) => {
  const ns = await netnsFor(t, 'ipset-swap');
  const a = await ns.agent();
  okValues(
    t,
    await a.call<Outcome[]>(S, 'calls', [
      ['create', 'KUBE-CLUSTER-IP', 'hash:ip,port', { comment: true }],
      ['add', 'KUBE-CLUSTER-IP', { ip: '10.96.0.1', proto: 'tcp', port: 443, comment: 'old' }],
      ['create', 'KUBE-CLUSTER-IP-TMP', 'hash:ip,port', { comment: true }],
      ['add', 'KUBE-CLUSTER-IP-TMP', { ip: '10.96.0.2', proto: 'tcp', port: 443, comment: 'new' }],
      ['swap', 'KUBE-CLUSTER-IP', 'KUBE-CLUSTER-IP-TMP'],
    ]),
  );
  t.deepEqual(
    (await save(ns)).filter((l) => l.startsWith('add')),
    ['add KUBE-CLUSTER-IP 10.96.0.2,tcp:443 comment "new"', 'add KUBE-CLUSTER-IP-TMP 10.96.0.1,tcp:443 comment "old"'],
  );
  const [before, , , after] = okValues(
    t,
    await a.call<Outcome[]>(S, 'calls', [
      ['getByName', 'KUBE-CLUSTER-IP'],
      ['rename', 'KUBE-CLUSTER-IP-TMP', 'KUBE-CLUSTER-IP-OLD'],
      ['flush', 'KUBE-CLUSTER-IP-OLD'],
      ['getByName', 'KUBE-CLUSTER-IP-OLD'],
    ]),
  ) as { index: number }[];
  t.deepEqual(before, { index: 0, family: 'inet' });
  t.deepEqual(after, { index: 1, family: 'inet' }, 'rename keeps the index');
  t.deepEqual((await ns.run('ipset', 'list', '-n')).trim().split('\n').sort(), [
    'KUBE-CLUSTER-IP',
    'KUBE-CLUSTER-IP-OLD',
  ]);
  t.deepEqual(
    (await save(ns)).filter((l) => l.startsWith('add')),
    ['add KUBE-CLUSTER-IP 10.96.0.2,tcp:443 comment "new"'],
  );
  okValues(t, await a.call<Outcome[]>(S, 'calls', [['destroy', 'KUBE-CLUSTER-IP-OLD'], ['names']]));
  t.deepEqual((await ns.run('ipset', 'list', '-n')).trim().split('\n'), ['KUBE-CLUSTER-IP']);
});

test('20,000 entries in bulk: all arrive, and a refused entry in a bulk is named by position', async (t) => {
  const ns = await netnsFor(t, 'ipset-bulk');
  const a = await ns.agent();
  const { ms, messages } = await a.call<{ ms: number; messages: number }>(
    S,
    'timedAddMany',
    'KUBE-CLUSTER-IP',
    20_000,
    true,
  );
  t.log(`addMany: 20,000 hash:ip,port entries with comments in ${ms.toFixed(1)} ms, ${messages} messages`);
  const header = await ns.run('ipset', 'list', '-t', 'KUBE-CLUSTER-IP');
  t.regex(header, /Number of entries: 20000/);
  const saved = (await ns.run('ipset', 'save', 'KUBE-CLUSTER-IP')).split('\n').filter((l) => l.startsWith('add '));
  t.is(saved.length, 20_000);
  t.true(saved.includes('add KUBE-CLUSTER-IP 10.0.78.31,udp:20000 comment "ns5/svc-19999:port"'));
  // Our list reads them all back (a dump over many datagrams, folded into one set).
  const [listed] = okValues(t, await a.call<Outcome[]>(S, 'calls', [['get', 'KUBE-CLUSTER-IP']])) as [
    { elements: number; entries: unknown[] },
  ];
  t.is(listed.entries.length, 20_000);
  t.is(listed.elements, 20_000);

  // Entry 3 of 5 already exists: 1 and 2 are added, the error names entry 3, 4 and 5 are not added.
  await ns.run('ipset', 'create', 'KPTS-B', 'hash:ip,port');
  await ns.run('ipset', 'add', 'KPTS-B', '10.9.9.3,tcp:3');
  const five = [1, 2, 3, 4, 5].map((i) => ({ ip: `10.9.9.${i}`, proto: 'tcp', port: i }));
  const [res] = await a.call<Outcome[]>(S, 'calls', [['addMany', 'KPTS-B', five]]);
  t.like(res, {
    ok: false,
    error: { code: 'IPSET_ERR_EXIST', message: 'add 10.9.9.3,tcp:3 to ipset KPTS-B (entry 3 of 5): IPSET_ERR_EXIST' },
  });
  t.deepEqual(
    (await save(ns)).filter((l) => l.startsWith('add KPTS-B')),
    ['add KPTS-B 10.9.9.1,tcp:1', 'add KPTS-B 10.9.9.2,tcp:2', 'add KPTS-B 10.9.9.3,tcp:3'],
  );
  // With exist, the same bulk goes through; delMany removes them all.
  okValues(t, await a.call<Outcome[]>(S, 'calls', [['addMany', 'KPTS-B', five, { exist: true }]]));
  t.is((await save(ns)).filter((l) => l.startsWith('add KPTS-B')).length, 5);
  okValues(t, await a.call<Outcome[]>(S, 'calls', [['delMany', 'KPTS-B', five]]));
  t.is((await save(ns)).filter((l) => l.startsWith('add KPTS-B')).length, 0);
});

test('the kernel refuses nfnetlink batches for ipset (hence ADT lists for bulk changes)', async (t) => {
  const ns = await netnsFor(t, 'ipset-batch');
  const a = await ns.agent();
  const r = await a.call<{ error: Scenario.ErrorView | null; entries: number }>(S, 'batchAttempt', 'KPTS-B');
  t.true(['EOPNOTSUPP', 'ENOTSUP'].includes(r.error?.code ?? ''), r.error?.message);
  t.is(r.entries, 0);
});
