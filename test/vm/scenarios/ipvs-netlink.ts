// The IPVS client against Debian's 6.1 kernel, inside the QEMU VM (run by run-cases.ts from
// ipvs-netlink.test.ts). The VM is ours alone: its root namespace plays the node. Every
// result is read back with `ipvsadm -Ln` (the host's binary through the 9p root), an
// independent reader, as well as through our own dump.
//
// The boot starts with no module loaded and the kernel's module autoloader disabled, so the
// first case sees a kernel without IPVS; the second loads the modules.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { connect, Protocol } from '../../../src/netlink/core/index.ts';
import type { NetlinkConnection } from '../../../src/netlink/core/index.ts';
import {
  IP_VS_SVC_F_PERSISTENT,
  IP_VS_SVC_F_SCHED_SH_FALLBACK,
  IP_VS_SVC_F_SCHED_SH_PORT,
  IpvsClient,
  isDestinationNotFound,
  isIpvsExists,
  isSchedulerMissing,
  isServiceNotFound,
} from '../../../src/netlink/ipvs/index.ts';
import type { IpvsOp, IpvsServiceKey, IpvsServiceSpec } from '../../../src/netlink/ipvs/index.ts';
import { isRouteExists, RouteClient } from '../../../src/netlink/route/index.ts';
import type { VmCase } from '../run-cases.ts';
import { ipvsadmLines, must, run } from './vm-shell.ts';

const NODE = process.execPath;
const MODPROBE = process.env.VM_MODPROBE ?? '/usr/sbin/modprobe';
const MODULES = ['ip_vs', 'ip_vs_rr', 'ip_vs_wrr', 'ip_vs_sh', 'ip_vs_lc', 'nf_conntrack', 'veth', 'dummy'];

/** `ipvsadm -Ln` (optionally of one service), lines trimmed and blank lines dropped. */
const ipvsadm = async (...args: string[]): Promise<string[]> =>
  ipvsadmLines(await must('/usr/sbin/ipvsadm', '-Ln', ...args));

let conn: NetlinkConnection | undefined;
let client: IpvsClient;
const children: ChildProcess[] = [];

function fresh(): IpvsClient {
  conn?.close();
  conn = connect(Protocol.GENERIC, { timeoutMs: 10_000 });
  client = new IpvsClient(conn);
  return client;
}

const WEB: IpvsServiceSpec = { family: 'IPv4', protocol: 'tcp', address: '10.96.0.1', port: 80, scheduler: 'rr' };
const WEB_KEY: IpvsServiceKey = { family: 'IPv4', protocol: 'tcp', address: '10.96.0.1', port: 80 };
const DNS6: IpvsServiceSpec = { family: 'IPv6', protocol: 'udp', address: 'fd00::10', port: 53, scheduler: 'rr' };
const MARK: IpvsServiceSpec = { family: 'IPv4', fwmark: 7, scheduler: 'lc' };
const STICKY: IpvsServiceSpec = {
  family: 'IPv4',
  protocol: 'tcp',
  address: '10.96.0.2',
  port: 443,
  scheduler: 'sh',
  flags: IP_VS_SVC_F_SCHED_SH_FALLBACK | IP_VS_SVC_F_SCHED_SH_PORT,
  timeout: 300,
  netmask: 24,
};

async function expectRejects(p: Promise<unknown>, check: (e: unknown) => boolean, what: string): Promise<unknown> {
  try {
    await p;
  } catch (e) {
    assert.ok(check(e), `${what}: unexpected error ${String(e)}`);
    return e;
  }
  assert.fail(`${what}: expected a rejection`);
}

