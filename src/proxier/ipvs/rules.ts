// The companion rules of upstream's IPVS mode, as data: a pure function from what the sets hold
// (and the masquerade policy) to the KUBE-* chains, the jumps into them and their rules, in
// upstream's order (pkg/proxy/ipvs/proxier.go writeIptablesRules, createAndLinkKubeChain).
//
// companion.ts writes them in the iptables-nft form (tables `ip nat` / `ip filter`, the
// xtables-compat `set`, `comment`, `addrtype`, `mark`, `conntrack`, `physdev`, `ipvs` matches and
// `MARK`/`MASQUERADE`/`REJECT` targets) so that `iptables-nft-save` shows upstream's rules. Each
// match and target is a typed value, which the shared iptables dialect encodes one to one;
// toIptablesSave() renders the same data the way iptables-save prints it, for logs and golden
// tests. Set names are kernel names (KUBE-6-... for IPv6).

import type { IPFamily } from '../../base/ip.ts';
import { masqueradeMark, type LocalDetector } from '../../model/index.ts';
import { SET_INFO, SetName, ipsetName } from './names.ts';
import type { SetKey } from './names.ts';
import type { NoNodeAccess } from './plan.ts';
import type {
  IptRule,
  IptTable,
  JumpRule,
  L4Proto,
  Match,
  SetDir,
  Target,
} from '../../netlink/nftables/iptables/rule.ts';
import { ruleArgs as saveRuleArgs } from '../../netlink/nftables/iptables/save.ts';

// The rule model is the shared iptables dialect's (netlink/nftables/iptables/rule.ts); re-exported
// so this module's callers keep their imports.
export type { IptRule, IptTable, JumpRule, Match, SetDir, Target };

export interface CompanionRules {
  readonly family: IPFamily;
  readonly chains: readonly { readonly table: IptTable; readonly name: string }[];
  readonly jumps: readonly JumpRule[];
  readonly rules: readonly IptRule[];
}

export interface RulesInput {
  readonly family: IPFamily;
  /** Sets with at least one entry (upstream writes a set's rules only then). */
  readonly nonEmptySets: ReadonlySet<SetKey>;
  readonly noNodeAccess: readonly NoNodeAccess[];
  readonly masqueradeAll: boolean;
  readonly detectLocal: LocalDetector;
  /** --iptables-masquerade-bit, default 14. */
  readonly masqueradeBit?: number;
  /** MASQUERADE --random-fully (upstream: when iptables supports it). Default true. */
  readonly randomFully?: boolean;
}

const L4_PROTOS: readonly L4Proto[] = ['tcp', 'udp', 'sctp'];

export const Chain = {
  SERVICES: 'KUBE-SERVICES',
  POSTROUTING: 'KUBE-POSTROUTING',
  NODE_PORT: 'KUBE-NODE-PORT',
  LOAD_BALANCER: 'KUBE-LOAD-BALANCER',
  MARK_MASQ: 'KUBE-MARK-MASQ',
  FORWARD: 'KUBE-FORWARD',
  PROXY_FIREWALL: 'KUBE-PROXY-FIREWALL',
  SOURCE_RANGES_FIREWALL: 'KUBE-SOURCE-RANGES-FIREWALL',
  IPVS_FILTER: 'KUBE-IPVS-FILTER',
  IPVS_OUT_FILTER: 'KUBE-IPVS-OUT-FILTER',
} as const;

/** upstream iptablesChains: the chains we own, and only these. */
export const CHAINS: readonly { table: IptTable; name: string }[] = [
  { table: 'nat', name: Chain.SERVICES },
  { table: 'nat', name: Chain.POSTROUTING },
  { table: 'nat', name: Chain.NODE_PORT },
  { table: 'nat', name: Chain.LOAD_BALANCER },
  { table: 'nat', name: Chain.MARK_MASQ },
  { table: 'filter', name: Chain.FORWARD },
  { table: 'filter', name: Chain.NODE_PORT },
  { table: 'filter', name: Chain.PROXY_FIREWALL },
  { table: 'filter', name: Chain.SOURCE_RANGES_FIREWALL },
  { table: 'filter', name: Chain.IPVS_FILTER },
  { table: 'filter', name: Chain.IPVS_OUT_FILTER },
];

