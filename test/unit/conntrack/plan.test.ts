// The flusher's pure decisions: which entries a reconcile deletes (against the desired state
// built by the real model), and which a flush deletes once the guard applies.
import test from 'ava';
import { isStaleAgainst, servingIndex } from '../../../src/conntrack/index.ts';
import {
  guardMayKeep,
  kernelFlushable,
  mergeTargets,
  planFlush,
  retainFailed,
  selectStale,
  targetKey,
  withoutFilters,
} from '../../../src/conntrack/plan.ts';
import type { PendingTarget } from '../../../src/conntrack/plan.ts';
import type { DesiredState, ServicePortId, StaleTarget } from '../../../src/model/index.ts';
import { compileFilter, exactInKernel, IPPROTO } from '../../../src/netlink/conntrack/index.ts';
import type { Flow } from '../../../src/netlink/conntrack/index.ts';
import { ep, newTracker, node, slice, svc } from '../model/helpers.ts';
import { flow, show } from './fake-client.ts';

const NODE_IP = '10.1.0.1';
const A = '10.244.1.5';
const B = '10.244.1.6';
const C = '10.244.1.7';
const DEAD = '10.244.9.9';
const E = '10.244.2.5';
const udp = (name: string, port: number, nodePort?: number) => [
  { name, protocol: 'UDP', port, ...(nodePort ? { nodePort } : {}) },
];

/** dns: UDP 10.96.0.10:53 (+ external IP) -> A (ready), B (terminating, serving), C (not serving), port 5353.
 *  np: UDP NodePort 30053 on 10.96.0.20:53 -> E. web: TCP 10.96.0.30:53 -> DEAD. */
function desired(extra: { nodePortAddresses?: string[] } = {}): DesiredState {
  const { t } = newTracker(extra.nodePortAddresses ? { nodePortAddresses: extra.nodePortAddresses } : {});
  t.onNode(node('node-a', { internal: [NODE_IP] }));
  t.onService(undefined, svc('dns', { clusterIP: '10.96.0.10', ports: udp('p', 53), externalIPs: ['192.0.2.10'] }));
  t.onEndpointSlice(
    slice(
      'dns-1',
      'dns',
      [
        ep(A),
        ep(B, { ready: false, serving: true, terminating: true }),
        ep(C, { ready: false, serving: false, terminating: true }),
      ],
      {
        ports: [{ name: 'p', protocol: 'UDP', port: 5353 }],
      },
    ),
    false,
  );
  t.onService(undefined, svc('np', { clusterIP: '10.96.0.20', type: 'NodePort', ports: udp('p', 53, 30053) }));
  t.onEndpointSlice(slice('np-1', 'np', [ep(E)], { ports: [{ name: 'p', protocol: 'UDP', port: 8080 }] }), false);
  t.onService(undefined, svc('web', { clusterIP: '10.96.0.30', ports: [{ name: 'p', protocol: 'TCP', port: 53 }] }));
  t.onEndpointSlice(slice('web-1', 'web', [ep(DEAD)], { ports: [{ name: 'p', protocol: 'TCP', port: 5353 }] }), false);
  return t.checkout().desired;
}

