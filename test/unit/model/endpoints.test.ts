import test from 'ava';
import type { ServicePortId } from '../../../src/model/ids.ts';
import type { EndpointSlice, Service } from '../../../src/model/k8s.ts';
import { normalizeSlice } from '../../../src/model/slice.ts';
import { DEFAULT_LIMITS } from '../../../src/model/types.ts';
import { ep, keys, NODE, newTracker, slice, svc } from './helpers.ts';

const id = (s: string) => s as ServicePortId;

interface Row {
  name: string;
  family?: 'IPv4' | 'IPv6';
  service: Service;
  slices: EndpointSlice[];
  /** service port id -> endpoint keys */
  want: Record<string, string[]>;
}

const twoPorts = svc('s', {
  ports: [
    { name: 'http', protocol: 'TCP', port: 80 },
    { name: 'dns', protocol: 'UDP', port: 53 },
  ],
});

const rows: Row[] = [
  {
    name: 'one slice, one port',
    service: svc('s'),
    slices: [slice('s-1', 's', [ep('10.0.0.2'), ep('10.0.0.1')])],
    want: { 'default/s:p/TCP': ['10.0.0.1:8080', '10.0.0.2:8080'] },
  },
  {
    name: 'all slices of the Service merge',
    service: svc('s'),
    slices: [slice('s-1', 's', [ep('10.0.0.1')]), slice('s-2', 's', [ep('10.0.0.2')])],
    want: { 'default/s:p/TCP': ['10.0.0.1:8080', '10.0.0.2:8080'] },
  },
  {
    name: 'an address in two slices is kept once',
    service: svc('s'),
    slices: [slice('s-1', 's', [ep('10.0.0.1')]), slice('s-2', 's', [ep('10.0.0.1'), ep('10.0.0.2')])],
    want: { 'default/s:p/TCP': ['10.0.0.1:8080', '10.0.0.2:8080'] },
  },
  {
    name: 'named target ports resolve per slice (pods listening on different ports)',
    service: svc('s', { ports: [{ name: 'web', protocol: 'TCP', port: 80, targetPort: 'http' }] }),
    slices: [
      slice('s-1', 's', [ep('10.0.0.1')], { ports: [{ name: 'web', protocol: 'TCP', port: 8080 }] }),
      slice('s-2', 's', [ep('10.0.0.2')], { ports: [{ name: 'web', protocol: 'TCP', port: 9090 }] }),
    ],
    want: { 'default/s:web/TCP': ['10.0.0.1:8080', '10.0.0.2:9090'] },
  },
  {
    name: 'ports match by name and protocol',
    service: twoPorts,
    slices: [
      slice('s-1', 's', [ep('10.0.0.1')], {
        ports: [
          { name: 'http', protocol: 'TCP', port: 8080 },
          { name: 'dns', protocol: 'UDP', port: 5353 },
        ],
      }),
      // One slice may not hold two ports of one name (the API server refuses it); two slices may.
      slice('s-2', 's', [ep('10.0.0.2')], { ports: [{ name: 'dns', protocol: 'TCP', port: 5353 }] }),
    ],
    want: { 'default/s:http/TCP': ['10.0.0.1:8080'], 'default/s:dns/UDP': ['10.0.0.1:5353'] },
  },
  {
    // The API server defaults a slice port's nil name to "" and its protocol to TCP.
    name: 'slice ports without a name (absent or null) join the Service port without one',
    service: svc('s', { ports: [{ port: 80 }] }),
    slices: [
      slice('s-1', 's', [ep('10.0.0.1')], { ports: [{ port: 8080 }] }),
      slice('s-2', 's', [ep('10.0.0.2')], { ports: [{ name: null, protocol: null, port: 8080 } as never] }),
    ],
    want: { 'default/s:/TCP': ['10.0.0.1:8080', '10.0.0.2:8080'] },
  },
  {
    name: 'a slice port without a name does not join a named Service port',
    service: svc('s', { ports: [{ name: 'http', port: 80 }] }),
    slices: [slice('s-1', 's', [ep('10.0.0.1')], { ports: [{ port: 8080 }] })],
    want: { 'default/s:http/TCP': [] },
  },
  {
    name: 'a slice port with no Service port is not published',
    service: svc('s'),
    slices: [slice('s-1', 's', [ep('10.0.0.1')], { ports: [{ name: 'other', protocol: 'TCP', port: 1 }] })],
    want: { 'default/s:p/TCP': [] },
  },
  {
    name: 'slices of another Service do not count',
    service: svc('s'),
    slices: [slice('s-1', 's', [ep('10.0.0.1')]), slice('t-1', 't', [ep('10.0.0.9')])],
    want: { 'default/s:p/TCP': ['10.0.0.1:8080'] },
  },
  {
    name: 'slices in another namespace do not count',
    service: svc('s'),
    slices: [slice('s-1', 's', [ep('10.0.0.1')]), slice('s-1', 's', [ep('10.0.0.9')], { ns: 'other' })],
    want: { 'default/s:p/TCP': ['10.0.0.1:8080'] },
  },
  {
    name: 'FQDN slices are ignored',
    service: svc('s'),
    slices: [
      slice('s-1', 's', [ep('10.0.0.1')]),
      slice('s-2', 's', [{ addresses: ['db.example'] }], { addressType: 'FQDN' }),
    ],
    want: { 'default/s:p/TCP': ['10.0.0.1:8080'] },
  },
  {
    name: 'IPv6 slices go to the IPv6 tracker only',
    service: svc('s', { clusterIPs: ['10.96.0.10', 'fd00::10'] }),
    slices: [slice('s-4', 's', [ep('10.0.0.1')]), slice('s-6', 's', [ep('fd00::1')], { addressType: 'IPv6' })],
    want: { 'default/s:p/TCP': ['10.0.0.1:8080'] },
  },
  {
    name: 'IPv6 tracker, bracketed keys',
    family: 'IPv6',
    service: svc('s', { clusterIPs: ['10.96.0.10', 'fd00::10'] }),
    slices: [slice('s-4', 's', [ep('10.0.0.1')]), slice('s-6', 's', [ep('fd00:0::1')], { addressType: 'IPv6' })],
    want: { 'default/s:p/TCP': ['[fd00::1]:8080'] },
  },
  {
    name: 'slices of a headless-labelled or other-proxy slice are ignored',
    service: svc('s'),
    slices: [
      slice('s-1', 's', [ep('10.0.0.1')]),
      slice('s-2', 's', [ep('10.0.0.2')], { labels: { 'service.kubernetes.io/service-proxy-name': 'x' } }),
      slice('s-3', 's', [ep('10.0.0.3')], { labels: { 'service.kubernetes.io/headless': '' } }),
    ],
    want: { 'default/s:p/TCP': ['10.0.0.1:8080'] },
  },
];

