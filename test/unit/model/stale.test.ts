import test from 'ava';
import type { EndpointSlice, Service } from '../../../src/model/k8s.ts';
import type { StaleTarget } from '../../../src/model/types.ts';
import { ep, newTracker, slice, svc, type EpOpts } from './helpers.ts';

const udp = (o: Parameters<typeof svc>[1] = {}) =>
  svc('dns', { ports: [{ name: 'dns', protocol: 'UDP', port: 53 }], ...o });
const sctp = () => svc('dns', { ports: [{ name: 'dns', protocol: 'SCTP', port: 53 }] });
const tcp = () => svc('dns', { ports: [{ name: 'dns', protocol: 'TCP', port: 53 }] });
const sl = (proto: string, ...eps: [string, EpOpts?][]) =>
  slice(
    'dns-1',
    'dns',
    eps.map(([ip, o]) => ep(ip, o)),
    { ports: [{ name: 'dns', protocol: proto, port: 5353 }] },
  );

type Step = { svc?: Service | null; slice?: EndpointSlice; removeSlice?: EndpointSlice };

interface Row {
  name: string;
  before: Step[];
  after: Step[];
  /** Compact: "reason ips:port [->endpoint]" */
  want: string[];
}

const show = (s: StaleTarget) =>
  `${s.reason} ${s.protocol} ${s.serviceIPs.join(',')}:${s.port}${s.nodePort ? `+${s.nodePort}` : ''}${s.endpointIP ? ` ->${s.endpointIP}` : ''}`;

const rows: Row[] = [
  {
    name: 'UDP endpoint removed',
    before: [{ svc: udp() }, { slice: sl('UDP', ['10.0.0.1'], ['10.0.0.2']) }],
    after: [{ slice: sl('UDP', ['10.0.0.1']) }],
    want: ['endpoint-removed UDP 10.96.0.10:53 ->10.0.0.2'],
  },
  {
    name: 'SCTP endpoint removed',
    before: [{ svc: sctp() }, { slice: sl('SCTP', ['10.0.0.1'], ['10.0.0.2']) }],
    after: [{ slice: sl('SCTP', ['10.0.0.1']) }],
    want: ['endpoint-removed SCTP 10.96.0.10:53 ->10.0.0.2'],
  },
  {
    name: 'TCP endpoint removed: nothing (TCP flows end on their own)',
    before: [{ svc: tcp() }, { slice: sl('TCP', ['10.0.0.1'], ['10.0.0.2']) }],
    after: [{ slice: sl('TCP', ['10.0.0.1']) }],
    want: [],
  },
  {
    name: 'UDP endpoint stops serving',
    before: [{ svc: udp() }, { slice: sl('UDP', ['10.0.0.1'], ['10.0.0.2']) }],
    after: [{ slice: sl('UDP', ['10.0.0.1'], ['10.0.0.2', { ready: false, serving: false, terminating: true }]) }],
    want: ['endpoint-removed UDP 10.96.0.10:53 ->10.0.0.2'],
  },
  {
    name: 'UDP endpoint ready -> serving terminating: still served, nothing stale',
    before: [{ svc: udp() }, { slice: sl('UDP', ['10.0.0.1'], ['10.0.0.2']) }],
    after: [{ slice: sl('UDP', ['10.0.0.1'], ['10.0.0.2', { ready: false, serving: true, terminating: true }]) }],
    want: [],
  },
  {
    name: 'a non-serving endpoint removed: nothing (no traffic went there)',
    before: [{ svc: udp() }, { slice: sl('UDP', ['10.0.0.1'], ['10.0.0.2', { ready: false, serving: false }]) }],
    after: [{ slice: sl('UDP', ['10.0.0.1']) }],
    want: [],
  },
  {
    name: 'UDP service gains its first endpoint, with external and LB IPs and node port',
    before: [
      {
        svc: udp({
          type: 'LoadBalancer',
          ports: [{ name: 'dns', protocol: 'UDP', port: 53, nodePort: 30053 }],
          externalIPs: ['1.2.3.4'],
          ingress: [{ ip: '5.6.7.8' }],
        }),
      },
    ],
    after: [{ slice: sl('UDP', ['10.0.0.1']) }],
    want: ['newly-active UDP 10.96.0.10,1.2.3.4,5.6.7.8:53+30053'],
  },
  {
    name: 'UDP service from only-unready to a ready endpoint',
    before: [{ svc: udp() }, { slice: sl('UDP', ['10.0.0.1', { ready: false, serving: false }]) }],
    after: [{ slice: sl('UDP', ['10.0.0.1']) }],
    want: ['newly-active UDP 10.96.0.10:53'],
  },
  {
    name: 'UDP service created with its endpoints already known',
    before: [{ slice: sl('UDP', ['10.0.0.1']) }],
    after: [{ svc: udp() }],
    want: ['newly-active UDP 10.96.0.10:53'],
  },
  {
    name: 'UDP service deleted',
    before: [{ svc: udp() }, { slice: sl('UDP', ['10.0.0.1']) }],
    after: [{ svc: null }],
    want: ['service-deleted UDP 10.96.0.10:53'],
  },
  {
    name: 'TCP service deleted: nothing',
    before: [{ svc: tcp() }, { slice: sl('TCP', ['10.0.0.1']) }],
    after: [{ svc: null }],
    want: [],
  },
  {
    name: 'all UDP endpoints removed with the slice',
    before: [{ svc: udp() }, { slice: sl('UDP', ['10.0.0.1'], ['10.0.0.2']) }],
    after: [{ removeSlice: sl('UDP') }],
    want: ['endpoint-removed UDP 10.96.0.10:53 ->10.0.0.1', 'endpoint-removed UDP 10.96.0.10:53 ->10.0.0.2'],
  },
  {
    name: 'endpoint port changes: the old ip:port is stale',
    before: [{ svc: udp() }, { slice: sl('UDP', ['10.0.0.1']) }],
    after: [
      { slice: slice('dns-1', 'dns', [ep('10.0.0.1')], { ports: [{ name: 'dns', protocol: 'UDP', port: 5454 }] }) },
    ],
    want: ['endpoint-removed UDP 10.96.0.10:53 ->10.0.0.1'],
  },
];

