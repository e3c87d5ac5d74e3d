import test from 'ava';
import { resolveLoadBalancing } from '../../../src/model/index.ts';
import { LOAD_BALANCING_SUPPORT } from '../../../src/proxier/types.ts';
import { loadBalancingAnnotation } from '../../../src/model/load-balancing.ts';
import { normalizeService } from '../../../src/model/service.ts';
import { DEFAULT_LIMITS } from '../../../src/model/index.ts';

test('the annotation wins over the node default; neither = the mode default', (t) => {
  t.deepEqual(resolveLoadBalancing(LOAD_BALANCING_SUPPORT.nftables, 'consistent-hash', 'round-robin'), {
    algorithm: 'consistent-hash',
  });
  t.deepEqual(resolveLoadBalancing(LOAD_BALANCING_SUPPORT.nftables, undefined, 'round-robin'), {
    algorithm: 'round-robin',
  });
  t.deepEqual(resolveLoadBalancing(LOAD_BALANCING_SUPPORT.nftables, undefined, undefined), { algorithm: undefined });
});

test('an unsupported or unknown value gets what a Service without one gets, and says why', (t) => {
  const u = resolveLoadBalancing(LOAD_BALANCING_SUPPORT.nftables, 'least-connection', 'round-robin');
  t.is(u.algorithm, 'round-robin');
  t.regex(u.unsupported ?? '', /least-connection is not supported in nftables mode/);
  const k = resolveLoadBalancing(LOAD_BALANCING_SUPPORT.ipvs, 'maglev', undefined);
  t.is(k.algorithm, undefined);
  t.regex(k.unsupported ?? '', /unknown value "maglev"/);
  // A node default the mode cannot honour is the mode's default, silently (the flag is per node).
  t.deepEqual(resolveLoadBalancing(LOAD_BALANCING_SUPPORT.iptables, undefined, 'consistent-hash'), {
    algorithm: undefined,
  });
});

test('every port of a Service carries the trimmed annotation', (t) => {
  t.is(loadBalancingAnnotation({ annotations: { 'kube-proxy-ts.io/load-balancing': ' round-robin ' } }), 'round-robin');
  t.is(loadBalancingAnnotation({ annotations: { 'kube-proxy-ts.io/load-balancing': 3 } }), undefined);
  t.is(loadBalancingAnnotation(undefined), undefined);
  const r = normalizeService(
    {
      metadata: {
        namespace: 'default',
        name: 's',
        annotations: { 'kube-proxy-ts.io/load-balancing': 'consistent-hash' },
      },
      spec: {
        clusterIP: '10.96.0.10',
        ports: [
          { name: 'a', port: 80 },
          { name: 'b', port: 81 },
        ],
      },
    },
    'IPv4',
    DEFAULT_LIMITS,
  );
  t.deepEqual(
    r.ports.map((p) => p.loadBalancingAsked),
    ['consistent-hash', 'consistent-hash'],
  );
});
