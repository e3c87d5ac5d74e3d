// A node that ran upstream kube-proxy in IPVS mode, switched to kube-proxy-ts in nftables mode
// (docs/migrating.md), against Debian's 6.1 kernel inside the QEMU VM (run by run-cases.ts from
// upstream-ipvs-leftovers.test.ts). Upstream's state is made with the tools upstream's state is
// made of: `ip link add kube-ipvs0 type dummy` holding the VIPs, `ipset create` for its KUBE-*
// sets, `ipvsadm` for its virtual servers (real servers at a pod IP that no longer exists),
// iptables-nft-restore for its companion rules (test/fixtures/upstream/kube-proxy-ipvs.rules,
// which keep the sets busy). Then the daemon starts from a manifest directory: the state is
// gone, a real connection to the Service reaches our endpoint, and what is not upstream's
// (a fwmark virtual server, a set, rules in the built-in chains) stays.
//
//   client 192.168.7.2 ── vclient 192.168.7.1 node (daemon) 10.0.0.1 vpods ── pods 10.0.0.2 (TCP 8080 "<local> <peer>")

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DAEMON_V8_OPTIONS } from '../../../src/daemon/v8-options.ts';
import { serviceYAML } from '../../helpers/manifests.ts';
import type { VmCase } from '../run-cases.ts';
import { ip, ipvsadmLines, must, run } from './vm-shell.ts';

const NODE_BIN = process.execPath;
const BIN = new URL('../../../bin/kube-proxy-ts.js', import.meta.url).pathname;
const AGENT = new URL('./ipvs-daemon-agent.mjs', import.meta.url).pathname;
const FIXTURE = new URL('../../fixtures/upstream/kube-proxy-ipvs.rules', import.meta.url).pathname;
const RUN_DIR = process.env.RUN_DIR ?? '/tmp';
const WORK = '/tmp/kpts-upstream-ipvs';
const DAEMON_LOG = join(RUN_DIR, 'daemon.log');
const VIP = '10.96.0.10';
const NODE_IP = '192.168.7.1';
const POD = '10.0.0.2';
const STALE_POD = '10.0.0.99';

const inNode = (cmd: string, ...a: string[]): Promise<string> =>
  must('/usr/sbin/ip', 'netns', 'exec', 'node', cmd, ...a);

/** One TCP connection from the client: the answer ("<local> <peer>") or the error code. */
async function probe(host: string, port: number): Promise<string> {
  const js =
    `const s=require('net').connect(${port},'${host}');let d='';s.setTimeout(3000,()=>{console.log('ETIMEDOUT');process.exit(0)});` +
    `s.on('data',(x)=>d+=x);s.on('end',()=>{console.log(d.trim());process.exit(0)});s.on('error',(e)=>{console.log(e.code);process.exit(0)})`;
  return (await must('/usr/sbin/ip', 'netns', 'exec', 'client', NODE_BIN, '-e', js)).trim();
}

