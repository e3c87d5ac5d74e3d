// IPVS mode on Debian's 6.1 kernel (inside the QEMU VM, run by run-cases.ts from
// ipvs-local-policy.test.ts): a Local traffic policy (internal and external) with no usable
// local endpoint and remote terminating endpoints around (issue 16 item 9). Upstream's
// syncEndpoint sends such a VS to the local endpoints when there are any (ready ones, else
// local serving-terminating ones) and otherwise to the cluster endpoints (PR 97081): ready
// ones, else serving-terminating ones anywhere; a ClusterIP-only Service with
// internalTrafficPolicy=Local has no cluster endpoints, so its VS stays empty. An endpoint
// whose `serving` condition is unset is serving (the API's default, as upstream reads it).
//
// The VM's root namespace is the node "node-a"; backends 10.0.0.2-4 in namespace "pods", the
// client 192.168.7.2 in "client". Endpoints say which node they are on; the proxier is driven
// directly (model + IpvsProxier, no companion rules: an off-node client needs no SNAT here and
// the pods route back through the node). Read back with ipvsadm and real TCP connections.

import assert from 'node:assert/strict';
import { systemClock } from '../../../src/base/clock.ts';
import { nullLogger } from '../../../src/base/logger.ts';
import { ChangeTracker } from '../../../src/model/index.ts';
import { IpvsProxier } from '../../../src/proxier/ipvs/index.ts';
import { ep, node, slice, svc } from '../../unit/model/helpers.ts';
import type { EpOpts } from '../../unit/model/helpers.ts';
import type { VmCase } from '../run-cases.ts';
import { NODE_IP, PodsAndClient } from './pods-and-client.ts';
import { openIpvsDeps } from './ipvs-deps.ts';
import { must } from './vm-shell.ts';

const LOCAL: EpOpts = { node: 'node-a' };
const REMOTE: EpOpts = { node: 'node-b' };
const TERMINATING: EpOpts = { ready: false, serving: true, terminating: true };
/** `serving` left out: the API (and upstream) read it as true. */
const TERMINATING_SERVING_UNSET: EpOpts = { ready: false, terminating: true };
const GONE: EpOpts = { ready: false, serving: false, terminating: true };

/** The real servers of one TCP VS with weight > 0 ("10.0.0.2:8080"), sorted. */
async function realServers(vip: string, port: number): Promise<string[]> {
  const out = await must('/usr/sbin/ipvsadm', '-Ln', '-t', `${vip}:${port}`);
  return out
    .split('\n')
    .map((l) => l.trim().split(/\s+/))
    .filter((f) => f[0] === '->' && f[1] !== 'RemoteAddress:Port' && f[3] !== '0')
    .map((f) => f[1]!)
    .sort();
}

// --- the client agent ------------------------------------------------------------------------

const net = new PodsAndClient();
const ask = (q: Record<string, unknown>) => net.ask(q);

/** The backends that answered n connections ("10.0.0.2"), or the error code of the first failure. */
async function backends(host: string, port: number, n = 4): Promise<string[] | string> {
  const r = await ask({ op: 'tcp', host, port, n });
  if (r.error) return String(r.code ?? r.error);
  return [...new Set((r.answers as string[]).map((a) => a.split(' ')[0]!))].sort();
}

// --- the proxier ---------------------------------------------------------------------------

let proxier: IpvsProxier;
const tracker = new ChangeTracker({ nodeName: 'node-a', family: 'IPv4' }, { logger: nullLogger, clock: systemClock });
const closers: (() => void)[] = [];
let rv = 1;

/** One Service per case (its own VIP and node port: nothing drains from an earlier case). */
async function service(
  name: string,
  n: number,
  o: { nodePort: boolean },
  eps: [string, EpOpts][],
): Promise<{ vip: string; nodePort: number }> {
  const vip = `10.96.0.${n}`;
  const nodePort = 30000 + n;
  const port = { name: 'p', protocol: 'TCP', port: 80, ...(o.nodePort ? { nodePort } : {}) };
  tracker.onService(
    undefined,
    svc(name, {
      clusterIP: vip,
      type: o.nodePort ? 'NodePort' : 'ClusterIP',
      ports: [port],
      iTP: 'Local',
      ...(o.nodePort ? { eTP: 'Local' } : {}),
    }),
  );
  tracker.onEndpointSlice(
    slice(
      `${name}-1`,
      name,
      eps.map(([a, e]) => ep(a, e)),
      { rv: String(++rv), ports: [{ name: 'p', protocol: 'TCP', port: 8080 }] },
    ),
    false,
  );
  const { desired, change } = tracker.checkout();
  const r = await proxier.sync(desired, change, AbortSignal.timeout(60_000));
  assert.deepEqual(r.errors, []);
  return { vip, nodePort };
}

