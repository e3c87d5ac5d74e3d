// Pickers: the shared chains that choose one of a frontend's N endpoints, and the maps they
// read the endpoints from. One picker per kind of traffic and endpoint count, whatever the
// number of Services:
//
//   chain pick-internal-3 {                       # cluster IPs whose traffic has 3 endpoints
//       ip saddr != @pod-cidrs meta mark set meta mark | 0x4000
//       meta l4proto tcp dnat ip to ip daddr . meta l4proto . th dport . numgen random mod 3 map @endpoints-3
//       (the same for udp and sctp)
//   }
//   map endpoints-3 { typeof ip daddr . meta l4proto . th dport . numgen random mod 1 : ip daddr . th dport }
//       10.96.0.10 . udp . 53 . 0 : 10.244.1.5 . 53, ... . 1 : ..., ... . 2 : ...
//
// Why not one chain per Service with its own `numgen … map`, as upstream does: the kernel
// checks every map a rule binds against all of the map's elements and all of its other
// bindings (nf_tables_bind_set), and every element added to a map against all of its
// bindings. One shared map bound by a chain per Service costs O(Services × endpoints) per
// Service — measured on 6.18, 20,000 chains binding one map of 100,000 elements took minutes.
// Here a map is bound by the two or three pickers of its endpoint count, and a Service's
// frontend reaches its picker through the `service-ips` verdict map: one lookup, then one
// map lookup keyed by the frontend itself.
//
// Kinds (the frontend's key in the map is in brackets):
//   internal        cluster IP [daddr . proto . port]: masquerade unless from a local pod
//   external        external IP, load-balancer IP [daddr . proto . port]: masquerade
//   nodeport        node port [proto . port]: masquerade
//   external-local  externalTrafficPolicy=Local: from local pods and from the node (that one
//   nodeport-local  masqueraded) any of C cluster endpoints (short-circuit-… maps), from
//                   elsewhere one of L local endpoints, client address kept.

import type { NftRule, NftSetLike, RuleBuilder, TypeofExpr } from '../../netlink/nftables/index.ts';
import { rule } from '../../netlink/nftables/index.ts';
import type { FamilyTraits } from './family.ts';
import { SET } from './names.ts';

export type PickerSpec =
  | { readonly kind: 'internal' | 'external' | 'nodeport'; readonly count: number }
  | { readonly kind: 'external-local' | 'nodeport-local'; readonly local: number; readonly cluster: number };

export interface PickerContext {
  readonly traits: FamilyTraits;
  readonly masqueradeAll: boolean;
  /** A detect-local mode is implemented: sources inside @pod-cidrs, or from `localInterface`, are local pods. */
  readonly detectLocal: boolean;
  /**
   * BridgeInterface ("br0") or InterfaceNamePrefix ("veth*", nft's wildcard): local pods are
   * the packets arriving on it (upstream's IfLocalNFT: `iifname br0` / `iifname "veth*"`).
   * Unset: the CIDR-based modes, matched against @pod-cidrs.
   */
  readonly localInterface?: string;
  readonly masqueradeMark: number;
}

const PROTOCOLS = ['tcp', 'udp', 'sctp'] as const;

export const pickerName = (s: PickerSpec): string =>
  'count' in s ? `pick-${s.kind}-${s.count}` : `pick-${s.kind}-${s.local}-${s.cluster}`;

const isNodePort = (s: PickerSpec): boolean => s.kind === 'nodeport' || s.kind === 'nodeport-local';

/** The map holding a frontend's endpoints: `endpoints-N`, `nodeport-endpoints-N`, and the short-circuit ones. */
export function endpointsMapName(nodePort: boolean, shortCircuit: boolean, count: number): string {
  return `${nodePort ? 'nodeport-' : ''}${shortCircuit ? 'short-circuit-' : ''}endpoints-${count}`;
}

/** Maps a picker reads (those with at least one endpoint). */
export function pickerMaps(s: PickerSpec): string[] {
  const np = isNodePort(s);
  if ('count' in s) return s.count > 0 ? [endpointsMapName(np, false, s.count)] : [];
  const out: string[] = [];
  if (s.local > 0) out.push(endpointsMapName(np, false, s.local));
  if (s.cluster > 0) out.push(endpointsMapName(np, true, s.cluster));
  return out;
}

