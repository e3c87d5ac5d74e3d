import test from 'ava';
import { staleFlowFilters, staleFlowFiltersAll } from '../../../src/conntrack/stale-filters.ts';
import { compileFilter } from '../../../src/netlink/conntrack/index.ts';
import type { Flow, FlowFilter } from '../../../src/netlink/conntrack/index.ts';
import type { ServicePortId, StaleTarget } from '../../../src/model/index.ts';

const svc = 'kube-system/kube-dns:dns/UDP' as ServicePortId;
const base = {
  service: svc,
  family: 'IPv4',
  protocol: 'UDP',
  serviceIPs: ['10.96.0.10', '192.0.2.10'],
  port: 53,
  nodePort: 0,
} as const;

test('endpoint-removed: each Service IP:port and the NodePort, replies from the endpoint', (t) => {
  const target: StaleTarget = {
    ...base,
    reason: 'endpoint-removed',
    nodePort: 30053,
    endpointIP: '10.244.1.5',
    endpointPort: 5353,
  };
  const reply = { src: '10.244.1.5', srcPort: 5353 };
  t.deepEqual(staleFlowFilters(target), [
    { family: 'IPv4', proto: 17, orig: { dst: '10.96.0.10', dstPort: 53 }, reply },
    { family: 'IPv4', proto: 17, orig: { dst: '192.0.2.10', dstPort: 53 }, reply },
    { family: 'IPv4', proto: 17, orig: { dstPort: 30053 }, reply },
  ]);
});

test('newly-active and service-deleted: every entry to the destinations; SCTP and IPv6 too', (t) => {
  t.deepEqual(staleFlowFilters({ ...base, reason: 'newly-active', serviceIPs: ['10.96.0.10', '10.96.0.10'] }), [
    { family: 'IPv4', proto: 17, orig: { dst: '10.96.0.10', dstPort: 53 } },
  ]);
  t.deepEqual(
    staleFlowFilters({
      ...base,
      reason: 'service-deleted',
      family: 'IPv6',
      protocol: 'SCTP',
      serviceIPs: ['fd00:96:0:0::10'],
      port: 3868,
    }),
    [{ family: 'IPv6', proto: 132, orig: { dst: 'fd00:96::10', dstPort: 3868 } }],
  );
});

test('an unusable endpoint or a foreign-family address never widens a filter', (t) => {
  t.deepEqual(staleFlowFilters({ ...base, reason: 'endpoint-removed' }), []);
  t.deepEqual(staleFlowFilters({ ...base, reason: 'endpoint-removed', endpointIP: 'fd00::5' }), []);
  t.deepEqual(staleFlowFilters({ ...base, reason: 'service-deleted', serviceIPs: ['fd00::10', 'bogus'] }), []);
});

const flow = (dst: string, dport: number, replySrc: string, proto = 17): Flow => ({
  family: 'IPv4',
  orig: { src: '10.1.0.1', dst, proto, srcPort: 40000, dstPort: dport },
  reply: { src: replySrc, dst: '10.1.0.1', proto, srcPort: 5353, dstPort: 40000 },
  status: 8,
  unknown: [],
});

test('what the filters select: the stale endpoint only, never TCP, other endpoints or Services', (t) => {
  const filters: FlowFilter[] = staleFlowFiltersAll([
    { ...base, reason: 'endpoint-removed', nodePort: 30053, endpointIP: '10.244.1.5', endpointPort: 5353 },
    { ...base, reason: 'endpoint-removed', nodePort: 30053, endpointIP: '10.244.1.5', endpointPort: 5353 },
  ]);
  t.is(filters.length, 3, 'duplicates merged');
  const match = (f: Flow): boolean => filters.some((x) => compileFilter(x)(f));
  t.true(match(flow('10.96.0.10', 53, '10.244.1.5')));
  t.true(match(flow('172.18.0.2', 30053, '10.244.1.5')), 'NodePort on any node address');
  t.false(match(flow('10.96.0.10', 53, '10.244.2.7')), 'healthy endpoint');
  t.false(match(flow('10.96.0.10', 53, '10.244.1.5', 6)), 'TCP');
  t.false(match(flow('10.96.0.11', 53, '10.244.1.5')), 'another Service');
});
