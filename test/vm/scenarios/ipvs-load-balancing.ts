// IPVS mode's per-Service scheduler on Debian's 6.1 kernel (inside the QEMU VM, run by
// run-cases.ts from ipvs-load-balancing.test.ts): the load-balancing annotation gives each
// Service's virtual servers rr, mh or lc; random (which IPVS has not) and no annotation keep
// --ipvs-scheduler (wlc here, so a fallback shows). Read back with `ipvsadm -Ln` per Service,
// then real TCP connections: round-robin spreads exactly, consistent-hash keeps one client on
// one backend, least-connection avoids the backend holding a connection. A changed annotation
// edits the VS in place: its connection counter (ipvsadm --stats) survives, a new VS would
// start at 0.
//
// The VM's root namespace is the node; backends 10.0.0.2-4 in namespace "pods", the client
// 192.168.7.2 in "client" (pods-and-client.ts). The proxier is driven directly (model +
// IpvsProxier, no companion rules: the client is off-node and the backends route back through
// the node, so IPVS sees the replies without masquerading).

import assert from 'node:assert/strict';
import { systemClock } from '../../../src/base/clock.ts';
import { nullLogger } from '../../../src/base/logger.ts';
import { ChangeTracker, LOAD_BALANCING_ANNOTATION } from '../../../src/model/index.ts';
import { IpvsProxier } from '../../../src/proxier/ipvs/index.ts';
import { ep, node, slice, svc } from '../../unit/model/helpers.ts';
import type { VmCase } from '../run-cases.ts';
import { openIpvsDeps } from './ipvs-deps.ts';
import { NODE_IP, PodsAndClient } from './pods-and-client.ts';
import { must } from './vm-shell.ts';

const BACKENDS = ['10.0.0.2', '10.0.0.3', '10.0.0.4'];
const net = new PodsAndClient();
const tracker = new ChangeTracker({ nodeName: 'node-a', family: 'IPv4' }, { logger: nullLogger, clock: systemClock });
const closers: (() => void)[] = [];
let proxier: IpvsProxier;
let rv = 1;

/** The Services of this scenario: name, VIP, annotation, the backends' port. */
const SERVICES = [
  { name: 'rr', vip: '10.96.0.11', value: 'round-robin', port: 8080 },
  { name: 'ch', vip: '10.96.0.12', value: 'consistent-hash', port: 8080 },
  { name: 'lc', vip: '10.96.0.13', value: 'least-connection', port: 8081 },
  { name: 'rnd', vip: '10.96.0.14', value: 'random', port: 8080 },
  { name: 'none', vip: '10.96.0.15', value: undefined, port: 8080 },
] as const;

function service(name: string, vip: string, value: string | undefined) {
  const s = svc(name, { clusterIP: vip, rv: String(++rv) });
  if (value !== undefined) s.metadata!.annotations = { [LOAD_BALANCING_ANNOTATION]: value };
  return s;
}

async function sync(): Promise<void> {
  const { desired, change } = tracker.checkout();
  assert.deepEqual((await proxier.sync(desired, change, AbortSignal.timeout(120_000))).errors, []);
}

/** `ipvsadm -Ln -t VIP:80`'s service line, squeezed ("TCP 10.96.0.11:80 rr"). */
async function vsLine(vip: string): Promise<string> {
  const out = await must('/usr/sbin/ipvsadm', '-Ln', '-t', `${vip}:80`);
  const line = out.split('\n').find((l) => l.startsWith('TCP'));
  return (line ?? '(none)').trim().replace(/\s+/g, ' ');
}

/** The connections counter of a VS (`ipvsadm -Ln --stats`): it starts at 0 when the VS is made. */
async function vsConns(vip: string): Promise<number> {
  const out = await must('/usr/sbin/ipvsadm', '-Ln', '--stats', '-t', `${vip}:80`);
  const f = out
    .split('\n')
    .find((l) => l.startsWith('TCP'))
    ?.trim()
    .split(/\s+/);
  return Number(f?.[2]);
}

/**
 * vsConns once the kernel's stats estimator has summed the per-CPU counters (it runs every 2 s,
 * so a read right after connections can lag): the same figure twice, 2.5 s apart (bounded).
 */
async function settledConns(vip: string): Promise<number> {
  let last = await vsConns(vip);
  for (let i = 0; i < 6; i++) {
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    const now = await vsConns(vip);
    if (now === last) return now;
    last = now;
  }
  return last;
}

const ask = (q: Record<string, unknown>) => net.ask(q);
const backendOf = (answer: string): string => answer.split(' ')[0]!;

/** n short connections from the client: the backend of each. */
async function connections(vip: string, n: number): Promise<string[]> {
  const r = await ask({ op: 'tcp', host: vip, port: 80, n });
  assert.ok(!r.error, String(r.error));
  return (r.answers as string[]).map(backendOf);
}