/** Asserts the VS real servers and who answers, for the cluster IP and (when given) the node port. */
async function expectBoth(
  s: { vip: string; nodePort: number },
  want: string[],
  withNodePort: boolean,
  note: (v: unknown) => void,
): Promise<void> {
  const seen: Record<string, unknown> = { clusterIP: await realServers(s.vip, 80) };
  if (withNodePort) seen['nodePort'] = await realServers(NODE_IP, s.nodePort);
  seen['answers'] = await backends(s.vip, 80);
  if (withNodePort) seen['nodePortAnswers'] = await backends(NODE_IP, s.nodePort);
  note(seen);
  const servers = want.map((a) => `${a}:8080`);
  assert.deepEqual(seen['clusterIP'], servers, 'cluster-IP VS real servers');
  if (withNodePort) assert.deepEqual(seen['nodePort'], servers, 'node-port VS real servers');
  const answered = want.length > 0 ? want : 'ECONNREFUSED';
  assert.deepEqual(seen['answers'], answered, 'cluster IP answered by');
  if (withNodePort) assert.deepEqual(seen['nodePortAnswers'], answered, 'node port answered by');
}

export const cases: VmCase[] = [
  {
    name: 'setup: pods and client namespaces, backends, the proxier',
    timeoutMs: 120_000,
    async run() {
      await net.start(['10.0.0.2', '10.0.0.3', '10.0.0.4']);
      const { deps, close } = openIpvsDeps();
      closers.push(close);
      proxier = new IpvsProxier({ family: 'IPv4', gracefulCheckIntervalMs: 500, gracefulTerminationMs: 60_000 }, deps);
      await proxier.init();
      tracker.onNode(node('node-a', { internal: [NODE_IP] }));
    },
  },
  {
    name: 'iTP=Local + eTP=Local, no local endpoint, a remote ready one and a remote terminating one: the ready one',
    timeoutMs: 90_000,
    async run(note) {
      const s = await service('l1', 31, { nodePort: true }, [
        ['10.0.0.2', REMOTE],
        ['10.0.0.3', { ...REMOTE, ...TERMINATING }],
      ]);
      await expectBoth(s, ['10.0.0.2'], true, note);
    },
  },
  {
    name: 'iTP=Local + eTP=Local, no local endpoint, only remote terminating ones (serving set, and unset): both serve',
    timeoutMs: 90_000,
    async run(note) {
      const s = await service('l2', 32, { nodePort: true }, [
        ['10.0.0.2', { ...REMOTE, ...TERMINATING }],
        ['10.0.0.3', { ...REMOTE, ...TERMINATING_SERVING_UNSET }],
      ]);
      await expectBoth(s, ['10.0.0.2', '10.0.0.3'], true, note);
    },
  },
  {
    name: 'iTP=Local + eTP=Local, only a remote terminating one with serving unset: it serves (not an empty VS)',
    timeoutMs: 90_000,
    async run(note) {
      const s = await service('l3', 33, { nodePort: true }, [
        ['10.0.0.3', { ...REMOTE, ...TERMINATING_SERVING_UNSET }],
      ]);
      await expectBoth(s, ['10.0.0.3'], true, note);
    },
  },
  {
    name: 'iTP=Local + eTP=Local, a local terminating endpoint and a remote ready one: the local one only',
    timeoutMs: 90_000,
    async run(note) {
      const s = await service('l4', 34, { nodePort: true }, [
        ['10.0.0.4', { ...LOCAL, ...TERMINATING }],
        ['10.0.0.2', REMOTE],
      ]);
      await expectBoth(s, ['10.0.0.4'], true, note);
    },
  },
  {
    name: 'iTP=Local + eTP=Local, the local endpoint terminating and not serving, a remote terminating one: the remote one',
    timeoutMs: 90_000,
    async run(note) {
      const s = await service('l5', 35, { nodePort: true }, [
        ['10.0.0.4', { ...LOCAL, ...GONE }],
        ['10.0.0.3', { ...REMOTE, ...TERMINATING }],
      ]);
      await expectBoth(s, ['10.0.0.3'], true, note);
    },
  },
  {
    name: 'ClusterIP-only iTP=Local, remote ready and terminating endpoints only: an empty VS, connections refused',
    timeoutMs: 90_000,
    async run(note) {
      const s = await service('l6', 36, { nodePort: false }, [
        ['10.0.0.2', REMOTE],
        ['10.0.0.3', { ...REMOTE, ...TERMINATING_SERVING_UNSET }],
      ]);
      await expectBoth(s, [], false, note);
    },
  },
  {
    name: 'ClusterIP-only iTP=Local, a local terminating endpoint: it serves',
    timeoutMs: 90_000,
    async run(note) {
      const s = await service('l7', 37, { nodePort: false }, [
        ['10.0.0.4', { ...LOCAL, ...TERMINATING_SERVING_UNSET }],
        ['10.0.0.2', REMOTE],
      ]);
      await expectBoth(s, ['10.0.0.4'], false, note);
    },
  },
];

export async function teardown(): Promise<void> {
  net.stop();
  for (const c of closers) c();
  await proxier?.cleanup();
}
