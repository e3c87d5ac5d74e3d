// `kube-proxy-ts trace` checked against real packets for every policy combination the kernel
// tests cover, in the nftables, iptables and userspace modes (trace-policy-cases.ts; IPVS
// runs the same cases under QEMU: test/vm/ipvs-trace.test.ts): the daemon (bin/kube-proxy-ts.js,
// fed from a manifest directory) predicts, then the same packet is sent and must land as
// predicted. ClusterIP, NodePort and no endpoints from the client and a pod through the CLI
// are in explain-trace.test.ts; here: externalIP, LB with source ranges, eTP/iTP Local,
// affinity, terminating endpoints, detect-local, an unexposed port, an unallocated service
// IP, and masquerade-all.
import { join } from 'node:path';
import test from 'ava';
import type { ExecutionContext } from 'ava';
import type { ProxyMode } from '../../src/proxier/types.ts';
import { ECHO, makeCluster, podIP } from '../helpers/cluster.ts';
import type { Cluster } from '../helpers/cluster.ts';
import { pollUntil } from '../helpers/daemon-process.ts';
import { writeServiceManifests } from '../helpers/manifests.ts';
import { nodeDaemonArgs, startDaemon, tempDir } from '../helpers/standalone.ts';
import { ep, svc } from '../unit/model/helpers.ts';
import { gatewayAnswers, POLICY_SERVICES, runPolicyCases, traceOver } from './trace-policy-cases.ts';
import type { PolicyEnv } from './trace-policy-cases.ts';

async function startProgrammed(
  t: ExecutionContext,
  c: Cluster,
  mode: ProxyMode,
  dir: string,
  extra: string[] = [],
): Promise<PolicyEnv> {
  const sock = join(dir, 'control.sock');
  const d = startDaemon(t, c.node, nodeDaemonArgs(mode, { manifestDir: dir }, ['--control-socket', sock, ...extra]));
  try {
    // Programmed once the first Service answers through its cluster IP.
    await pollUntil(
      'the daemon to program the Services',
      async () =>
        (await c.clientAgent.call<string>(ECHO, 'tcp', '10.96.0.1', 80)).startsWith('pod') ? true : undefined,
      20_000,
    );
  } catch (e) {
    t.log(d.log());
    throw e;
  }
  return { c, trace: traceOver(sock) };
}

for (const mode of ['nftables', 'iptables', 'userspace'] as const) {
  test.serial(`${mode}: trace predicts what real packets meet, policy by policy`, async (t) => {
    const c = await makeCluster(t, `xtp${mode[0]}`, 3);
    const dir = await tempDir(t, 'trace');
    await writeServiceManifests(dir, POLICY_SERVICES);
    await gatewayAnswers(c);
    await runPolicyCases(t, await startProgrammed(t, c, mode, dir), mode);
  });
}

for (const mode of ['nftables', 'iptables'] as const) {
  test.serial(`${mode}: masquerade-all: trace says masqueraded from a pod too, and it is`, async (t) => {
    const c = await makeCluster(t, `xtm${mode[0]}`, 2);
    const dir = await tempDir(t, 'trace-ma');
    await writeServiceManifests(dir, [
      {
        svc: svc('web', {
          clusterIP: '10.96.0.1',
          ports: [{ name: 'http', protocol: 'TCP', port: 80, targetPort: 8080 }],
        }),
        eps: [ep(podIP(0), { node: 'node-a' }), ep(podIP(1), { node: 'node-b' })],
      },
    ]);
    const d = await startProgrammed(t, c, mode, dir, ['--masquerade-all']);
    const p = await d.trace(podIP(1), '10.96.0.1:80');
    t.is(p.verdict, 'dnat');
    t.true(p.masquerade!.yes);
    t.regex(p.masquerade!.why, /masquerade-all|masqueradeAll/i);
    for (const a of await c.podAgents[1]!.call<string[]>(ECHO, 'tcpMany', '10.96.0.1', 80, 8))
      t.not(a.split(' ')[1], podIP(1), `${mode}: ${a} masqueraded as trace said`);
  });
}
