// The ctnetlink layer against Debian's 6.1 kernel, inside the QEMU VM (run by run-cases.ts
// from conntrack-netlink.test.ts). The VM is ours alone: its root namespace plays the node.
// Results are read back with `conntrack -L` (the host's binary through the 9p root).
// Above all this checks what 6.1 supports of the dump filter (CTA_FILTER, status, zone).

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { IPPROTO } from '../../../src/netlink/conntrack/index.ts';
import type { Flow, FlowFilter, NewFlow } from '../../../src/netlink/conntrack/index.ts';
import * as S from '../../kernel/scenarios/conntrack.ts';
import type { VmCase } from '../run-cases.ts';

function ct(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      '/usr/sbin/conntrack',
      args,
      { timeout: 60_000, encoding: 'utf8', maxBuffer: 64 << 20 },
      (err, stdout, stderr) => {
        resolve({ code: err ? 1 : 0, stdout, stderr });
      },
    );
  });
}

/** `conntrack -L ARGS` as "orig-src orig-sport -> orig-dst orig-dport" lines, sorted. */
async function cliLines(...args: string[]): Promise<string[]> {
  const r = await ct('-L', ...args);
  assert.equal(r.code, 0, r.stderr);
  return r.stdout
    .split('\n')
    .filter((l) => l.includes('src='))
    .map((l) => {
      const kv = (k: string): string => new RegExp(`\\b${k}=(\\S+)`).exec(l)?.[1] ?? '-';
      return `${kv('src')} ${kv('sport')} -> ${kv('dst')} ${kv('dport')}`;
    })
    .sort();
}
const ourLines = (flows: Flow[]): string[] =>
  flows.map((f) => `${f.orig.src} ${f.orig.srcPort ?? '-'} -> ${f.orig.dst} ${f.orig.dstPort ?? '-'}`).sort();

const udp = (src: string, dst: string, sport: number, dport: number, replySrc = dst): NewFlow => ({
  orig: { src, dst, proto: IPPROTO.UDP, srcPort: sport, dstPort: dport },
  reply: { src: replySrc, dst: src, proto: IPPROTO.UDP, srcPort: dport, dstPort: sport },
  timeout: 300,
});
const MIXED: NewFlow[] = [
  udp('10.1.0.1', '10.96.0.10', 40001, 53, '10.244.1.5'),
  udp('10.1.0.2', '10.96.0.10', 40002, 53, '10.244.1.5'),
  udp('10.1.0.3', '10.96.0.10', 40003, 53, '10.244.2.7'),
  {
    ...udp('10.1.0.1', '10.96.0.10', 40004, 53, '10.244.1.5'),
    orig: { src: '10.1.0.1', dst: '10.96.0.10', proto: IPPROTO.TCP, srcPort: 40004, dstPort: 53 },
    reply: { src: '10.244.1.5', dst: '10.1.0.1', proto: IPPROTO.TCP, srcPort: 53, dstPort: 40004 },
    tcpState: 3,
  },
  udp('10.1.0.4', '10.96.0.11', 40005, 53, '10.244.1.5'),
  { ...udp('10.1.0.5', '10.96.0.10', 40006, 5353, '10.244.1.5'), mark: 0x4000 },
  { ...udp('10.1.0.6', '10.96.0.12', 40007, 53), zone: 3 },
  udp('fd00::1', 'fd00:96::10', 40008, 53, 'fd00:244::5'),
  udp('fd00::2', 'fd00:96::11', 40009, 53, 'fd00:244::5'),
];

async function reset(): Promise<void> {
  await ct('-F');
  const errs = (await S.create(MIXED)).filter(Boolean);
  assert.deepEqual(errs, []);
}

async function kernelFiltered(filter: FlowFilter, cliArgs: string[], note: (v: unknown) => void): Promise<void> {
  const d = await S.dump(filter);
  note({ received: d.received, matched: d.flows.length, kernelTupleFilter: d.kernelTupleFilter });
  assert.deepEqual(ourLines(d.flows), await cliLines(...cliArgs));
  assert.ok(d.flows.length > 0);
  assert.equal(d.received, d.flows.length, 'the kernel sent only matching entries');
}

