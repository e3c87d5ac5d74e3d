// nf_tables change notifications, as `nft monitor` reads them: after every committed
// transaction the kernel announces each object added or removed on the NFNLGRP_NFTABLES
// multicast group, then a NEWGEN message with the new generation. Each announcement's
// nlmsghdr carries the port id of the socket that made the change (0 for the kernel itself),
// which tells our own changes from everyone else's.

import { AttrSet, listenChanges, nfnlCmd, nfnlSubsys, NfnlSubsys, Protocol, splitNfPayload } from '../core/index.ts';
import type { ChangeHandlers, InMessage, MulticastListener, SocketOptions } from '../core/index.ts';
import { familyName, NftMsg } from './constants.ts';
import { decodeRule } from './rule.ts';
import type { Family } from './constants.ts';

/** linux/netfilter/nfnetlink.h enum nfnetlink_groups. */
export const NFNLGRP_NFTABLES = 7;

export type NftChangeKind = 'table' | 'chain' | 'rule' | 'set' | 'element' | 'generation' | 'other';

export interface NftChange {
  readonly kind: NftChangeKind;
  /** Added (or replaced) rather than removed. */
  readonly added: boolean;
  readonly family: Family | undefined;
  /** The table the object lives in (undefined for generation messages). */
  readonly table: string | undefined;
  /** The chain of a chain or rule, the set of a set or element. */
  readonly object: string | undefined;
  /** The port id of the socket whose transaction made the change (0: the kernel). */
  readonly portId: number;
  /**
   * A removed rule that ended in a jump: the chain it jumped to (the announcement carries the
   * whole rule), so a watcher can tell its jump from a built-in chain being removed.
   */
  readonly jump?: string;
}

const KIND: ReadonlyMap<number, [NftChangeKind, boolean]> = new Map([
  [NftMsg.NEWTABLE, ['table', true]],
  [NftMsg.DELTABLE, ['table', false]],
  [NftMsg.DESTROYTABLE, ['table', false]],
  [NftMsg.NEWCHAIN, ['chain', true]],
  [NftMsg.DELCHAIN, ['chain', false]],
  [NftMsg.DESTROYCHAIN, ['chain', false]],
  [NftMsg.NEWRULE, ['rule', true]],
  [NftMsg.DELRULE, ['rule', false]],
  [NftMsg.DESTROYRULE, ['rule', false]],
  [NftMsg.NEWSET, ['set', true]],
  [NftMsg.DELSET, ['set', false]],
  [NftMsg.DESTROYSET, ['set', false]],
  [NftMsg.NEWSETELEM, ['element', true]],
  [NftMsg.DELSETELEM, ['element', false]],
  [NftMsg.DESTROYSETELEM, ['element', false]],
  [NftMsg.NEWGEN, ['generation', true]],
] as [number, [NftChangeKind, boolean]][]);

// Every object message names its table in attribute 1 (NFTA_TABLE_NAME, NFTA_CHAIN_TABLE,
// NFTA_RULE_TABLE, NFTA_SET_TABLE, NFTA_SET_ELEM_LIST_TABLE, and objects and flowtables too).
const ATTR_TABLE = 1;
/** The object's own name: NFTA_CHAIN_NAME, NFTA_RULE_CHAIN, NFTA_SET_NAME, NFTA_SET_ELEM_LIST_SET. */
const ATTR_OBJECT: Partial<Record<NftChangeKind, number>> = { chain: 3, rule: 2, set: 2, element: 2 };

/** One announcement, or undefined when it is not an nf_tables message. Throws NetlinkDecodeError on bad attributes. */
export function decodeNftChange(m: InMessage): NftChange | undefined {
  if (nfnlSubsys(m.type) !== NfnlSubsys.NFTABLES) return undefined;
  const nf = splitNfPayload(m.payload);
  if (!nf) return undefined;
  const [kind, added] = KIND.get(nfnlCmd(m.type)) ?? ['other', true];
  const attrs = kind === 'generation' ? undefined : new AttrSet(nf.attrs, 'nf_tables notification');
  const objAttr = ATTR_OBJECT[kind];
  const jump = kind === 'rule' && !added ? jumpOf(m) : undefined;
  return {
    kind,
    added,
    family: familyName(nf.family),
    table: attrs?.str(ATTR_TABLE),
    object: objAttr === undefined ? undefined : attrs?.str(objAttr),
    portId: m.pid,
    ...(jump !== undefined ? { jump } : {}),
  };
}

/** The chain a rule's final verdict jumps to; undefined when it does not jump or its expressions do not decode. */
function jumpOf(m: InMessage): string | undefined {
  try {
    const last = decodeRule(m).rule.exprs.at(-1);
    return last?.type === 'immediate' && 'verdict' in last && last.verdict.verdict === 'jump'
      ? last.verdict.chain
      : undefined;
  } catch {
    return undefined; // the change itself is still reported
  }
}

export type NftMonitorHandlers = ChangeHandlers<NftChange>;

/** Listens to nf_tables announcements in this namespace on a socket of its own. */
export function monitorNftables(h: NftMonitorHandlers, opts: SocketOptions = {}): MulticastListener {
  return listenChanges(Protocol.NETFILTER, [NFNLGRP_NFTABLES], decodeNftChange, h, opts);
}
