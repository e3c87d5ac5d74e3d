// Health checks cannot be locked out: the real daemon in a namespace cluster, an attacker in a
// pod namespace holding 1,000 connections to a health port (looping keep-alive clients, then
// half-open ones that never send a byte and reconnect when closed), and health checks made as
// the kubelet (from the node) and a load balancer (from outside) make them, a fresh connection
// each; the same on a Service health-check node port and on the metrics port (bound to every
// address here; /metrics looped). Every check is answered; the share answered within 1 s and
// the latencies are logged (BENCHMARKS.md, Reliability). Upstream's default: healthz on
// 0.0.0.0:10256.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import test from 'ava';
import { makeCluster, NODE_IP, podIP } from '../helpers/cluster.ts';
import { pollUntil } from '../helpers/daemon-process.ts';
import { nodeDaemonArgs, startDaemon, tempDir } from '../helpers/standalone.ts';
import type { ProbeRun } from './scenarios/health-probe.ts';

const AGENT = new URL('./daemon-agent.ts', import.meta.url).href;
const FLOOD = new URL('./scenarios/http-flood.ts', import.meta.url).href;
const HALF_OPEN = new URL('./scenarios/half-open.ts', import.meta.url).href;
const PROBE = new URL('./scenarios/health-probe.ts', import.meta.url).href;
const ATTACKERS = 1000;
const PROBES = Number(process.env['HEALTH_FLOOD_PROBES'] ?? 30);
const HC_PORT = 30100;

const LOCAL_LB = `apiVersion: v1
kind: Service
metadata: {name: lb, namespace: default}
spec:
  type: LoadBalancer
  clusterIP: 10.96.0.20
  externalTrafficPolicy: Local
  healthCheckNodePort: ${HC_PORT}
  ports: [{name: http, protocol: TCP, port: 80, targetPort: 8080, nodePort: 30080}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: lb-1, namespace: default, labels: {kubernetes.io/service-name: lb}}
addressType: IPv4
ports: [{name: http, protocol: TCP, port: 8080}]
endpoints: [{addresses: ["${podIP(0)}"], conditions: {ready: true}, nodeName: node-a}]
`;

test.serial('1,000 looping and 1,000 half-open attacker connections: every health check is answered', async (t) => {
  t.timeout(240_000);
  const c = await makeCluster(t, 'hflood', 1);
  const dir = await tempDir(t, 'hflood');
  await writeFile(join(dir, 'lb.yaml'), LOCAL_LB);
  const d = startDaemon(
    t,
    c.node,
    nodeDaemonArgs('nftables', { manifestDir: dir }, [], { healthz: '0.0.0.0:10256', metrics: '0.0.0.0:10249' }),
  );
  const healthz = `http://${NODE_IP}:10256/healthz`;
  const livez = `http://${NODE_IP}:10256/livez`;
  const serviceHealth = `http://${NODE_IP}:${HC_PORT}/`;
  const metricsHealthz = `http://${NODE_IP}:10249/healthz`;
  await pollUntil(
    'the Service health check to answer 200',
    async () => {
      const r = await c.clientAgent.call<{ status: number }>(AGENT, 'httpGet', serviceHealth).catch(() => undefined);
      return r?.status === 200 ? true : undefined;
    },
    90_000,
  ).catch((e: unknown) => {
    t.log(d.log().slice(-5000));
    throw e;
  });
  const attacker = c.podAgents[0]!;
  const kubelet = c.nodeAgent;
  const balancer = c.clientAgent;
  const rows: string[] = [];
  const check = async (phase: string, runs: Promise<ProbeRun>[]): Promise<void> => {
    for (const r of await Promise.all(runs)) {
      const q = (p: number) => r.ms[Math.min(r.ms.length - 1, Math.floor(p * r.ms.length))] ?? -1;
      rows.push(
        `${phase}: ${r.url} ${r.ok}/${PROBES} answered, ${r.within1s} within 1 s, ` +
          `median ${q(0.5)} ms, p99 ${q(0.99)} ms, max ${r.ms.at(-1) ?? -1} ms`,
      );
      t.is(r.ok, PROBES, `${phase}: every check of ${r.url} answered`);
    }
  };
  // One target at a time, the kubelet's and a load balancer's checks in turn (one prober each).
  const probe = (agent: typeof kubelet, url: string) => agent.call<ProbeRun>(PROBE, 'probeRun', url, PROBES);

  const targets = [
    {
      target: 'health port',
      port: 10256,
      floodURL: healthz,
      checks: () => [probe(kubelet, healthz), probe(balancer, livez)],
    },
    {
      target: 'Service health-check port',
      port: HC_PORT,
      floodURL: serviceHealth,
      checks: () => [probe(balancer, serviceHealth), probe(kubelet, healthz)],
    },
    {
      target: 'metrics port',
      port: 10249,
      floodURL: `http://${NODE_IP}:10249/metrics`,
      checks: () => [probe(kubelet, metricsHealthz), probe(balancer, healthz)],
    },
  ];
  for (const { target, port, floodURL, checks } of targets) {
    await attacker.call(FLOOD, 'startFlood', floodURL, ATTACKERS);
    t.teardown(() => attacker.call(FLOOD, 'stopFlood').then(() => undefined));
    await pollUntil(
      'the flood to be answered',
      async () => ((await attacker.call<{ ok: number }>(FLOOD, 'floodCount')).ok >= 500 ? true : undefined),
      60_000,
    );
    const phase = `${ATTACKERS} looping clients on the ${target}`;
    await check(phase, checks());
    const flood = await attacker.call<{ ok: number; failed: number }>(FLOOD, 'stopFlood');
    rows.push(`${phase}: the flood got ${flood.ok} answers (${flood.failed} cut or refused)`);
    t.true(flood.ok > 0);

    await attacker.call(HALF_OPEN, 'startHalfOpen', NODE_IP, port, ATTACKERS);
    t.teardown(() => attacker.call(HALF_OPEN, 'stopHalfOpen').then(() => undefined));
    await pollUntil(
      'the half-open connections to be established',
      async () =>
        (await attacker.call<{ established: number }>(HALF_OPEN, 'halfOpenCount')).established >= ATTACKERS
          ? true
          : undefined,
      60_000,
    );
    const half = `${ATTACKERS} half-open connections to the ${target}`;
    await check(half, checks());
    const held = await attacker.call<{ established: number; closedByServer: number }>(HALF_OPEN, 'stopHalfOpen');
    rows.push(`${half}: ${held.established} established, ${held.closedByServer} closed by the daemon`);
  }
  t.log(rows.join('\n'));
  t.regex(d.log(), /Serving healthz/);
});