const jump = (table: IptTable, chain: JumpRule['chain'], to: string, comment: string): JumpRule => ({
  table,
  chain,
  matches: [{ m: 'comment', text: comment }],
  target: { t: 'jump', chain: to },
});

/** upstream iptablesJumpChain. */
export const JUMPS: readonly JumpRule[] = [
  jump('nat', 'OUTPUT', Chain.SERVICES, 'kubernetes service portals'),
  jump('nat', 'PREROUTING', Chain.SERVICES, 'kubernetes service portals'),
  jump('nat', 'POSTROUTING', Chain.POSTROUTING, 'kubernetes postrouting rules'),
  jump('filter', 'FORWARD', Chain.FORWARD, 'kubernetes forwarding rules'),
  jump('filter', 'INPUT', Chain.NODE_PORT, 'kubernetes health check rules'),
  jump('filter', 'INPUT', Chain.PROXY_FIREWALL, 'kube-proxy firewall rules'),
  jump('filter', 'FORWARD', Chain.PROXY_FIREWALL, 'kube-proxy firewall rules'),
  jump('filter', 'INPUT', Chain.IPVS_FILTER, 'kubernetes ipvs access filter'),
  jump('filter', 'OUTPUT', Chain.IPVS_OUT_FILTER, 'kubernetes ipvs access filter'),
];

/** upstream ipsetWithIptablesChain: set -> (table, from chain, target, match dirs, protocol). */
const SET_RULES: readonly {
  set: SetKey;
  table: IptTable;
  from: string;
  to: Target;
  dirs: SetDir[];
  proto?: 'tcp' | 'udp' | 'sctp';
}[] = [
  {
    set: SetName.LOOP_BACK,
    table: 'nat',
    from: Chain.POSTROUTING,
    to: { t: 'MASQUERADE', randomFully: false },
    dirs: ['dst', 'dst', 'src'],
  },
  {
    set: SetName.LOAD_BALANCER,
    table: 'nat',
    from: Chain.SERVICES,
    to: { t: 'jump', chain: Chain.LOAD_BALANCER },
    dirs: ['dst', 'dst'],
  },
  {
    set: SetName.LOAD_BALANCER_LOCAL,
    table: 'nat',
    from: Chain.LOAD_BALANCER,
    to: { t: 'RETURN' },
    dirs: ['dst', 'dst'],
  },
  {
    set: SetName.NODE_PORT_LOCAL_TCP,
    table: 'nat',
    from: Chain.NODE_PORT,
    to: { t: 'RETURN' },
    dirs: ['dst'],
    proto: 'tcp',
  },
  {
    set: SetName.NODE_PORT_TCP,
    table: 'nat',
    from: Chain.NODE_PORT,
    to: { t: 'jump', chain: Chain.MARK_MASQ },
    dirs: ['dst'],
    proto: 'tcp',
  },
  {
    set: SetName.NODE_PORT_LOCAL_UDP,
    table: 'nat',
    from: Chain.NODE_PORT,
    to: { t: 'RETURN' },
    dirs: ['dst'],
    proto: 'udp',
  },
  {
    set: SetName.NODE_PORT_UDP,
    table: 'nat',
    from: Chain.NODE_PORT,
    to: { t: 'jump', chain: Chain.MARK_MASQ },
    dirs: ['dst'],
    proto: 'udp',
  },
  {
    set: SetName.NODE_PORT_LOCAL_SCTP,
    table: 'nat',
    from: Chain.NODE_PORT,
    to: { t: 'RETURN' },
    dirs: ['dst', 'dst'],
    proto: 'sctp',
  },
  {
    set: SetName.NODE_PORT_SCTP,
    table: 'nat',
    from: Chain.NODE_PORT,
    to: { t: 'jump', chain: Chain.MARK_MASQ },
    dirs: ['dst', 'dst'],
    proto: 'sctp',
  },
  {
    set: SetName.LOAD_BALANCER_FW,
    table: 'filter',
    from: Chain.PROXY_FIREWALL,
    to: { t: 'jump', chain: Chain.SOURCE_RANGES_FIREWALL },
    dirs: ['dst', 'dst'],
  },
  {
    set: SetName.LOAD_BALANCER_SOURCE_CIDR,
    table: 'filter',
    from: Chain.SOURCE_RANGES_FIREWALL,
    to: { t: 'RETURN' },
    dirs: ['dst', 'dst', 'src'],
  },
  {
    set: SetName.LOAD_BALANCER_SOURCE_IP,
    table: 'filter',
    from: Chain.SOURCE_RANGES_FIREWALL,
    to: { t: 'RETURN' },
    dirs: ['dst', 'dst', 'src'],
  },
];

