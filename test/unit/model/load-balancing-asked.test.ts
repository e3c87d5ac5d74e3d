// The load-balancing annotation from the API to every port of the Service: the sources keep it
// (and drop the other annotations), the model copies it trimmed to each ServicePortInfo, and a
// Service without it has none. What each mode does with it is the proxiers' tests.
import test from 'ava';
import { V1Service } from '@kubernetes/client-node';
import { convertService } from '../../../src/sources/convert.ts';
import { LOAD_BALANCING_ANNOTATION } from '../../../src/model/index.ts';
import { newTracker, svc } from './helpers.ts';

test('the sources keep the load-balancing annotation and drop the others', (t) => {
  const s = new V1Service();
  s.metadata = {
    name: 'web',
    namespace: 'default',
    annotations: { [LOAD_BALANCING_ANNOTATION]: 'round-robin', 'example.com/other': 'x' },
  };
  s.spec = { clusterIP: '10.96.0.1', ports: [{ port: 80, protocol: 'TCP' }] };
  const c = convertService(s);
  t.true(c.ok);
  if (c.ok) t.deepEqual(c.obj.metadata?.annotations, { [LOAD_BALANCING_ANNOTATION]: 'round-robin' });
});

test('every port of the Service carries the value, trimmed; none without the annotation', (t) => {
  const { t: tracker } = newTracker();
  const ports = [
    { name: 'a', protocol: 'TCP', port: 80 },
    { name: 'b', protocol: 'UDP', port: 53 },
  ];
  const asked = svc('asked', { clusterIP: '10.96.0.11', ports });
  asked.metadata!.annotations = { [LOAD_BALANCING_ANNOTATION]: ' consistent-hash ' };
  tracker.onService(undefined, asked);
  tracker.onService(undefined, svc('plain', { clusterIP: '10.96.0.12', ports }));
  const byService = new Map<string, (string | undefined)[]>();
  for (const p of tracker.checkout().desired.services.values())
    byService.set(p.name, [...(byService.get(p.name) ?? []), p.loadBalancingAsked]);
  t.deepEqual(byService.get('asked'), ['consistent-hash', 'consistent-hash']);
  t.deepEqual(byService.get('plain'), [undefined, undefined]);
});