for (const row of rows) {
  test(`stale: ${row.name}`, (t) => {
    const { t: tr } = newTracker();
    let current: Service | undefined;
    const run = (steps: Step[]) => {
      for (const s of steps) {
        if (s.svc !== undefined) {
          tr.onService(current, s.svc ?? undefined);
          current = s.svc ?? undefined;
        }
        if (s.slice) tr.onEndpointSlice(s.slice, false);
        if (s.removeSlice) tr.onEndpointSlice(s.removeSlice, true);
      }
      return tr.checkout().change.stale;
    };
    run(row.before);
    t.deepEqual(run(row.after).map(show).sort(), row.want);
  });
}

test('stale: targets name the service port, family and endpoint port', (t) => {
  const { t: tr } = newTracker();
  tr.onService(undefined, udp());
  tr.onEndpointSlice(sl('UDP', ['10.0.0.1']), false);
  tr.checkout();
  tr.onEndpointSlice(sl('UDP'), false);
  t.deepEqual(tr.checkout().change.stale, [
    {
      reason: 'endpoint-removed',
      service: 'default/dns:dns/UDP' as StaleTarget['service'],
      family: 'IPv4',
      protocol: 'UDP',
      serviceIPs: ['10.96.0.10'],
      port: 53,
      nodePort: 0,
      endpointIP: '10.0.0.1',
      endpointPort: 5353,
    },
  ]);
});

test('stale: the first checkout after a start reports nothing (no restart-wide UDP flush)', (t) => {
  const { t: tr } = newTracker();
  tr.onService(undefined, udp());
  tr.onEndpointSlice(sl('UDP', ['10.0.0.1']), false);
  t.deepEqual(tr.checkout().change.stale, []);
});
