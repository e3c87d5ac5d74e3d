import test from 'ava';
import type { ServiceKey, ServicePortId } from '../../../src/model/ids.ts';
import { ep, keys, NODE, newTracker, node, slice, svc } from './helpers.ts';

const P = 'default/s:p/TCP' as ServicePortId;
const S = 'default/s' as ServiceKey;

test('tracker: first checkout is full; an idle one is not and changes nothing', (t) => {
  const { t: tr } = newTracker();
  t.true(tr.syncNeeded);
  const first = tr.checkout();
  t.true(first.change.full);
  t.false(tr.syncNeeded);
  const second = tr.checkout();
  t.false(second.change.full);
  t.is(second.change.services.size, 0);
  t.is(second.desired, first.desired, 'one published state object, updated in place');
});

test('tracker: add, update and delete a Service', (t) => {
  const { t: tr } = newTracker();
  tr.checkout();
  t.true(tr.onService(undefined, svc('s')));
  let { desired, change } = tr.checkout();
  t.deepEqual([...change.services], [P]);
  t.is(change.previous.get(P)!.info, undefined);
  t.is(desired.services.get(P)!.port, 80);

  const before = desired.services.get(P);
  tr.onService(svc('s'), svc('s', { ports: [{ name: 'p', port: 81 }] }));
  ({ desired, change } = tr.checkout());
  t.deepEqual([...change.services], [P]);
  t.is(change.previous.get(P)!.info, before, 'previous value handed over for diffing');
  t.is(desired.services.get(P)!.port, 81);

  tr.onService(svc('s'), undefined);
  ({ desired, change } = tr.checkout());
  t.deepEqual([...change.services], [P]);
  t.false(desired.services.has(P));
  t.false(desired.selections.has(P));
});

test('tracker: a change that is undone before checkout is no change', (t) => {
  const { t: tr } = newTracker();
  tr.onService(undefined, svc('s'));
  tr.onEndpointSlice(slice('s-1', 's', [ep('10.0.0.1')]), false);
  tr.checkout();

  t.true(tr.onService(svc('s'), svc('s', { ports: [{ name: 'p', port: 81 }] })));
  t.false(tr.onService(svc('s'), svc('s')), 'back to what is applied: nothing pending');
  t.true(tr.onEndpointSlice(slice('s-1', 's', [ep('10.0.0.2')]), false));
  t.false(tr.onEndpointSlice(slice('s-1', 's', [ep('10.0.0.1')]), false));
  t.true(tr.onEndpointSlice(slice('s-1', 's', []), true));
  t.false(tr.onEndpointSlice(slice('s-1', 's', [ep('10.0.0.1')]), false), 'delete then re-add');
  t.deepEqual(tr.pending(), { services: 0, endpointSlices: 0 });
  t.is(tr.checkout().change.services.size, 0);
});

test('tracker: re-delivered identical objects (resync) need no sync', (t) => {
  const { t: tr } = newTracker();
  tr.onService(undefined, svc('s'));
  tr.onEndpointSlice(slice('s-1', 's', [ep('10.0.0.1')]), false);
  tr.checkout();
  t.false(tr.onService(svc('s'), svc('s', { rv: '2' })));
  t.false(tr.onEndpointSlice(slice('s-1', 's', [ep('10.0.0.1')], { rv: '2' }), false));
  t.false(tr.onNode(undefined), 'node still unknown');
});

test('tracker: slices that arrive before their Service count when it appears', (t) => {
  const { t: tr } = newTracker();
  tr.onEndpointSlice(slice('s-1', 's', [ep('10.0.0.1')]), false);
  let { desired } = tr.checkout();
  t.is(desired.services.size, 0);
  t.is(desired.endpoints.size, 0);
  tr.onService(undefined, svc('s'));
  ({ desired } = tr.checkout());
  t.deepEqual(keys(desired.endpoints.get(P)), ['10.0.0.1:8080']);
  t.deepEqual(keys(desired.selections.get(P)!.cluster), ['10.0.0.1:8080']);
});

test('tracker: slices survive their Service being deleted and re-created', (t) => {
  const { t: tr } = newTracker();
  tr.onService(undefined, svc('s'));
  tr.onEndpointSlice(slice('s-1', 's', [ep('10.0.0.1')]), false);
  tr.checkout();
  tr.onService(svc('s'), undefined);
  t.false(tr.checkout().desired.endpoints.has(P));
  tr.onService(undefined, svc('s'));
  t.deepEqual(keys(tr.checkout().desired.endpoints.get(P)), ['10.0.0.1:8080']);
});