/** Matches "not from this node's pods" (upstream LocalTrafficDetector.IfNotLocal). */
function ifNotLocal(d: LocalDetector): Match[] {
  switch (d.mode) {
    case 'ClusterCIDR':
    case 'NodeCIDR':
      return d.cidrs.map((cidr) => ({ m: 'src', cidr, invert: true }) as const);
    case 'BridgeInterface':
      return [{ m: 'inIface', name: d.interfaceName, invert: true }];
    case 'InterfaceNamePrefix':
      return [{ m: 'inIface', name: `${d.interfaceName}+`, invert: true }];
    default:
      return [];
  }
}

/** What the rule groups below write with: the rule list, and the input's sets and mark. */
interface RuleWriter {
  readonly input: RulesInput;
  readonly mark: number;
  readonly toMasq: Target;
  add(table: IptTable, chain: string, matches: Match[], target: Target): void;
  /** The set has entries: rules on an empty set are left out, as upstream. */
  has(k: SetKey): boolean;
  comment(k: SetKey): Match;
  set(k: SetKey, ...dirs: SetDir[]): Match;
}

export function companionRules(input: RulesInput): CompanionRules {
  const rules: IptRule[] = [];
  const w: RuleWriter = {
    input,
    mark: masqueradeMark(input.masqueradeBit),
    toMasq: { t: 'jump', chain: Chain.MARK_MASQ },
    add: (table, chain, matches, target) => rules.push({ table, chain, matches, target }),
    has: (k) => input.nonEmptySets.has(k),
    comment: (k) => ({ m: 'comment', text: SET_INFO.get(k)!.comment }),
    set: (k, ...dirs) => ({ m: 'set', set: ipsetName(k, input.family), dirs }),
  };
  serviceRules(w);
  nodeRules(w);
  filterRules(w);
  noLocalEndpointRules(w);
  postroutingRules(w);
  return { family: input.family, chains: CHAINS, jumps: JUMPS, rules };
}

