import test from 'ava';
import { categorizeEndpoints, type TopologyContext } from '../../../src/model/topology.ts';
import type { EndpointInfo, TopologyMode } from '../../../src/model/types.ts';
import { keys, NODE } from './helpers.ts';

/** Endpoint shorthand: "R" ready, "T" serving+terminating, "X" terminating not serving, "N" not ready. */
function e(
  ip: string,
  state: 'R' | 'T' | 'X' | 'N',
  o: { local?: boolean; zones?: string[]; nodes?: string[] } = {},
): EndpointInfo {
  return {
    key: `${ip}:80`,
    ip,
    port: 80,
    ready: state === 'R',
    serving: state === 'R' || state === 'T',
    terminating: state === 'T' || state === 'X',
    nodeName: o.local ? NODE : 'remote',
    zone: '',
    isLocal: o.local === true,
    zoneHints: o.zones ?? [],
    nodeHints: o.nodes ?? [],
  };
}

const POLICY = {
  cluster: { usesClusterEndpoints: true, usesLocalEndpoints: false },
  internalLocal: { usesClusterEndpoints: false, usesLocalEndpoints: true },
  externalLocal: { usesClusterEndpoints: true, usesLocalEndpoints: true },
};

interface Row {
  name: string;
  policy: keyof typeof POLICY;
  eps: EndpointInfo[];
  ctx?: Partial<TopologyContext>;
  cluster: string[];
  local: string[];
  all: string[];
  any: boolean;
  mode?: TopologyMode;
}

