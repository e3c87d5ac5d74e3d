// The IPVS proxier against Debian's 6.1 kernel, inside the QEMU VM (run by run-cases.ts from
// ipvs-proxier.test.ts). The VM's root namespace is the node: kube-ipvs0 lives there. Backends
// run in namespace "pods" (10.0.0.2, 10.0.0.3 behind vpods 10.0.0.1), the client in "client"
// (192.168.7.2 behind vclient 192.168.7.1, the node address NodePorts are tested on).
//
// The proxier is driven directly (no daemon): Kubernetes objects go into a real ChangeTracker,
// checkouts go to proxier.sync(). Every result is read back with independent tools
// (`ipvsadm -Ln`, `ipset list`, `ip addr show kube-ipvs0`) and with real TCP/UDP traffic.

import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { systemClock } from '../../../src/base/clock.ts';
import { nullLogger } from '../../../src/base/logger.ts';
import { ChangeTracker } from '../../../src/model/index.ts';
import type { Service } from '../../../src/model/k8s.ts';
import { connect, Protocol } from '../../../src/netlink/core/index.ts';
import { openIpset } from '../../../src/netlink/ipset/index.ts';
import { NftClient } from '../../../src/netlink/nftables/index.ts';
import { IpvsProxier, toIptablesSave } from '../../../src/proxier/ipvs/index.ts';
import { CompanionWriter } from '../../../src/proxier/ipvs/companion.ts';
import type { IpvsProxierDeps, IpvsProxierOptions } from '../../../src/proxier/ipvs/index.ts';
import type { SyncReport } from '../../../src/proxier/types.ts';
import { ep, node, slice, svc } from '../../unit/model/helpers.ts';
import type { VmCase } from '../run-cases.ts';
import { NODE_IP, PodsAndClient } from './pods-and-client.ts';
import { openIpvsDeps } from './ipvs-deps.ts';
import { ip, ipvsadmLines, must, run } from './vm-shell.ts';

const NODE_BIN = process.execPath;

/** `ipvsadm -Ln` lines, trimmed and squeezed, headers dropped; optionally one service's. */
const ipvsadm = async (...args: string[]): Promise<string[]> =>
  ipvsadmLines(await must('/usr/sbin/ipvsadm', '-Ln', ...args));

/** `ipvsadm -Ln` with the connection counters cut off: "-> 10.0.0.2:8080 Masq 1". */
const ipvsShape = async (...args: string[]): Promise<string[]> =>
  ipvsadmLines(await must('/usr/sbin/ipvsadm', '-Ln', ...args), { counters: false });

/** Members of an ipset as `ipset list` prints them, sorted. */
async function ipsetMembers(name: string): Promise<string[]> {
  const out = await must('/usr/sbin/ipset', 'list', name);
  const i = out.indexOf('Members:\n');
  return out
    .slice(i + 9)
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean)
    .sort();
}

async function vipAddrs(): Promise<string[]> {
  const out = await ip('-4', '-o', 'addr', 'show', 'dev', 'kube-ipvs0');
  return out
    .split('\n')
    .map((l) => /inet (\S+)/.exec(l)?.[1])
    .filter((x): x is string => !!x)
    .sort();
}

// --- the client agent ---------------------------------------------------------------------

const net = new PodsAndClient();
const ask = (q: Record<string, unknown>) => net.ask(q);

async function tcp(host: string, port: number, n = 1): Promise<string[]> {
  const r = await ask({ op: 'tcp', host, port, n });
  if (r.error) throw new Error(`tcp ${host}:${port}: ${String(r.error)}`);
  return r.answers as string[];
}

async function udp(host: string, port: number, n = 1): Promise<string[]> {
  const r = await ask({ op: 'udp', host, port, n });
  if (r.error) throw new Error(`udp ${host}:${port}: ${String(r.error)}`);
  return r.answers as string[];
}

const backendOf = (answer: string): string => answer.split(' ')[0]!;

// --- the proxier under test ----------------------------------------------------------------

let deps: IpvsProxierDeps;
let proxier: IpvsProxier;
const tracker = new ChangeTracker({ nodeName: 'node-a', family: 'IPv4' }, { logger: nullLogger, clock: systemClock });
const closers: (() => void)[] = [];

