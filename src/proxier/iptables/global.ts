// The fixed part of upstream's iptables ruleset (pkg/proxy/iptables/proxier.go): the chains
// it always creates, the jumps into them from the built-in chains (iptablesJumpChains and
// kubelet's KUBE-FIREWALL jumps), KUBE-POSTROUTING and KUBE-MARK-MASQ, KUBE-FORWARD, the
// anti-martian rule that guards localhost node ports, the nodeports rule that ends nat
// KUBE-SERVICES, and the empty KUBE-PROXY-CANARY chains whose disappearance tells that
// someone flushed the tables.

import { isLoopback, parseIP } from '../../base/ip.ts';
import type { BuiltinChain, IptRule, IptTable, JumpRule, Match } from '../../netlink/nftables/iptables/rule.ts';
import { Chain, NfacctCounter } from './names.ts';
import type { GlobalContext, GlobalRules, IptChainRef } from './types.ts';

/** One of upstream's iptablesJumpChains entries. */
interface JumpSpec {
  readonly table: IptTable;
  readonly to: string;
  readonly from: BuiltinChain;
  /** '' for kubelet's KUBE-FIREWALL jumps, which carry no comment. */
  readonly comment: string;
  readonly newOnly: boolean;
}

const spec = (table: IptTable, to: string, from: BuiltinChain, comment: string, newOnly = false): JumpSpec => ({
  table,
  to,
  from,
  comment,
  newOnly,
});

/** upstream iptablesJumpChains then iptablesKubeletJumpChains, in upstream's order. */
export const JUMP_SPECS: readonly JumpSpec[] = [
  spec('filter', Chain.EXTERNAL_SERVICES, 'INPUT', 'kubernetes externally-visible service portals', true),
  spec('filter', Chain.EXTERNAL_SERVICES, 'FORWARD', 'kubernetes externally-visible service portals', true),
  spec('filter', Chain.NODE_PORTS, 'INPUT', 'kubernetes health check service ports'),
  spec('filter', Chain.SERVICES, 'FORWARD', 'kubernetes service portals', true),
  spec('filter', Chain.SERVICES, 'OUTPUT', 'kubernetes service portals', true),
  spec('filter', Chain.FORWARD, 'FORWARD', 'kubernetes forwarding rules'),
  spec('filter', Chain.PROXY_FIREWALL, 'INPUT', 'kubernetes load balancer firewall', true),
  spec('filter', Chain.PROXY_FIREWALL, 'OUTPUT', 'kubernetes load balancer firewall', true),
  spec('filter', Chain.PROXY_FIREWALL, 'FORWARD', 'kubernetes load balancer firewall', true),
  spec('nat', Chain.SERVICES, 'OUTPUT', 'kubernetes service portals'),
  spec('nat', Chain.SERVICES, 'PREROUTING', 'kubernetes service portals'),
  spec('nat', Chain.POSTROUTING, 'POSTROUTING', 'kubernetes postrouting rules'),
  spec('filter', Chain.FIREWALL, 'INPUT', ''),
  spec('filter', Chain.FIREWALL, 'OUTPUT', ''),
];

function jumpRule(s: JumpSpec): JumpRule {
  const matches: Match[] = [];
  if (s.newOnly) matches.push({ m: 'ctstate', states: ['NEW'] });
  if (s.comment !== '') matches.push({ m: 'comment', text: s.comment });
  return { table: s.table, chain: s.from, matches, target: { t: 'jump', chain: s.to } };
}

/**
 * The jumps top to bottom per built-in chain. Upstream inserts each at position 1 in list
 * order, so on a clean host the last inserted stands first: the list reversed.
 */
export const JUMPS: readonly JumpRule[] = [...JUMP_SPECS].reverse().map(jumpRule);

/** The fixed chains, per table in upstream's order of declaration, the canaries last. */
export const FIXED_CHAINS: readonly IptChainRef[] = [
  ...[
    Chain.SERVICES,
    Chain.EXTERNAL_SERVICES,
    Chain.FORWARD,
    Chain.NODE_PORTS,
    Chain.PROXY_FIREWALL,
    Chain.FIREWALL,
  ].map((name) => ({ table: 'filter' as const, name })),
  ...[Chain.SERVICES, Chain.NODE_PORTS, Chain.POSTROUTING, Chain.MARK_MASQ].map((name) => ({
    table: 'nat' as const,
    name,
  })),
  ...(['mangle', 'nat', 'filter'] as const).map((table) => ({ table, name: Chain.CANARY })),
];