test('tracker: a Service gaining the service-proxy-name label disappears', (t) => {
  const { t: tr } = newTracker();
  tr.onService(undefined, svc('s'));
  tr.checkout();
  t.true(tr.onService(svc('s'), svc('s', { labels: { 'service.kubernetes.io/service-proxy-name': 'other' } })));
  t.false(tr.checkout().desired.services.has(P));
});

test('tracker: pending counts and totals for metrics', (t) => {
  const { t: tr } = newTracker();
  tr.onService(undefined, svc('a'));
  tr.onService(undefined, svc('b'));
  tr.onEndpointSlice(slice('a-1', 'a', [ep('10.0.0.1')]), false);
  tr.onEndpointSlice(slice('a-2', 'a', [ep('10.0.0.2')]), false);
  tr.onEndpointSlice(slice('a-2', 'a', [ep('10.0.0.3')]), false);
  t.deepEqual(tr.pending(), { services: 2, endpointSlices: 2 });
  t.deepEqual(tr.totals, { services: 2, endpointSlices: 3 });
  tr.checkout();
  t.deepEqual(tr.pending(), { services: 0, endpointSlices: 0 });
});

test('tracker: trigger times after the tracker started are reported once', (t) => {
  const { t: tr, clock } = newTracker();
  const start = clock.now();
  tr.onService(undefined, svc('s'));
  tr.onEndpointSlice(slice('s-1', 's', [ep('10.0.0.1')], { trigger: new Date(start - 1000).toISOString() }), false);
  tr.onEndpointSlice(slice('s-2', 's', [ep('10.0.0.2')], { trigger: new Date(start + 1000).toISOString() }), false);
  tr.onEndpointSlice(slice('s-3', 's', [ep('10.0.0.3')], { trigger: 'not a time' }), false);
  let { change } = tr.checkout();
  t.deepEqual(change.triggerTimes.get(S), [start + 1000]);
  ({ change } = tr.checkout());
  t.is(change.triggerTimes.size, 0);
});

test('tracker: a deleted slice drops pending trigger times (its annotation is old)', (t) => {
  const { t: tr, clock } = newTracker();
  tr.onService(undefined, svc('s'));
  tr.onEndpointSlice(slice('s-1', 's', [ep('10.0.0.1')]), false);
  tr.checkout();
  tr.onEndpointSlice(slice('s-1', 's', [ep('10.0.0.2')], { trigger: new Date(clock.now() + 5).toISOString() }), false);
  tr.onEndpointSlice(slice('s-1', 's', [ep('10.0.0.2')]), true);
  t.is(tr.checkout().change.triggerTimes.size, 0);
});

test('tracker: requestFullSync makes the next checkout full', (t) => {
  const { t: tr } = newTracker();
  tr.checkout();
  tr.requestFullSync();
  t.true(tr.syncNeeded);
  t.true(tr.checkout().change.full);
  t.false(tr.checkout().change.full);
});

test('tracker: health check node port and local ready endpoint count (distinct IPs)', (t) => {
  const { t: tr } = newTracker();
  const lb = svc('s', {
    type: 'LoadBalancer',
    eTP: 'Local',
    hcPort: 32000,
    ports: [
      { name: 'a', port: 80, nodePort: 30080 },
      { name: 'b', port: 81, nodePort: 30081 },
    ],
  });
  tr.onService(undefined, lb);
  tr.onEndpointSlice(
    slice(
      's-1',
      's',
      [ep('10.0.0.1', { node: NODE }), ep('10.0.0.2', { node: 'other' }), ep('10.0.0.3', { node: NODE, ready: false })],
      {
        ports: [
          { name: 'a', protocol: 'TCP', port: 8080 },
          { name: 'b', protocol: 'TCP', port: 8081 },
        ],
      },
    ),
    false,
  );
  const { desired, change } = tr.checkout();
  t.deepEqual(desired.healthChecks.get(S), {
    service: S,
    namespace: 'default',
    name: 's',
    nodePort: 32000,
    localEndpoints: 1,
  });
  t.true(change.serviceKeys.has(S));

  tr.onService(lb, svc('s', { type: 'LoadBalancer', ports: [{ name: 'a', port: 80, nodePort: 30080 }] }));
  t.false(tr.checkout().desired.healthChecks.has(S), 'eTP Cluster: no health check');
});

