// iptables rules as data: the matches and targets kube-proxy's iptables-based modes use
// (iptables, ipvs companion rules, userspace portals), one typed value per `-m`/`-j` so the
// iptables-nft encoder (encode.ts) maps each to the expressions iptables-nft 1.8.9 sends, and
// the renderer (save.ts) prints them as iptables-save does. Addresses are text (IPv4 or IPv6,
// the rule's family decides which is valid); chain and set names are kernel names.

/** iptables-nft's tables: `ip|ip6 nat`, `filter`, `mangle`. */
export type IptTable = 'nat' | 'filter' | 'mangle';
export type L4Proto = 'tcp' | 'udp' | 'sctp';
export type SetDir = 'src' | 'dst';
export type CtState = 'NEW' | 'RELATED' | 'ESTABLISHED' | 'INVALID' | 'DNAT';

export type Match =
  /** `[!] -s CIDR` (a bare address means /32 or /128). */
  | { readonly m: 'src'; readonly cidr: string; readonly invert?: boolean }
  /** `[!] -d CIDR`. */
  | { readonly m: 'dst'; readonly cidr: string; readonly invert?: boolean }
  /** `[!] -i NAME` (a trailing '+' matches the prefix). */
  | { readonly m: 'inIface'; readonly name: string; readonly invert?: boolean }
  /** `[!] -o NAME`. */
  | { readonly m: 'outIface'; readonly name: string; readonly invert?: boolean }
  /** `-p PROTO`. */
  | { readonly m: 'proto'; readonly proto: L4Proto }
  /** `-m tcp|udp|sctp --dport N` (needs a `proto` match of the same protocol in the rule). */
  | { readonly m: 'dport'; readonly proto: L4Proto; readonly port: number }
  /**
   * `-m tcp|udp|sctp` with no option (upstream's KUBE-SEP DNAT rules load the protocol's
   * match without a port; iptables-save prints it back as a bare `-m tcp`).
   */
  | { readonly m: 'l4'; readonly proto: L4Proto }
  /** `-m comment --comment TEXT`. */
  | { readonly m: 'comment'; readonly text: string }
  /** `-m set --match-set NAME dst,dst,...` (an ipset; IPVS mode). */
  | { readonly m: 'set'; readonly set: string; readonly dirs: readonly SetDir[] }
  /** `-m addrtype [!] --src-type|--dst-type LOCAL`. */
  | { readonly m: 'addrtype'; readonly dir: 'src' | 'dst'; readonly type: 'LOCAL'; readonly invert?: boolean }
  /** `-m mark [!] --mark VALUE/MASK`. */
  | { readonly m: 'mark'; readonly value: number; readonly mask: number; readonly invert?: boolean }
  /** `-m conntrack [!] --ctstate S1,S2`. */
  | { readonly m: 'ctstate'; readonly states: readonly CtState[]; readonly invert?: boolean }
  /** `-m physdev ! --physdev-is-in`. */
  | { readonly m: 'physdevNotIsIn' }
  /** `-m ipvs --vaddr A --vproto P --vport N`. */
  | { readonly m: 'ipvs'; readonly vaddr: string; readonly vproto: L4Proto; readonly vport: number }
  /**
   * `-m statistic --mode random --probability P`. `probability` is the text upstream prints
   * (`%0.10f`, e.g. "0.3333333333"); the kernel gets it as a u32 threshold.
   */
  | { readonly m: 'statistic'; readonly probability: string }
  /**
   * `-m statistic --mode nth --every N --packet P`: matches every N-th packet that reaches the
   * rule, starting with packet P (0-based, P < N); the kernel keeps one counter per rule.
   */
  | { readonly m: 'statisticNth'; readonly every: number; readonly packet: number }
  /**
   * `-m recent --name NAME --set|--rcheck [--seconds S] [--reap] --mask ... --rsource`
   * (ClientIP session affinity; upstream always uses the source address).
   */
  /**
   * `-m nfacct --nfacct-name NAME`: counts the packet in the nfacct object NAME (which must
   * exist when the rule is added; upstream's metrics read it back).
   */
  | { readonly m: 'nfacct'; readonly name: string }
  | {
      readonly m: 'recent';
      readonly name: string;
      readonly mode: 'set' | 'rcheck';
      readonly seconds?: number;
      readonly reap?: boolean;
    };

export type Target =
  /** `-j CHAIN`. */
  | { readonly t: 'jump'; readonly chain: string }
  | { readonly t: 'ACCEPT' | 'RETURN' | 'DROP' | 'REJECT' }
  /** `-j MARK --or-mark V` / `--xor-mark V`. */
  | { readonly t: 'MARK'; readonly op: 'or' | 'xor'; readonly value: number }
  /** `-j MASQUERADE [--random-fully]`. */
  | { readonly t: 'MASQUERADE'; readonly randomFully: boolean }
  /** `-j DNAT --to-destination ADDR:PORT` (IPv6: `[ADDR]:PORT`). */
  | { readonly t: 'DNAT'; readonly addr: string; readonly port: number }
  /** `-j REDIRECT --to-ports PORT`. */
  | { readonly t: 'REDIRECT'; readonly port: number }
  /**
   * No `-j` at all: the rule only counts and the packet goes on (upstream ends each KUBE-FW-*
   * chain with such a comment-only rule).
   */
  | { readonly t: 'none' };

export interface IptRule {
  readonly table: IptTable;
  readonly chain: string;
  readonly matches: readonly Match[];
  readonly target: Target;
}

/** The built-in chains iptables-nft creates as base chains. */
export type BuiltinChain = 'PREROUTING' | 'INPUT' | 'FORWARD' | 'OUTPUT' | 'POSTROUTING';

/** A rule placed in a built-in chain (INPUT, OUTPUT, ...) to reach one of ours. */
export interface JumpRule extends IptRule {
  readonly chain: BuiltinChain;
}