/** KUBE-SERVICES: the set matches, masquerading of cluster and external IPs. */
function serviceRules({ input, toMasq, add, has, comment, set }: RuleWriter): void {
  const loopback = input.family === 'IPv6' ? '::1/128' : '127.0.0.0/8';
  add('nat', Chain.SERVICES, [{ m: 'src', cidr: loopback }], { t: 'RETURN' });

  for (const r of SET_RULES) {
    if (!has(r.set)) continue;
    const matches: Match[] = [];
    if (r.proto) matches.push({ m: 'proto', proto: r.proto });
    matches.push(comment(r.set), set(r.set, ...r.dirs));
    add(r.table, r.from, matches, r.to);
  }

  if (has(SetName.CLUSTER_IP)) {
    const base: Match[] = [comment(SetName.CLUSTER_IP)];
    if (input.masqueradeAll) add('nat', Chain.SERVICES, [...base, set(SetName.CLUSTER_IP, 'dst', 'dst')], toMasq);
    else if (input.detectLocal.implemented)
      add(
        'nat',
        Chain.SERVICES,
        [...base, set(SetName.CLUSTER_IP, 'dst', 'dst'), ...ifNotLocal(input.detectLocal)],
        toMasq,
      );
    // Node-originated traffic to a VIP picks the VIP as its source (it is on kube-ipvs0).
    else add('nat', Chain.SERVICES, [...base, set(SetName.CLUSTER_IP, 'src', 'dst')], toMasq);
  }

  const externalIPRules = (k: SetKey): void => {
    const base = [comment(k), set(k, 'dst', 'dst')];
    add(
      'nat',
      Chain.SERVICES,
      [...base, { m: 'physdevNotIsIn' }, { m: 'addrtype', dir: 'src', type: 'LOCAL', invert: true }],
      { t: 'ACCEPT' },
    );
    add('nat', Chain.SERVICES, [...base, { m: 'addrtype', dir: 'dst', type: 'LOCAL' }], { t: 'ACCEPT' });
  };
  if (has(SetName.EXTERNAL_IP)) {
    add('nat', Chain.SERVICES, [comment(SetName.EXTERNAL_IP), set(SetName.EXTERNAL_IP, 'dst', 'dst')], toMasq);
    externalIPRules(SetName.EXTERNAL_IP);
  }
  if (has(SetName.EXTERNAL_IP_LOCAL)) externalIPRules(SetName.EXTERNAL_IP_LOCAL);
}

/** Node ports, load balancers and their firewall, VIPs the node may not reach, and the ACCEPT of IPVS traffic. */
function nodeRules({ input, toMasq, add, has, set }: RuleWriter): void {
  add('nat', Chain.SERVICES, [{ m: 'addrtype', dir: 'dst', type: 'LOCAL' }], { t: 'jump', chain: Chain.NODE_PORT });
  add('nat', Chain.LOAD_BALANCER, [], toMasq);
  add('filter', Chain.SOURCE_RANGES_FIREWALL, [], { t: 'DROP' });
  for (const n of input.noNodeAccess) {
    const vproto = L4_PROTOS.find((p) => p === n.protocol);
    if (!vproto) continue; // services carry tcp, udp or sctp only
    add(
      'filter',
      Chain.IPVS_OUT_FILTER,
      [
        { m: 'src', cidr: n.ip },
        { m: 'ipvs', vaddr: n.ip, vproto, vport: n.port },
      ],
      { t: 'DROP' },
    );
  }
  // acceptIPVSTraffic: at the end of KUBE-SERVICES.
  for (const k of [SetName.CLUSTER_IP, SetName.LOAD_BALANCER] as const)
    if (has(k)) add('nat', Chain.SERVICES, [set(k, 'dst', 'dst')], { t: 'ACCEPT' });
}

/** KUBE-FORWARD, the health-check node ports, and KUBE-IPVS-FILTER. */
function filterRules({ mark, add, comment, set }: RuleWriter): void {
  add(
    'filter',
    Chain.FORWARD,
    [
      { m: 'comment', text: 'kubernetes forwarding rules' },
      { m: 'mark', value: mark, mask: mark },
    ],
    { t: 'ACCEPT' },
  );
  add(
    'filter',
    Chain.FORWARD,
    [
      { m: 'comment', text: 'kubernetes forwarding conntrack rule' },
      { m: 'ctstate', states: ['RELATED', 'ESTABLISHED'] },
    ],
    { t: 'ACCEPT' },
  );
  add(
    'filter',
    Chain.NODE_PORT,
    [comment(SetName.HEALTH_CHECK_NODE_PORT), set(SetName.HEALTH_CHECK_NODE_PORT, 'dst')],
    { t: 'ACCEPT' },
  );

  // KUBE-IPVS-FILTER: VIPs answer only on service ports (kubernetes issue 72236).
  for (const k of [SetName.LOAD_BALANCER, SetName.CLUSTER_IP, SetName.EXTERNAL_IP, SetName.EXTERNAL_IP_LOCAL] as const)
    add('filter', Chain.IPVS_FILTER, [set(k, 'dst', 'dst')], { t: 'RETURN' });
  add('filter', Chain.IPVS_FILTER, [set(SetName.HEALTH_CHECK_NODE_PORT, 'dst')], { t: 'RETURN' });
  add('filter', Chain.IPVS_FILTER, [{ m: 'ctstate', states: ['NEW'] }, set(SetName.IPVS_IPS, 'dst')], { t: 'REJECT' });
}