const rows: Row[] = [
  { name: 'no endpoints', policy: 'cluster', eps: [], cluster: [], local: [], all: [], any: false },
  {
    name: 'cluster: ready endpoints only',
    policy: 'cluster',
    eps: [e('10.0.0.1', 'R'), e('10.0.0.2', 'T'), e('10.0.0.3', 'N')],
    cluster: ['10.0.0.1:80'],
    local: [],
    all: ['10.0.0.1:80'],
    any: true,
  },
  {
    name: 'cluster: no ready -> serving terminating fallback',
    policy: 'cluster',
    eps: [e('10.0.0.2', 'T'), e('10.0.0.3', 'X'), e('10.0.0.4', 'N')],
    cluster: ['10.0.0.2:80'],
    local: [],
    all: ['10.0.0.2:80'],
    any: true,
  },
  {
    name: 'cluster: only non-serving terminating -> nothing',
    policy: 'cluster',
    eps: [e('10.0.0.3', 'X'), e('10.0.0.4', 'N')],
    cluster: [],
    local: [],
    all: [],
    any: false,
  },
  {
    name: 'iTP Local: local ready only',
    policy: 'internalLocal',
    eps: [e('10.0.0.1', 'R', { local: true }), e('10.0.0.2', 'R'), e('10.0.0.3', 'T', { local: true })],
    cluster: [],
    local: ['10.0.0.1:80'],
    all: ['10.0.0.1:80'],
    any: true,
  },
  {
    name: 'iTP Local: no local endpoint, remote ready -> empty but hasAny',
    policy: 'internalLocal',
    eps: [e('10.0.0.2', 'R')],
    cluster: [],
    local: [],
    all: [],
    any: true,
  },
  {
    name: 'iTP Local: local fallback to serving terminating',
    policy: 'internalLocal',
    eps: [e('10.0.0.1', 'T', { local: true }), e('10.0.0.2', 'R')],
    cluster: [],
    local: ['10.0.0.1:80'],
    all: ['10.0.0.1:80'],
    any: true,
  },
  {
    name: 'eTP Local: cluster has all ready, local the local ready, reachable = cluster',
    policy: 'externalLocal',
    eps: [e('10.0.0.1', 'R', { local: true }), e('10.0.0.2', 'R')],
    cluster: ['10.0.0.1:80', '10.0.0.2:80'],
    local: ['10.0.0.1:80'],
    all: ['10.0.0.1:80', '10.0.0.2:80'],
    any: true,
  },
  {
    name: 'eTP Local: local falls back independently; reachable is the union',
    policy: 'externalLocal',
    eps: [e('10.0.0.1', 'T', { local: true }), e('10.0.0.2', 'R')],
    cluster: ['10.0.0.2:80'],
    local: ['10.0.0.1:80'],
    all: ['10.0.0.1:80', '10.0.0.2:80'],
    any: true,
  },
  {
    name: 'zone hints for my zone: PreferSameZone',
    policy: 'cluster',
    ctx: { zone: 'z1' },
    eps: [e('10.0.0.1', 'R', { zones: ['z1'] }), e('10.0.0.2', 'R', { zones: ['z2'] })],
    cluster: ['10.0.0.1:80'],
    local: [],
    all: ['10.0.0.1:80'],
    any: true,
    mode: 'PreferSameZone',
  },
  {
    name: 'zone hints ignored when one ready endpoint lacks them',
    policy: 'cluster',
    ctx: { zone: 'z1' },
    eps: [e('10.0.0.1', 'R', { zones: ['z1'] }), e('10.0.0.2', 'R')],
    cluster: ['10.0.0.1:80', '10.0.0.2:80'],
    local: [],
    all: ['10.0.0.1:80', '10.0.0.2:80'],
    any: true,
    mode: '',
  },
  {
    name: 'zone hints: an unready endpoint without hints does not count',
    policy: 'cluster',
    ctx: { zone: 'z1' },
    eps: [e('10.0.0.1', 'R', { zones: ['z1'] }), e('10.0.0.2', 'R', { zones: ['z2'] }), e('10.0.0.3', 'N')],
    cluster: ['10.0.0.1:80'],
    local: [],
    all: ['10.0.0.1:80'],
    any: true,
    mode: 'PreferSameZone',
  },
  {
    name: 'zone hints ignored when the node zone is unknown',
    policy: 'cluster',
    ctx: { zone: '' },
    eps: [e('10.0.0.1', 'R', { zones: ['z1'] }), e('10.0.0.2', 'R', { zones: ['z2'] })],
    cluster: ['10.0.0.1:80', '10.0.0.2:80'],
    local: [],
    all: ['10.0.0.1:80', '10.0.0.2:80'],
    any: true,
    mode: '',
  },
  {
    name: 'zone hints ignored when none is for my zone',
    policy: 'cluster',
    ctx: { zone: 'z3' },
    eps: [e('10.0.0.1', 'R', { zones: ['z1'] }), e('10.0.0.2', 'R', { zones: ['z2'] })],
    cluster: ['10.0.0.1:80', '10.0.0.2:80'],
    local: [],
    all: ['10.0.0.1:80', '10.0.0.2:80'],
    any: true,
    mode: '',
  },
  {
    name: 'node hints for my node: PreferSameNode',
    policy: 'cluster',
    ctx: { zone: 'z1' },
    eps: [e('10.0.0.1', 'R', { zones: ['z1'], nodes: [NODE] }), e('10.0.0.2', 'R', { zones: ['z1'], nodes: ['b'] })],
    cluster: ['10.0.0.1:80'],
    local: [],
    all: ['10.0.0.1:80'],
    any: true,
    mode: 'PreferSameNode',
  },
  {
    name: 'node hints off (feature gate): zone hints used',
    policy: 'cluster',
    ctx: { zone: 'z1', nodeHints: false },
    eps: [e('10.0.0.1', 'R', { zones: ['z1'], nodes: [NODE] }), e('10.0.0.2', 'R', { zones: ['z1'], nodes: ['b'] })],
    cluster: ['10.0.0.1:80', '10.0.0.2:80'],
    local: [],
    all: ['10.0.0.1:80', '10.0.0.2:80'],
    any: true,
    mode: 'PreferSameZone',
  },
  {
    name: 'node hints partial: fall back to zone hints',
    policy: 'cluster',
    ctx: { zone: 'z2' },
    eps: [e('10.0.0.1', 'R', { zones: ['z1'], nodes: [NODE] }), e('10.0.0.2', 'R', { zones: ['z2'] })],
    cluster: ['10.0.0.2:80'],
    local: [],
    all: ['10.0.0.2:80'],
    any: true,
    mode: 'PreferSameZone',
  },
  {
    name: 'topology with eTP Local: a local endpoint in another zone stays reachable',
    policy: 'externalLocal',
    ctx: { zone: 'z1' },
    eps: [e('10.0.0.1', 'R', { zones: ['z1'] }), e('10.0.0.2', 'R', { zones: ['z2'], local: true })],
    cluster: ['10.0.0.1:80'],
    local: ['10.0.0.2:80'],
    all: ['10.0.0.1:80', '10.0.0.2:80'],
    any: true,
    mode: 'PreferSameZone',
  },
];

for (const row of rows) {
  test(`topology: ${row.name}`, (t) => {
    const ctx: TopologyContext = { nodeName: NODE, zone: '', nodeHints: true, ...row.ctx };
    const sel = categorizeEndpoints(POLICY[row.policy], row.eps, ctx);
    t.deepEqual(keys(sel.cluster), row.cluster, 'cluster');
    t.deepEqual(keys(sel.local), row.local, 'local');
    t.deepEqual(keys(sel.allReachable), row.all, 'allReachable');
    t.is(sel.hasAnyEndpoints, row.any, 'hasAnyEndpoints');
    if (row.mode !== undefined) t.is(sel.topologyMode, row.mode, 'mode');
  });
}
