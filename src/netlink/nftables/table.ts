// Tables: NFTA_TABLE_NAME, NFTA_TABLE_FLAGS (nft always sends it, 0 by default),
// [NFTA_TABLE_USERDATA: comment TLV]. Deletes name the table, or its handle.
import type { InMessage, OutMessage } from '../core/index.ts';
import type { Family } from './constants.ts';
import { NFTA_TABLE_FLAGS, NFTA_TABLE_HANDLE, NFTA_TABLE_NAME, NFTA_TABLE_USE, NFTA_TABLE_USERDATA } from './constants.ts';
import { nftMessage, received } from './message.ts';
import type { NftTable, Scope } from './types.ts';
import { commentOf, commentUdata } from './udata.ts';

export function tableMessage(scope: Scope, cmd: number, flags: number, t: NftTable, label: string, full: boolean): OutMessage {
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
