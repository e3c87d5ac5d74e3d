// Event-driven drift repair (issue 18): the real daemon in the node namespace of a namespace
// cluster hears the kernel's nf_tables announcements, and a change to its table that it did
// not make (`nft delete table`, `nft flush ruleset`, a flushed map, a hand-added rule) is
// repaired at once. The periodic sync is 10 minutes here, so only the event can repair it.
// Each wait is a bounded loop of real connections; the measured repair times are logged.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import test from 'ava';
import { ECHO, makeCluster, podIP } from '../helpers/cluster.ts';
import { pollUntil } from '../helpers/daemon-process.ts';
import { serviceYAML } from '../helpers/manifests.ts';
import { nodeDaemonArgs, startDaemon, tempDir } from '../helpers/standalone.ts';

const VIP = '10.96.0.10';

test.serial('drift repair: our table deleted, the ruleset flushed, a map flushed, a rule added by hand', async (t) => {
  const c = await makeCluster(t, 'drift', 1);
  const dir = await tempDir(t, 'drift');
  await writeFile(
    join(dir, 'web.yaml'),
    serviceYAML({ name: 'web', clusterIP: VIP, port: 80, targetPort: 8080, endpoints: [podIP(0)] }),
  );
  const d = startDaemon(
    t,
    c.node,
    nodeDaemonArgs('nftables', { manifestDir: dir }, [
      '--sync-period',
      '10m',
      '--min-sync-period',
      '100ms',
      '--v',
      '2',
    ]),
  );
  // A short connect time-out: an unanswered probe must not hide how soon the repair landed.
  const answers = async (): Promise<true | undefined> =>
    (await c.clientAgent.call<string>(ECHO, 'tcp', VIP, 80, 100)).startsWith('pod1 ') ? true : undefined;
  await pollUntil('the ClusterIP to answer', answers, 20_000).catch((e: unknown) => {
    t.log(d.log());
    throw e;
  });

  /** The daemon's own figure: from the repair request (the first foreign change heard) to the end of the next sync. */
  const daemonRepairMs = (logFrom: number): number | undefined => {
    const lines = d.log().slice(logFrom).split('\n');
    const at = (l: string | undefined): number => Date.parse(l?.slice(0, 24) ?? '');
    const seen = lines.findIndex((l) => l.includes('Repair sync requested'));
    const synced = lines.findIndex((l, i) => i > seen && l.includes('Synced proxy rules'));
    return seen < 0 || synced < 0 ? undefined : at(lines[synced]) - at(lines[seen]);
  };
  const tamper = async (what: string, ...args: string[]): Promise<void> => {
    const logFrom = d.log().length;
    const start = Date.now();
    const r = await c.node.exec('nft', args);
    t.is(r.code, 0, `${what}: ${r.stderr}`);
    await pollUntil(`the ClusterIP to answer again after ${what}`, answers, 10_000, 20).catch((e: unknown) => {
      t.log(d.log());
      throw e;
    });
    const ms = Date.now() - start;
    t.log(
      `${what}: the ClusterIP answers again ${ms} ms after nft was started (probes time out after 100 ms); daemon: change seen -> synced in ${daemonRepairMs(logFrom)} ms`,
    );
  };

  await tamper('nft delete table ip kube-proxy-ts', 'delete', 'table', 'ip', 'kube-proxy-ts');
  await tamper('nft flush ruleset', 'flush', 'ruleset');
  await tamper('nft flush map ip kube-proxy-ts service-ips', 'flush', 'map', 'ip', 'kube-proxy-ts', 'service-ips');

  // A rule added by hand that drops the Service's traffic: the repair rewrites the chain.
  const handStart = Date.now();
  const hand = await c.node.exec('nft', [
    'insert',
    'rule',
    'ip',
    'kube-proxy-ts',
    'nat-prerouting',
    'ip',
    'daddr',
    VIP,
    'drop',
  ]);
  t.is(hand.code, 0, hand.stderr);
  await pollUntil(
    'the hand-added rule to be gone',
    async () => {
      const r = await c.node.exec('nft', ['list', 'chain', 'ip', 'kube-proxy-ts', 'nat-prerouting']);
      return r.code === 0 && !r.stdout.includes(`${VIP} drop`) ? true : undefined;
    },
    10_000,
    20,
  );
  t.log(`a rule added by hand: gone again ${Date.now() - handStart} ms after nft was started`);
  t.truthy(await answers());
  t.regex(d.log(), /changed by someone else; repairing now/);
});