for (const row of rows) {
  test(`endpoints: ${row.name}`, (t) => {
    const { t: tr, warnings } = newTracker({ family: row.family ?? 'IPv4' });
    tr.onService(undefined, row.service);
    for (const s of row.slices) tr.onEndpointSlice(s, false);
    const { desired } = tr.checkout();
    t.deepEqual(warnings(), []);
    for (const [portId, want] of Object.entries(row.want))
      t.deepEqual(keys(desired.endpoints.get(id(portId))), want, portId);
  });
}

test('endpoints: a duplicate address prefers the copy on this node', (t) => {
  const { t: tr } = newTracker();
  tr.onService(undefined, svc('s'));
  tr.onEndpointSlice(slice('s-1', 's', [ep('10.0.0.1', { node: 'other' })]), false);
  tr.onEndpointSlice(slice('s-2', 's', [ep('10.0.0.1', { node: NODE })]), false);
  const eps = tr.checkout().desired.endpoints.get(id('default/s:p/TCP'))!;
  t.is(eps.length, 1);
  t.true(eps[0]!.isLocal);
  t.is(eps[0]!.nodeName, NODE);
});

interface CondRow {
  conditions: { ready?: boolean; serving?: boolean; terminating?: boolean };
  want: [ready: boolean, serving: boolean, terminating: boolean];
}

const condRows: CondRow[] = [
  { conditions: {}, want: [true, true, false] },
  // Unset serving means true whatever ready says (upstream EndpointSliceCache).
  { conditions: { ready: false }, want: [false, true, false] },
  { conditions: { ready: false, terminating: true }, want: [false, true, true] },
  { conditions: { ready: false, serving: true, terminating: true }, want: [false, true, true] },
  { conditions: { ready: true, serving: true, terminating: false }, want: [true, true, false] },
  { conditions: { ready: false, serving: false, terminating: true }, want: [false, false, true] },
];

for (const row of condRows) {
  test(`endpoints: conditions ${JSON.stringify(row.conditions)}`, (t) => {
    const res = normalizeSlice(
      slice('s-1', 's', [{ addresses: ['10.0.0.1'], conditions: row.conditions }]),
      'IPv4',
      DEFAULT_LIMITS,
    );
    const e = res.info!.endpoints[0]!;
    t.deepEqual([e.ready, e.serving, e.terminating], row.want);
  });
}

test('endpoints: hints, zone and node name are kept; hint names sorted and unique', (t) => {
  const res = normalizeSlice(
    slice('s-1', 's', [ep('10.0.0.1', { node: 'n1', zone: 'z1', zones: ['z2', 'z1', 'z2'], nodes: ['n1'] })]),
    'IPv4',
    DEFAULT_LIMITS,
  );
  const e = res.info!.endpoints[0]!;
  t.deepEqual([e.nodeName, e.zone, e.zoneHints, e.nodeHints], ['n1', 'z1', ['z1', 'z2'], ['n1']]);
});

test('endpoints: reordering endpoints and ports in a slice is not a change', (t) => {
  const { t: tr } = newTracker();
  tr.onService(
    undefined,
    svc('s', {
      ports: [
        { name: 'a', port: 1 },
        { name: 'b', port: 2 },
      ],
    }),
  );
  const ports = [
    { name: 'a', protocol: 'TCP', port: 10 },
    { name: 'b', protocol: 'TCP', port: 20 },
  ];
  tr.onEndpointSlice(slice('s-1', 's', [ep('10.0.0.1'), ep('10.0.0.2')], { ports }), false);
  tr.checkout();
  const needed = tr.onEndpointSlice(
    slice('s-1', 's', [ep('10.0.0.2'), ep('10.0.0.1')], { ports: [...ports].reverse() }),
    false,
  );
  t.false(needed);
  t.is(tr.checkout().change.services.size, 0);
});
