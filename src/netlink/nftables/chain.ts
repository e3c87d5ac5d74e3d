// Chains. A regular chain is a table and a name. A base chain adds (in nft's order):
//   NFTA_CHAIN_TYPE "filter"|"nat"|"route", [NFTA_CHAIN_POLICY be32],
//   NFTA_CHAIN_HOOK { NFTA_HOOK_HOOKNUM be32, NFTA_HOOK_PRIORITY be32 (signed), [NFTA_HOOK_DEV] }
import type { InMessage, OutMessage } from '../core/index.ts';
import { NetlinkDecodeError, NLM_F_CREATE, NLM_F_EXCL } from '../core/index.ts';
import type { Family, Hook } from './constants.ts';
import {
  HOOKS,
  NFTA_CHAIN_HANDLE,
  NFTA_CHAIN_HOOK,
  NFTA_CHAIN_NAME,
  NFTA_CHAIN_POLICY,
  NFTA_CHAIN_TABLE,
  NFTA_CHAIN_TYPE,
  NFTA_CHAIN_USE,
  NFTA_CHAIN_USERDATA,
  NFTA_HOOK_DEV,
  NFTA_HOOK_HOOKNUM,
  NFTA_HOOK_PRIORITY,
  NftMsg,
} from './constants.ts';
import { cstr, ident, nftMessage, quote, received } from './message.ts';
import type { ObjectCodec } from './object.ts';
import {
  addThenDelete,
  braces,
  commentPart,
  createFlags,
  isRemoval,
  needsDestroy,
  opLabel,
  removalCmd,
  scopeText,
  validName,
} from './object.ts';
import { flushRulesMessage } from './rule.ts';
import type { BaseChainSpec, NftChain, Scope } from './types.ts';
import { commentOf, commentUdata } from './udata.ts';

export function chainMessage(
  scope: Scope,
  cmd: number,
  flags: number,
  c: NftChain,
  label: string,
  full: boolean,
): OutMessage {
  return nftMessage(cmd, scope.family, flags, label, (w) => {
    w.bytes(NFTA_CHAIN_TABLE, cstr(scope.table));
    if (!full && c.handle !== undefined) {
      w.u64(NFTA_CHAIN_HANDLE, c.handle, 'net');
      return;
    }
    w.str(NFTA_CHAIN_NAME, c.name);
    if (!full) return;
    const b = c.base;
    if (b) {
      w.str(NFTA_CHAIN_TYPE, b.type);
      if (b.policy !== undefined) w.u32(NFTA_CHAIN_POLICY, b.policy === 'accept' ? 1 : 0, 'net');
      w.nested(NFTA_CHAIN_HOOK, (h) => {
        h.u32(NFTA_HOOK_HOOKNUM, HOOKS[b.hook], 'net').u32(NFTA_HOOK_PRIORITY, b.priority >>> 0, 'net');
        if (b.device !== undefined) h.str(NFTA_HOOK_DEV, b.device);
      });
    }
    if (c.comment !== undefined) w.bytes(NFTA_CHAIN_USERDATA, commentUdata(c.comment));
  });
}

export interface ListedChain {
  family: Family;
  table: string;
  chain: NftChain;
  use?: number;
}

function hookName(family: Family, n: number): Hook {
  if (family === 'netdev' && n === 0) return 'ingress';
  const name = (Object.keys(HOOKS) as Hook[]).find((k) => k !== 'ingress' && HOOKS[k] === n);
  if (!name) throw new NetlinkDecodeError('chain hook', 0, `unknown hook ${n}`);
  return name;
}

export function decodeChain(msg: Pick<InMessage, 'payload'>): ListedChain {
  const { family, attrs: a } = received(msg, 'chain');
  const chain: NftChain = { kind: 'chain', name: a.require(NFTA_CHAIN_NAME, a.str(NFTA_CHAIN_NAME)) };
  const handle = a.u64(NFTA_CHAIN_HANDLE, 'net');
  if (handle !== undefined) chain.handle = handle;
  const hook = a.nested(NFTA_CHAIN_HOOK);
  if (hook) {
    const type = a.str(NFTA_CHAIN_TYPE) ?? 'filter';
    if (type !== 'filter' && type !== 'nat' && type !== 'route')
      throw new NetlinkDecodeError(a.where, 0, `unknown chain type ${type}`);
    const base: BaseChainSpec = {
      type,
      hook: hookName(family, hook.require(NFTA_HOOK_HOOKNUM, hook.u32(NFTA_HOOK_HOOKNUM, 'net'))),
      priority: hook.require(NFTA_HOOK_PRIORITY, hook.u32(NFTA_HOOK_PRIORITY, 'net')) | 0,
    };
    const policy = a.u32(NFTA_CHAIN_POLICY, 'net');
    if (policy !== undefined) base.policy = policy === 1 ? 'accept' : 'drop';
    const dev = hook.str(NFTA_HOOK_DEV);
    if (dev !== undefined) base.device = dev;
    chain.base = base;
  }
  const comment = commentOf(a.bytes(NFTA_CHAIN_USERDATA), 0, 'chain userdata');
  if (comment !== undefined) chain.comment = comment;
  const out: ListedChain = { family, table: a.require(NFTA_CHAIN_TABLE, a.str(NFTA_CHAIN_TABLE)), chain };
  const use = a.u32(NFTA_CHAIN_USE, 'net');
  if (use !== undefined) out.use = use;
  return out;
}

/** The body nft prints for a chain: its base chain spec and comment. */
export function renderChainBody(o: NftChain): string[] {
  const parts: string[] = [];
  if (o.base) {
    const dev = o.base.device !== undefined ? ` device ${quote(o.base.device)}` : '';
    parts.push(`type ${o.base.type} hook ${o.base.hook}${dev} priority ${o.base.priority}`);
    if (o.base.policy) parts.push(`policy ${o.base.policy}`);
  }
  return [...parts, ...commentPart(o.comment)];
}

/** Chains: NEWCHAIN/DELCHAIN; flush removes the chain's rules (DELRULE with table and chain). */
export const chainCodec: ObjectCodec<NftChain, ListedChain> = {
  validate(verb, c) {
    if (verb === 'insert' || verb === 'replace') return `cannot ${verb} a chain`;
    if (isRemoval(verb) && c.handle !== undefined) return undefined;
    return validName('chain', c.name);
  },

  encode(st, verb, c) {
    const label = opLabel(st, verb, c);
    if (verb === 'flush') st.out.push(flushRulesMessage(st.scope, c.name, label));
    else if (isRemoval(verb)) {
      st.out.push(chainMessage(st.scope, removalCmd(verb, NftMsg.DELCHAIN, NftMsg.DESTROYCHAIN), 0, c, label, false));
    } else
      st.out.push(chainMessage(st.scope, NftMsg.NEWCHAIN, createFlags(verb, NLM_F_CREATE, NLM_F_EXCL), c, label, true));
  },

  render(scope, verb, c) {
    const del = isRemoval(verb);
    if (del && c.handle !== undefined) return `${verb} chain ${scopeText(scope)} handle ${c.handle}`;
    const body = del || verb === 'flush' ? '' : braces(renderChainBody(c));
    return `${verb} chain ${scopeText(scope)} ${ident(c.name)}${body}`;
  },

  decode: decodeChain,

  emulateDestroy(c) {
    if (c.name === undefined) needsDestroy('chain by handle');
    return addThenDelete({ kind: 'chain', name: c.name }, c);
  },
};
