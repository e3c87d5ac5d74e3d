// Drift repair in IPVS mode (issue 18) against Debian's 6.1 kernel, inside the QEMU VM (run by
// run-cases.ts from ipvs-drift.test.ts): the real daemon (node + src/daemon/v8-options.ts +
// bin/kube-proxy-ts.js, `--proxy-mode ipvs`) in the VM's root namespace, a Service from a
// manifest directory, real connections from a client namespace (pods-and-client.ts):
//
//   client 192.168.7.2 ── vclient 192.168.7.1 node (daemon, kube-ipvs0) 10.0.0.1 vpods ── pods 10.0.0.2, 10.0.0.3
//
// Each case tampers with one kind of our kernel state as an operator or another program
// would, waits (bounded) until the kernel holds our state again, and then sends connections:
// they must be answered, masqueraded to the node (the client is outside --cluster-cidr). The
// time from the tampering to the repaired state is noted (BENCHMARKS.md).
//
//   announced, repaired by the drift watch (proxier/drift/; the daemon logs "Repair sync
//   requested" naming the change): our companion chains in nf_tables (`iptables-nft -t nat -F
//   KUBE-SERVICES`, our jump deleted from PREROUTING, `iptables-nft -t nat -F`), kube-ipvs0's
//   addresses and the link itself;
//   not announced, repaired by the periodic full sync (--ipvs-sync-period, PERIOD_S here):
//   IPVS virtual servers (`ipvsadm -C`) and ipsets (`ipset flush KUBE-CLUSTER-IP`, whose
//   ClusterIP the KUBE-IPVS-FILTER chain then rejects).
//
// One daemon serves every case (each start costs tens of seconds under emulation), so the
// period is short enough for the second kind; the first kind is told apart by the repair
// request in the log, and the periodic kind by its absence. A foreign rule in nat PREROUTING
// survives every repair; our own changes (a Service added and removed, the periodic full
// syncs rewriting the companion chains) never ask for a repair.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DAEMON_V8_OPTIONS } from '../../../src/daemon/v8-options.ts';
import { connect, GenlFamilies, Protocol } from '../../../src/netlink/core/index.ts';
import { serviceYAML } from '../../helpers/manifests.ts';
import type { VmCase } from '../run-cases.ts';
import { PodsAndClient } from './pods-and-client.ts';
import { ip, ipvsadmLines, must, run } from './vm-shell.ts';

const NODE_BIN = process.execPath;
const BIN = new URL('../../../bin/kube-proxy-ts.js', import.meta.url).pathname;
const RUN_DIR = process.env.RUN_DIR ?? '/tmp';
const WORK = '/tmp/kpts-ipvs-drift';
const MANIFESTS = join(WORK, 'manifests');
const DAEMON_LOG = join(RUN_DIR, 'daemon.log');
const VIP = '10.96.0.10';
const VIP2 = '10.96.0.11';
const BACKENDS = ['10.0.0.2', '10.0.0.3'];
/** --ipvs-sync-period: the bound on what only the periodic sync repairs. */
const PERIOD_S = 5;
/** How long a repair may take before the case fails: the period, and room for a loaded VM. */
const REPAIR_BOUND_MS = PERIOD_S * 1000 + 20_000;
const FOREIGN = ['-p', 'tcp', '--dport', '2222', '-j', 'ACCEPT'];

const net = new PodsAndClient();
let daemon: ChildProcess | undefined;

const web = (name: string, clusterIP: string): string =>
  serviceYAML({ name, clusterIP, port: 80, targetPort: 8080, endpoints: BACKENDS, nodeName: 'node-a' });

interface LogLine {
  /** Seconds since the epoch. */
  ts?: number;
  msg?: string;
  why?: string;
  full?: boolean;
  reason?: string;
}

function logLines(): LogLine[] {
  let text = '';
  try {
    text = readFileSync(DAEMON_LOG, 'utf8');
  } catch {
    return [];
  }
  const out: LogLine[] = [];
  for (const l of text.split('\n')) {
    if (!l.startsWith('{')) continue;
    try {
      out.push(JSON.parse(l) as LogLine);
    } catch {
      // a line cut by the reader racing the writer
    }
  }
  return out;
}

/** The reasons of the repair syncs the drift watches asked for so far. */
const repairRequests = (): string[] =>
  logLines()
    .filter((l) => l.msg === 'Repair sync requested')
    .map((l) => l.why ?? '');
/** Full syncs the periodic timer started so far. */
const periodicSyncs = (): number =>
  logLines().filter((l) => l.msg === 'Synced proxy rules' && l.full === true && l.reason === 'periodic').length;