test('reconcile: only entries to a frontend whose reply source no longer serves it', (t) => {
  const index = servingIndex(desired());
  const cases: [Flow, boolean, string][] = [
    [flow({ dst: '10.96.0.10', dport: 53, replySrc: A, replyPort: 5353 }), false, 'ready endpoint'],
    [flow({ dst: '192.0.2.10', dport: 53, replySrc: A, replyPort: 5353 }), false, 'ready endpoint via the external IP'],
    [
      flow({ dst: '10.96.0.10', dport: 53, replySrc: B, replyPort: 5353 }),
      false,
      'terminating but serving endpoint keeps its flows (as upstream)',
    ],
    [flow({ dst: '10.96.0.10', dport: 53, replySrc: C, replyPort: 5353 }), true, 'endpoint no longer serving'],
    [flow({ dst: '10.96.0.10', dport: 53, replySrc: DEAD, replyPort: 5353 }), true, 'endpoint gone'],
    [
      flow({ dst: '10.96.0.10', dport: 53, replySrc: A, replyPort: 9999 }),
      true,
      'right pod, port nothing serves (targetPort changed)',
    ],
    [
      flow({ dst: '10.96.0.10', dport: 53, replySrc: '10.96.0.10', replyPort: 53 }),
      true,
      'never DNATed: cached while the Service had no endpoint',
    ],
    [
      flow({ dst: '10.96.0.30', dport: 53, replySrc: DEAD, replyPort: 9999, proto: IPPROTO.TCP }),
      false,
      'TCP is never touched',
    ],
    [
      flow({ dst: '10.96.0.10', dport: 53, replySrc: DEAD, replyPort: 5353, proto: IPPROTO.TCP }),
      false,
      'TCP to a UDP frontend is never touched',
    ],
    [flow({ dst: '10.96.0.99', dport: 53, replySrc: DEAD }), false, 'not a frontend'],
    [flow({ dst: '10.96.0.10', dport: 54, replySrc: DEAD }), false, 'a port of the Service IP no Service exposes'],
    [flow({ dst: '8.8.8.8', dport: 53, replySrc: '8.8.8.8', replyPort: 53 }), false, 'the node talking to the outside'],
    [flow({ dst: NODE_IP, dport: 30053, replySrc: E }), false, 'node port, serving endpoint'],
    [flow({ dst: '10.96.0.20', dport: 53, replySrc: E }), false, 'its cluster IP, serving endpoint'],
    [flow({ dst: NODE_IP, dport: 30053, replySrc: DEAD }), true, 'node port, endpoint gone'],
    [
      flow({ dst: NODE_IP, dport: 30053, replySrc: NODE_IP, replyPort: 30053 }),
      true,
      'node port never DNATed, on the node IP',
    ],
    [
      flow({ dst: '198.51.100.7', dport: 30053, replySrc: '198.51.100.7', replyPort: 30053 }),
      false,
      "another host's port 30053",
    ],
    [flow({ dst: 'fd00::10', dport: 53, replySrc: 'fd00::99', family: 'IPv6' }), false, 'another family'],
  ];
  for (const [f, stale, why] of cases) t.is(isStaleAgainst(index, f), stale, `${why}: ${show(f)}`);
});

test('reconcile: un-DNATed node-port entries by nodePortAddresses, or by the local-address callback', (t) => {
  const cidr = servingIndex(desired({ nodePortAddresses: ['192.0.2.0/24'] }));
  t.true(isStaleAgainst(cidr, flow({ dst: '192.0.2.44', dport: 30053, replySrc: '192.0.2.44', replyPort: 30053 })));
  t.false(
    isStaleAgainst(cidr, flow({ dst: NODE_IP, dport: 30053, replySrc: NODE_IP, replyPort: 30053 })),
    'node ports do not answer there',
  );
  t.true(
    isStaleAgainst(cidr, flow({ dst: NODE_IP, dport: 30053, replySrc: DEAD })),
    'DNATed to a dead endpoint: ours whatever the address',
  );
  const local = servingIndex(desired(), { isLocalAddress: (ip) => ip === '172.18.0.9' });
  t.true(isStaleAgainst(local, flow({ dst: '172.18.0.9', dport: 30053, replySrc: '172.18.0.9', replyPort: 30053 })));
  t.false(isStaleAgainst(local, flow({ dst: NODE_IP, dport: 30053, replySrc: NODE_IP, replyPort: 30053 })));
});

const svcId = 'default/dns:p/UDP' as ServicePortId;
const base = {
  service: svcId,
  family: 'IPv4',
  protocol: 'UDP',
  serviceIPs: ['10.96.0.10'],
  port: 53,
  nodePort: 0,
} as const;
const pending = (...targets: StaleTarget[]): Map<string, PendingTarget> => {
  const m = new Map<string, PendingTarget>();
  mergeTargets(m, targets);
  return m;
};
const selectAll = (targets: Map<string, PendingTarget>, flows: Flow[], d?: DesiredState): Flow[] =>
  planFlush(targets).groups.flatMap((g) =>
    selectStale(g, flows, d ? servingIndex(d) : undefined).selected.map((s) => s.flow),
  );