function newProxier(o: Partial<IpvsProxierOptions> = {}): IpvsProxier {
  return new IpvsProxier({ family: 'IPv4', gracefulCheckIntervalMs: 500, gracefulTerminationMs: 60_000, ...o }, deps);
}

async function sync(full = false, p: IpvsProxier = proxier): Promise<SyncReport> {
  if (full) tracker.requestFullSync();
  const { desired, change } = tracker.checkout();
  return p.sync(desired, change, AbortSignal.timeout(60_000));
}

const services = new Map<string, Service>();
function putService(name: string, s: Service): void {
  tracker.onService(services.get(name), s);
  services.set(name, s);
}
function dropService(name: string): void {
  tracker.onService(services.get(name), undefined);
  services.delete(name);
}
let rv = 1;
const TCP = (port: number, nodePort?: number) => ({
  name: 'p',
  protocol: 'TCP',
  port,
  ...(nodePort ? { nodePort } : {}),
});
const eps = (name: string, ips: string[], port = 8080, protocol = 'TCP') =>
  tracker.onEndpointSlice(
    slice(
      `${name}-1`,
      name,
      ips.map((a) => ep(a)),
      { rv: String(++rv), ports: [{ name: 'p', protocol, port }] },
    ),
    false,
  );

/** A one-shot TCP connect from the pods namespace (source 10.0.0.2): "<answer>" or "ERR <code>". */
async function fromPod(host: string, port: number): Promise<string> {
  const r = await run(
    '/usr/sbin/ip',
    [
      'netns',
      'exec',
      'pods',
      NODE_BIN,
      '-e',
      `
    const s = require('node:net').connect({ host: '${host}', port: ${port}, localAddress: '10.0.0.2' });
    let d = ''; s.setTimeout(4000, () => s.destroy(Object.assign(new Error('timeout'), { code: 'ETIMEDOUT' })));
    s.on('data', (c) => d += c); s.on('end', () => console.log(d.trim())); s.on('error', (e) => console.log('ERR ' + e.code));
  `,
    ],
    { timeoutMs: 30_000 },
  );
  return r.stdout.trim();
}

const ruleLines = (text: string): string[] =>
  text
    .split('\n')
    .filter((l) => l.startsWith('-A '))
    .sort();

async function until(what: string, check: () => Promise<boolean>, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`timed out waiting for ${what}`);
}

