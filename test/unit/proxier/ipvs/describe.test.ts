// The IPVS proxier's describe (explain) and traffic counters over the in-memory IPVS fake:
// what is read back per virtual server, drift after a real server is deleted behind its back,
// and the kernel's stats summed per frontend kind.
import test from 'ava';
import { explainPort } from '../../../../src/explain/explain.ts';
import type { ServicePortId } from '../../../../src/model/index.ts';
import { ep, harness, NODE_IP, slice, svc } from './harness.ts';

const ID = 'default/web:p/TCP' as ServicePortId;

async function setup() {
  const h = harness();
  h.tracker.onService(
    undefined,
    svc('web', { type: 'NodePort', ports: [{ name: 'p', protocol: 'TCP', port: 80, nodePort: 30080 }] }),
  );
  h.tracker.onEndpointSlice(slice('web-1', 'web', [ep('10.244.1.1'), ep('10.244.2.1')]), false);
  await h.sync();
  return h;
}

test('describe reads every virtual server and real server of the port back; it agrees with the plan', async (t) => {
  const h = await setup();
  const info = h.tracker.desired.services.get(ID)!;
  const d = await h.proxier.describe(info);
  t.is(d.mode, 'ipvs');
  t.deepEqual(
    d.kernel.map((e) => `${e.where} ${e.key} ${e.value}`),
    [
      'ipvs TCP 10.96.0.10:80 rr',
      'TCP 10.96.0.10:80 10.244.1.1:8080 masq weight 1',
      'TCP 10.96.0.10:80 10.244.2.1:8080 masq weight 1',
      `ipvs TCP ${NODE_IP}:30080 rr`,
      `TCP ${NODE_IP}:30080 10.244.1.1:8080 masq weight 1`,
      `TCP ${NODE_IP}:30080 10.244.2.1:8080 masq weight 1`,
    ],
  );
  t.true(explainPort(h.tracker.desired, info, d).kernel!.agrees);
});

test('a real server deleted behind the proxier is drift', async (t) => {
  const h = await setup();
  await h.ipvs.deleteDestination(
    { family: 'IPv4', protocol: 'tcp', address: '10.96.0.10', port: 80 },
    { address: '10.244.2.1', port: 8080 },
  );
  const info = h.tracker.desired.services.get(ID)!;
  const x = explainPort(h.tracker.desired, info, await h.proxier.describe(info));
  t.false(x.kernel!.agrees);
  t.deepEqual(
    x.kernel!.drift.missing.map((e) => `${e.where} ${e.key}`),
    ['TCP 10.96.0.10:80 10.244.2.1:8080'],
  );
});

test('traffic counters: the kernel stats of each virtual server, summed per frontend kind', async (t) => {
  const h = await setup();
  for (const { svc: s } of h.ipvsFake.services.values()) {
    if ('fwmark' in s) continue;
    const np = s.port === 30080;
    Object.assign(s.stats, { inPkts: np ? 7n : 11n, inBytes: np ? 700n : 1100n, conns: np ? 2n : 3n });
  }
  const samples = await h.proxier.trafficCounters();
  t.deepEqual(
    [...samples].sort((a, b) => a.frontend.localeCompare(b.frontend)),
    [
      { id: ID, frontend: 'cluster-ip', packets: 11, bytes: 1100, connections: 3 },
      { id: ID, frontend: 'node-port', packets: 7, bytes: 700, connections: 2 },
    ],
  );
});
