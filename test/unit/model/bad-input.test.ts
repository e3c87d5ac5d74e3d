import test, { type ExecutionContext } from 'ava';
import fc from 'fast-check';
import type { ServicePortId } from '../../../src/model/ids.ts';
import type { EndpointSlice, Service } from '../../../src/model/k8s.ts';
import type { DesiredState } from '../../../src/model/types.ts';
import { ep, keys, NODE, newTracker, node, slice, svc } from './helpers.ts';

const GOOD = 'default/good:p/TCP' as ServicePortId;
const BAD = (port = 'p', proto = 'TCP') => `default/bad:${port}/${proto}` as ServicePortId;

/** A healthy neighbour that must come through every bad input untouched. */
function feedGood(tr: ReturnType<typeof newTracker>['t']) {
  tr.onService(undefined, svc('good', { clusterIP: '10.96.0.1' }));
  tr.onEndpointSlice(slice('good-1', 'good', [ep('10.0.1.1'), ep('10.0.1.2')]), false);
}

function assertGoodIntact(t: ExecutionContext, d: DesiredState) {
  t.is(d.services.get(GOOD)?.clusterIP, '10.96.0.1');
  t.deepEqual(keys(d.selections.get(GOOD)?.cluster), ['10.0.1.1:8080', '10.0.1.2:8080']);
}