test('flush: newly-active deletes the cached un-DNATed entries; the guard keeps flows already on a serving endpoint', (t) => {
  const cached = flow({ dst: '10.96.0.10', dport: 53, replySrc: '10.96.0.10', replyPort: 53 });
  const fresh = flow({ dst: '10.96.0.10', dport: 53, replySrc: A, replyPort: 5353, sport: 40001 });
  const tcp = flow({
    dst: '10.96.0.10',
    dport: 53,
    replySrc: '10.96.0.10',
    replyPort: 53,
    proto: IPPROTO.TCP,
    sport: 40002,
  });
  const other = flow({ dst: '10.96.0.11', dport: 53, replySrc: '10.96.0.11', replyPort: 53, sport: 40003 });
  const targets = pending({ ...base, reason: 'newly-active' });
  t.deepEqual(selectAll(targets, [cached, fresh, tcp, other], desired()).map(show), [show(cached)]);
  t.deepEqual(
    selectAll(targets, [cached, fresh, tcp, other]).map(show),
    [show(cached), show(fresh)],
    'without a desired state: every UDP entry to the frontend, as upstream did',
  );
});

test('flush: endpoint-removed selects that endpoint only; a retry after it came back deletes nothing', (t) => {
  const toDead = flow({ dst: '10.96.0.10', dport: 53, replySrc: DEAD, replyPort: 5353 });
  const toA = flow({ dst: '10.96.0.10', dport: 53, replySrc: A, replyPort: 5353, sport: 40001 });
  t.deepEqual(
    selectAll(
      pending({ ...base, reason: 'endpoint-removed', endpointIP: DEAD, endpointPort: 5353 }),
      [toDead, toA],
      desired(),
    ).map(show),
    [show(toDead)],
  );
  const toABack = pending({ ...base, reason: 'endpoint-removed', endpointIP: A, endpointPort: 5353 });
  t.deepEqual(selectAll(toABack, [toDead, toA], desired()), [], 'A serves the frontend again');
  t.deepEqual(selectAll(toABack, [toDead, toA]).map(show), [show(toA)]);
});

test("flush: a node-port filter takes our node-port entries only, never another host's port or a service IP", (t) => {
  const np = { ...base, service: 'default/np:p/UDP' as ServicePortId, serviceIPs: ['10.96.0.20'], nodePort: 30053 };
  const dnated = flow({ dst: NODE_IP, dport: 30053, replySrc: DEAD });
  const cached = flow({ dst: NODE_IP, dport: 30053, replySrc: NODE_IP, replyPort: 30053, sport: 40001 });
  const outgoing = flow({
    dst: '198.51.100.7',
    dport: 30053,
    replySrc: '198.51.100.7',
    replyPort: 30053,
    sport: 40002,
  });
  const healthy = flow({ dst: NODE_IP, dport: 30053, replySrc: E, sport: 40003 });
  const all = [dnated, cached, outgoing, healthy];
  t.deepEqual(selectAll(pending({ ...np, reason: 'newly-active' }), all, desired()).map(show), [
    show(dnated),
    show(cached),
  ]);
  t.deepEqual(selectAll(pending({ ...np, reason: 'service-deleted' }), all, desired()).map(show), [
    show(dnated),
    show(cached),
  ]);
  t.deepEqual(
    selectAll(pending({ ...np, reason: 'endpoint-removed', endpointIP: DEAD, endpointPort: 8080 }), all, desired()).map(
      show,
    ),
    [show(dnated)],
  );
});

test('planning: one dump per family and protocol, filtered by what the targets share; TCP never planned', (t) => {
  const p = planFlush(
    pending(
      { ...base, reason: 'endpoint-removed', endpointIP: DEAD, endpointPort: 5353 },
      { ...base, reason: 'endpoint-removed', endpointIP: C, endpointPort: 5353 },
      { ...base, reason: 'newly-active', protocol: 'SCTP' },
    ),
  );
  t.deepEqual(
    p.groups.map((g) => g.dump),
    [
      { family: 'IPv4', proto: IPPROTO.UDP, orig: { dst: '10.96.0.10', dstPort: 53 }, reply: { srcPort: 5353 } },
      { family: 'IPv4', proto: IPPROTO.SCTP, orig: { dst: '10.96.0.10', dstPort: 53 } },
    ],
  );
  t.deepEqual(p.empty, []);
  t.deepEqual(
    planFlush(pending({ ...base, reason: 'endpoint-removed' })).groups,
    [],
    'a target without endpoint address selects nothing',
  );
});