test('tracker: a node zone change reselects endpoints and forces a full sync', (t) => {
  const { t: tr } = newTracker();
  tr.onService(undefined, svc('s'));
  tr.onEndpointSlice(slice('s-1', 's', [ep('10.0.0.1', { zones: ['z1'] }), ep('10.0.0.2', { zones: ['z2'] })]), false);
  let { desired, change } = tr.checkout();
  t.deepEqual(
    keys(desired.selections.get(P)!.cluster),
    ['10.0.0.1:8080', '10.0.0.2:8080'],
    'zone unknown: hints ignored',
  );

  tr.onNode(node(NODE, { zone: 'z2' }));
  ({ desired, change } = tr.checkout());
  t.true(change.full);
  t.true(change.nodeChanged);
  t.deepEqual([...change.services], [P]);
  t.deepEqual(keys(change.previous.get(P)!.selection!.cluster), ['10.0.0.1:8080', '10.0.0.2:8080']);
  t.deepEqual(keys(desired.selections.get(P)!.cluster), ['10.0.0.2:8080']);
  t.is(desired.node.zone, 'z2');
});

test('tracker: Nodes other than this one are ignored', (t) => {
  const { t: tr } = newTracker();
  tr.checkout();
  t.false(tr.onNode(node('someone-else', { zone: 'z9' })));
  t.is(tr.checkout().desired.node.zone, '');
});

test('tracker: ServiceCIDRs replace the configured ones', (t) => {
  const { t: tr } = newTracker({ serviceCIDRs: ['10.96.0.0/12'] });
  t.deepEqual(tr.checkout().desired.serviceCIDRs, ['10.96.0.0/12']);
  tr.onServiceCIDRs([
    { metadata: { name: 'kubernetes' }, spec: { cidrs: ['10.96.0.0/12', 'fd00:96::/108'] } },
    { metadata: { name: 'extra' }, spec: { cidrs: ['10.100.0.0/16'] } },
  ]);
  const { desired, change } = tr.checkout();
  t.deepEqual(desired.serviceCIDRs, ['10.100.0.0/16', '10.96.0.0/12']);
  t.true(change.full);
});

test('tracker: the published state is updated in place but values are replaced, not mutated', (t) => {
  const { t: tr } = newTracker();
  tr.onService(undefined, svc('s'));
  tr.onEndpointSlice(slice('s-1', 's', [ep('10.0.0.1')]), false);
  const { desired } = tr.checkout();
  const oldEps = desired.endpoints.get(P)!;
  tr.onEndpointSlice(slice('s-1', 's', [ep('10.0.0.1'), ep('10.0.0.2')]), false);
  tr.checkout();
  t.deepEqual(keys(oldEps), ['10.0.0.1:8080']);
  t.deepEqual(keys(desired.endpoints.get(P)), ['10.0.0.1:8080', '10.0.0.2:8080']);
});

test('tracker: the single-change path touches only the changed Service', (t) => {
  const { t: tr } = newTracker();
  for (let i = 0; i < 50; i++) {
    tr.onService(undefined, svc(`s${i}`, { clusterIP: `10.96.0.${i + 1}` }));
    tr.onEndpointSlice(slice(`s${i}-1`, `s${i}`, [ep(`10.1.${i}.1`), ep(`10.1.${i}.2`)]), false);
  }
  const first = tr.checkout();
  t.is(first.change.services.size, 50);
  const gen = first.desired.generation;
  const untouched = first.desired.selections.get('default/s7:p/TCP' as ServicePortId);

  tr.onEndpointSlice(slice('s3-1', 's3', [ep('10.1.3.1'), ep('10.1.3.9')]), false);
  const { desired, change } = tr.checkout();
  t.false(change.full);
  t.deepEqual([...change.services], ['default/s3:p/TCP']);
  t.deepEqual([...change.serviceKeys], ['default/s3']);
  t.deepEqual([...change.previous.keys()], ['default/s3:p/TCP']);
  t.is(desired.generation, gen + 1);
  t.is(
    desired.selections.get('default/s7:p/TCP' as ServicePortId),
    untouched,
    'other Services keep their very objects',
  );
  t.deepEqual(keys(desired.endpoints.get('default/s3:p/TCP' as ServicePortId)), ['10.1.3.1:8080', '10.1.3.9:8080']);
});

test('tracker: a slice whose service-name label changes moves to the new Service', (t) => {
  const { t: tr } = newTracker();
  tr.onService(undefined, svc('s'));
  tr.onService(undefined, svc('u', { clusterIP: '10.96.0.11' }));
  tr.onEndpointSlice(slice('x-1', 's', [ep('10.0.0.1')]), false);
  tr.checkout();
  tr.onEndpointSlice(slice('x-1', 'u', [ep('10.0.0.1')]), false);
  const { desired, change } = tr.checkout();
  t.false(desired.endpoints.has(P));
  t.deepEqual(keys(desired.endpoints.get('default/u:p/TCP' as ServicePortId)), ['10.0.0.1:8080']);
  t.deepEqual([...change.services].sort(), ['default/s:p/TCP', 'default/u:p/TCP']);
});