/**
 * Ours, not upstream's: an eTP=Local frontend whose VS fell back to remote endpoints (plan.ts)
 * takes new connections only from this node's pods and the node itself, as the documented
 * traffic policy (and upstream's iptables and nftables modes) ask. Filter INPUT runs before
 * IPVS's LOCAL_IN hook, so this sees the frontend address; the node's own connections meet IPVS
 * at LOCAL_OUT and never get here (the src-type match keeps it so). DROP, as upstream's other
 * modes: the load balancer's health check already steers clients to nodes with endpoints, and
 * an established connection (one draining) keeps its packets. Without a local-traffic detector
 * pods cannot be told apart and are treated as external, as in upstream's other modes.
 */
function noLocalEndpointRules({ input, add, has, comment, set }: RuleWriter): void {
  const k = SetName.NO_LOCAL_ENDPOINTS;
  if (!has(k)) return;
  const notPods = input.detectLocal.implemented ? ifNotLocal(input.detectLocal) : [];
  add(
    'filter',
    Chain.PROXY_FIREWALL,
    [
      ...notPods,
      comment(k),
      set(k, 'dst', 'dst'),
      { m: 'addrtype', dir: 'src', type: 'LOCAL', invert: true },
      { m: 'ctstate', states: ['NEW'] },
    ],
    { t: 'DROP' },
  );
}

/** KUBE-POSTROUTING and KUBE-MARK-MASQ: masquerade what carries the mark. */
function postroutingRules({ input, mark, add }: RuleWriter): void {
  add('nat', Chain.POSTROUTING, [{ m: 'mark', value: mark, mask: mark, invert: true }], { t: 'RETURN' });
  add('nat', Chain.POSTROUTING, [], { t: 'MARK', op: 'xor', value: mark });
  add('nat', Chain.POSTROUTING, [{ m: 'comment', text: 'kubernetes service traffic requiring SNAT' }], {
    t: 'MASQUERADE',
    randomFully: input.randomFully ?? true,
  });
  add('nat', Chain.MARK_MASQ, [], { t: 'MARK', op: 'or', value: mark });
}

/** One rule's arguments as iptables-save prints them (netlink/nftables/iptables/save.ts renders them). */
export function ruleArgs(r: IptRule, family: IPFamily = 'IPv4'): string {
  // The companion rules use a subset of the shared rule model's matches and targets.
  return saveRuleArgs(r, family);
}

/**
 * The rules in iptables-save form: per table, our chains' declarations, the jump rules (shown
 * as -A of the built-in chains), then our rules. Built-in chain policies and other rules are
 * not ours and not shown.
 */
export function toIptablesSave(c: CompanionRules): string {
  const out: string[] = [];
  for (const table of ['nat', 'filter'] as const) {
    out.push(`*${table}`);
    for (const ch of c.chains) if (ch.table === table) out.push(`:${ch.name} - [0:0]`);
    for (const j of c.jumps) if (j.table === table) out.push(`-A ${j.chain} ${ruleArgs(j, c.family)}`);
    for (const r of c.rules) if (r.table === table) out.push(`-A ${r.chain} ${ruleArgs(r, c.family)}`);
    out.push('COMMIT');
  }
  return out.join('\n') + '\n';
}