export const cases: VmCase[] = [
  {
    name: 'kernel and conntrack: our dump lists what conntrack -L lists',
    async run(note) {
      await reset();
      const uname = await new Promise<string>((resolve) =>
        execFile('/bin/uname', ['-r'], (_e, out) => resolve(out.trim())),
      );
      const d = await S.dump({});
      note({ kernel: uname, entries: d.flows.length });
      assert.deepEqual(ourLines(d.flows), await cliLines());
      assert.equal(d.flows.length, MIXED.length);
    },
  },
  {
    name: 'CTA_FILTER (IPv4): protocol, original destination and port, filtered by the kernel',
    async run(note) {
      await kernelFiltered(
        { family: 'IPv4', proto: IPPROTO.UDP, orig: { dst: '10.96.0.10', dstPort: 53 } },
        ['-f', 'ipv4', '-p', 'udp', '--orig-dst', '10.96.0.10', '--dport', '53'],
        note,
      );
    },
  },
  {
    name: 'CTA_FILTER (IPv4): plus the reply source (the stale endpoint), filtered by the kernel',
    async run(note) {
      await kernelFiltered(
        { proto: IPPROTO.UDP, orig: { dst: '10.96.0.10', dstPort: 53 }, reply: { src: '10.244.1.5' } },
        ['-p', 'udp', '--orig-dst', '10.96.0.10', '--dport', '53', '--reply-src', '10.244.1.5'],
        note,
      );
    },
  },
  {
    name: 'CTA_FILTER (IPv6): the kernel matches the protocol; addresses are matched by us',
    async run(note) {
      const probe = await S.probeIpv6AddressFilter('fd00:96::10');
      const d = await S.dump({ proto: IPPROTO.UDP, orig: { dst: 'fd00:96::10', dstPort: 53 } });
      note({ probe, received: d.received, matched: d.flows.length, kernelTupleFilter: d.kernelTupleFilter });
      // The kernel's own IPv6 address match is inverted on 6.1 as on 6.18 (see filter.ts).
      assert.equal(probe.verdict, 'inverted');
      assert.deepEqual(
        ourLines(d.flows),
        await cliLines('-f', 'ipv6', '-p', 'udp', '--orig-dst', 'fd00:96::10', '--dport', '53'),
      );
      assert.equal(d.flows.length, 1);
      assert.ok(d.kernelTupleFilter);
    },
  },
  {
    name: 'mark, status and zone filters',
    async run(note) {
      const mark = await S.dump({ mark: { value: 0x4000, mask: 0x4000 } });
      const zone = await S.dump({ zone: 3 });
      const status = await S.dump({ status: { value: 4, mask: 4 } }); // ASSURED: none of the inserted ones
      note({
        mark: [mark.received, mark.flows.length],
        zone: [zone.received, zone.flows.length],
        status: [status.received, status.flows.length],
      });
      assert.equal(mark.flows.length, 1);
      assert.equal(mark.received, 1, 'mark filtered by the kernel');
      assert.equal(zone.flows.length, 1);
      // 6.1 ignores CTA_ZONE in a dump request (6.18 filters by it): every entry comes back.
      assert.equal(zone.received, MIXED.length, 'zone not filtered by the 6.1 kernel');
      assert.equal(status.received, 0, 'status filtered by the kernel');
      assert.equal(status.flows.length, 0);
    },
  },
  {
    name: 'delete exactly the stale flows; ENOENT is already-gone; another id leaves an entry alone',
    async run(note) {
      await reset();
      const { found, report } = await S.dumpAndDelete({
        proto: IPPROTO.UDP,
        orig: { dst: '10.96.0.10', dstPort: 53 },
        reply: { src: '10.244.1.5' },
      });
      note({ found, report });
      assert.equal(found, 2);
      assert.deepEqual(report, { deleted: 2, notFound: 0, errors: [] });
      const left = await cliLines();
      assert.equal(left.length, MIXED.length - 2);
      assert.ok(left.includes('10.1.0.1 40004 -> 10.96.0.10 53'), 'the TCP flow stays');
      assert.ok(left.includes('10.1.0.3 40003 -> 10.96.0.10 53'), 'the healthy endpoint stays');
      assert.deepEqual(await S.deleteTargets([MIXED[0]!.orig, MIXED[1]!.orig]), {
        deleted: 0,
        notFound: 2,
        errors: [],
      });
      const [f] = (await S.dump({ proto: IPPROTO.UDP, orig: { dst: '10.96.0.11' } })).flows;
      assert.equal(await S.deleteOne({ ...f!, id: (f!.id! ^ 1) >>> 0 }), false);
      assert.equal((await cliLines()).length, MIXED.length - 2);
      assert.equal(await S.deleteOne(f!), true);
      assert.equal((await cliLines()).length, MIXED.length - 3);
    },
  },
  {
    name: 'a filtered flush (CTA_FILTER in a DELETE, 6.12+) is refused by 6.1 before deleting anything; deletes fall back to dump and delete',
    async run(note) {
      await reset();
      const stale: FlowFilter = {
        family: 'IPv4',
        proto: IPPROTO.UDP,
        orig: { dst: '10.96.0.10', dstPort: 53 },
        reply: { src: '10.244.1.5' },
      };
      const flushed = await S.flushMatching(stale);
      // What the kernel answers to the request itself: with a partial CTA_TUPLE_ORIG, 6.1 takes
      // the DELETE for a delete by tuple and refuses the tuple (EINVAL).
      const raw = await S.rawFlush(stale, 'IPv4');
      const replyOnly = await S.rawFlush({ family: 'IPv4', proto: IPPROTO.UDP, reply: { src: '10.244.1.5' } }, 'IPv4');
      assert.equal(flushed, null, 'flushMatching: cannot, nothing deleted');
      assert.ok(raw && replyOnly, 'refused');
      assert.equal((await cliLines()).length, MIXED.length, 'nothing deleted by the refused requests');
      const r = await S.deleteMatching([stale]);
      note({ flushed, raw: raw.code, replyOnly: replyOnly.code, deleteMatching: r });
      assert.deepEqual(r, { deleted: 2, notFound: 0, errors: [], matched: 2, dumps: 1, flushes: 0 });
      const left = await cliLines();
      assert.equal(left.length, MIXED.length - 2);
      assert.ok(
        !left.some((l) => l.startsWith('10.1.0.1 40001 ') || l.startsWith('10.1.0.2 40002 ')),
        'the stale flows went',
      );
      assert.ok(left.includes('10.1.0.1 40004 -> 10.96.0.10 53'), 'the TCP flow stays');
    },
  },
  {
    name: 'pipelined DELETEs that all fail (ENOENT): every error reply fits the receive buffer at the stock net.core.rmem_max',
    async run(note) {
      await ct('-F');
      const rmemMax = await new Promise<string>((resolve) =>
        execFile('/bin/cat', ['/proc/sys/net/core/rmem_max'], (_e, out) => resolve(out.trim())),
      );
      // With 1,024 per datagram the replies overflowed the buffer and the process aborted.
      const gone = S.udpFlows(2048, '10.96.0.77', '10.244.7.7').map((f) => f.orig);
      const r = await S.deleteTargets(gone);
      note({ rmemMax, deleted: r.deleted, notFound: r.notFound, errors: r.errors.slice(0, 3) });
      assert.deepEqual(r, { deleted: 0, notFound: 2048, errors: [] });
    },
  },
  {
    name: 'ctnetlink refuses nfnetlink batches',
    async run(note) {
      const e = await S.deleteInBatch(MIXED[2]!.orig);
      note(e);
      assert.ok(e);
    },
  },
  {
    name: '10,000 entries: insert, filtered dump, pipelined delete (timed; software-emulated CPU)',
    timeoutMs: 240_000,
    async run(note) {
      await ct('-F');
      const r = await S.benchDelete(10_000);
      note(r);
      assert.equal(r.deleted, 10_000);
      assert.equal(r.left, 0);
    },
  },
];