test('coalescing and retry bookkeeping: equal targets merge, attempts count up, given up at the limit', (t) => {
  const a: StaleTarget = { ...base, reason: 'endpoint-removed', endpointIP: DEAD, endpointPort: 5353 };
  const m = pending(a, { ...a, serviceIPs: [...a.serviceIPs] }, { ...base, reason: 'newly-active' });
  t.is(m.size, 2);
  const { keep, dropped } = retainFailed([m.get(targetKey(a))!], 2);
  t.deepEqual(
    keep.map((p) => p.attempts),
    [1],
  );
  t.deepEqual(dropped, []);
  mergeTargets(m, keep);
  mergeTargets(m, [a]);
  t.is(m.get(targetKey(a))!.attempts, 1, 'a target scheduled again keeps its failure count');
  t.is(retainFailed([m.get(targetKey(a))!], 2).dropped.length, 1);
});

test('reconcile: IPv6 and SCTP frontends, addresses compared canonically', (t) => {
  const { t: tr } = newTracker({ family: 'IPv6' });
  tr.onService(
    undefined,
    svc('sig', {
      clusterIPs: ['fd00:96::0:10'],
      ports: [
        { name: 'p', protocol: 'SCTP', port: 3868 },
        { name: 'u', protocol: 'UDP', port: 53 },
      ],
    }),
  );
  tr.onEndpointSlice(
    slice('sig-1', 'sig', [ep('fd00:244:1::5')], {
      addressType: 'IPv6',
      ports: [
        { name: 'p', protocol: 'SCTP', port: 3868 },
        { name: 'u', protocol: 'UDP', port: 5353 },
      ],
    }),
    false,
  );
  const index = servingIndex(tr.checkout().desired);
  const v6 = (o: Parameters<typeof flow>[0]) => flow({ family: 'IPv6', src: 'fd00:1::2', ...o });
  t.deepEqual([...index.protos].sort(), [IPPROTO.UDP, IPPROTO.SCTP].sort());
  t.false(
    isStaleAgainst(
      index,
      v6({ dst: 'fd00:96::10', dport: 3868, replySrc: 'fd00:244:1::5', replyPort: 3868, proto: IPPROTO.SCTP }),
    ),
  );
  t.true(
    isStaleAgainst(
      index,
      v6({ dst: 'fd00:96::10', dport: 3868, replySrc: 'fd00:244:1::9', replyPort: 3868, proto: IPPROTO.SCTP }),
    ),
  );
  t.false(isStaleAgainst(index, v6({ dst: 'fd00:96::10', dport: 53, replySrc: 'fd00:244:1::5', replyPort: 5353 })));
  t.true(
    isStaleAgainst(index, v6({ dst: 'fd00:96::10', dport: 53, replySrc: 'fd00:244:1::5', replyPort: 3868 })),
    'the SCTP endpoint port is not the UDP one',
  );
  t.false(
    isStaleAgainst(index, flow({ dst: '10.96.0.10', dport: 53, replySrc: DEAD })),
    'IPv4 entries are not this index’s business',
  );
});

