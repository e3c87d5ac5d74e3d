// Runs inside throwaway namespaces (netns agents) for the end-to-end benchmark:
//   - in the node namespace: the test API server (test/helpers/fake-apiserver.ts) holding N
//     Services × E endpoints, and the writes the benchmark times (new Service, endpoint move,
//     churn); the daemon under test is a separate process in the same namespace;
//   - in the client namespace: TCP connects repeated until a Service answers as expected.
// Times are wall-clock milliseconds with sub-millisecond precision (timeOrigin + now), so that
// a write in one process and an answer in another compare.
import { performance } from 'node:perf_hooks';
import type { KObject } from '../helpers/fake-apiserver.ts';
import { FakeApiServer } from '../helpers/fake-apiserver.ts';
import { tcp } from '../kernel/scenarios/echo.ts';

export const NODE_NAME = 'node-a';
export const SERVICE_PORT = 80;

let server: FakeApiServer | undefined;
let size = 0;
/** Endpoints per Service as seeded: churned slices keep that many. */
let perService = 10;
let podAddrs: string[][] = [];
let churnRng = 1;

const wallNow = (): number => performance.timeOrigin + performance.now();

/** 10.96.0.0/12: enough ClusterIPs for 50,000 Services and more. */
export function clusterIP(i: number): string {
  const n = (10 << 24) + (96 << 16) + 10 + i;
  return [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');
}

/** Endpoints of Services nobody probes: unique addresses in 10.128.0.0/9 (not routed; never contacted). */
function farAddrs(i: number, per: number, salt = 0): string[] {
  const out: string[] = [];
  for (let j = 0; j < per; j++) {
    const n = (10 << 24) + (128 << 16) + ((i * per + j + salt * 7919) % (1 << 23));
    out.push([n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.'));
  }
  return out;
}

function service(i: number): KObject {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: `svc-${i}`, namespace: `ns-${i % 50}`, labels: { app: `app-${i}`, tier: 'bench' } },
    spec: {
      type: 'ClusterIP',
      clusterIP: clusterIP(i),
      clusterIPs: [clusterIP(i)],
      ipFamilies: ['IPv4'],
      ipFamilyPolicy: 'SingleStack',
      selector: { app: `app-${i}` },
      sessionAffinity: 'None',
      internalTrafficPolicy: 'Cluster',
      ports: [{ name: 'http', protocol: 'TCP', port: SERVICE_PORT, targetPort: 8080 }],
    },
    status: { loadBalancer: {} },
  };
}

/** `trigger`: the write's time, as the EndpointSlice controller annotates it (network-programming latency). */
function slice(i: number, addrs: readonly string[], trigger?: number): KObject {
  return {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: {
      name: `svc-${i}-abcde`,
      namespace: `ns-${i % 50}`,
      ...(trigger !== undefined
        ? { annotations: { 'endpoints.kubernetes.io/last-change-trigger-time': new Date(trigger).toISOString() } }
        : {}),
      labels: {
        'kubernetes.io/service-name': `svc-${i}`,
        'endpointslice.kubernetes.io/managed-by': 'endpointslice-controller.k8s.io',
      },
      ownerReferences: [
        {
          apiVersion: 'v1',
          kind: 'Service',
          name: `svc-${i}`,
          uid: `00000000-0000-0000-0000-${String(i).padStart(12, '0')}`,
          controller: true,
          blockOwnerDeletion: true,
        },
      ],
    },
    addressType: 'IPv4',
    endpoints: addrs.map((a, j) => ({
      addresses: [a],
      conditions: { ready: true, serving: true, terminating: false },
      nodeName: NODE_NAME,
      targetRef: { kind: 'Pod', namespace: `ns-${i % 50}`, name: `app-${i}-pod-${j}`, uid: `pod-uid-${i}-${j}` },
    })),
    ports: [{ name: 'http', protocol: 'TCP', port: 8080 }],
  };
}

/**
 * Starts the test API server with `n` Services × `per` endpoints and this node. Services 0
 * and n-1 (the ones probed) have their endpoints on pod 0 (`pods[0]`, one address each); the
 * rest point at unique unrouted addresses.
 */
export async function startApi(n: number, per: number, pods: string[][]): Promise<{ url: string; seedMs: number }> {
  const t0 = performance.now();
  server = await FakeApiServer.start({ host: '127.0.0.1' });
  size = n;
  perService = per;
  podAddrs = pods;
  server.create({
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name: NODE_NAME, labels: { 'kubernetes.io/hostname': NODE_NAME } },
    spec: { podCIDR: '10.244.0.0/24', podCIDRs: ['10.244.0.0/24'] },
    status: {
      addresses: [
        { type: 'InternalIP', address: '10.1.0.1' },
        { type: 'Hostname', address: NODE_NAME },
      ],
    },
  });
  for (let i = 0; i < n; i++) {
    server.create(service(i));
    server.create(slice(i, i === 0 || i === n - 1 ? pods[0]!.slice(0, per) : farAddrs(i, per)));
  }
  return { url: server.url, seedMs: performance.now() - t0 };
}

