// --cleanup on a large node where both of upstream's iptables-nft modes left state: the
// iptables mode's ruleset for 5,000 Services × 10 endpoints (55,000 chains) and the IPVS mode's
// companion rules with the ipsets they match. One run removes all of it (no set left busy by a
// rule that still references it), and a second finds nothing; foreign rules stay.
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { performance } from 'node:perf_hooks';
import { Netns } from '../helpers/netns.ts';
import { runDaemon } from '../helpers/daemon-process.ts';
import { restoreTexts } from '../bench/iptables-agent.ts';
import { readFile } from 'node:fs/promises';

const IPSETS: [string, string][] = [
  ['KUBE-CLUSTER-IP', 'hash:ip,port'],
  ['KUBE-LOOP-BACK', 'hash:ip,port,ip'],
  ['KUBE-NODE-PORT-TCP', 'bitmap:port range 0-65535'],
  ['KUBE-LOAD-BALANCER', 'hash:ip,port'],
  ['KUBE-IPVS-IPS', 'hash:ip'],
  ['KUBE-HEALTH-CHECK-NODE-PORT', 'bitmap:port range 0-65535'],
];

async function load(ns: Netns, tool: string, args: string[], input: string): Promise<void> {
  const r = await ns.exec(tool, args, { input, timeoutMs: 300_000 });
  if (r.code !== 0) throw new Error(`${tool} ${args.join(' ')}: ${r.stderr.slice(0, 500)}`);
}

const kubeChains = (save: string): string[] =>
  save.split('\n').filter((l) => /^:KUBE-/.test(l) && !/^:KUBE-(FIREWALL|KUBELET-CANARY|MARK-DROP) /.test(l));

async function cleanupBoth(t: ExecutionContext, SERVICES: number): Promise<void> {
  t.timeout(600_000);
  const ns = await Netns.create('kpts-clscale');
  try {
    const text = restoreTexts(SERVICES, 0).full;
    await load(ns, 'iptables-nft-restore', [], text);
    // The IPVS mode's rules into the same tables: chains the iptables mode already has are
    // appended to, not declared again (a declaration would flush them).
    const have = new Set(kubeChains(text).map((l) => l.split(' ')[0]));
    const ipvs = (await readFile(new URL('../fixtures/upstream/kube-proxy-ipvs.rules', import.meta.url), 'utf8'))
      .split('\n')
      .filter((l) => !have.has(l.split(' ')[0]!))
      .join('\n');
    for (const [name, type] of IPSETS) await ns.run('ipset', 'create', name, ...type.split(' '));
    await load(ns, 'iptables-nft-restore', ['--noflush'], ipvs);
    // (iptables-nft-save of 160,000 rules takes minutes: the kernel's whole-table dump.)
    const chains = await ns.exec('nft', ['list', 'chains', 'ip'], { timeoutMs: 300_000 });
    t.is(chains.code, 0, chains.stderr);
    t.is(chains.stdout.split('\n').filter((l) => /chain KUBE-SEP-/.test(l)).length, SERVICES * 10);
    t.regex(
      (await ns.run('iptables-nft', '-t', 'nat', '-S', 'KUBE-SERVICES')).toString(),
      /--match-set KUBE-CLUSTER-IP/,
    );

    const t0 = performance.now();
    const first = await runDaemon(ns, ['--cleanup'], 540_000);
    t.log(`--cleanup of ${SERVICES} Services + IPVS leftovers: ${Math.round(performance.now() - t0)} ms`);
    t.is(first.code, 0, first.stderr.slice(-2000));
    t.notRegex(first.stderr + first.stdout, /busy|EBUSY/i);
    const after = await ns.run('iptables-nft-save');
    t.deepEqual(kubeChains(after), []);
    t.deepEqual(
      (await ns.run('ipset', 'list', '-n')).split('\n').filter((l) => l.startsWith('KUBE-')),
      [],
    );
    // The fixture's foreign rules stay.
    t.regex(after, /--dport 7777 .*foreign: not kube-proxy rules/);
    t.regex(after, /--dport 5555 .*foreign: not kube-proxy rules/);
    const second = await runDaemon(ns, ['--cleanup'], 60_000);
    t.is(second.code, 0, second.stderr.slice(-2000));
  } finally {
    await ns.destroy();
  }
}

test('--cleanup removes 100 Services of iptables-mode state and IPVS-mode rules with their ipsets in one run', (t) =>
  cleanupBoth(t, 100));
test('--cleanup removes 5,000 Services of iptables-mode state and IPVS-mode rules with their ipsets in one run', (t) =>
  cleanupBoth(t, 5_000));