/** A held connection (the backends' 8081 answers, then stays open): its id and backend. */
async function open(vip: string): Promise<{ id: number; backend: string }> {
  const r = await ask({ op: 'open', host: vip, port: 80 });
  assert.ok(!r.error, String(r.error));
  return { id: r.id as number, backend: backendOf(r.answer as string) };
}

const count = (bs: string[]) => Object.fromEntries(BACKENDS.map((b) => [b, bs.filter((x) => x === b).length]));

export const cases: VmCase[] = [
  {
    name: 'setup: pods and client, the proxier with --ipvs-scheduler wlc, five Services',
    timeoutMs: 300_000,
    async run() {
      await net.start(BACKENDS);
      const { deps, close } = openIpvsDeps();
      closers.push(close);
      proxier = new IpvsProxier({ family: 'IPv4', scheduler: 'wlc' }, deps);
      await proxier.init();
      tracker.onNode(node('node-a', { internal: [NODE_IP] }));
      for (const s of SERVICES) {
        tracker.onService(undefined, service(s.name, s.vip, s.value));
        const ports = [{ name: 'p', protocol: 'TCP', port: s.port }];
        tracker.onEndpointSlice(
          slice(
            `${s.name}-1`,
            s.name,
            BACKENDS.map((b) => ep(b)),
            { ports },
          ),
          false,
        );
      }
      await sync();
    },
  },
  {
    name: 'ipvsadm -Ln per Service: round-robin rr, consistent-hash mh, least-connection lc, random and none wlc',
    async run(note) {
      const seen = await Promise.all(SERVICES.map((s) => vsLine(s.vip)));
      note(seen);
      assert.deepEqual(seen, [
        'TCP 10.96.0.11:80 rr',
        'TCP 10.96.0.12:80 mh',
        'TCP 10.96.0.13:80 lc',
        'TCP 10.96.0.14:80 wlc',
        'TCP 10.96.0.15:80 wlc',
      ]);
    },
  },
  {
    name: 'round-robin: 30 new connections -> 10/10/10; consistent-hash: 12 reconnects of one client -> one backend',
    timeoutMs: 120_000,
    async run(note) {
      const rr = count(await connections('10.96.0.11', 30));
      const ch = await connections('10.96.0.12', 12);
      note({ rr, ch });
      assert.deepEqual(rr, { '10.0.0.2': 10, '10.0.0.3': 10, '10.0.0.4': 10 });
      assert.equal(new Set(ch).size, 1, `one backend for one client: ${ch.join(', ')}`);
    },
  },
  {
    name: 'least-connection: after two of three held connections are reset, new ones avoid the backend still holding one',
    timeoutMs: 120_000,
    async run(note) {
      const held = [await open('10.96.0.13'), await open('10.96.0.13'), await open('10.96.0.13')];
      assert.deepEqual(new Set(held.map((h) => h.backend)).size, 3, 'one per backend');
      // RST: IPVS counts these as inactive (CLOSE), far below an active connection's weight.
      for (const h of held.slice(1)) await ask({ op: 'reset', conn: h.id });
      const next = [await open('10.96.0.13'), await open('10.96.0.13')];
      note({ held: held.map((h) => h.backend), next: next.map((h) => h.backend) });
      // Round-robin would come back to the first backend now; lc does not while it is busiest.
      assert.deepEqual(new Set(next.map((h) => h.backend)), new Set(held.slice(1).map((h) => h.backend)));
      for (const h of [held[0]!, ...next]) await ask({ op: 'reset', conn: h.id });
    },
  },
  {
    name: 'a changed annotation edits the VS in place: round-robin -> least-connection, its connection counter kept',
    timeoutMs: 120_000,
    async run(note) {
      const before = await settledConns('10.96.0.11');
      tracker.onService(service('rr', '10.96.0.11', 'round-robin'), service('rr', '10.96.0.11', 'least-connection'));
      await sync();
      const after = { line: await vsLine('10.96.0.11'), conns: await settledConns('10.96.0.11') };
      note({ before, after });
      assert.equal(after.line, 'TCP 10.96.0.11:80 lc');
      assert.ok(before >= 30, `the counter counted the earlier connections (${before})`);
      assert.equal(after.conns, before, 'the same VS (a new one would count from 0)');
      // And back to the node's scheduler when the annotation goes.
      tracker.onService(service('rr', '10.96.0.11', 'least-connection'), service('rr', '10.96.0.11', undefined));
      await sync();
      assert.equal(await vsLine('10.96.0.11'), 'TCP 10.96.0.11:80 wlc');
    },
  },
];

export async function teardown(): Promise<void> {
  net.stop();
  await proxier?.cleanup();
  for (const c of closers) c();
}
