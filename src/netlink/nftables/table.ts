// Tables: NFTA_TABLE_NAME, NFTA_TABLE_FLAGS (nft always sends it, 0 by default),
// [NFTA_TABLE_USERDATA: comment TLV]. Deletes name the table, or its handle. tableCodec is
// the table's part of every transaction and dump.
import type { InMessage, OutMessage } from '../core/index.ts';
import { NLM_F_EXCL } from '../core/index.ts';
import type { Family } from './constants.ts';
import {
  NFTA_TABLE_FLAGS,
  NFTA_TABLE_HANDLE,
  NFTA_TABLE_NAME,
  NFTA_TABLE_USE,
  NFTA_TABLE_USERDATA,
  NftMsg,
} from './constants.ts';
import { nftMessage, received } from './message.ts';
import type { ObjectCodec } from './object.ts';
import { addThenDelete, braces, commentPart, isRemoval, opLabel, removalCmd, scopeText } from './object.ts';
import { flushRulesMessage } from './rule.ts';
import type { NftTable, Scope } from './types.ts';
import { commentOf, commentUdata } from './udata.ts';

export function tableMessage(
  scope: Scope,
  cmd: number,
  flags: number,
  t: NftTable,
  label: string,
  full: boolean,
): OutMessage {
  return nftMessage(cmd, scope.family, flags, label, (w) => {
    if (!full && t.handle !== undefined) {
      w.u64(NFTA_TABLE_HANDLE, t.handle, 'net');
      return;
    }
    w.str(NFTA_TABLE_NAME, scope.table);
    if (!full) return;
    w.u32(NFTA_TABLE_FLAGS, t.flags ?? 0, 'net');
    if (t.comment !== undefined) w.bytes(NFTA_TABLE_USERDATA, commentUdata(t.comment));
  });
}

export interface ListedTable {
  family: Family;
  name: string;
  table: NftTable;
  /** How many objects the table holds (NFTA_TABLE_USE). */
  use?: number;
}

export function decodeTable(msg: Pick<InMessage, 'payload'>): ListedTable {
  const { family, attrs: a } = received(msg, 'table');
  const name = a.require(NFTA_TABLE_NAME, a.str(NFTA_TABLE_NAME));
  const table: NftTable = { kind: 'table' };
  const flags = a.u32(NFTA_TABLE_FLAGS, 'net');
  if (flags) table.flags = flags;
  const handle = a.u64(NFTA_TABLE_HANDLE, 'net');
  if (handle !== undefined) table.handle = handle;
  const comment = commentOf(a.bytes(NFTA_TABLE_USERDATA), 0, 'table userdata');
  if (comment !== undefined) table.comment = comment;
  const out: ListedTable = { family, name, table };
  const use = a.u32(NFTA_TABLE_USE, 'net');
  if (use !== undefined) out.use = use;
  return out;
}

/** The table: NEWTABLE/DELTABLE; flush removes every rule of every chain (DELRULE with only the table). */
export const tableCodec: ObjectCodec<NftTable, ListedTable> = {
  validate(verb) {
    return verb === 'insert' || verb === 'replace' ? `cannot ${verb} a table` : undefined;
  },

  encode(st, verb, t) {
    const label = opLabel(st, verb, t);
    if (verb === 'flush') st.out.push(flushRulesMessage(st.scope, undefined, label));
    else if (isRemoval(verb))
      st.out.push(tableMessage(st.scope, removalCmd(verb, NftMsg.DELTABLE, NftMsg.DESTROYTABLE), 0, t, label, false));
    else st.out.push(tableMessage(st.scope, NftMsg.NEWTABLE, verb === 'create' ? NLM_F_EXCL : 0, t, label, true));
  },

  render(scope, verb, t) {
    const del = isRemoval(verb);
    if (del && t.handle !== undefined) return `${verb} table ${scope.family} handle ${t.handle}`;
    return `${verb} table ${scopeText(scope)}${del || verb === 'flush' ? '' : braces(commentPart(t.comment))}`;
  },

  decode: decodeTable,

  emulateDestroy: (t) => addThenDelete(t, t),
};