export const cases: VmCase[] = [
  {
    name: 'setup: node, pods and client namespaces; backends; init() writes the sysctls and probes the scheduler',
    timeoutMs: 120_000,
    async run(note) {
      await net.start(['10.0.0.2', '10.0.0.3']);

      const opened = openIpvsDeps();
      closers.push(opened.close);
      deps = opened.deps;
      for (const p of ['net/ipv4/vs/conntrack', 'net/ipv4/vs/expire_nodest_conn', 'net/ipv4/ip_forward'])
        writeFileSync(`/proc/sys/${p}`, '0\n');
      proxier = newProxier();
      await proxier.init();
      const got = Object.fromEntries(
        [
          'net/ipv4/vs/conntrack',
          'net/ipv4/vs/expire_nodest_conn',
          'net/ipv4/vs/expire_quiescent_template',
          'net/ipv4/ip_forward',
        ].map((p) => [p, readFileSync(`/proc/sys/${p}`, 'utf8').trim()]),
      );
      note(got);
      assert.deepEqual(Object.values(got), ['1', '1', '1', '1']);
      assert.deepEqual(await ipvsadm(), [], 'the scheduler probe leaves nothing');
      tracker.onNode(node('node-a', { internal: [NODE_IP] }));
      // An unknown scheduler never gets this far.
      assert.throws(() => newProxier({ scheduler: 'nope' }), /unknown IPVS scheduler "nope"/);
    },
  },
  {
    name: 'ClusterIP (rr): connections alternate between both backends; ipvsadm, ipset and kube-ipvs0 agree',
    timeoutMs: 60_000,
    async run(note) {
      putService('web', svc('web', { clusterIP: '10.96.0.10' }));
      eps('web', ['10.0.0.2', '10.0.0.3']);
      const r = await sync();
      note({ full: r.full, kernelMs: Math.round(r.kernelMs), planMs: Math.round(r.planMs) });
      assert.deepEqual(await ipvsadm('-t', '10.96.0.10:80'), [
        'TCP 10.96.0.10:80 rr',
        '-> 10.0.0.2:8080 Masq 1 0 0',
        '-> 10.0.0.3:8080 Masq 1 0 0',
      ]);
      assert.deepEqual(await vipAddrs(), ['10.96.0.10/32']);
      assert.deepEqual(await ipsetMembers('KUBE-CLUSTER-IP'), ['10.96.0.10,tcp:80']);
      assert.deepEqual(await ipsetMembers('KUBE-IPVS-IPS'), ['10.96.0.10']);
      const answers = await tcp('10.96.0.10', 80, 6);
      const b = answers.map(backendOf);
      assert.deepEqual(new Set(b), new Set(['10.0.0.2', '10.0.0.3']), answers.join(', '));
      for (let i = 1; i < b.length; i++) assert.notEqual(b[i], b[i - 1], `rr alternates: ${b.join(', ')}`);
      assert.ok(
        answers.every((a) => a.endsWith(' 192.168.7.2')),
        'no SNAT for an off-node client',
      );
    },
  },
  {
    name: "NodePort on the node address and an externalIP answer; the set types are upstream's",
    timeoutMs: 60_000,
    async run(note) {
      putService(
        'np',
        svc('np', {
          clusterIP: '10.96.0.11',
          type: 'NodePort',
          ports: [TCP(80, 30080)],
          externalIPs: ['203.0.113.10'],
        }),
      );
      eps('np', ['10.0.0.2', '10.0.0.3']);
      await sync();
      const lines = await ipvsadm();
      assert.ok(lines.includes(`TCP ${NODE_IP}:30080 rr`), lines.join('\n'));
      assert.ok(lines.includes('TCP 203.0.113.10:80 rr'), lines.join('\n'));
      assert.deepEqual(await ipsetMembers('KUBE-NODE-PORT-TCP'), ['30080']);
      assert.deepEqual(await ipsetMembers('KUBE-EXTERNAL-IP'), ['203.0.113.10,tcp:80']);
      assert.deepEqual(await vipAddrs(), ['10.96.0.10/32', '10.96.0.11/32', '203.0.113.10/32']);
      const np = await tcp(NODE_IP, 30080, 2);
      const ext = await tcp('203.0.113.10', 80, 2);
      note({ np, ext });
      assert.deepEqual(new Set(np.map(backendOf)), new Set(['10.0.0.2', '10.0.0.3']));
      assert.deepEqual(new Set(ext.map(backendOf)), new Set(['10.0.0.2', '10.0.0.3']));
      const types = await must('/usr/sbin/ipset', 'list', '-t');
      for (const [name, type] of [
        ['KUBE-LOOP-BACK', 'hash:ip,port,ip'],
        ['KUBE-NODE-PORT-TCP', 'bitmap:port'],
        ['KUBE-LOAD-BALANCER-SOURCE-CIDR', 'hash:ip,port,net'],
        ['KUBE-IPVS-IPS', 'hash:ip'],
      ] as [string, string][]) {
        assert.match(types, new RegExp(`Name: ${name}\\nType: ${type.replace(/[,:]/g, '.')}\\n`), `${name} is ${type}`);
      }
    },
  },
  {
    name: 'UDP ClusterIP answers from both backends',
    timeoutMs: 60_000,
    async run(note) {
      putService('dns', svc('dns', { clusterIP: '10.96.0.53', ports: [{ name: 'p', protocol: 'UDP', port: 53 }] }));
      eps('dns', ['10.0.0.2', '10.0.0.3'], 5353, 'UDP');
      await sync();
      assert.deepEqual(await ipvsadm('-u', '10.96.0.53:53'), [
        'UDP 10.96.0.53:53 rr',
        '-> 10.0.0.2:5353 Masq 1 0 0',
        '-> 10.0.0.3:5353 Masq 1 0 0',
      ]);
      const answers = await udp('10.96.0.53', 53, 4);
      note({ answers });
      assert.deepEqual(new Set(answers.map(backendOf)), new Set(['10.0.0.2', '10.0.0.3']));
    },
  },
  {
    name: 'traffic counters (per-Service metrics) rise by exactly the datagrams sent; describe reads the VS back (explain)',
    timeoutMs: 60_000,
    async run(note) {
      const id = 'default/dns:p/UDP';
      const counted = async (): Promise<{ packets: number; connections: number; bytes: number }> => {
        const s = (await proxier.trafficCounters()).find((x) => x.id === id && x.frontend === 'cluster-ip');
        return { packets: s?.packets ?? 0, connections: s?.connections ?? 0, bytes: s?.bytes ?? 0 };
      };
      // The kernel folds its per-CPU counters into what it reports every 2 s (ip_vs_est.c):
      // a value counts once it has stayed the same for longer than that.
      const settled = async (what: string): Promise<{ packets: number; connections: number; bytes: number }> => {
        let last = await counted();
        let since = Date.now();
        await until(what, async () => {
          const now = await counted();
          if (now.packets !== last.packets || now.connections !== last.connections) [last, since] = [now, Date.now()];
          return Date.now() - since > 3000;
        });
        return last;
      };
      const base = await settled('the counters to settle');
      await udp('10.96.0.53', 53, 5);
      const after = await settled('the counters to count the datagrams');
      note({ base, after });
      assert.equal(after.packets - base.packets, 5, 'one packet per datagram');
      assert.equal(after.connections - base.connections, 5, 'a new source port is a new IPVS connection');
      assert.ok(after.bytes - base.bytes >= 5 * 28, 'at least the IP and UDP headers of each');
      const info = tracker.desired.services.get(id as never)!;
      const d = await proxier.describe(info);
      const text = (list: typeof d.kernel): string[] => list.map((e) => `${e.where} ${e.key} ${e.value}`).sort();
      assert.deepEqual(text(d.kernel), [
        'UDP 10.96.0.53:53 10.0.0.2:5353 masq weight 1',
        'UDP 10.96.0.53:53 10.0.0.3:5353 masq weight 1',
        'ipvs UDP 10.96.0.53:53 rr',
      ]);
      assert.deepEqual(text(d.kernel), text(d.expected), 'no drift');
    },
  },
  {
    name: 'ClientIP affinity: one client sticks to one backend; ipvsadm shows the persistence timeout',
    timeoutMs: 60_000,
    async run(note) {
      putService('sticky', svc('sticky', { clusterIP: '10.96.0.12', affinity: 'ClientIP', timeout: 600 }));
      eps('sticky', ['10.0.0.2', '10.0.0.3']);
      await sync();
      assert.deepEqual((await ipvsadm('-t', '10.96.0.12:80'))[0], 'TCP 10.96.0.12:80 rr persistent 600');
      const answers = await tcp('10.96.0.12', 80, 6);
      note({ answers });
      assert.equal(new Set(answers.map(backendOf)).size, 1, answers.join(', '));
    },
  },
  {
    name: 'a Service without endpoints refuses connections at once',
    timeoutMs: 60_000,
    async run(note) {
      putService('empty', svc('empty', { clusterIP: '10.96.0.13' }));
      await sync();
      assert.deepEqual(await ipvsadm('-t', '10.96.0.13:80'), ['TCP 10.96.0.13:80 rr']);
      const t = Date.now();
      const r = await ask({ op: 'tcp', host: '10.96.0.13', port: 80, n: 1 });
      note({ r, ms: Date.now() - t });
      assert.ok(r.error, 'the connection fails');
      assert.notEqual(r.code, 'ETIMEDOUT', 'rejected, not black-holed');
    },
  },
  {
    name: 'restart with scheduler sh: a new proxier edits the VSes in place; one client keeps one backend',
    timeoutMs: 60_000,
    async run(note) {
      const sh = newProxier({ scheduler: 'sh' });
      const r = await sync(true, sh);
      note({ full: r.full, kernelMs: Math.round(r.kernelMs) });
      assert.deepEqual((await ipvsadm('-t', '10.96.0.10:80'))[0], 'TCP 10.96.0.10:80 sh');
      const answers = await tcp('10.96.0.10', 80, 6);
      assert.equal(new Set(answers.map(backendOf)).size, 1, answers.join(', '));
      // And back to rr, as after another restart.
      proxier = newProxier();
      await sync(true);
      assert.deepEqual((await ipvsadm('-t', '10.96.0.10:80'))[0], 'TCP 10.96.0.10:80 rr');
    },
  },
  {
    name: 'graceful termination: a long-lived connection keeps working after its endpoint is removed; the real server goes once it closes',
    timeoutMs: 90_000,
    async run(note) {
      putService('long', svc('long', { clusterIP: '10.96.0.14', ports: [TCP(81)] }));
      eps('long', ['10.0.0.2', '10.0.0.3'], 8081);
      await sync();
      const open = await ask({ op: 'open', host: '10.96.0.14', port: 81 });
      assert.ok(!open.error, String(open.error));
      const busy = backendOf(open.answer as string);
      const other = busy === '10.0.0.2' ? '10.0.0.3' : '10.0.0.2';
      eps('long', [other], 8081);
      await sync();
      const lines = await ipvsadm('-t', '10.96.0.14:81');
      note({ busy, lines });
      assert.ok(lines.includes(`-> ${busy}:8081 Masq 0 1 0`), `drained, one active connection: ${lines.join(' | ')}`);
      const echo = await ask({ op: 'send', conn: open.id, data: 'still-there' });
      assert.equal(echo.answer, 'still-there', 'the established connection still flows');
      // New connections only reach the remaining backend (8081 answers first, then echoes: use open).
      const n1 = await ask({ op: 'open', host: '10.96.0.14', port: 81 });
      assert.equal(backendOf(n1.answer as string), other);
      await ask({ op: 'reset', conn: n1.id });
      assert.deepEqual(
        proxier.terminating().map((x) => x.dest),
        [`${busy}:8081`],
      );
      // Close with a RST: IPVS moves the connection to CLOSE (10 s), then it has none left.
      const t = Date.now();
      await ask({ op: 'reset', conn: open.id });
      await until(
        'the drained real server to be deleted',
        async () => !(await ipvsadm('-t', '10.96.0.14:81')).some((l) => l.includes(busy)),
        40_000,
      );
      note({ busy, lines, deletedAfterMs: Date.now() - t });
      assert.deepEqual(proxier.terminating(), []);
    },
  },
  {
    name: 'restart recovery: a real server left at weight 0 with a ready endpoint gets weight 1 from a new proxier (issue 108319)',
    timeoutMs: 60_000,
    async run() {
      await must('/usr/sbin/ipvsadm', '-e', '-t', '10.96.0.10:80', '-r', '10.0.0.3:8080', '-m', '-w', '0');
      assert.ok((await ipvsShape('-t', '10.96.0.10:80')).includes('-> 10.0.0.3:8080 Masq 0'));
      proxier = newProxier();
      await sync(true);
      assert.ok((await ipvsShape('-t', '10.96.0.10:80')).includes('-> 10.0.0.3:8080 Masq 1'));
    },
  },
  {
    name: 'manual deletions (VS, real server, VIP, ipset entry) are repaired by the next full sync, not before',
    timeoutMs: 60_000,
    async run(note) {
      const before = await ipvsShape();
      await must('/usr/sbin/ipvsadm', '-D', '-t', '10.96.0.11:80');
      await must('/usr/sbin/ipvsadm', '-d', '-t', '10.96.0.10:80', '-r', '10.0.0.2:8080');
      await ip('addr', 'del', '10.96.0.12/32', 'dev', 'kube-ipvs0');
      await must('/usr/sbin/ipset', 'del', 'KUBE-CLUSTER-IP', '10.96.0.10,tcp:80');
      await must('/usr/sbin/ipvsadm', '-A', '-t', '10.96.99.1:80', '-s', 'rr');
      await sync();
      assert.notDeepEqual(await ipvsShape(), before, 'an incremental sync trusts its mirror');
      const r = await sync(true);
      note({ full: r.full, kernelMs: Math.round(r.kernelMs), planMs: Math.round(r.planMs) });
      assert.deepEqual(await ipvsShape(), before);
      assert.ok((await vipAddrs()).includes('10.96.0.12/32'));
      assert.ok((await ipsetMembers('KUBE-CLUSTER-IP')).includes('10.96.0.10,tcp:80'));
      const answers = await tcp('10.96.0.10', 80, 4);
      assert.deepEqual(new Set(answers.map(backendOf)), new Set(['10.0.0.2', '10.0.0.3']));
    },
  },
  {
    name: 'deleting Services removes their VSes, VIPs and entries; others stay',
    timeoutMs: 60_000,
    async run() {
      dropService('empty');
      dropService('sticky');
      await sync();
      const lines = await ipvsadm();
      assert.ok(!lines.some((l) => l.includes('10.96.0.12') || l.includes('10.96.0.13')), lines.join('\n'));
      assert.ok(!(await vipAddrs()).some((a) => a.startsWith('10.96.0.12/') || a.startsWith('10.96.0.13/')));
      assert.ok(!(await ipsetMembers('KUBE-CLUSTER-IP')).some((e) => e.startsWith('10.96.0.12,')));
      assert.ok((await tcp('10.96.0.10', 80, 1)).length === 1);
    },
  },
  {
    name: 'without companion rules a pod cannot reach itself through its Service (hairpin needs KUBE-LOOP-BACK masquerade)',
    timeoutMs: 60_000,
    async run(note) {
      putService('hair', svc('hair', { clusterIP: '10.96.0.20' }));
      tracker.onEndpointSlice(
        slice('hair-1', 'hair', [ep('10.0.0.2', { node: 'node-a' })], {
          rv: String(++rv),
          ports: [{ name: 'p', protocol: 'TCP', port: 8080 }],
        }),
        false,
      );
      putService(
        'lbsr',
        svc('lbsr', {
          clusterIP: '10.96.0.21',
          type: 'LoadBalancer',
          ports: [TCP(80, 30081)],
          ingress: [{ ip: '198.51.100.30' }],
          sourceRanges: ['172.16.0.0/12'],
        }),
      );
      await sync();
      assert.deepEqual(await ipsetMembers('KUBE-LOOP-BACK'), ['10.0.0.2,tcp:8080,10.0.0.2']);
      const r = await fromPod('10.96.0.20', 80);
      note({ r });
      assert.match(r, /^ERR /);
    },
  },
  {
    name: 'companion rules as data: iptables-nft-restore loads toIptablesSave() and iptables-nft-save prints the same rules back',
    timeoutMs: 240_000,
    async run(note) {
      const text = toIptablesSave(proxier.companionRules(tracker.desired));
      const file = `${process.env.RUN_DIR ?? '/tmp'}/companion-rules.txt`;
      writeFileSync(file, text);
      // Slow under QEMU without KVM: the first use autoloads nft_compat and the xt modules.
      // Under strace: the NFTA_MATCH_INFO/NFTA_TARGET_INFO bytes iptables-nft sends are the fixtures
      // an nft_compat encoder has to reproduce.
      const trace = `${process.env.RUN_DIR ?? '/tmp'}/iptables-nft-restore.strace`;
      const restore = await run(
        '/usr/bin/strace',
        [
          '-f',
          '-e',
          'trace=sendmsg',
          '-s',
          '262144',
          '-x',
          '-o',
          trace,
          '/usr/sbin/iptables-nft-restore',
          '--noflush',
          file,
        ],
        { timeoutMs: 120_000 },
      );
      assert.equal(restore.code, 0, `iptables-nft-restore: ${restore.stderr}`);
      const saved = (await run('/usr/sbin/iptables-nft-save', [], { timeoutMs: 60_000 })).stdout.replace(
        / \[\d+:\d+\]/g,
        '',
      );
      writeFileSync(`${process.env.RUN_DIR ?? '/tmp'}/iptables-nft-save.txt`, saved);
      const want = ruleLines(text);
      const got = ruleLines(saved);
      const missing = want.filter((l) => !got.includes(l));
      const extra = got.filter((l) => !want.includes(l));
      note({ rules: want.length, missing, extra });
      // How iptables-nft encodes them (native expressions vs xt matches/targets, info bytes): the
      // reference for the nft_compat encoder (kept in $RUN_DIR; see ipvs-proxier-companion.capture.txt).
      for (const t of ['nat', 'filter']) {
        const dbg = await run('/usr/sbin/nft', ['--debug=netlink', 'list', 'table', 'ip', t]);
        writeFileSync(`${process.env.RUN_DIR ?? '/tmp'}/nft-debug-netlink-${t}.txt`, dbg.stdout + dbg.stderr);
      }
      assert.deepEqual({ missing, extra }, { missing: [], extra: [] });
    },
  },
  {
    name: 'with the companion rules: hairpin works (masqueraded to the node), NodePort clients are masqueraded, VIPs reject other ports',
    timeoutMs: 60_000,
    async run(note) {
      const hair = await fromPod('10.96.0.20', 80);
      const np = await tcp(NODE_IP, 30080, 1);
      const other = await ask({ op: 'tcp', host: '10.96.0.10', port: 22, n: 1 });
      note({ hair, np, other });
      assert.equal(hair, '10.0.0.2 10.0.0.1', 'the pod reached itself, seen from the node address');
      assert.match(np[0]!, / 10\.0\.0\.1$/, 'NodePort traffic is masqueraded');
      assert.equal(other.code, 'ECONNREFUSED', 'KUBE-IPVS-FILTER rejects a non-service port on a VIP');
      await must('/usr/sbin/nft', 'delete', 'table', 'ip', 'nat');
      await must('/usr/sbin/nft', 'delete', 'table', 'ip', 'filter');
    },
  },
  {
    name: 'companion rules over nfnetlink (no iptables binary): iptables-nft-save prints toIptablesSave(); written twice, nothing sent; one changed rule replaced by handle; hairpin and NodePort masquerade work',
    timeoutMs: 240_000,
    async run(note) {
      const nfConn = connect(Protocol.NETFILTER, { timeoutMs: 30_000 });
      const ipsetConn = openIpset({ timeoutMs: 10_000 });
      closers.push(() => nfConn.close(), ipsetConn.close);
      const nat = new NftClient({ family: 'ip', table: 'nat', transport: nfConn, destroy: 'emulate' });
      const writer = new CompanionWriter('IPv4', {
        nat,
        filter: new NftClient({ family: 'ip', table: 'filter', transport: nfConn, destroy: 'emulate' }),
        ipset: ipsetConn.client,
      });
      const rules = proxier.companionRules(tracker.desired);
      let t = performance.now();
      const first = await writer.write(rules);
      const firstMs = Math.round(performance.now() - t);
      t = performance.now();
      const second = await writer.write(rules);
      const secondMs = Math.round(performance.now() - t);
      // A partial update: masqueradeAll changes one rule of KUBE-SERVICES; it is replaced by
      // handle (one delete, one insert) and every other rule keeps its handle. Then back.
      const handles = async (): Promise<bigint[]> =>
        (await nat.listRules('KUBE-SERVICES')).flatMap((r) => (r.handle === undefined ? [] : [r.handle]));
      const before = await handles();
      const m = tracker.desired.masquerade;
      const flipped = proxier.companionRules({ ...tracker.desired, masquerade: { ...m, all: !m.all } });
      const partial = await writer.write(flipped);
      const after = await handles();
      const back = await writer.write(rules);
      const saved = (await run('/usr/sbin/iptables-nft-save', [], { timeoutMs: 60_000 })).stdout.replace(
        / \[\d+:\d+\]/g,
        '',
      );
      writeFileSync(`${process.env.RUN_DIR ?? '/tmp'}/iptables-nft-save-netlink.txt`, saved);
      const want = ruleLines(toIptablesSave(rules));
      const got = ruleLines(saved);
      const missing = want.filter((l) => !got.includes(l));
      const extra = got.filter((l) => !want.includes(l));
      const hair = await fromPod('10.96.0.20', 80);
      const np = await tcp(NODE_IP, 30080, 1);
      note({
        messages: [first, second, partial, back],
        keptHandles: before.filter((h) => after.includes(h)).length,
        handles: before.length,
        ms: [firstMs, secondMs],
        rules: want.length,
        got: got.length,
        missing,
        extra,
        hair,
        np,
      });
      await run('/usr/sbin/nft', ['delete', 'table', 'ip', 'nat']);
      await run('/usr/sbin/nft', ['delete', 'table', 'ip', 'filter']);
      assert.deepEqual({ missing, extra }, { missing: [], extra: [] });
      assert.equal(got.length, want.length, 'no rule twice');
      assert.equal(second, 0, 'written again unchanged: nothing sent');
      assert.equal(partial, 2, 'one rule changed: one delete and one insert by handle');
      assert.equal(back, 2);
      assert.deepEqual(
        before.filter((h) => !after.includes(h)).length,
        1,
        'every other rule of KUBE-SERVICES keeps its handle',
      );
      assert.equal(hair, '10.0.0.2 10.0.0.1');
      assert.match(np[0]!, / 10\.0\.0\.1$/);
    },
  },
  {
    name: '300 Services x 2 endpoints: cold sync, one-endpoint incremental sync, full resync (timed)',
    timeoutMs: 240_000,
    async run(note) {
      for (let i = 0; i < 300; i++) {
        putService(`bulk${i}`, svc(`bulk${i}`, { clusterIP: `10.97.${i >> 8}.${i & 255}` }));
        eps(`bulk${i}`, ['10.0.0.2', '10.0.0.3']);
      }
      let t = performance.now();
      const cold = await sync();
      const coldMs = Math.round(performance.now() - t);
      const coldOps = proxier.lastOps;
      const coldReqs = proxier.lastRequests;
      eps('bulk150', ['10.0.0.2']);
      t = performance.now();
      const one = await sync();
      const oneMs = Math.round(performance.now() - t);
      const oneOps = proxier.lastOps;
      const oneReqs = proxier.lastRequests;
      t = performance.now();
      const full = await sync(true);
      const fullMs = Math.round(performance.now() - t);
      const fullOps = proxier.lastOps;
      const fullReqs = proxier.lastRequests;
      note({
        cold: {
          ms: coldMs,
          kernelMs: Math.round(cold.kernelMs),
          planMs: Math.round(cold.planMs),
          kernelCalls: coldOps,
          requests: coldReqs,
        },
        oneEndpoint: {
          ms: oneMs,
          kernelMs: Math.round(one.kernelMs),
          kernelCalls: oneOps,
          requests: oneReqs,
          full: one.full,
        },
        fullResync: { ms: fullMs, kernelMs: Math.round(full.kernelMs), kernelCalls: fullOps, requests: fullReqs },
      });
      assert.equal(one.full, false);
      assert.equal((await ipvsadm()).filter((l) => l.startsWith('TCP 10.97.')).length, 300);
      // 10.0.0.3 drains at weight 0; with no connection the graceful check may already have deleted it.
      const one150 = await ipvsShape('-t', '10.97.0.150:80');
      assert.ok(
        one150.includes('-> 10.0.0.2:8080 Masq 1') && !one150.includes('-> 10.0.0.3:8080 Masq 1'),
        one150.join(' | '),
      );
      assert.equal((await vipAddrs()).filter((a) => a.startsWith('10.97.')).length, 300);
    },
  },
  {
    name: "cleanup removes our companion rules, VSes, ipsets and kube-ipvs0, and leaves a fwmark service and a stranger's rule alone",
    timeoutMs: 180_000,
    async run(note) {
      await must('/usr/sbin/ipvsadm', '-A', '-f', '7', '-s', 'rr');
      // A proxier that writes the companion rules itself: a full sync writes them, cleanup removes
      // them first (they reference the sets), then the VSes, sets and link. A stranger's rule stays.
      const nfConn = connect(Protocol.NETFILTER, { timeoutMs: 30_000 });
      const ipsetConn = openIpset({ timeoutMs: 10_000 });
      closers.push(() => nfConn.close(), ipsetConn.close);
      const companion = new CompanionWriter('IPv4', {
        nat: new NftClient({ family: 'ip', table: 'nat', transport: nfConn, destroy: 'emulate' }),
        filter: new NftClient({ family: 'ip', table: 'filter', transport: nfConn, destroy: 'emulate' }),
        ipset: ipsetConn.client,
      });
      proxier = new IpvsProxier({ family: 'IPv4' }, { ...deps, companion });
      await sync(true);
      await must(
        '/usr/sbin/iptables-nft',
        '-t',
        'filter',
        '-A',
        'INPUT',
        '-p',
        'tcp',
        '--dport',
        '2222',
        '-j',
        'ACCEPT',
      );
      const before = await run('/usr/sbin/iptables-nft-save', [], { timeoutMs: 60_000 });
      assert.ok(before.stdout.includes('-A KUBE-SERVICES'), 'the sync wrote the rules');
      await proxier.cleanup();
      const after = (await run('/usr/sbin/iptables-nft-save', [], { timeoutMs: 60_000 })).stdout;
      note({ after });
      assert.ok(!after.includes('KUBE-'), after);
      assert.ok(after.includes('-A INPUT -p tcp -m tcp --dport 2222 -j ACCEPT'), after);
      assert.deepEqual(await ipvsadm(), ['FWM 7 rr']);
      const names = await must('/usr/sbin/ipset', 'list', '-n');
      assert.ok(!names.split('\n').some((n) => n.startsWith('KUBE-')), names);
      const link = await run('/usr/sbin/ip', ['link', 'show', 'kube-ipvs0']);
      assert.notEqual(link.code, 0, 'kube-ipvs0 is gone');
      await must('/usr/sbin/ipvsadm', '-D', '-f', '7');
    },
  },
];

export async function teardown(): Promise<void> {
  net.stop();
  for (const c of closers) c();
}