async function until<T>(what: string, check: () => Promise<T | undefined>, ms: number, everyMs = 1000): Promise<T> {
  const end = Date.now() + ms;
  let last: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v !== undefined) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > end)
      throw new Error(`timed out after ${ms} ms waiting for ${what}${last ? `: ${String(last)}` : ''}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

const children: ChildProcess[] = [];
let daemon: ChildProcess | undefined;
const daemonLog = (): string => {
  try {
    return readFileSync(DAEMON_LOG, 'utf8');
  } catch {
    return '';
  }
};

/** The IPVS ipsets upstream creates (a subset: the ones its companion rules match, and one IPv6 set). */
const SETS: readonly string[][] = [
  ['KUBE-CLUSTER-IP', 'hash:ip,port'],
  ['KUBE-LOOP-BACK', 'hash:ip,port,ip'],
  ['KUBE-LOAD-BALANCER', 'hash:ip,port'],
  ['KUBE-IPVS-IPS', 'hash:ip'],
  ['KUBE-NODE-PORT-TCP', 'bitmap:port', 'range', '0-65535'],
  ['KUBE-HEALTH-CHECK-NODE-PORT', 'bitmap:port', 'range', '0-65535'],
  ['KUBE-6-CLUSTER-IP', 'hash:ip,port', 'family', 'inet6'],
];

/** `ipvsadm -Ln` of the node, squeezed, headers dropped, connection counters cut off. */
const ipvsLines = async (): Promise<string[]> =>
  ipvsadmLines(await inNode('/usr/sbin/ipvsadm', '-Ln'), { counters: false });

export const cases: VmCase[] = [
  {
    name: "setup: node, pods and client namespaces, a backend, a manifest directory, and upstream's IPVS state (kube-ipvs0, ipsets, virtual servers, companion rules) with foreign objects among it",
    timeoutMs: 150_000,
    async run(note) {
      for (const ns of ['node', 'pods', 'client']) await ip('netns', 'add', ns);
      for (const [dev, peer, nodeAddr, peerAddr] of [
        ['vpods', 'pods', '10.0.0.1/24', `${POD}/24`],
        ['vclient', 'client', `${NODE_IP}/24`, '192.168.7.2/24'],
      ] as const) {
        await ip('-n', 'node', 'link', 'add', dev, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', peer);
        await ip('-n', 'node', 'addr', 'add', nodeAddr, 'dev', dev);
        await ip('-n', 'node', 'link', 'set', dev, 'up');
        await ip('-n', peer, 'addr', 'add', peerAddr, 'dev', 'eth0');
        await ip('-n', peer, 'link', 'set', 'eth0', 'up');
        await ip('-n', peer, 'link', 'set', 'lo', 'up');
        await ip('-n', peer, 'route', 'add', 'default', 'via', nodeAddr.split('/')[0]!);
      }
      await ip('-n', 'node', 'link', 'set', 'lo', 'up');
      await inNode('/usr/sbin/sysctl', '-qw', 'net.ipv4.ip_forward=1');
      const server = spawn('/usr/sbin/ip', ['netns', 'exec', 'pods', NODE_BIN, AGENT, 'server', POD], {
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      children.push(server);
      await new Promise<void>((resolve, reject) => {
        const t = setTimeout(() => reject(new Error('backend server did not start')), 90_000);
        server.stdout!.once('data', () => {
          clearTimeout(t);
          resolve();
        });
      });
      mkdirSync(join(WORK, 'manifests'), { recursive: true });
      writeFileSync(
        join(WORK, 'manifests', 'web.yaml'),
        serviceYAML({ name: 'web', clusterIP: VIP, port: 80, nodePort: 30080, targetPort: 8080, endpoints: [POD] }),
      );

      // Upstream's IPVS mode, as it leaves a node: its dummy link with the VIPs...
      await inNode('/usr/sbin/ip', 'link', 'add', 'kube-ipvs0', 'type', 'dummy');
      for (const a of [VIP, '10.96.0.11']) await inNode('/usr/sbin/ip', 'addr', 'add', `${a}/32`, 'dev', 'kube-ipvs0');
      // ...its sets, with what they held...
      for (const [name, ...spec] of SETS) await inNode('/usr/sbin/ipset', 'create', name!, ...spec);
      await inNode('/usr/sbin/ipset', 'add', 'KUBE-CLUSTER-IP', `${VIP},tcp:80`);
      await inNode('/usr/sbin/ipset', 'add', 'KUBE-NODE-PORT-TCP', '30080');
      await inNode('/usr/sbin/ipset', 'add', 'KUBE-IPVS-IPS', VIP);
      // ...its virtual servers, sending to a pod that is gone...
      for (const vs of [`${VIP}:80`, `${NODE_IP}:30080`]) {
        await inNode('/usr/sbin/ipvsadm', '-A', '-t', vs, '-s', 'rr');
        await inNode('/usr/sbin/ipvsadm', '-a', '-t', vs, '-r', `${STALE_POD}:8080`, '-m');
      }
      await inNode('/usr/sbin/ipvsadm', '-A', '-u', '10.96.0.11:53', '-s', 'rr');
      // ...and its companion rules, which keep the sets busy.
      const r = await run('/usr/sbin/ip', ['netns', 'exec', 'node', '/usr/sbin/iptables-nft-restore', '--noflush'], {
        input: readFileSync(FIXTURE, 'utf8'),
      });
      assert.equal(r.code, 0, r.stderr);
      // Not upstream's: a fwmark virtual server and a set of someone else.
      await inNode('/usr/sbin/ipvsadm', '-A', '-f', '7', '-s', 'rr');
      await inNode('/usr/sbin/ipset', 'create', 'someone-elses', 'hash:ip');

      const stale = await probe(VIP, 80);
      assert.ok(
        !stale.startsWith(POD),
        `before: upstream's virtual server takes the ClusterIP to a pod that is gone (${stale})`,
      );
      note({ uname: (await must('/bin/uname', '-r')).trim(), before: await ipvsLines(), stale });
    },
  },
  {
    name: "kube-proxy-ts starts in nftables mode: upstream's virtual servers, ipsets, kube-ipvs0 and companion rules are gone; the Service reaches our endpoint; foreign objects stay",
    timeoutMs: 300_000,
    async run(note) {
      const t0 = Date.now();
      const fd = openSync(DAEMON_LOG, 'a');
      const args = [
        '--proxy-mode',
        'nftables',
        '--manifest-dir',
        join(WORK, 'manifests'),
        '--hostname-override',
        'node-a',
        '--cluster-cidr',
        '10.244.0.0/16',
        '--healthz-bind-address',
        '127.0.0.1:10256',
        '--metrics-bind-address',
        '127.0.0.1:10249',
      ];
      daemon = spawn('/usr/sbin/ip', ['netns', 'exec', 'node', NODE_BIN, ...DAEMON_V8_OPTIONS, BIN, ...args], {
        stdio: ['ignore', fd, fd],
      });
      closeSync(fd);
      children.push(daemon);
      const answer = await until(
        'the ClusterIP to answer from our endpoint',
        async () => {
          if (daemon!.exitCode !== null) throw new Error(`the daemon exited ${daemon!.exitCode}`);
          const a = await probe(VIP, 80);
          return a.startsWith(`${POD} `) ? a : undefined;
        },
        240_000,
        2000,
      ).catch((e: unknown) => {
        throw new Error(`${String(e)}\n--- daemon log ---\n${daemonLog().slice(-4000)}`);
      });
      const servingMs = Date.now() - t0;
      assert.ok((await probe(NODE_IP, 30080)).startsWith(`${POD} `), 'the NodePort reaches our endpoint too');

      assert.deepEqual(await ipvsLines(), ['FWM 7 rr'], 'only the foreign fwmark virtual server is left');
      assert.deepEqual((await inNode('/usr/sbin/ipset', 'list', '-n')).trim().split('\n'), ['someone-elses']);
      const link = await run('/usr/sbin/ip', ['netns', 'exec', 'node', '/usr/sbin/ip', 'link', 'show', 'kube-ipvs0']);
      assert.notEqual(link.code, 0, 'kube-ipvs0 is gone');
      const saved = (await inNode('/usr/sbin/iptables-nft-save')).split('\n');
      assert.deepEqual(
        saved.filter((l) => l.includes('KUBE-')),
        [],
        'no KUBE-* chain or rule is left',
      );
      assert.deepEqual(
        saved.filter((l) => l.startsWith('-A ')),
        [
          '-A FORWARD -p tcp -m tcp --dport 5555 -m comment --comment "foreign: not kube-proxy rules" -j ACCEPT',
          '-A PREROUTING -p tcp -m tcp --dport 7777 -m comment --comment "foreign: not kube-proxy rules" -j ACCEPT',
        ],
        'the foreign rules stay (iptables-nft-save prints filter before nat)',
      );
      const log = daemonLog();
      assert.match(log, /Removed upstream kube-proxy IPVS virtual servers count=3/);
      const sets =
        'KUBE-LOOP-BACK,KUBE-CLUSTER-IP,KUBE-6-CLUSTER-IP,KUBE-LOAD-BALANCER,KUBE-NODE-PORT-TCP,KUBE-HEALTH-CHECK-NODE-PORT,KUBE-IPVS-IPS';
      assert.ok(log.includes(`Removed upstream kube-proxy ipsets sets=${sets}\n`), log);
      assert.match(log, /Removed upstream kube-proxy dummy link link=kube-ipvs0/);
      assert.doesNotMatch(log, /Could not remove/);
      note({ servingMs, answer });
    },
  },
];

export async function teardown(): Promise<void> {
  daemon?.kill('SIGTERM');
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
}
