// The real daemon taking an upstream kube-proxy command line: flags upstream accepts that
// have no meaning here start it anyway (one line each), --init-only does the privileged
// set-up and exits 0 without programming anything, and a --config file changed on disk
// makes it exit 1 (for systemd to restart it) with its rules left in place.
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { ECHO, makeCluster, podIP } from '../helpers/cluster.ts';
import { pollUntil, runDaemon, spawnDaemon } from '../helpers/daemon-process.ts';
import { serviceYAML } from '../helpers/manifests.ts';

const VIP = '10.96.0.40';
const UPSTREAM_ONLY = [
  '--vmodule=proxier*=4',
  '--log-flush-frequency=5s',
  '--log-text-split-stream',
  '--boot-id-file=/proc/sys/kernel/random/boot_id',
  '--machine-id-file=/etc/machine-id',
  '--kube-api-content-type=application/vnd.kubernetes.protobuf',
  '--oom-score-adj=-999',
];

test.serial(
  '--init-only with upstream-only flags: exit 0, one line per flag without effect, nothing programmed',
  async (t) => {
    const c = await makeCluster(t, 'dinit', 1);
    const r = await runDaemon(c.node, ['--init-only', '--hostname-override', 'node-a', ...UPSTREAM_ONLY]);
    t.is(r.code, 0, r.stderr);
    const log = r.stdout + r.stderr;
    for (const f of ['vmodule', 'log-flush-frequency', 'log-text-split-stream', 'boot-id-file', 'machine-id-file']) {
      t.is(
        log.split('\n').filter((l) => l.includes(`--${f} is accepted for compatibility and has no effect`)).length,
        1,
        f,
      );
    }
    t.regex(log, /Initialization done/);
    t.not((await c.node.exec('nft', ['list', 'table', 'ip', 'kube-proxy-ts'])).code, 0, 'no rules programmed');
  },
);

test.serial('a --config file changed on disk: the daemon says why and exits 1; its rules stay', async (t) => {
  const c = await makeCluster(t, 'dcfg', 1);
  const dir = await mkdtemp(join(tmpdir(), 'kpts-cfg-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const manifests = join(dir, 'manifests');
  await mkdir(manifests);
  await writeFile(
    join(manifests, 'web.yaml'),
    serviceYAML({ name: 'web', clusterIP: VIP, port: 80, targetPort: 8080, endpoints: [podIP(0)] }),
  );
  const cfg = join(dir, 'config.yaml');
  const text = (minSync: string) => `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
healthzBindAddress: ""
metricsBindAddress: ""
nftables: {minSyncPeriod: ${minSync}}
kubeProxyTS: {manifestDir: ${manifests}}
`;
  await writeFile(cfg, text('100ms'));
  const d = spawnDaemon(c.node, ['--config', cfg, '--hostname-override', 'node-a']);
  t.teardown(() => d.kill());
  await pollUntil(
    'the ClusterIP to answer',
    async () => ((await c.clientAgent.call<string>(ECHO, 'tcp', VIP, 80)).startsWith('pod1 ') ? true : undefined),
    20_000,
  ).catch((e: unknown) => {
    t.log(d.log());
    throw e;
  });
  await writeFile(cfg, text('200ms'));
  const exit = await d.exited;
  t.is(exit.code, 1, d.log());
  t.regex(d.log(), /The configuration file changed/);
  t.true(
    (await c.clientAgent.call<string>(ECHO, 'tcp', VIP, 80)).startsWith('pod1 '),
    'traffic still flows: the rules stay',
  );
});
