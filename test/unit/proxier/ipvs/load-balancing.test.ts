// The per-Service scheduler in IPVS mode: the load-balancing annotation (or --load-balancing)
// picks rr, mh or lc for that Service's virtual servers; random, which IPVS has not, keeps
// --ipvs-scheduler. A changed annotation edits the virtual servers in place (SET_SERVICE).
import test from 'ava';
import { LOAD_BALANCING_ANNOTATION } from '../../../../src/model/index.ts';
import { ep, harness, slice, svc } from './harness.ts';

function annotated(name: string, value: string | undefined, o: Parameters<typeof svc>[1] = {}) {
  const s = svc(name, o);
  if (value !== undefined) s.metadata!.annotations = { [LOAD_BALANCING_ANNOTATION]: value };
  return s;
}
const heads = (lines: string[]) => lines.filter((l) => !l.includes(' -> '));

test('each Service gets the scheduler its annotation maps to; the others keep --ipvs-scheduler', async (t) => {
  const h = harness({ scheduler: 'wlc' });
  const cases = [
    ['rr', 'round-robin', '10.96.0.11'],
    ['ch', 'consistent-hash', '10.96.0.12'],
    ['lc', 'least-connection', '10.96.0.13'],
    ['rnd', 'random', '10.96.0.14'],
    ['bad', 'maglev', '10.96.0.15'],
    ['none', undefined, '10.96.0.16'],
  ] as const;
  for (const [name, value, clusterIP] of cases) {
    h.tracker.onService(undefined, annotated(name, value, { clusterIP }));
    h.tracker.onEndpointSlice(slice(`${name}-1`, name, [ep('10.0.0.1'), ep('10.0.0.2')]), false);
  }
  await h.sync();
  t.deepEqual(heads(h.vs()), [
    'TCP 10.96.0.11:80 rr',
    'TCP 10.96.0.12:80 mh',
    'TCP 10.96.0.13:80 lc',
    'TCP 10.96.0.14:80 wlc',
    'TCP 10.96.0.15:80 wlc',
    'TCP 10.96.0.16:80 wlc',
  ]);
});

test('consistent-hash is mh on the client address (no mh-port flag); --ipvs-scheduler mh keeps upstream mh-port', async (t) => {
  const h = harness({ scheduler: 'mh' });
  h.tracker.onService(undefined, annotated('a', 'consistent-hash', { clusterIP: '10.96.0.11' }));
  h.tracker.onService(undefined, annotated('b', undefined, { clusterIP: '10.96.0.12' }));
  await h.sync();
  t.deepEqual(heads(h.vs()), ['TCP 10.96.0.11:80 mh', 'TCP 10.96.0.12:80 mh flags 16']);
});

test('the node default (--load-balancing) applies to Services without the annotation', async (t) => {
  const h = harness({ scheduler: 'rr', loadBalancing: 'least-connection' });
  h.tracker.onService(undefined, annotated('a', undefined, { clusterIP: '10.96.0.11' }));
  h.tracker.onService(undefined, annotated('b', 'round-robin', { clusterIP: '10.96.0.12' }));
  h.tracker.onService(undefined, annotated('c', 'random', { clusterIP: '10.96.0.13' }));
  await h.sync();
  t.deepEqual(heads(h.vs()), ['TCP 10.96.0.11:80 lc', 'TCP 10.96.0.12:80 rr', 'TCP 10.96.0.13:80 lc']);
});

test('a changed annotation edits every VS of the Service in place: SET_SERVICE, real servers kept', async (t) => {
  const h = harness({ scheduler: 'rr' });
  const o = { type: 'NodePort' as const, ports: [{ name: 'p', protocol: 'TCP', port: 80, nodePort: 30080 }] };
  h.tracker.onService(undefined, annotated('s', undefined, o));
  h.tracker.onEndpointSlice(slice('s-1', 's', [ep('10.0.0.1'), ep('10.0.0.2')]), false);
  await h.sync();
  t.deepEqual(heads(h.vs()), ['TCP 10.96.0.10:80 rr', 'TCP 192.168.1.10:30080 rr']);
  h.writes();
  h.tracker.onService(annotated('s', undefined, o), annotated('s', 'least-connection', { ...o, rv: '2' }));
  await h.sync();
  t.deepEqual(heads(h.vs()), ['TCP 10.96.0.10:80 lc', 'TCP 192.168.1.10:30080 lc']);
  t.is(h.vs().length, 6, 'both real servers of both VSes kept');
  // lc is asked for the first time: probed once (a probe VS made and removed), then both VSes edited.
  const w = h.writes();
  t.deepEqual(w.ipvsOrder, ['DEL_SERVICE', 'NEW_SERVICE', 'DEL_SERVICE', 'SET_SERVICE', 'SET_SERVICE']);
  t.is(w.newDest + w.delDest, 0);
});

test('a scheduler the kernel lacks is probed once and said once; its Services keep --ipvs-scheduler', async (t) => {
  const h = harness({ scheduler: 'rr' });
  h.ipvsFake.schedulers.delete('mh');
  h.tracker.onService(undefined, annotated('a', 'consistent-hash', { clusterIP: '10.96.0.11' }));
  h.tracker.onService(undefined, annotated('b', 'least-connection', { clusterIP: '10.96.0.12' }));
  const r = await h.sync();
  t.deepEqual(r.errors, []);
  t.deepEqual(heads(h.vs()), ['TCP 10.96.0.11:80 rr', 'TCP 10.96.0.12:80 lc']);
  h.tracker.onService(undefined, annotated('c', 'consistent-hash', { clusterIP: '10.96.0.13' }));
  h.writes();
  await h.sync();
  t.is(h.writes().newService, 1, 'no second probe: only the new VS');
  t.deepEqual(heads(h.vs()).at(-1), 'TCP 10.96.0.13:80 rr');
  const warned = h.records.filter((x) => x.level === 'warn' && /IPVS scheduler mh is unavailable/.test(x.msg));
  t.is(warned.length, 1);
});

test('Services that do not ask probe nothing beyond the start-up probe of --ipvs-scheduler', async (t) => {
  const h = harness({ scheduler: 'wlc' });
  await h.proxier.init();
  h.writes();
  h.tracker.onService(undefined, annotated('a', undefined, { clusterIP: '10.96.0.11' }));
  await h.sync();
  const w = h.writes();
  t.is(w.newService, 1, 'the VS only');
  t.is(w.delService, 0, 'no probe VS removed');
});