/**
 * The server's own share of a cold start: every page of Services and EndpointSlices fetched
 * here as the daemon fetches them (500 per page), bodies read, not decoded.
 */
export async function listServingMs(): Promise<number> {
  const t0 = performance.now();
  for (const path of ['/api/v1/services', '/apis/discovery.k8s.io/v1/endpointslices']) {
    let cont = '';
    for (let page = 0; page < 100_000; page++) {
      const url = `${server!.url}${path}?limit=500${cont ? `&continue=${encodeURIComponent(cont)}` : ''}`;
      const text = await (await fetch(url)).text();
      const m = /"continue":"([^"]*)"/.exec(text.slice(0, 2000));
      cont = m ? m[1]! : '';
      if (cont === '') break;
    }
  }
  return performance.now() - t0;
}

/** A new Service (index `size + k`) with its endpoints on pod 0; returns the write's wall time. */
export function addService(k: number): { at: number; ip: string } {
  const i = size + k;
  const at = wallNow();
  server!.create(service(i));
  server!.create(slice(i, podAddrs[0]!.slice(0, 10)));
  return { at, ip: clusterIP(i) };
}

/** Moves Service 0's endpoints to pod `to`; returns the write's wall time. `trigger`: annotate it. */
export function moveEndpoints(to: number, trigger = false): number {
  const at = wallNow();
  server!.update(slice(0, podAddrs[to]!.slice(0, 10), trigger ? at : undefined));
  return at;
}

/**
 * One batch of the churn benchmark: `count` endpoint updates of unprobed Services written at
 * once, each annotated with its write time; with `moveTo` >= 0, Service 0's endpoints move to
 * that pod first (the change timed with packets). Returns the write's wall time.
 */
export function churnBatch(count: number, moveTo: number): number {
  const at = wallNow();
  if (moveTo >= 0) server!.update(slice(0, podAddrs[moveTo]!.slice(0, 10), at));
  for (let j = 0; j < count; j++) {
    churnRng = (churnRng * 1103515245 + 12345) % 2 ** 31;
    const i = 1 + (churnRng % Math.max(1, size - 2));
    server!.update(slice(i, farAddrs(i, perService, churnRng), at));
  }
  return at;
}

/** The daemon's /metrics text (its metrics server listens on 127.0.0.1:10249 in this namespace). */
export async function metricsText(timeoutMs = 10_000): Promise<string> {
  return (await fetch('http://127.0.0.1:10249/metrics', { signal: AbortSignal.timeout(timeoutMs) })).text();
}

/** `count` endpoint updates of unprobed Services, `perSecond` at most; returns how many were written. */
export async function churn(count: number, perSecond: number): Promise<number> {
  let done = 0;
  const gap = 1000 / perSecond;
  const t0 = performance.now();
  for (; done < count; done++) {
    churnRng = (churnRng * 1103515245 + 12345) % 2 ** 31;
    const i = 1 + (churnRng % Math.max(1, size - 2));
    server!.update(slice(i, farAddrs(i, perService, done + 1)));
    const ahead = t0 + (done + 1) * gap - performance.now();
    if (ahead > 0) await new Promise((r) => setTimeout(r, ahead));
  }
  return done;
}

export async function stopApi(): Promise<void> {
  await server?.close();
  server = undefined;
}

/**
 * Opens a new connection to host:port every `everyMs` (each may wait up to 300 ms: a SYN sent
 * before the rules exist is lost, and waiting for it would hide when they arrived) until an
 * answer starts with `prefix` (the echo backend's pod name); returns the wall time of that
 * answer, or undefined after `limitMs`. At most 200 attempts are in flight.
 */
export async function firstAnswer(
  host: string,
  port: number,
  prefix: string,
  limitMs: number,
  everyMs = 2,
): Promise<number | undefined> {
  const end = performance.now() + limitMs;
  let answeredAt: number | undefined;
  let inFlight = 0;
  while (answeredAt === undefined && performance.now() < end) {
    if (inFlight < 200) {
      inFlight++;
      void tcp(host, port, 300).then((answer) => {
        inFlight--;
        if (answeredAt === undefined && answer.startsWith(prefix)) answeredAt = wallNow();
      });
    }
    await new Promise((r) => setTimeout(r, everyMs));
  }
  return answeredAt;
}

/** The server's request log (path, list or watch, wall time), for a look at what a cold start waited for. */
export function requestLog(): { path: string; watch: boolean; at: number; cont: boolean }[] {
  return (server?.requests ?? []).map((r) => ({
    path: r.path,
    watch: r.watch,
    at: r.at,
    cont: r.query['continue'] !== undefined,
  }));
}