async function until<T>(what: string, check: () => Promise<T | undefined | false>, ms: number, everyMs = 100) {
  const end = performance.now() + ms;
  let last: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v !== undefined && v !== false) return v;
    } catch (e) {
      last = e;
    }
    if (performance.now() > end)
      throw new Error(`timed out after ${ms} ms waiting for ${what}${last ? `: ${String(last)}` : ''}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** Our rules in `table` as iptables-nft-save prints them: chains declared and rules mentioning KUBE-, sorted. */
async function kubeRules(table: 'nat' | 'filter'): Promise<string> {
  const text = (await must('/usr/sbin/iptables-nft-save', '-t', table)).replace(/ \[\d+:\d+\]/g, '');
  return text
    .split('\n')
    .filter((l) => l.startsWith(':KUBE-') || (l.startsWith('-A ') && l.includes('KUBE-')))
    .map((l) => (l.startsWith(':') ? l.split(' ')[0]! : l))
    .sort()
    .join('\n');
}

const foreignPresent = async (): Promise<boolean> =>
  (await run('/usr/sbin/iptables-nft', ['-t', 'nat', '-C', 'PREROUTING', ...FOREIGN])).code === 0;
const vipBound = async (vip: string): Promise<boolean> =>
  (await must('/usr/sbin/ip', '-4', '-o', 'addr', 'show', 'dev', 'kube-ipvs0').catch(() => '')).includes(` ${vip}/32 `);
const realServers = async (): Promise<number> => {
  const r = await run('/usr/sbin/ipvsadm', ['-Ln', '-t', `${VIP}:80`]);
  return r.code === 0 ? ipvsadmLines(r.stdout, { counters: false }).length - 1 : 0;
};
const clusterIPEntry = async (): Promise<boolean> =>
  (await must('/usr/sbin/ipset', 'list', 'KUBE-CLUSTER-IP')).includes(`${VIP},tcp:80`);

/** n connections to the ClusterIP, each answered by a backend that saw the node (masqueraded). */
async function answers(n: number, vip = VIP): Promise<string[]> {
  const r = await net.ask({ op: 'tcp', host: vip, port: 80, n });
  if (r.error) throw new Error(`tcp ${vip}:80: ${String(r.error)} (${String(r.code)})`);
  const a = r.answers as string[];
  for (const x of a) {
    const [backend, peer] = x.split(' ');
    if (!BACKENDS.includes(backend!) || peer !== '10.0.0.1') throw new Error(`unexpected answer ${x}`);
  }
  return a;
}

let baseline: { nat: string; filter: string } | undefined;
const rulesRepaired = async (): Promise<boolean> =>
  (await kubeRules('nat')) === baseline!.nat && (await kubeRules('filter')) === baseline!.filter;

interface Repair {
  /** Tampering started → the kernel holds our state again (as the test's polling sees it). */
  ms: number;
  /** From the daemon's log: tampering started → the watch heard it; heard → the repair sync done. */
  daemon?: { heardMs: number; syncedMs: number };
  requests: string[];
  /** Periodic full syncs logged before the tampering. */
  periodicBefore: number;
}

/**
 * Tampers, waits (bounded) until `repaired` holds, then until the ClusterIP answers as before;
 * returns the time to the repaired state and the repair syncs the watches asked for meanwhile.
 */
async function repair(tamper: () => Promise<unknown>, repaired: () => Promise<boolean>): Promise<Repair> {
  const requestsBefore = repairRequests().length;
  const periodicBefore = periodicSyncs();
  const t0 = performance.now();
  const epoch0 = Date.now();
  await tamper();
  await until('the state to be repaired', repaired, REPAIR_BOUND_MS);
  const ms = Math.round(performance.now() - t0);
  await until('the ClusterIP to answer again', () => answers(3), 20_000, 250);
  assert.ok(daemon && daemon.exitCode === null, 'the daemon still runs');
  return { ms, ...daemonTimes(epoch0), requests: repairRequests().slice(requestsBefore), periodicBefore };
}

/** The daemon's own account (same clock): when a watch heard the change, when the next sync ended. */
function daemonTimes(epoch0: number): { daemon?: { heardMs: number; syncedMs: number } } {
  const lines = logLines().filter((l) => (l.ts ?? 0) * 1000 >= epoch0);
  const heard = lines.find((l) => l.msg?.endsWith('repairing now'));
  const synced = heard && lines.find((l) => l.msg === 'Synced proxy rules' && l.ts! >= heard.ts!);
  if (!heard || !synced) return {};
  return {
    daemon: {
      heardMs: Math.round(heard.ts! * 1000 - epoch0),
      syncedMs: Math.round((synced.ts! - heard.ts!) * 1000),
    },
  };
}

function assertAnnounced(r: Repair, why: RegExp): void {
  assert.ok(
    r.requests.some((w) => why.test(w)),
    `the drift watch asked for a repair naming the change (${why}): ${JSON.stringify(r.requests)}`,
  );
}

async function assertPeriodic(r: Repair): Promise<void> {
  assert.deepEqual(r.requests, [], 'nothing announced it: no repair request');
  // The sync logs after its writes: wait (bounded) for the line of the one that repaired it.
  await until('a periodic full sync in the log', async () => periodicSyncs() > r.periodicBefore, 10_000);
}

export const cases: VmCase[] = [
  {
    name: "the kernel announces no IPVS change: the IPVS generic netlink family has no multicast group (the controller's own has)",
    async run(note) {
      const conn = connect(Protocol.GENERIC, { timeoutMs: 10_000 });
      try {
        const families = new GenlFamilies(conn);
        const ipvs = await families.resolve('IPVS');
        const ctrl = await families.resolve('nlctrl');
        note({ ipvs: [...ipvs.groups.keys()], nlctrl: [...ctrl.groups.keys()] });
        assert.deepEqual([...ipvs.groups.keys()], []);
        assert.ok(ctrl.groups.has('notify'), 'groups are read: nlctrl announces families');
      } finally {
        conn.close();
      }
    },
  },
  {
    name: 'the daemon in IPVS mode serves the ClusterIP; a foreign nat PREROUTING rule is there',
    timeoutMs: 200_000,
    async run(note) {
      rmSync(WORK, { recursive: true, force: true });
      mkdirSync(MANIFESTS, { recursive: true });
      writeFileSync(join(MANIFESTS, 'web.yaml'), web('web', VIP));
      await net.start(BACKENDS);
      await must('/usr/sbin/iptables-nft', '-t', 'nat', '-A', 'PREROUTING', ...FOREIGN);
      const fd = openSync(DAEMON_LOG, 'a');
      const t0 = performance.now();
      daemon = spawn(
        NODE_BIN,
        [
          ...DAEMON_V8_OPTIONS,
          BIN,
          '--proxy-mode',
          'ipvs',
          '--manifest-dir',
          MANIFESTS,
          '--hostname-override',
          'node-a',
          '--cluster-cidr',
          '10.244.0.0/16',
          '--ipvs-sync-period',
          `${PERIOD_S}s`,
          '--healthz-bind-address',
          '127.0.0.1:10256',
          '--metrics-bind-address',
          '127.0.0.1:10249',
          '--logging-format',
          'json',
          '--v',
          '2',
        ],
        { stdio: ['ignore', fd, fd] },
      );
      closeSync(fd);
      await until('the ClusterIP to answer', () => answers(1), 180_000, 500);
      baseline = { nat: await kubeRules('nat'), filter: await kubeRules('filter') };
      note({ startMs: Math.round(performance.now() - t0) });
      assert.match(baseline.nat, /-A PREROUTING .*-j KUBE-SERVICES/);
      assert.match(baseline.nat, /-A KUBE-SERVICES .*KUBE-CLUSTER-IP/);
      assert.match(baseline.filter, /-A KUBE-IPVS-FILTER .*KUBE-IPVS-IPS.* -j REJECT/);
      assert.ok(await foreignPresent());
      assert.deepEqual(repairRequests(), []);
    },
  },
  {
    name: 'our own changes (a Service added and removed, periodic full syncs rewriting the companion chains) ask for no repair',
    timeoutMs: 120_000,
    async run(note) {
      const periodic = periodicSyncs();
      writeFileSync(join(MANIFESTS, 'web2.yaml'), web('web2', VIP2));
      await until('the second ClusterIP to answer', () => answers(1, VIP2), 30_000, 250);
      rmSync(join(MANIFESTS, 'web2.yaml'));
      await until('the second ClusterIP to be unbound', async () => !(await vipBound(VIP2)), 30_000);
      await until('a periodic full sync', async () => periodicSyncs() > periodic, 3 * PERIOD_S * 1000);
      note({ periodicSyncs: periodicSyncs() - periodic });
      assert.deepEqual(repairRequests(), [], 'no repair asked for');
      assert.ok(await rulesRepaired(), 'the rules are as before');
    },
  },
  {
    name: 'announced: iptables-nft -t nat -F KUBE-SERVICES is repaired by the drift watch',
    timeoutMs: 60_000,
    async run(note) {
      const r = await repair(() => must('/usr/sbin/iptables-nft', '-t', 'nat', '-F', 'KUBE-SERVICES'), rulesRepaired);
      note(r);
      assertAnnounced(r, /removed rule ip nat KUBE-SERVICES/);
      assert.ok(await foreignPresent(), 'the foreign rule survives');
    },
  },
  {
    name: 'announced: our jump deleted from nat PREROUTING (iptables-nft -t nat -D PREROUTING N) is repaired by the drift watch',
    timeoutMs: 60_000,
    async run(note) {
      const listing = await must('/usr/sbin/iptables-nft', '-t', 'nat', '-L', 'PREROUTING', '-n', '--line-numbers');
      const n = listing
        .split('\n')
        .find((l) => / KUBE-SERVICES /.test(` ${l} `))
        ?.split(/\s+/)[0];
      assert.ok(n && /^\d+$/.test(n), `our jump in PREROUTING: ${listing}`);
      const r = await repair(() => must('/usr/sbin/iptables-nft', '-t', 'nat', '-D', 'PREROUTING', n), rulesRepaired);
      note(r);
      assertAnnounced(r, /removed rule ip nat PREROUTING \(-j KUBE-SERVICES\)/);
      assert.ok(await foreignPresent(), 'the foreign rule survives');
    },
  },
  {
    name: 'announced: ip addr del <ClusterIP>/32 dev kube-ipvs0 is repaired by the drift watch',
    timeoutMs: 60_000,
    async run(note) {
      const r = await repair(
        () => ip('addr', 'del', `${VIP}/32`, 'dev', 'kube-ipvs0'),
        () => vipBound(VIP),
      );
      note(r);
      assertAnnounced(r, new RegExp(`removed address ${VIP.replaceAll('.', '\\.')}/32 from kube-ipvs0`));
      assert.ok(await foreignPresent(), 'the foreign rule survives');
    },
  },
  {
    name: 'announced: ip link del kube-ipvs0 is repaired by the drift watch',
    timeoutMs: 60_000,
    async run(note) {
      const r = await repair(
        () => ip('link', 'del', 'kube-ipvs0'),
        () => vipBound(VIP),
      );
      note(r);
      assertAnnounced(r, /removed (link kube-ipvs0|address 10\.96\.0\.10\/32 from kube-ipvs0)/);
      assert.ok(await foreignPresent(), 'the foreign rule survives');
    },
  },
  {
    name: 'not announced: ipvsadm -C is repaired by the periodic full sync',
    timeoutMs: 60_000,
    async run(note) {
      const r = await repair(
        () => must('/usr/sbin/ipvsadm', '-C'),
        async () => (await realServers()) === 2,
      );
      note(r);
      await assertPeriodic(r);
      assert.ok(await foreignPresent(), 'the foreign rule survives');
    },
  },
  {
    name: 'not announced: ipset flush KUBE-CLUSTER-IP (KUBE-IPVS-FILTER then rejects the ClusterIP) is repaired by the periodic full sync',
    timeoutMs: 60_000,
    async run(note) {
      const r = await repair(async () => {
        await must('/usr/sbin/ipset', 'flush', 'KUBE-CLUSTER-IP');
        const tried = await net.ask({ op: 'tcp', host: VIP, port: 80, n: 1 });
        // Unless a periodic sync refilled the set meanwhile, KUBE-IPVS-FILTER rejected it.
        if (!(await clusterIPEntry()))
          assert.equal(tried.code, 'ECONNREFUSED', `rejected while the set is empty: ${JSON.stringify(tried)}`);
      }, clusterIPEntry);
      note(r);
      await assertPeriodic(r);
      assert.ok(await foreignPresent(), 'the foreign rule survives');
    },
  },
  {
    name: 'announced: iptables-nft -t nat -F (the whole table) is repaired by the drift watch; a foreign rule added back survives',
    timeoutMs: 60_000,
    async run(note) {
      const r = await repair(async () => {
        await must('/usr/sbin/iptables-nft', '-t', 'nat', '-F');
        await must('/usr/sbin/iptables-nft', '-t', 'nat', '-A', 'PREROUTING', ...FOREIGN);
      }, rulesRepaired);
      note(r);
      assertAnnounced(r, /removed rule ip nat .*KUBE-/);
      assert.ok(await foreignPresent(), 'the foreign rule survives the repair');
      assert.match(await kubeRules('nat'), /-A PREROUTING .*-j KUBE-SERVICES/, 'our jump is back');
    },
  },
];

export async function teardown(): Promise<void> {
  daemon?.kill('SIGKILL');
  net.stop();
}
