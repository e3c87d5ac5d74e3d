// `kube-proxy-ts trace` against real packets in IPVS mode, on Debian's 6.1 kernel inside the
// QEMU VM (run by run-cases.ts from ipvs-trace.test.ts): the same cluster of namespaces, the
// same Services and the same cases as the other modes' kernel test
// (test/kernel/trace-policy-cases.ts), with the real daemon (bin/kube-proxy-ts.js,
// `--proxy-mode ipvs`, a manifest directory) in the node namespace. One boot, one daemon start
// (tens of seconds under emulation), then every case.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ECHO, makeCluster } from '../../helpers/cluster.ts';
import type { Cluster } from '../../helpers/cluster.ts';
import { pollUntil, spawnDaemon } from '../../helpers/daemon-process.ts';
import type { DaemonProcess } from '../../helpers/daemon-process.ts';
import { writeServiceManifests } from '../../helpers/manifests.ts';
import { nodeDaemonArgs } from '../../helpers/standalone.ts';
import { gatewayAnswers, POLICY_SERVICES, runPolicyCases, traceOver } from '../../kernel/trace-policy-cases.ts';
import type { Check, PolicyEnv } from '../../kernel/trace-policy-cases.ts';
import type { VmCase } from '../run-cases.ts';

const teardowns: (() => Promise<void>)[] = [];
let env: PolicyEnv | undefined;
let daemon: DaemonProcess | undefined;

const check: Check = {
  is: (a, b, m) => assert.strictEqual(a, b, m),
  regex: (s, re, m) => assert.match(s, re, m),
  true: (v, m) => assert.strictEqual(v, true, m),
  false: (v, m) => assert.strictEqual(v, false, m),
  deepEqual: (a, b, m) => assert.deepStrictEqual(a, b, m),
};

async function start(note: (v: unknown) => void): Promise<void> {
  const began = performance.now();
  const c: Cluster = await makeCluster({ teardown: (f) => void teardowns.push(f) }, 'ipvstr', 3);
  const dir = await mkdtemp(join(tmpdir(), 'kpts-ipvs-trace-'));
  teardowns.push(() => rm(dir, { recursive: true, force: true }));
  await writeServiceManifests(dir, POLICY_SERVICES);
  await gatewayAnswers(c);
  const cluster = Math.round(performance.now() - began);
  const sock = join(dir, 'control.sock');
  daemon = spawnDaemon(c.node, nodeDaemonArgs('ipvs', { manifestDir: dir }, ['--control-socket', sock]));
  const d = daemon;
  teardowns.unshift(() => d.kill());
  try {
    await pollUntil(
      'the daemon to program the Services',
      async () =>
        (await c.clientAgent.call<string>(ECHO, 'tcp', '10.96.0.1', 80)).startsWith('pod') ? true : undefined,
      360_000,
      500,
    );
  } catch (e) {
    throw new Error(`${String(e)}\ndaemon log:\n${d.log().slice(-4000)}`);
  }
  note({ clusterMs: cluster, daemonMs: Math.round(performance.now() - began) - cluster });
  env = { c, trace: traceOver(sock) };
}

export const cases: VmCase[] = [
  { name: 'the cluster and the IPVS daemon start', timeoutMs: 400_000, run: start },
  {
    name: 'ipvs: trace predicts what real packets meet, policy by policy',
    timeoutMs: 150_000,
    run: async () => {
      if (!env) throw new Error('no daemon (the start failed)');
      try {
        await runPolicyCases(check, env, 'ipvs');
      } catch (e) {
        throw new Error(`${String(e)}\ndaemon log:\n${daemon?.log().slice(-3000) ?? ''}`);
      }
    },
  },
];

export async function teardown(): Promise<void> {
  for (const f of teardowns) await f().catch(() => undefined);
}
