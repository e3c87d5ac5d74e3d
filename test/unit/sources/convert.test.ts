import test from 'ava';
import { V1EndpointSlice, V1Node, V1Service } from '@kubernetes/client-node';
import {
  convertEndpointSlice,
  convertNode,
  convertService,
  convertServiceCIDR,
  rfc3339,
  selectedByProxy,
  toPlain,
} from '../../../src/sources/convert.ts';

test('client-node class instances become plain JSON-shaped objects; Dates become RFC 3339', (t) => {
  const s = new V1Service();
  s.metadata = {
    name: 'web',
    namespace: 'default',
    resourceVersion: '42',
    creationTimestamp: new Date('2024-05-06T07:08:09Z'),
    deletionTimestamp: new Date('2024-05-06T07:08:10Z'),
    managedFields: [{ manager: 'kubectl', operation: 'Apply' }],
    labels: { app: 'web', 'service.kubernetes.io/service-proxy-name': 'other' },
    annotations: { 'kubectl.kubernetes.io/last-applied-configuration': '{}' },
  };
  s.spec = { clusterIP: '10.96.0.1', ports: [{ port: 80, protocol: 'TCP', targetPort: 'http' as unknown as never }] };
  s.status = { loadBalancer: { ingress: [{ ip: '1.2.3.4' }] }, conditions: [] };
  const c = convertService(s);
  t.true(c.ok);
  if (!c.ok) return;
  t.is(c.key, 'default/web');
  t.deepEqual(c.obj, {
    kind: 'Service',
    apiVersion: 'v1',
    metadata: {
      name: 'web',
      namespace: 'default',
      resourceVersion: '42',
      labels: { 'service.kubernetes.io/service-proxy-name': 'other' },
      deletionTimestamp: '2024-05-06T07:08:10Z',
    },
    spec: { clusterIP: '10.96.0.1', ports: [{ port: 80, protocol: 'TCP', targetPort: 'http' }] },
    status: { loadBalancer: { ingress: [{ ip: '1.2.3.4' }] } },
  });
  t.is(Object.getPrototypeOf(c.obj.spec), Object.prototype, 'no class instances survive');
  t.false(JSON.stringify(c.obj).includes('managedFields'));

  const slice = new V1EndpointSlice();
  slice.metadata = { name: 's', namespace: 'default' };
  slice.addressType = 'IPv6';
  slice.endpoints = [
    {
      addresses: ['fd00::1'],
      conditions: { ready: true, serving: true, terminating: false },
      zone: 'z',
      targetRef: { kind: 'Pod', name: 'p', uid: 'u' },
    },
    { addresses: ['fd00::2'], conditions: { ready: true, serving: true, terminating: false }, zone: 'z' },
  ];
  slice.ports = [{ port: 8080 }];
  const cs = convertEndpointSlice(slice);
  t.true(cs.ok);
  if (cs.ok) {
    t.deepEqual(
      cs.obj.endpoints,
      [
        { addresses: ['fd00::1'], conditions: { ready: true, serving: true, terminating: false }, zone: 'z' },
        { addresses: ['fd00::2'], conditions: { ready: true, serving: true, terminating: false }, zone: 'z' },
      ],
      'only what the model reads: no targetRef',
    );
    t.is(cs.obj.endpoints![0]!.conditions, cs.obj.endpoints![1]!.conditions, 'equal conditions are one shared object');
    t.true(Object.isFrozen(cs.obj.endpoints![0]!.conditions));
  }

  const n = new V1Node();
  n.metadata = { name: 'n1', labels: { 'topology.kubernetes.io/zone': 'a' } };
  n.spec = { podCIDR: '10.0.0.0/24', providerID: 'x' };
  n.status = { addresses: [{ type: 'InternalIP', address: '10.1.1.1' }], capacity: { cpu: '4' } };
  const cn = convertNode(n);
  t.true(cn.ok);
  if (cn.ok) {
    t.is(cn.key, 'n1');
    t.deepEqual(cn.obj.spec, { podCIDR: '10.0.0.0/24' });
    t.deepEqual(cn.obj.status, { addresses: [{ type: 'InternalIP', address: '10.1.1.1' }] });
  }
});

test('structural rejects name the object and the field', (t) => {
  t.like(convertService(null), { ok: false, key: undefined, reason: 'not an object' });
  t.like(convertService([]), { ok: false, reason: 'not an object' });
  t.like(convertService({ kind: 'Pod', metadata: { name: 'x', namespace: 'y' } }), {
    ok: false,
    key: 'y/x',
    reason: 'kind is Pod, expected Service',
  });
  t.like(convertService({ metadata: { namespace: 'y' } }), { ok: false, reason: 'metadata.name is missing' });
  t.like(convertService({ metadata: { name: 'x' } }), { ok: false, key: 'x', reason: 'metadata.namespace is missing' });
  t.like(convertService({ metadata: { name: 'x', namespace: 'y', labels: { a: 1 } } }), {
    ok: false,
    reason: 'metadata.labels.a is not a string',
  });
  t.like(convertService({ metadata: { name: 'x', namespace: 'y' }, spec: { ports: {} } }), {
    ok: false,
    reason: 'spec.ports is not a list',
  });
  t.like(convertEndpointSlice({ metadata: { name: 'x', namespace: 'y' }, ports: 'a' }), {
    ok: false,
    reason: 'ports is not a list',
  });
  t.like(convertEndpointSlice({ metadata: { name: 'x', namespace: 'y' }, addressType: 4 }), {
    ok: false,
    reason: 'addressType is not a string',
  });
  t.like(convertNode({ metadata: { name: 'n' }, status: { addresses: 'x' } }), {
    ok: false,
    key: 'n',
    reason: 'status.addresses is not a list',
  });
  t.like(convertServiceCIDR({ metadata: { name: 'c' }, spec: { cidrs: ['10.0.0.0/8'] } }), { ok: true, key: 'c' });
  // Semantics are the model's: a nonsense port passes structural conversion.
  t.like(convertService({ metadata: { name: 'x', namespace: 'y' }, spec: { ports: [{ port: -1 }] } }), { ok: true });
});

test('toPlain bounds depth and drops what JSON cannot carry', (t) => {
  let deep: Record<string, unknown> = { leaf: true };
  for (let i = 0; i < 100; i++) deep = { d: deep };
  t.notThrows(() => toPlain(deep));
  t.deepEqual(toPlain({ a: undefined, b: () => 1, c: NaN, d: [1, undefined, 2], e: new Date('x') }), { d: [1, 2] });
  t.is(rfc3339(new Date('2024-01-01T00:00:00.123Z')), '2024-01-01T00:00:00.123Z');
  t.is(rfc3339(new Date('2024-01-01T00:00:00Z')), '2024-01-01T00:00:00Z');
});

test("selectedByProxy mirrors kube-proxy's label selector", (t) => {
  t.true(selectedByProxy(undefined));
  t.true(selectedByProxy({ app: 'x' }));
  t.false(selectedByProxy({ 'service.kubernetes.io/service-proxy-name': '' }));
  t.false(selectedByProxy({ 'service.kubernetes.io/headless': '' }));
});