test('tracker: a removal is matched by slice name, whatever its labels say', (t) => {
  const { t: tr } = newTracker();
  tr.onService(undefined, svc('s'));
  tr.onEndpointSlice(slice('s-1', 's', [ep('10.0.0.1')]), false);
  tr.checkout();
  t.true(tr.onEndpointSlice({ metadata: { namespace: 'default', name: 's-1' } }, true));
  t.false(tr.checkout().desired.endpoints.has(P));
  t.false(tr.onEndpointSlice({ metadata: { namespace: 'default', name: 'never-seen' } }, true));
});

test('tracker: dual-stack Service yields one entry per family tracker; a shared reject log warns once', async (t) => {
  const { RejectLog } = await import('../../../src/model/issues.ts');
  const { memoryLogger } = await import('../../../src/base/logger.ts');
  const { FakeClock } = await import('../../../src/base/clock.ts');
  const { ChangeTracker } = await import('../../../src/model/tracker.ts');
  const logger = memoryLogger();
  const counted: string[] = [];
  const rejectLog = new RejectLog(logger, (k, r) => counted.push(`${k}/${r}`));
  const deps = { logger, clock: new FakeClock(), rejectLog };
  const v4 = new ChangeTracker({ nodeName: NODE, family: 'IPv4' }, deps);
  const v6 = new ChangeTracker({ nodeName: NODE, family: 'IPv6' }, deps);
  const s = svc('s', { clusterIPs: ['10.96.0.10', 'fd00::10'], externalIPs: ['1.2.3.4', 'fd00::1:4', 'bogus'] });
  for (const tr of [v4, v6]) tr.onService(undefined, s);
  const a = v4.checkout().desired.services.get(P)!;
  const b = v6.checkout().desired.services.get(P)!;
  t.deepEqual([a.family, a.clusterIP, a.externalIPs], ['IPv4', '10.96.0.10', ['1.2.3.4']]);
  t.deepEqual([b.family, b.clusterIP, b.externalIPs], ['IPv6', 'fd00::10', ['fd00::1:4']]);
  t.is(logger.records.filter((r) => r.level === 'warn').length, 1);
  t.deepEqual(counted, ['Service/invalid-external-ip']);
});

test('tracker: an object whose fields throw when read is skipped, counted, and harms nothing', (t) => {
  const { t: tr, rejected, warnings } = newTracker();
  tr.onService(undefined, svc('s'));
  const hostile = {
    get metadata(): never {
      throw new Error('boom');
    },
  };
  t.notThrows(() => tr.onService(undefined, hostile as never));
  t.notThrows(() => tr.onEndpointSlice(hostile as never, false));
  t.notThrows(() => tr.onNode(hostile as never));
  t.true(tr.checkout().desired.services.has(P));
  t.deepEqual(rejected, ['Service/internal-error', 'EndpointSlice/internal-error', 'Node/internal-error']);
  t.is(warnings().length, 3, 'one line per object');
  t.true(
    warnings().every((w) => w.level === 'error' && w.msg.includes('<unreadable object>') && w.msg.includes('boom')),
  );
});

test('tracker: only the ports whose endpoints changed are reported, not the whole Service', (t) => {
  const { t: tr } = newTracker();
  tr.onService(
    undefined,
    svc('s', {
      ports: [
        { name: 'a', port: 80 },
        { name: 'b', port: 81 },
      ],
    }),
  );
  tr.onEndpointSlice(
    slice('s-a', 's', [ep('10.0.0.1')], { ports: [{ name: 'a', protocol: 'TCP', port: 8080 }] }),
    false,
  );
  tr.onEndpointSlice(
    slice('s-b', 's', [ep('10.0.0.1')], { ports: [{ name: 'b', protocol: 'TCP', port: 8081 }] }),
    false,
  );
  tr.onEndpointSlice(
    slice('s-x', 's', [ep('10.0.0.1')], { ports: [{ name: 'x', protocol: 'TCP', port: 9999 }] }),
    false,
  );
  tr.checkout();
  tr.onEndpointSlice(
    slice('s-b', 's', [ep('10.0.0.2')], { ports: [{ name: 'b', protocol: 'TCP', port: 8081 }] }),
    false,
  );
  t.deepEqual([...tr.checkout().change.services], ['default/s:b/TCP']);
  t.true(
    tr.onEndpointSlice(
      slice('s-x', 's', [ep('10.0.0.3')], { ports: [{ name: 'x', protocol: 'TCP', port: 9999 }] }),
      false,
    ),
  );
  t.deepEqual([...tr.checkout().change.services], [], 'a port the Service does not have changes nothing published');
});