export const cases: VmCase[] = [
  {
    name: 'a kernel without IPVS: a clear NetlinkError names the missing family',
    async run(note) {
      await must('/bin/sh', '-c', 'echo /bin/false >/proc/sys/kernel/modprobe');
      const e = await expectRejects(fresh().listServices(), () => true, 'listServices without ip_vs');
      note(String(e));
      assert.match(String(e), /get genl family IPVS: not available in this kernel: ENOENT/);
    },
  },
  {
    name: 'modules load; info() reports IPVS 1.2.1',
    timeoutMs: 120_000,
    async run(note) {
      await must(MODPROBE, '-a', ...MODULES);
      const info = await fresh().info();
      note(info);
      assert.equal(info.version, '1.2.1');
      assert.ok(info.connTableSize > 0);
      await client.flushAll();
    },
  },
  {
    name: 'add a TCP service: ipvsadm -Ln and our dump and get agree',
    async run() {
      await client.addService(WEB);
      assert.deepEqual(await ipvsadm(), ['TCP 10.96.0.1:80 rr']);
      const [svc, ...rest] = await client.listServices();
      assert.equal(rest.length, 0);
      assert.deepEqual(
        { ...svc, stats: undefined, unknown: undefined },
        { ...WEB, flags: 0, timeout: 0, netmask: 32, stats: undefined, unknown: undefined },
      );
      const got = await client.getService(WEB_KEY);
      assert.equal(got?.scheduler, 'rr');
      assert.equal(got?.stats.conns, 0n);
    },
  },
  {
    name: 'adding the same service again fails with EEXIST',
    async run(note) {
      const e = await expectRejects(client.addService(WEB), isIpvsExists, 'duplicate add');
      note(String(e));
      assert.match(String(e), /^NetlinkError: add ipvs service TCP 10\.96\.0\.1:80 scheduler rr: EEXIST/);
    },
  },
  {
    name: 'destinations: add (masq, weight, thresholds), read back, duplicate is EEXIST',
    async run() {
      await client.addDestination(WEB_KEY, { address: '10.0.0.2', port: 8080, weight: 1 });
      await client.addDestination(WEB_KEY, {
        address: '10.0.0.3',
        port: 8080,
        weight: 5,
        upperThreshold: 100,
        lowerThreshold: 10,
      });
      assert.deepEqual(await ipvsadm(), [
        'TCP 10.96.0.1:80 rr',
        '-> 10.0.0.2:8080 Masq 1 0 0',
        '-> 10.0.0.3:8080 Masq 5 0 0',
      ]);
      const th = await must('/usr/sbin/ipvsadm', '-Ln', '--thresholds', '-t', '10.96.0.1:80');
      assert.match(th, /10\.0\.0\.3:8080\s+100\s+10/);
      const dests = (await client.listDestinations(WEB_KEY)).sort((a, b) => a.address.localeCompare(b.address));
      assert.deepEqual(
        dests.map((d) => [
          d.family,
          d.address,
          d.port,
          d.forward,
          d.weight,
          d.upperThreshold,
          d.lowerThreshold,
          d.activeConns,
          d.inactiveConns,
        ]),
        [
          ['IPv4', '10.0.0.2', 8080, 'masq', 1, 0, 0, 0, 0],
          ['IPv4', '10.0.0.3', 8080, 'masq', 5, 100, 10, 0, 0],
        ],
      );
      await expectRejects(
        client.addDestination(WEB_KEY, { address: '10.0.0.2', port: 8080, weight: 1 }),
        isIpvsExists,
        'duplicate destination',
      );
    },
  },
  {
    name: 'edit a destination to weight 0 (drain); edit the service to wrr with persistence',
    async run() {
      await client.editDestination(WEB_KEY, { address: '10.0.0.2', port: 8080, weight: 0 });
      await client.editService({ ...WEB, scheduler: 'wrr', timeout: 10800 });
      assert.deepEqual(await ipvsadm(), [
        'TCP 10.96.0.1:80 wrr persistent 10800',
        '-> 10.0.0.2:8080 Masq 0 0 0',
        '-> 10.0.0.3:8080 Masq 5 0 0',
      ]);
      const svc = await client.getService(WEB_KEY);
      assert.equal(svc?.scheduler, 'wrr');
      assert.equal(svc?.timeout, 10800);
      assert.equal(svc?.flags, IP_VS_SVC_F_PERSISTENT);
      // Back to plain rr, no persistence: the PERSISTENT flag goes with the timeout.
      await client.editService(WEB);
      assert.deepEqual((await ipvsadm('-t', '10.96.0.1:80'))[0], 'TCP 10.96.0.1:80 rr');
    },
  },
  {
    name: 'IPv6 UDP, fwmark and sh-with-flags services round-trip through the kernel',
    async run() {
      await client.addService(DNS6);
      await client.addDestination(DNS6, { address: 'fd00::2', port: 5353, weight: 2 });
      await client.addService(MARK);
      await client.addService(STICKY);
      const lines = await ipvsadm();
      assert.ok(lines.includes('UDP [fd00::10]:53 rr'), lines.join('\n'));
      assert.ok(lines.includes('-> [fd00::2]:5353 Masq 2 0 0'), lines.join('\n'));
      assert.ok(lines.includes('FWM 7 lc'), lines.join('\n'));
      assert.ok(
        lines.includes('TCP 10.96.0.2:443 sh (sh-fallback,sh-port) persistent 300 mask 255.255.255.0'),
        lines.join('\n'),
      );
      const all = await client.listServices();
      const strip = (s: object): object => ({ ...s, stats: undefined, unknown: undefined });
      assert.deepEqual(
        strip(all.find((s) => 'fwmark' in s)!),
        strip({ ...MARK, flags: 0, timeout: 0, netmask: 32, stats: 0, unknown: 0 }),
      );
      assert.deepEqual(
        strip((await client.getService(STICKY))!),
        strip({ ...STICKY, flags: STICKY.flags! | IP_VS_SVC_F_PERSISTENT, stats: 0, unknown: 0 }),
      );
      assert.deepEqual(
        strip((await client.getService(DNS6))!),
        strip({ ...DNS6, flags: 0, timeout: 0, netmask: 128, stats: 0, unknown: 0 }),
      );
      const [d6] = await client.listDestinations(DNS6);
      assert.equal(d6?.address, 'fd00::2');
      assert.equal(d6?.family, 'IPv6');
    },
  },
  {
    name: 'delete a destination; deleting it again is ENOENT; missing service is ESRCH / undefined',
    async run() {
      await client.deleteDestination(WEB_KEY, { address: '10.0.0.2', port: 8080 });
      assert.deepEqual(await ipvsadm('-t', '10.96.0.1:80'), ['TCP 10.96.0.1:80 rr', '-> 10.0.0.3:8080 Masq 5 0 0']);
      await expectRejects(
        client.deleteDestination(WEB_KEY, { address: '10.0.0.2', port: 8080 }),
        isDestinationNotFound,
        'second delete',
      );
      const gone: IpvsServiceKey = { family: 'IPv4', protocol: 'tcp', address: '10.96.9.9', port: 1 };
      assert.equal(await client.getService(gone), undefined);
      await expectRejects(client.deleteService(gone), isServiceNotFound, 'delete missing service');
      await expectRejects(
        client.addDestination(gone, { address: '10.0.0.9', port: 1, weight: 1 }),
        isServiceNotFound,
        'destination of a missing service',
      );
    },
  },
  {
    name: 'deleteServices removes only the services named; one made by ipvsadm stays',
    async run() {
      await must('/usr/sbin/ipvsadm', '-A', '-t', '10.99.0.1:22', '-s', 'rr');
      const n = await client.deleteServices([
        WEB_KEY,
        DNS6,
        MARK,
        STICKY,
        { family: 'IPv4', protocol: 'tcp', address: '10.96.9.9', port: 1 },
      ]);
      assert.equal(n, 4);
      assert.deepEqual(await ipvsadm(), ['TCP 10.99.0.1:22 rr']);
      await must('/usr/sbin/ipvsadm', '-D', '-t', '10.99.0.1:22');
    },
  },
  {
    name: 'timeouts: set all three, read back (ipvsadm and ours), partial set leaves the rest',
    async run(note) {
      const before = await client.getTimeouts();
      note({ defaults: before });
      assert.deepEqual(before, { tcp: 900, tcpFin: 120, udp: 300 });
      await client.setTimeouts({ tcp: 1800, tcpFin: 60, udp: 120 });
      assert.match(await must('/usr/sbin/ipvsadm', '-L', '--timeout'), /Timeout \(tcp tcpfin udp\): 1800 60 120/);
      await client.setTimeouts({ udp: 30 });
      assert.deepEqual(await client.getTimeouts(), { tcp: 1800, tcpFin: 60, udp: 30 });
      await client.setTimeouts({ tcp: 900, tcpFin: 120, udp: 300 });
    },
  },
  {
    name: 'a scheduler whose module cannot load is a named error; with autoload it loads',
    async run(note) {
      const e = await expectRejects(
        client.addService({ ...WEB, scheduler: 'fo' }),
        isSchedulerMissing,
        'scheduler fo without autoload',
      );
      note(String(e));
      assert.match(String(e), /scheduler "fo" is not available \(is module ip_vs_fo loadable\?\): ENOENT/);
      assert.deepEqual(await ipvsadm(), []);
      await expectRejects(client.addService({ ...WEB, scheduler: 'nosuch' }), isSchedulerMissing, 'scheduler nosuch');
      // As on a real node: the kernel's autoloader finds ip_vs_fo.
      writeFileSync('/proc/sys/kernel/modprobe', MODPROBE);
      await client.addService({ ...WEB, scheduler: 'fo' });
      assert.deepEqual(await ipvsadm(), ['TCP 10.96.0.1:80 fo']);
      await client.deleteService(WEB_KEY);
    },
  },
  {
    name: '500 services x 2 destinations: add, dump, delete (timed)',
    timeoutMs: 180_000,
    async run(note) {
      const keys: IpvsServiceSpec[] = [];
      for (let i = 0; i < 500; i++)
        keys.push({
          family: 'IPv4',
          protocol: i % 2 ? 'udp' : 'tcp',
          address: `10.97.${i >> 8}.${i & 255}`,
          port: 80,
          scheduler: 'rr',
        });
      let t = performance.now();
      for (const k of keys) {
        await client.addService(k);
        await client.addDestination(k, { address: '10.0.0.2', port: 8080, weight: 1 });
        await client.addDestination(k, { address: '10.0.0.3', port: 8080, weight: 1 });
      }
      const addMs = Math.round(performance.now() - t);
      t = performance.now();
      const listed = await client.listServices();
      const dumpMs = Math.round(performance.now() - t);
      t = performance.now();
      let dests = 0;
      for (const k of listed.slice(0, 100)) dests += (await client.listDestinations(k)).length;
      const destDumpMs = Math.round(performance.now() - t);
      assert.equal(listed.length, 500);
      assert.equal(dests, 200);
      const lines = await ipvsadm();
      assert.equal(lines.filter((l) => l.startsWith('->')).length, 1000);
      t = performance.now();
      assert.equal(await client.deleteServices(keys), 500);
      const delMs = Math.round(performance.now() - t);
      assert.deepEqual(await ipvsadm(), []);
      note({
        addServicesAndDestsMs: addMs,
        dumpServicesMs: dumpMs,
        dump100DestListsMs: destDumpMs,
        delete500Ms: delMs,
      });
    },
  },
  {
    name: 'applyMany: 500 services x 2 destinations pipelined in list order, ipvsadm agrees; pipelined deletes (timed)',
    timeoutMs: 180_000,
    async run(note) {
      const keys: IpvsServiceSpec[] = [];
      for (let i = 0; i < 500; i++)
        keys.push({
          family: 'IPv4',
          protocol: i % 2 ? 'udp' : 'tcp',
          address: `10.97.${i >> 8}.${i & 255}`,
          port: 80,
          scheduler: 'rr',
        });
      const adds: IpvsOp[] = keys.flatMap((k): IpvsOp[] => [
        { op: 'add-service', service: k },
        { op: 'add-destination', service: k, destination: { address: '10.0.0.2', port: 8080, weight: 1 } },
        { op: 'add-destination', service: k, destination: { address: '10.0.0.3', port: 8080, weight: 1 } },
      ]);
      let t = performance.now();
      const added = await client.applyMany(adds);
      const addMs = Math.round(performance.now() - t);
      assert.deepEqual(
        added.filter((e) => e !== undefined),
        [],
      );
      const lines = await ipvsadm();
      assert.equal(lines.filter((l) => !l.startsWith('->')).length, 500);
      assert.equal(lines.filter((l) => l.startsWith('->')).length, 1000);
      t = performance.now();
      const deleted = await client.applyMany(keys.map((k): IpvsOp => ({ op: 'delete-service', service: k })));
      const delMs = Math.round(performance.now() - t);
      assert.deepEqual(
        deleted.filter((e) => e !== undefined),
        [],
      );
      assert.deepEqual(await ipvsadm(), []);
      note({ requests: adds.length, addServicesAndDestsMs: addMs, delete500Ms: delMs });
    },
  },
  {
    name: 'pipelined writes that all fail: 2,048 IPVS and 2,048 address error replies fit the receive buffer at the stock rmem_max, each named',
    timeoutMs: 180_000,
    async run(note) {
      const rmemMax = readFileSync('/proc/sys/net/core/rmem_max', 'utf8').trim();
      // Destinations of a service that does not exist: every request is answered with ESRCH.
      const ghost: IpvsServiceKey = { family: 'IPv4', protocol: 'tcp', address: '10.98.0.1', port: 80 };
      const ops: IpvsOp[] = Array.from({ length: 2048 }, (_, j) => ({
        op: 'add-destination',
        service: ghost,
        destination: { address: `10.1.${j >> 8}.${j & 255}`, port: 8080, weight: 1 },
      }));
      const res = await client.applyMany(ops);
      assert.equal(res.filter((e) => isServiceNotFound(e)).length, 2048);
      assert.equal(res[2047]!.message, 'add ipvs destination 10.1.7.255:8080 of TCP 10.98.0.1:80: ESRCH');
      // Addresses bound twice: the second round is all EEXIST.
      const rconn = connect(Protocol.ROUTE, { timeoutMs: 10_000 });
      try {
        const route = new RouteClient(rconn);
        await must('/usr/sbin/ip', 'link', 'add', 'kpt-burst0', 'type', 'dummy');
        const link = (await route.getLink('kpt-burst0'))!.index;
        const addrs = Array.from({ length: 2048 }, (_, j) => `10.99.${j >> 8}.${j & 255}`);
        assert.deepEqual(
          (await route.addAddresses(link, addrs)).filter((e) => e !== undefined),
          [],
        );
        const again = await route.addAddresses(link, addrs);
        assert.equal(again.filter((e) => isRouteExists(e)).length, 2048);
        // The kernel's extended-ACK text, where it has one, follows the errno.
        assert.match(again[0]!.message, /^add address 10\.99\.0\.0\/32 to #\d+: EEXIST( \(.+\))?$/);
        const shown = (await must('/usr/sbin/ip', '-4', '-o', 'addr', 'show', 'dev', 'kpt-burst0')).trim().split('\n');
        note({ rmemMax, ipvsErrors: 2048, addressErrors: 2048, addressesShown: shown.length, first: res[0]!.message });
        assert.equal(shown.length, 2048);
      } finally {
        await run('/usr/sbin/ip', ['link', 'del', 'kpt-burst0']);
        rconn.close();
      }
    },
  },
  {
    name: 'traffic: a NAT service on a kube-ipvs0 VIP answers from both backends in turn',
    timeoutMs: 120_000,
    async run(note) {
      const ip = (...a: string[]): Promise<string> => must('/usr/sbin/ip', ...a);
      await must('/bin/sh', '-c', 'echo 1 >/proc/sys/net/ipv4/ip_forward; echo 1 >/proc/sys/net/ipv4/vs/conntrack');
      await ip('link', 'add', 'kube-ipvs0', 'type', 'dummy');
      await ip('addr', 'add', '10.96.0.10/32', 'dev', 'kube-ipvs0');
      await ip('netns', 'add', 'pods');
      await ip('netns', 'add', 'client');
      await ip('link', 'add', 'vpods', 'type', 'veth', 'peer', 'name', 'eth0', 'netns', 'pods');
      await ip('link', 'add', 'vclient', 'type', 'veth', 'peer', 'name', 'eth0', 'netns', 'client');
      await ip('addr', 'add', '10.0.0.1/24', 'dev', 'vpods');
      await ip('addr', 'add', '192.168.7.1/24', 'dev', 'vclient');
      await ip('link', 'set', 'vpods', 'up');
      await ip('link', 'set', 'vclient', 'up');
      for (const [ns, addrs, gw] of [
        ['pods', ['10.0.0.2/24', '10.0.0.3/24'], '10.0.0.1'],
        ['client', ['192.168.7.2/24'], '192.168.7.1'],
      ] as const) {
        for (const a of addrs) await ip('-n', ns, 'addr', 'add', a, 'dev', 'eth0');
        await ip('-n', ns, 'link', 'set', 'eth0', 'up');
        await ip('-n', ns, 'link', 'set', 'lo', 'up');
        await ip('-n', ns, 'route', 'add', 'default', 'via', gw);
      }
      const svc: IpvsServiceSpec = {
        family: 'IPv4',
        protocol: 'tcp',
        address: '10.96.0.10',
        port: 80,
        scheduler: 'rr',
      };
      await client.addService(svc);
      await client.addDestination(svc, { address: '10.0.0.2', port: 8080, weight: 1 });
      await client.addDestination(svc, { address: '10.0.0.3', port: 8080, weight: 1 });
      // A reply server in the pods namespace: answers "<local address> <peer address>".
      const server = spawn(
        '/usr/sbin/ip',
        [
          'netns',
          'exec',
          'pods',
          NODE,
          '-e',
          `
        require('node:net').createServer((s) => s.end(s.localAddress + ' ' + s.remoteAddress + '\\n')).listen(8080, '0.0.0.0', () => console.log('listening'));
      `,
        ],
        { stdio: ['ignore', 'pipe', 'inherit'] },
      );
      children.push(server);
      await new Promise<void>((resolve, reject) => {
        const t = setTimeout(() => reject(new Error('reply server did not start')), 30_000);
        server.stdout!.once('data', () => {
          clearTimeout(t);
          resolve();
        });
      });
      const out = await must(
        '/usr/sbin/ip',
        'netns',
        'exec',
        'client',
        NODE,
        '-e',
        `
        const net = require('node:net');
        const once = () => new Promise((res, rej) => { const s = net.connect(80, '10.96.0.10'); let d = ''; s.setTimeout(5000, () => s.destroy(new Error('timeout')));
          s.on('data', (c) => d += c); s.on('end', () => res(d.trim())); s.on('error', rej); });
        (async () => { const r = []; for (let i = 0; i < 6; i++) r.push(await once()); console.log(JSON.stringify(r)); })().catch((e) => { console.error(e); process.exit(1); });
      `,
      );
      const answers = JSON.parse(out) as string[];
      note({ answers });
      const backends = answers.map((a) => a.split(' ')[0]);
      assert.deepEqual(
        new Set(backends),
        new Set(['10.0.0.2', '10.0.0.3']),
        `both backends answer: ${answers.join(', ')}`,
      );
      for (let i = 1; i < backends.length; i++)
        assert.notEqual(backends[i], backends[i - 1], `rr alternates: ${backends.join(', ')}`);
      // No SNAT: the backend sees the client's own address.
      assert.ok(
        answers.every((a) => a.endsWith(' 192.168.7.2')),
        answers.join(', '),
      );
      // The kernel folds its per-CPU counters into what it reports every 2 s (estimation timer).
      let stats: (string | bigint | number)[][] = [];
      for (let i = 0; i < 20; i++) {
        stats = (await client.listDestinations(svc)).map((d) => [
          d.address,
          d.stats.conns,
          d.inactiveConns + d.activeConns,
        ]);
        if (stats.every((s) => s[1] === 3n)) break;
        await new Promise((r) => setTimeout(r, 500));
      }
      note({ answers, destStats: stats.map((s) => s.map(String)) });
      assert.deepEqual(
        stats.map((s) => s[1]),
        [3n, 3n],
      );
      assert.deepEqual(
        stats.map((s) => s[2]),
        [3, 3],
        'each backend has 3 connections (active or in TIME_WAIT)',
      );
      const svcStats = (await client.getService(svc))!.stats;
      assert.equal(svcStats.conns, 6n);
      assert.ok(svcStats.inPkts > 0n && svcStats.outBytes > 0n);
    },
  },
];

export async function teardown(): Promise<void> {
  for (const c of children) c.kill('SIGKILL');
  conn?.close();
}
