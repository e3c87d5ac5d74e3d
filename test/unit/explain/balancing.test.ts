// What explain and trace say of a Service port's load balancing in the iptables, IPVS and
// userspace modes: the algorithm in effect, where it came from, the rule that picks, and a
// refused annotation with its reason.
import test from 'ava';
import type { IPFamily } from '../../../src/base/ip.ts';
import { balancingOf, type BalancingContext } from '../../../src/explain/balancing.ts';
import { explainPort, matchPorts } from '../../../src/explain/explain.ts';
import { formatExplainPort, formatTrace } from '../../../src/explain/format.ts';
import { trace } from '../../../src/explain/trace.ts';
import { LOAD_BALANCING_ANNOTATION, type DesiredState, type ServicePortInfo } from '../../../src/model/index.ts';
import { ep, newTracker, node, slice, svc } from '../model/helpers.ts';

function model(annotation: string | undefined): DesiredState {
  const { t } = newTracker({ clusterCIDRs: ['10.244.0.0/16'] });
  t.onNode(node('node-a', { internal: ['192.168.1.10'] }));
  const s = svc('web');
  if (annotation !== undefined) s.metadata!.annotations = { [LOAD_BALANCING_ANNOTATION]: annotation };
  t.onService(undefined, s);
  t.onEndpointSlice(slice('web-1', 'web', [ep('10.244.1.1'), ep('10.244.1.2'), ep('10.244.1.3')]), false);
  return t.checkout().desired;
}
const port = (annotation: string | undefined): ServicePortInfo => matchPorts(model(annotation), 'default/web')[0]!;
const summary = (mode: string, annotation: string | undefined, ctx: BalancingContext = {}) => {
  const b = balancingOf(mode, port(annotation), ctx)!;
  return `${b.algorithm} ${b.source}${b.refused ? ' refused' : ''}`;
};

test('iptables: random (upstream) unless round-robin is asked; consistent-hash refused with the reason', (t) => {
  t.is(summary('iptables', undefined), 'random mode default');
  t.is(summary('iptables', 'round-robin'), 'round-robin annotation');
  t.is(summary('iptables', undefined, { loadBalancing: 'round-robin' }), 'round-robin node default');
  t.is(summary('iptables', 'consistent-hash'), 'random mode default refused');
  t.regex(balancingOf('iptables', port('round-robin'))!.picking, /--mode nth --every n-i --packet 0/);
  t.regex(
    balancingOf('iptables', port('consistent-hash'))!.refused!,
    /consistent-hash is not supported in iptables mode/,
  );
});

test('IPVS: rr, mh, lc per Service; random refused, --ipvs-scheduler kept', (t) => {
  const ctx = { ipvsScheduler: 'wlc' };
  t.is(summary('ipvs', 'round-robin', ctx), 'round-robin annotation');
  t.is(summary('ipvs', 'consistent-hash', ctx), 'consistent-hash annotation');
  t.is(summary('ipvs', 'least-connection', ctx), 'least-connection annotation');
  t.is(summary('ipvs', 'random', ctx), 'wlc mode default refused');
  t.is(summary('ipvs', undefined, {}), 'rr mode default');
  t.regex(balancingOf('ipvs', port('consistent-hash'), ctx)!.picking, /IPVS scheduler mh.*client's address:/);
  t.regex(balancingOf('ipvs', port(undefined), { ipvsScheduler: 'mh' })!.picking, /mh-port/);
  t.is(balancingOf('ipvs', port('least-connection'), ctx)!.share, 'by-connections');
});

test('userspace: always round-robin; anything else refused', (t) => {
  t.is(summary('userspace', undefined), 'round-robin mode default');
  t.is(summary('userspace', 'round-robin'), 'round-robin annotation');
  t.is(summary('userspace', 'consistent-hash'), 'round-robin mode default refused');
  t.is(balancingOf('nftables', port(undefined))!.algorithm, 'random', 'nftables answers in its own file');
});

test('explain prints the algorithm and the picking rule per port; trace notes them with equal shares', (t) => {
  const state = model('round-robin');
  const info = port('round-robin');
  const text = formatExplainPort(explainPort(state, info, undefined, balancingOf('iptables', info)));
  t.regex(text, /Load balancing:\n {2}round-robin \(annotation\): nat KUBE-SVC-\*\/KUBE-SVL-\*/);
  const r = trace(
    { states: new Map<IPFamily, DesiredState>([['IPv4', state]]), localAddresses: ['192.168.1.10'], mode: 'iptables' },
    { from: '10.244.1.9', to: '10.96.0.10', port: 80, protocol: 'TCP' },
  );
  t.deepEqual(
    r.endpoints.map((e) => e.probability),
    [1 / 3, 1 / 3, 1 / 3],
  );
  t.regex(formatTrace(r), /note: load balancing round-robin \(annotation\): .*--mode nth/);
});

test('trace with least-connection in IPVS mode says the shares are nominal', (t) => {
  const r = trace(
    {
      states: new Map<IPFamily, DesiredState>([['IPv4', model('least-connection')]]),
      localAddresses: ['192.168.1.10'],
      mode: 'ipvs',
      balancing: { ipvsScheduler: 'rr' },
    },
    { from: '10.244.1.9', to: '10.96.0.10', port: 80, protocol: 'TCP' },
  );
  t.true(r.notes.some((n) => /IPVS scheduler lc/.test(n)));
  t.true(r.notes.some((n) => /nominal/.test(n)));
});