test('kernel flush: a filter is flushable only where the dump path would delete exactly what it matches', (t) => {
  const d = desired();
  const index = servingIndex(d);
  // Every entry a filter of these targets could match, in every shape the guard looks at.
  const flows: Flow[] = [];
  let sport = 30000;
  for (const dst of ['10.96.0.10', '192.0.2.10', '10.96.0.20', '10.96.0.99', NODE_IP, '198.51.100.7']) {
    for (const dport of [53, 30053]) {
      for (const [replySrc, replyPort] of [
        [A, 5353],
        [B, 5353],
        [C, 5353],
        [DEAD, 5353],
        [DEAD, 8080],
        [E, 8080],
        [A, 9999],
        [dst, dport],
      ] as const) {
        flows.push(flow({ dst, dport, replySrc, replyPort, sport: sport++ }));
      }
    }
  }
  const dns = { ...base, serviceIPs: ['10.96.0.10', '192.0.2.10'] };
  const np = { ...base, service: 'default/np:p/UDP' as ServicePortId, serviceIPs: ['10.96.0.20'], nodePort: 30053 };
  const targets: [StaleTarget, string[]][] = [
    // [target, the filters (orig dst) expected to be flushable]
    [{ ...dns, reason: 'endpoint-removed', endpointIP: DEAD, endpointPort: 5353 }, ['10.96.0.10', '192.0.2.10']],
    [{ ...dns, reason: 'endpoint-removed', endpointIP: C, endpointPort: 5353 }, ['10.96.0.10', '192.0.2.10']], // C no longer serves
    [{ ...dns, reason: 'endpoint-removed', endpointIP: A, endpointPort: 5353 }, []], // A serves again: a retry
    [{ ...dns, reason: 'endpoint-removed', endpointIP: A, endpointPort: 9999 }, ['10.96.0.10', '192.0.2.10']], // A, but not on that port
    [{ ...dns, reason: 'endpoint-removed', endpointIP: A }, []], // no port: A serves on 5353
    [{ ...dns, reason: 'newly-active' }, []], // the frontend has endpoints now
    [{ ...dns, serviceIPs: ['10.96.0.99'], reason: 'service-deleted' }, ['10.96.0.99']], // no frontend left
    [{ ...np, reason: 'endpoint-removed', endpointIP: DEAD, endpointPort: 8080 }, ['10.96.0.20']], // never the node-port filter
  ];
  for (const [target, expected] of targets) {
    const plan = planFlush(pending(target));
    const label = JSON.stringify(target);
    const flushable = plan.groups.flatMap((g) => kernelFlushable(g, index, exactInKernel));
    t.deepEqual(flushable.map((pf) => pf.filter.orig!.dst).sort(), expected, label);
    for (const g of plan.groups) {
      for (const pf of flushable) {
        if (!g.filters.includes(pf)) continue;
        // The invariant: alone in its group, the dump path selects exactly what the filter matches.
        const alone = withoutFilters(g, new Set(g.filters.filter((x) => x !== pf)))!;
        const viaDump = selectStale(alone, flows, index);
        const m = compileFilter(pf.filter);
        t.deepEqual(
          viaDump.selected.map((x) => show(x.flow)),
          flows.filter(m).map(show),
          `${label} ${JSON.stringify(pf.filter)}`,
        );
        t.is(viaDump.kept, 0);
      }
    }
  }
  // Without a desired state there is no guard: any exact filter may go (node-port ones too).
  const npPlan = planFlush(pending({ ...np, reason: 'endpoint-removed', endpointIP: DEAD, endpointPort: 8080 }));
  t.is(npPlan.groups.flatMap((g) => kernelFlushable(g, undefined, exactInKernel)).length, 2);
  t.true(npPlan.groups[0]!.filters.some((pf) => pf.nodePort && guardMayKeep(pf, index)));
});

test('withoutFilters narrows the group and its dump to the filters left', (t) => {
  const plan = planFlush(
    pending({
      ...base,
      reason: 'endpoint-removed',
      endpointIP: DEAD,
      endpointPort: 5353,
      serviceIPs: ['10.96.0.10'],
      nodePort: 30053,
    }),
  );
  const g = plan.groups[0]!;
  t.is(g.filters.length, 2);
  t.deepEqual(g.dump, { family: 'IPv4', proto: IPPROTO.UDP, reply: { src: DEAD, srcPort: 5353 } });
  const vip = g.filters.find((pf) => !pf.nodePort)!;
  const rest = withoutFilters(g, new Set([vip]))!;
  t.deepEqual(rest.dump, {
    family: 'IPv4',
    proto: IPPROTO.UDP,
    orig: { dstPort: 30053 },
    reply: { src: DEAD, srcPort: 5353 },
  });
  t.deepEqual([...rest.byPort.keys()], [30053]);
  t.is(withoutFilters(g, new Set(g.filters)), undefined);
  t.is(withoutFilters(g, new Set()), g);
});