const many = <T>(n: number, f: (i: number) => T): T[] => Array.from({ length: n }, (_, i) => f(i));
const ip = (i: number) => `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;

interface Row {
  name: string;
  kind: 'Service' | 'EndpointSlice';
  /** Fed after a good Service "bad" (for slice rows) or instead of it (for Service rows). */
  obj: unknown;
  reason: string;
  /** How the warning names the object. */
  names: string;
  /** What of the bad Service is still published. */
  check?: (t: ExecutionContext, d: DesiredState) => void;
}

const goodBadSvc = () => svc('bad', { clusterIP: '10.96.0.2', ports: [{ name: 'p', port: 80 }] });

const serviceRows: Row[] = [
  {
    name: 'invalid cluster IP: Service skipped',
    kind: 'Service',
    obj: svc('bad', { clusterIP: '10.96.0.300' }),
    reason: 'invalid-cluster-ip',
    names: 'default/bad',
    check: (t, d) => t.false(d.services.has(BAD())),
  },
  {
    name: 'port out of range: that port skipped',
    kind: 'Service',
    obj: svc('bad', {
      ports: [
        { name: 'p', port: 80 },
        { name: 'q', port: 70000 },
      ],
    }),
    reason: 'invalid-port',
    names: 'default/bad',
    check: (t, d) => t.deepEqual([d.services.has(BAD()), d.services.has(BAD('q'))], [true, false]),
  },
  {
    name: 'port 0: that port skipped',
    kind: 'Service',
    obj: svc('bad', {
      ports: [
        { name: 'p', port: 80 },
        { name: 'q', port: 0 },
      ],
    }),
    reason: 'invalid-port',
    names: 'default/bad',
    check: (t, d) => t.false(d.services.has(BAD('q'))),
  },
  {
    name: 'non-integer port',
    kind: 'Service',
    obj: svc('bad', {
      ports: [
        { name: 'p', port: 80 },
        { name: 'q', port: '81' as unknown as number },
      ],
    }),
    reason: 'invalid-port',
    names: 'default/bad',
    check: (t, d) => t.true(d.services.has(BAD())),
  },
  {
    name: 'ports not a list',
    kind: 'Service',
    obj: { ...svc('bad'), spec: { clusterIP: '10.96.0.2', ports: '80' } },
    reason: 'invalid-port',
    names: 'default/bad',
  },
  {
    name: 'unknown protocol: that port skipped',
    kind: 'Service',
    obj: svc('bad', {
      ports: [
        { name: 'p', port: 80 },
        { name: 'q', protocol: 'ICMP', port: 81 },
      ],
    }),
    reason: 'unknown-protocol',
    names: 'default/bad',
    check: (t, d) => t.deepEqual([d.services.has(BAD()), d.services.has(BAD('q', 'ICMP'))], [true, false]),
  },
  {
    name: 'duplicate port names: the first wins',
    kind: 'Service',
    obj: svc('bad', {
      ports: [
        { name: 'p', port: 80 },
        { name: 'p', port: 81 },
      ],
    }),
    reason: 'duplicate-port',
    names: 'default/bad',
    check: (t, d) => t.is(d.services.get(BAD())?.port, 80),
  },
  {
    name: 'duplicate port number and protocol: the first wins',
    kind: 'Service',
    obj: svc('bad', {
      ports: [
        { name: 'p', port: 80 },
        { name: 'q', port: 80 },
        { name: 'u', protocol: 'UDP', port: 80 },
      ],
    }),
    reason: 'duplicate-port',
    names: 'default/bad',
    check: (t, d) =>
      t.deepEqual(
        [d.services.has(BAD()), d.services.has(BAD('q')), d.services.has(BAD('u', 'UDP'))],
        [true, false, true],
      ),
  },
  {
    name: 'a port without a name beside another port: that port skipped (the API requires names then)',
    kind: 'Service',
    obj: svc('bad', { ports: [{ name: 'p', port: 80 }, { port: 81 }] }),
    reason: 'invalid-port',
    names: 'default/bad',
    check: (t, d) => t.deepEqual([d.services.has(BAD()), d.services.has(BAD(''))], [true, false]),
  },
  {
    name: 'a port name that is not a string: that port skipped (not the unnamed port)',
    kind: 'Service',
    obj: svc('bad', { ports: [{ name: 80 as never, port: 80 }] }),
    reason: 'invalid-port',
    names: 'default/bad',
    check: (t, d) => t.false(d.services.has(BAD(''))),
  },
  {
    name: 'invalid node port: that port skipped',
    kind: 'Service',
    obj: svc('bad', {
      type: 'NodePort',
      ports: [
        { name: 'p', port: 80, nodePort: 30080 },
        { name: 'q', port: 81, nodePort: 99999 },
      ],
    }),
    reason: 'invalid-node-port',
    names: 'default/bad',
    check: (t, d) => t.deepEqual([d.services.get(BAD())?.nodePort, d.services.has(BAD('q'))], [30080, false]),
  },
  {
    name: 'unknown type: Service skipped',
    kind: 'Service',
    obj: svc('bad', { type: 'Weird' }),
    reason: 'unknown-type',
    names: 'default/bad',
    check: (t, d) => t.false(d.services.has(BAD())),
  },
  {
    name: 'invalid external IP: that IP dropped',
    kind: 'Service',
    obj: svc('bad', { externalIPs: ['1.2.3.4', 'nope'] }),
    reason: 'invalid-external-ip',
    names: 'default/bad',
    check: (t, d) => t.deepEqual(d.services.get(BAD())?.externalIPs, ['1.2.3.4']),
  },
  {
    name: 'invalid source range: load-balancer VIPs withheld (fail closed)',
    kind: 'Service',
    obj: svc('bad', {
      type: 'LoadBalancer',
      ingress: [{ ip: '5.5.5.5' }],
      sourceRanges: ['10.0.0.0/8', '300.0.0.0/8'],
    }),
    reason: 'invalid-source-range',
    names: 'default/bad',
    check: (t, d) => t.deepEqual([d.services.has(BAD()), d.services.get(BAD())?.loadBalancerVIPs], [true, []]),
  },
  {
    name: 'invalid load-balancer ingress IP: dropped',
    kind: 'Service',
    obj: svc('bad', { type: 'LoadBalancer', ingress: [{ ip: '5.5.5.5' }, { ip: 'x.y' }] }),
    reason: 'invalid-load-balancer-ip',
    names: 'default/bad',
    check: (t, d) => t.deepEqual(d.services.get(BAD())?.loadBalancerVIPs, ['5.5.5.5']),
  },
  {
    name: 'eTP Local load balancer without a health check port',
    kind: 'Service',
    obj: svc('bad', { type: 'LoadBalancer', eTP: 'Local', ports: [{ name: 'p', port: 80, nodePort: 30080 }] }),
    reason: 'invalid-health-check-node-port',
    names: 'default/bad',
    check: (t, d) => t.deepEqual([d.services.get(BAD())?.healthCheckNodePort, d.healthChecks.size], [0, 0]),
  },
  {
    name: 'affinity timeout out of range: default used',
    kind: 'Service',
    obj: svc('bad', { affinity: 'ClientIP', timeout: 0 }),
    reason: 'invalid-session-affinity',
    names: 'default/bad',
    check: (t, d) => t.is(d.services.get(BAD())?.stickyMaxAgeSeconds, 10800),
  },
  {
    name: 'too many ports: Service skipped',
    kind: 'Service',
    obj: svc('bad', { ports: many(1001, (i) => ({ name: `p${i}`, port: 1 + i })) }),
    reason: 'too-many-ports',
    names: 'default/bad',
    check: (t, d) => t.false(d.services.has(BAD('p0'))),
  },
  {
    name: 'no name',
    kind: 'Service',
    obj: { metadata: { namespace: 'default' }, spec: { clusterIP: '10.96.0.2' } },
    reason: 'missing-name',
    names: 'default/<no name>',
  },
  { name: 'not an object: null', kind: 'Service', obj: null, reason: 'not-an-object', names: '<not an object>' },
  {
    name: 'not an object: a string',
    kind: 'Service',
    obj: 'Service',
    reason: 'not-an-object',
    names: '<not an object>',
  },
  {
    name: 'spec not an object',
    kind: 'Service',
    obj: { metadata: { namespace: 'default', name: 'bad' }, spec: [1] },
    reason: 'not-an-object',
    names: 'default/bad',
  },
];

const ports1 = [{ name: 'p', protocol: 'TCP', port: 8080 }];
const sliceRows: Row[] = [
  {
    name: 'invalid endpoint IP: that endpoint skipped',
    kind: 'EndpointSlice',
    obj: slice('bad-1', 'bad', [ep('10.0.2.1'), ep('10.0.2.300'), ep('banana')]),
    reason: 'invalid-endpoint-ip',
    names: 'default/bad-1',
    check: (t, d) => t.deepEqual(keys(d.endpoints.get(BAD())), ['10.0.2.1:8080', '10.0.2.9:8080']),
  },
  {
    name: 'endpoint without an address',
    kind: 'EndpointSlice',
    obj: slice('bad-1', 'bad', [ep('10.0.2.1'), { addresses: [] }, {}]),
    reason: 'endpoint-without-address',
    names: 'default/bad-1',
    check: (t, d) => t.deepEqual(keys(d.endpoints.get(BAD())), ['10.0.2.1:8080', '10.0.2.9:8080']),
  },
  {
    name: 'IPv6 address in an IPv4 slice',
    kind: 'EndpointSlice',
    obj: slice('bad-1', 'bad', [ep('10.0.2.1'), ep('fd00::1')]),
    reason: 'endpoint-family-mismatch',
    names: 'default/bad-1',
    check: (t, d) => t.deepEqual(keys(d.endpoints.get(BAD())), ['10.0.2.1:8080', '10.0.2.9:8080']),
  },
  {
    name: 'unknown address type: slice ignored',
    kind: 'EndpointSlice',
    obj: slice('bad-1', 'bad', [ep('10.0.2.1')], { addressType: 'IPX' }),
    reason: 'unknown-address-type',
    names: 'default/bad-1',
    check: (t, d) => t.deepEqual(keys(d.endpoints.get(BAD())), ['10.0.2.9:8080']),
  },
  {
    name: 'too many endpoints: slice ignored, other slices of the Service kept',
    kind: 'EndpointSlice',
    obj: slice(
      'bad-2',
      'bad',
      many(100_001, (i) => ({ addresses: [ip(i)] })),
    ),
    reason: 'too-many-endpoints',
    names: 'default/bad-2',
    check: (t, d) => t.deepEqual(keys(d.endpoints.get(BAD())), ['10.0.2.9:8080']),
  },
  {
    name: 'too many ports: slice ignored',
    kind: 'EndpointSlice',
    obj: slice('bad-2', 'bad', [ep('10.0.2.1')], {
      ports: many(1001, (i) => ({ name: `p${i}`, protocol: 'TCP', port: 1 + i })),
    }),
    reason: 'too-many-ports',
    names: 'default/bad-2',
    check: (t, d) => t.deepEqual(keys(d.endpoints.get(BAD())), ['10.0.2.9:8080']),
  },
  {
    name: 'slice port out of range: that port skipped',
    kind: 'EndpointSlice',
    obj: slice('bad-1', 'bad', [ep('10.0.2.1')], { ports: [{ name: 'p', protocol: 'TCP', port: 65536 }] }),
    reason: 'invalid-port',
    names: 'default/bad-1',
    check: (t, d) => t.deepEqual(keys(d.endpoints.get(BAD())), ['10.0.2.9:8080']),
  },
  {
    name: 'slice port with unknown protocol',
    kind: 'EndpointSlice',
    obj: slice('bad-1', 'bad', [ep('10.0.2.1')], { ports: [...ports1, { name: 'p', protocol: 'QUIC', port: 1 }] }),
    reason: 'unknown-protocol',
    names: 'default/bad-1',
    check: (t, d) => t.deepEqual(keys(d.endpoints.get(BAD())), ['10.0.2.1:8080', '10.0.2.9:8080']),
  },
  {
    name: 'duplicate slice port: the first wins',
    kind: 'EndpointSlice',
    obj: slice('bad-1', 'bad', [ep('10.0.2.1')], { ports: [...ports1, { name: 'p', protocol: 'TCP', port: 9999 }] }),
    reason: 'duplicate-port',
    names: 'default/bad-1',
    check: (t, d) => t.deepEqual(keys(d.endpoints.get(BAD())), ['10.0.2.1:8080', '10.0.2.9:8080']),
  },
  {
    name: 'two slice ports of one name, other protocols: the first wins (the API refuses repeated names)',
    kind: 'EndpointSlice',
    obj: slice('bad-1', 'bad', [ep('10.0.2.1')], { ports: [...ports1, { name: 'p', protocol: 'UDP', port: 53 }] }),
    reason: 'duplicate-port',
    names: 'default/bad-1',
    check: (t, d) => t.deepEqual(keys(d.endpoints.get(BAD())), ['10.0.2.1:8080', '10.0.2.9:8080']),
  },
  {
    name: 'slice port name that is not a string: that port skipped (not the unnamed port)',
    kind: 'EndpointSlice',
    obj: slice('bad-1', 'bad', [ep('10.0.2.1')], { ports: [...ports1, { name: 7 as never, port: 9 }] }),
    reason: 'invalid-port',
    names: 'default/bad-1',
    check: (t, d) => t.deepEqual(keys(d.endpoints.get(BAD())), ['10.0.2.1:8080', '10.0.2.9:8080']),
  },
  {
    name: 'no service-name label',
    kind: 'EndpointSlice',
    obj: { metadata: { namespace: 'default', name: 'bad-1' }, addressType: 'IPv4', endpoints: [ep('10.0.2.1')] },
    reason: 'missing-service-name',
    names: 'default/bad-1',
  },
  { name: 'slice not an object', kind: 'EndpointSlice', obj: 17, reason: 'not-an-object', names: '<not an object>' },
];

for (const row of [...serviceRows, ...sliceRows]) {
  test(`bad input: ${row.kind}: ${row.name}`, (t) => {
    const { t: tr, warnings, rejected } = newTracker();
    feedGood(tr);
    if (row.kind === 'Service') {
      t.notThrows(() => tr.onService(undefined, row.obj as Service));
    } else {
      tr.onService(undefined, goodBadSvc());
      tr.onEndpointSlice(slice('bad-0', 'bad', [ep('10.0.2.9')]), false);
      t.notThrows(() => tr.onEndpointSlice(row.obj as EndpointSlice, false));
    }
    const { desired } = tr.checkout();
    assertGoodIntact(t, desired);
    const w = warnings();
    t.is(w.length, 1, 'exactly one warning');
    t.true(w[0]!.msg.includes(row.names), `warning names ${row.names}: ${w[0]!.msg}`);
    t.true(w[0]!.msg.includes(row.reason), `warning says ${row.reason}`);
    t.deepEqual(rejected, [`${row.kind}/${row.reason}`]);
    t.is(tr.rejects.get(`${row.kind}/${row.reason}`), 1);
    row.check?.(t, desired);
  });
}

test('bad input: many bad endpoints in one slice make one warning, one count', (t) => {
  const { t: tr, warnings, rejected } = newTracker();
  tr.onService(undefined, goodBadSvc());
  tr.onEndpointSlice(
    slice(
      'bad-1',
      'bad',
      many(50, (i) => ({ addresses: [`10.0.0.${300 + i}`] })),
    ),
    false,
  );
  t.is(warnings().length, 1);
  t.true(warnings()[0]!.msg.includes('and 45 more'));
  t.deepEqual(rejected, ['EndpointSlice/invalid-endpoint-ip']);
});

test('bad input: a resync of the same bad object is not reported again; a new version is', (t) => {
  const { t: tr, warnings } = newTracker();
  const bad = svc('bad', { ports: [{ name: 'p', port: 0 }] });
  tr.onService(undefined, bad);
  tr.onService(bad, bad);
  t.is(warnings().length, 1);
  tr.onService(bad, svc('bad', { ports: [{ name: 'p', port: 0 }], rv: '2' }));
  t.is(warnings().length, 2);
});

test('bad input: Node with invalid address and pod CIDR keeps the valid facts', (t) => {
  const { t: tr, warnings, rejected } = newTracker({ detectLocalMode: 'NodeCIDR' });
  tr.onNode(
    node(NODE, { zone: 'z1', internal: ['10.1.0.300', '10.1.0.5'], podCIDRs: ['10.244.1.0/33', '10.244.1.0/24'] }),
  );
  const { desired } = tr.checkout();
  t.deepEqual(
    [desired.node.zone, desired.node.primaryIP, desired.node.podCIDRs],
    ['z1', '10.1.0.5', ['10.244.1.0/24']],
  );
  t.is(warnings().length, 1);
  t.deepEqual(rejected.sort(), ['Node/invalid-cidr', 'Node/invalid-node-address']);
});

test('bad input: invalid options are reported once at construction', (t) => {
  const { t: tr, rejected } = newTracker({ clusterCIDRs: ['10.244.0.0/16', 'bogus'], nodePortAddresses: ['nope'] });
  t.deepEqual(rejected, ['Options/invalid-cidr']);
  t.deepEqual(tr.checkout().desired.masquerade.detectLocal.cidrs, ['10.244.0.0/16']);
});

test('bad input: a bad update of a working Service leaves its valid parts programmed', (t) => {
  const { t: tr } = newTracker();
  tr.onService(undefined, goodBadSvc());
  tr.onEndpointSlice(slice('bad-1', 'bad', [ep('10.0.2.1')]), false);
  tr.checkout();
  tr.onEndpointSlice(slice('bad-1', 'bad', [ep('10.0.2.1'), ep('nonsense')]), false);
  const { desired, change } = tr.checkout();
  t.is(change.services.size, 0, 'the only change was invalid, so nothing changed');
  t.deepEqual(keys(desired.endpoints.get(BAD())), ['10.0.2.1:8080']);
});

test('bad input: arbitrary garbage never throws and never disturbs a good Service', (t) => {
  const garbageMeta = fc.record(
    {
      namespace: fc.oneof(fc.constant('default'), fc.anything()),
      name: fc.oneof(fc.constant('bad'), fc.anything()),
      labels: fc.oneof(fc.constant({ 'kubernetes.io/service-name': 'good' }), fc.anything()),
    },
    { requiredKeys: [] },
  );
  const garbageObj = fc.oneof(
    fc.anything(),
    fc.record({ metadata: garbageMeta, spec: fc.anything(), status: fc.anything() }, { requiredKeys: [] }),
    fc.record(
      {
        metadata: garbageMeta,
        addressType: fc.oneof(fc.constant('IPv4'), fc.anything()),
        endpoints: fc.anything(),
        ports: fc.anything(),
      },
      { requiredKeys: [] },
    ),
  );
  fc.assert(
    fc.property(fc.array(garbageObj, { maxLength: 8 }), (objs) => {
      const { t: tr } = newTracker();
      feedGood(tr);
      for (const o of objs) {
        tr.onService(undefined, o as Service);
        tr.onEndpointSlice(o as EndpointSlice, false);
        tr.onNode(o as never);
      }
      const d = tr.checkout().desired;
      return d.services.get(GOOD)?.clusterIP === '10.96.0.1' && (d.endpoints.get(GOOD)?.length ?? 0) >= 2;
    }),
    { numRuns: 300 },
  );
  t.pass();
});

test('bad input: a wholly unusable update keeps the last good version programmed', (t) => {
  const { t: tr, rejected } = newTracker();
  tr.onService(undefined, goodBadSvc());
  tr.onEndpointSlice(slice('bad-1', 'bad', [ep('10.0.2.1')]), false);
  tr.checkout();
  const updates: [string, () => boolean][] = [
    ['invalid cluster IP', () => tr.onService(goodBadSvc(), svc('bad', { clusterIP: 'x' }))],
    ['unknown type', () => tr.onService(goodBadSvc(), svc('bad', { type: 'Nope' }))],
    [
      'too many ports',
      () => tr.onService(goodBadSvc(), svc('bad', { ports: many(1001, (i) => ({ name: `p${i}`, port: 1 + i })) })),
    ],
    [
      'slice: too many endpoints',
      () =>
        tr.onEndpointSlice(
          slice(
            'bad-1',
            'bad',
            many(100_001, (i) => ({ addresses: [ip(i)] })),
          ),
          false,
        ),
    ],
    [
      'slice: unknown address type',
      () => tr.onEndpointSlice(slice('bad-1', 'bad', [ep('10.0.2.2')], { addressType: 'IPX' }), false),
    ],
    [
      'slice: service-name label lost',
      () => tr.onEndpointSlice({ metadata: { namespace: 'default', name: 'bad-1' }, addressType: 'IPv4' }, false),
    ],
  ];
  for (const [what, update] of updates) {
    t.false(update(), what);
    const { desired, change } = tr.checkout();
    t.is(change.services.size, 0, what);
    t.is(desired.services.get(BAD())?.clusterIP, '10.96.0.2', what);
    t.deepEqual(keys(desired.endpoints.get(BAD())), ['10.0.2.1:8080'], what);
  }
  t.is(rejected.length, updates.length);
  // A deletion still deletes.
  tr.onService(goodBadSvc(), undefined);
  t.false(tr.checkout().desired.services.has(BAD()));
});
