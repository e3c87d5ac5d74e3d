// Durations past Node's timer limit through the real daemon: `--sync-period 600h` (which
// upstream takes) starts with one warning line and syncs once, not every millisecond (the
// issue counted 2,333 full syncs in 12 s at 77 % of a core); `--sync-period 0` and
// `--udp-timeout 0` are refused in one line, as --help says they must be greater than 0.
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import test from 'ava';
import { ECHO, makeCluster, podIP } from '../helpers/cluster.ts';
import { pollUntil, runDaemon } from '../helpers/daemon-process.ts';
import { serviceYAML } from '../helpers/manifests.ts';
import { nodeDaemonArgs, startDaemon, tempDir } from '../helpers/standalone.ts';

const AGENT = new URL('./daemon-agent.ts', import.meta.url).href;

/** The process's user + system CPU time in clock ticks (fields 14 and 15 of /proc/<pid>/stat). */
async function cpuTicks(pid: number): Promise<number> {
  const f = (await readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1]!.split(' ');
  return Number(f[11]) + Number(f[12]);
}

test.serial('--sync-period 600h: one warning, one sync, an idle daemon; 0 is refused', async (t) => {
  t.timeout(180_000);
  const c = await makeCluster(t, 'dur', 1);
  const dir = await tempDir(t, 'dur');
  await writeFile(
    join(dir, 'web.yaml'),
    serviceYAML({ name: 'web', clusterIP: '10.96.0.10', port: 80, targetPort: 8080, endpoints: [podIP(0)] }),
  );
  for (const bad of [
    ['--sync-period', '0'],
    ['--proxy-mode', 'userspace', '--udp-timeout', '0'],
  ]) {
    const r = await runDaemon(c.node, bad);
    t.is(r.code, 2, r.stderr);
    t.regex(
      r.stderr,
      /^kube-proxy-ts: invalid configuration from the command line: \S+ \(from --[a-z-]+\): "0s" must be greater than 0\n$/,
    );
  }

  const d = startDaemon(t, c.node, nodeDaemonArgs('nftables', { manifestDir: dir }, ['--sync-period', '600h']));
  await pollUntil(
    'the ClusterIP to answer',
    async () =>
      (await c.clientAgent.call<string>(ECHO, 'tcp', '10.96.0.10', 80, 200)).startsWith('pod') ? true : undefined,
    90_000,
  ).catch((e: unknown) => {
    t.log(d.log());
    throw e;
  });
  const warnings = d
    .log()
    .split('\n')
    .filter((l) => l.includes('longer than the longest timer'));
  t.is(warnings.length, 1, d.log());
  t.regex(warnings[0]!, /nftables\.syncPeriod \(from --sync-period\): "600h0m0s" is longer .* using "596h31m23\.647s"/);

  const cpu0 = await cpuTicks(d.pid);
  await new Promise((resolve) => setTimeout(resolve, 3000)); // what a timer loop would fill with syncs
  const cpu = (await cpuTicks(d.pid)) - cpu0;
  const metrics = await c.nodeAgent.call<{ body: string }>(AGENT, 'httpGet', 'http://127.0.0.1:10249/metrics');
  const syncs = Number(
    /kubeproxy_sync_proxy_rules_duration_seconds_count\{ip_family="IPv4"\} (\d+)/.exec(metrics.body)?.[1],
  );
  t.log(`${syncs} sync(s); ${cpu} CPU ticks in the 3 s after`);
  t.true(syncs >= 1 && syncs <= 2, `${syncs} syncs`);
});
