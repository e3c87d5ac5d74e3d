// What the userspace proxier asks of its proxy sockets: the model's selection per service port.
import test from 'ava';
import { proxySpecs } from '../../../../src/proxier/userspace/specs.ts';
import { ep, newTracker, slice, svc } from '../../model/helpers.ts';

const PORTS = [{ name: 'p', protocol: 'TCP', port: 8080 }];

test('ready endpoints in the selection; terminating ones only when none is ready; affinity timeout', (t) => {
  const { t: c } = newTracker({ clusterCIDRs: ['10.0.0.0/8'] });
  c.onService(undefined, svc('a', { clusterIP: '172.30.0.10', affinity: 'ClientIP', timeout: 300 }));
  c.onEndpointSlice(
    slice('a-1', 'a', [ep('10.1.0.1'), ep('10.1.0.2', { ready: false, serving: true, terminating: true })], {
      ports: PORTS,
    }),
    false,
  );
  c.onService(undefined, svc('b', { clusterIP: '172.30.0.11' }));
  c.onEndpointSlice(
    slice('b-1', 'b', [ep('10.1.0.3', { ready: false, serving: true, terminating: true })], { ports: PORTS }),
    false,
  );
  c.onService(undefined, svc('none', { clusterIP: '172.30.0.12' }));
  const specs = proxySpecs(c.checkout().desired);
  t.deepEqual(
    specs.map((s) => ({ name: s.name, protocol: s.protocol, backends: s.backends, affinity: s.affinitySeconds })),
    [
      { name: 'default/a:p', protocol: 'TCP', backends: [{ ip: '10.1.0.1', port: 8080 }], affinity: 300 },
      { name: 'default/b:p', protocol: 'TCP', backends: [{ ip: '10.1.0.3', port: 8080 }], affinity: 0 },
      { name: 'default/none:p', protocol: 'TCP', backends: [], affinity: 0 },
    ],
  );
});

test('SCTP ports are skipped and named; UDP ports get a socket', (t) => {
  const { t: c } = newTracker({ clusterCIDRs: ['10.0.0.0/8'] });
  c.onService(
    undefined,
    svc('m', {
      clusterIP: '172.30.0.20',
      ports: [
        { name: 'dns', protocol: 'UDP', port: 53 },
        { name: 'sig', protocol: 'SCTP', port: 3868 },
      ],
    }),
  );
  const skipped: string[] = [];
  const specs = proxySpecs(c.checkout().desired, (n) => skipped.push(n));
  t.deepEqual(
    specs.map((s) => `${s.name}/${s.protocol}`),
    ['default/m:dns/UDP'],
  );
  t.deepEqual(skipped, ['default/m:sig']);
});