/** Definition of an endpoints map from its name (see endpointsMapName). */
export function endpointsMap(t: FamilyTraits, name: string): NftSetLike {
  const nodePort = name.startsWith('nodeport-');
  const frontend: TypeofExpr[] = nodePort
    ? [
        { expr: 'meta', key: 'l4proto' },
        { expr: 'payload', field: 'th dport' },
      ]
    : [
        { expr: 'payload', field: t.daddr === 'ip daddr' ? 'ip daddr' : 'ip6 daddr' },
        { expr: 'meta', key: 'l4proto' },
        { expr: 'payload', field: 'th dport' },
      ];
  return {
    kind: 'map',
    name,
    key: nodePort ? ['inet_proto', 'inet_service', 'integer'] : [t.addrType, 'inet_proto', 'inet_service', 'integer'],
    // As nft records `typeof … numgen random mod 1 : ip daddr . th dport`, so that `nft list`
    // prints the map and its printout loads back.
    typeof: [...frontend, { expr: 'numgen', mode: 'random', modulus: 1 }],
    data: [t.addrType, 'inet_service'],
    dataTypeof: [
      { expr: 'payload', field: t.daddr === 'ip daddr' ? 'ip daddr' : 'ip6 daddr' },
      { expr: 'payload', field: 'th dport' },
    ],
  };
}

type Guard = (r: RuleBuilder) => RuleBuilder;

/** The detect-local match: from a local pod, or (negate) not from one. */
export function localTraffic(ctx: PickerContext, b: RuleBuilder, negate = false): RuleBuilder {
  if (ctx.localInterface !== undefined) return b.match('iifname', ctx.localInterface, negate ? 'neq' : 'eq');
  return b.inSet([ctx.traits.saddr], SET.podCIDRs, negate);
}
const none: Guard = (r) => r;

/** `[guard] meta l4proto P dnat to FRONTEND . numgen random mod N map @map`, for each protocol. */
function dnatRules(
  ctx: PickerContext,
  chain: string,
  nodePort: boolean,
  count: number,
  map: string,
  guard: Guard = none,
): NftRule[] {
  const t = ctx.traits;
  const key = nodePort ? (['meta l4proto', 'th dport'] as const) : ([t.daddr, 'meta l4proto', 'th dport'] as const);
  return PROTOCOLS.map((p) =>
    guard(rule(t.nft, chain))
      .match('meta l4proto', p)
      .dnatMap([...key, `numgen random mod ${count}`], map)
      .build(),
  );
}

/** Traffic to a cluster IP is masqueraded unless it comes from a local pod (or always, with --masquerade-all). */
export function internalMarkRules(ctx: PickerContext, chain: string): NftRule[] {
  const t = ctx.traits;
  if (ctx.masqueradeAll) return [rule(t.nft, chain).setMarkOr(ctx.masqueradeMark).build()];
  if (ctx.detectLocal) return [localTraffic(ctx, rule(t.nft, chain), true).setMarkOr(ctx.masqueradeMark).build()];
  return [];
}

/** The picker's chain rules. */
export function pickerRules(ctx: PickerContext, s: PickerSpec): NftRule[] {
  const t = ctx.traits;
  const chain = pickerName(s);
  const np = isNodePort(s);
  const r = (): RuleBuilder => rule(t.nft, chain);
  const mark = (b: RuleBuilder): NftRule => b.setMarkOr(ctx.masqueradeMark).build();
  const out: NftRule[] = [];
  if ('count' in s) {
    if (s.kind === 'internal') out.push(...internalMarkRules(ctx, chain));
    else out.push(mark(r()));
    if (s.count > 0) out.push(...dnatRules(ctx, chain, np, s.count, endpointsMapName(np, false, s.count)));
    return out;
  }
  // externalTrafficPolicy=Local: upstream's short-circuit first, then the local endpoints.
  if (s.cluster > 0) {
    const all = endpointsMapName(np, true, s.cluster);
    if (ctx.detectLocal) out.push(...dnatRules(ctx, chain, np, s.cluster, all, (b) => localTraffic(ctx, b)));
    out.push(mark(r().fibSaddrLocal()));
    out.push(...dnatRules(ctx, chain, np, s.cluster, all, (b) => b.fibSaddrLocal()));
  }
  if (s.local > 0) out.push(...dnatRules(ctx, chain, np, s.local, endpointsMapName(np, false, s.local)));
  return out;
}