const NODEPORTS_COMMENT = 'kubernetes service nodeports; NOTE: this must be the last rule in this chain';

export function globalRules(ctx: GlobalContext): GlobalRules {
  const mark = ctx.masqueradeMark;
  const rules: IptRule[] = [];
  const add = (table: IptTable, chain: string, matches: Match[], target: IptRule['target']): void => {
    rules.push({ table, chain, matches, target });
  };

  // Masquerade what KUBE-MARK-MASQ marked, clearing the mark so a packet that comes back
  // through the stack is not masqueraded twice.
  add('nat', Chain.POSTROUTING, [{ m: 'mark', value: mark, mask: mark, invert: true }], { t: 'RETURN' });
  add('nat', Chain.POSTROUTING, [], { t: 'MARK', op: 'xor', value: mark });
  add('nat', Chain.POSTROUTING, [{ m: 'comment', text: 'kubernetes service traffic requiring SNAT' }], {
    t: 'MASQUERADE',
    randomFully: ctx.randomFully,
  });
  add('nat', Chain.MARK_MASQ, [], { t: 'MARK', op: 'or', value: mark });

  if (ctx.family === 'IPv4' && ctx.localhostNodePorts) {
    // route_localnet opens 127.0.0.0/8 to the network (kubernetes issue 90259): drop martians that
    // were not DNATed by a node port.
    add(
      'filter',
      Chain.FIREWALL,
      [
        { m: 'comment', text: 'block incoming localnet connections' },
        { m: 'dst', cidr: '127.0.0.0/8' },
        { m: 'src', cidr: '127.0.0.0/8', invert: true },
        { m: 'ctstate', states: ['RELATED', 'ESTABLISHED', 'DNAT'], invert: true },
      ],
      { t: 'DROP' },
    );
  }

  // INVALID packets would reset connections unless the kernel is liberal (kubernetes issues 74839, 117924);
  // counted in upstream's nfacct object where the kernel has it.
  if (!ctx.conntrackTCPLiberal) {
    const invalid: Match[] = [{ m: 'ctstate', states: ['INVALID'] }];
    if (ctx.invalidDroppedCounter) invalid.push({ m: 'nfacct', name: NfacctCounter.INVALID_DROPPED });
    add('filter', Chain.FORWARD, invalid, { t: 'DROP' });
  }
  // Forward what we marked, and its replies, even when FORWARD's policy is DROP.
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

  return { family: ctx.family, chains: FIXED_CHAINS, jumps: JUMPS, rules, tail: nodePortsTail(ctx) };
}

/** The rule(s) sending what is left in nat KUBE-SERVICES to KUBE-NODEPORTS: after every Service's. */
function nodePortsTail(ctx: GlobalContext): IptRule[] {
  const to = { t: 'jump', chain: Chain.NODE_PORTS } as const;
  const comment: Match = { m: 'comment', text: NODEPORTS_COMMENT };
  if (ctx.nodePortAddresses.matchAll) {
    const matches: Match[] = [comment, { m: 'addrtype', dir: 'dst', type: 'LOCAL' }];
    // Localhost node ports never work on IPv6, and on IPv4 only with route_localnet.
    if (ctx.family === 'IPv6') matches.push({ m: 'dst', cidr: '::1/128', invert: true });
    else if (!ctx.localhostNodePorts) matches.push({ m: 'dst', cidr: '127.0.0.0/8', invert: true });
    return [{ table: 'nat', chain: Chain.SERVICES, matches, target: to }];
  }
  const out: IptRule[] = [];
  for (const text of ctx.nodePortIPs) {
    const ip = parseIP(text);
    if (!ip || ip.family !== ctx.family) continue;
    // Upstream logs and skips these; the proxier says why once.
    if (isLoopback(ip) && (ctx.family === 'IPv6' || !ctx.localhostNodePorts)) continue;
    out.push({ table: 'nat', chain: Chain.SERVICES, matches: [comment, { m: 'dst', cidr: ip.text }], target: to });
  }
  return out;
}
