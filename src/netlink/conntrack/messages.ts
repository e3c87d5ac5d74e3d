// The ctnetlink requests this layer sends, as OutMessages with labels that name the operation
// and the flow ("delete conntrack udp 10.0.0.1:40000 -> 10.96.0.10:53"). The transport adds
// NLM_F_REQUEST and NLM_F_ACK or NLM_F_DUMP.
//
//   nlmsghdr type = (NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_*
//   nfgenmsg  family = AF_INET | AF_INET6 | AF_UNSPEC (dumps: all), version 0, res_id 0
//   attributes (flow.ts, filter.ts)

import type { IPFamily } from '../../base/ip.ts';
import { AF_UNSPEC, AttrWriter, ByteWriter, NFNETLINK_V0, NfnlSubsys, NLM_F_CREATE, NLM_F_EXCL, nfMessage, nfnlType } from '../core/index.ts';
import type { OutMessage } from '../core/index.ts';
import { CTA, CtMsg } from './constants.ts';
import type { FlowFilter } from './filter.ts';
import { filterText, writeDumpFilter } from './filter.ts';
import type { NewFlow, Tuple } from './flow.ts';
import { familyNumber, tupleAddrs, tupleFamily, tupleText, writeNewFlow, writeTuple } from './flow.ts';

const ct = (cmd: number, family: number, flags: number, label: string, fill?: Parameters<typeof nfMessage>[5]): OutMessage =>
  nfMessage(NfnlSubsys.CTNETLINK, cmd, family, flags, label, fill);

/** Identifies one entry for GET and DELETE: its original tuple, zone, and optionally its id. */
export interface FlowKey {
  orig: Tuple;
  zone?: number;
  /**
   * When given, the kernel acts only if the entry's id still matches (else ENOENT). The id
   * hashes the entry's address and original tuple (nf_ct_get_id), so it tells a different
   * entry apart, but not one re-created with the same tuple in a recycled slot.
   */
  id?: number;
}

export function keyText(k: FlowKey): string {
  let s = tupleText(k.orig);
  if (k.zone !== undefined) s += ` zone ${k.zone}`;
  if (k.id !== undefined) s += ` id ${k.id >>> 0}`;
  return s;
}

function writeKeyAttrs(w: AttrWriter, k: FlowKey, addrs: ReturnType<typeof tupleAddrs>): void {
  // CTA_TUPLE_ORIG is never omitted: a DELETE without a tuple flushes the whole table.
  w.nested(CTA.TUPLE_ORIG, (t) => writeTuple(t, k.orig, addrs));
  if (k.zone !== undefined) w.u16(CTA.ZONE, k.zone, 'net');
  if (k.id !== undefined) w.u32(CTA.ID, k.id, 'net');
}

function keyMessage(cmd: number, verb: string, k: FlowKey): OutMessage {
  const addrs = tupleAddrs(k.orig);
  return ct(cmd, familyNumber(addrs.family), 0, `${verb} conntrack ${keyText(k)}`, (w) => writeKeyAttrs(w, k, addrs));
}

/** IPCTNL_MSG_CT_DELETE for one entry. Throws a TypeError for an invalid tuple. */
export const deleteRequest = (k: FlowKey): OutMessage => keyMessage(CtMsg.DELETE, 'delete', k);

/** A DELETE whose label is only built when asked for (on error): 10,000 labels cost GC time. */
class BulkDelete implements OutMessage {
  readonly type = nfnlType(NfnlSubsys.CTNETLINK, CtMsg.DELETE);
  readonly flags = 0;
  readonly payload: Uint8Array;
  private readonly key: FlowKey;

  constructor(payload: Uint8Array, key: FlowKey) {
    this.payload = payload;
    this.key = key;
  }

  get label(): string {
    return `delete conntrack ${keyText(this.key)}`;
  }
}

/**
 * IPCTNL_MSG_CT_DELETE for many entries, their payloads views into one buffer (one allocation
 * instead of one per message: for 10,000 deletes the garbage collector was the main cost).
 * An invalid key yields a TypeError in its place.
 */
export function deleteRequests(keys: readonly FlowKey[]): (OutMessage | TypeError)[] {
  const out = new ByteWriter(keys.length * 96 + 64);
  const w = new AttrWriter(out);
  const scratch = { src: new Uint8Array(4), dst: new Uint8Array(4) };
  const spans: (number | TypeError)[] = [];
  for (const k of keys) {
    const start = out.length;
    try {
      const addrs = tupleAddrs(k.orig, scratch);
      out.u8(familyNumber(addrs.family)).u8(NFNETLINK_V0).u16be(0);
      writeKeyAttrs(w, k, addrs);
      spans.push(start, out.length);
    } catch (e) {
      out.truncate(start);
      spans.push(e instanceof TypeError ? e : new TypeError(String(e)), 0);
    }
  }
  const buf = out.toBytes();
  const msgs: (OutMessage | TypeError)[] = [];
  for (let i = 0; i < keys.length; i++) {
    const start = spans[2 * i]!;
    const end = spans[2 * i + 1] as number;
    msgs.push(start instanceof TypeError ? start : new BulkDelete(new Uint8Array(buf.buffer, buf.byteOffset + start, end - start), keys[i]!));
  }
  return msgs;
}

/** IPCTNL_MSG_CT_GET for one entry (not a dump). */
export const getRequest = (k: FlowKey): OutMessage => keyMessage(CtMsg.GET, 'get', k);

/** IPCTNL_MSG_CT_NEW with NLM_F_CREATE | NLM_F_EXCL: inserts an entry, as `conntrack -I` does. */
export function newRequest(f: NewFlow): OutMessage {
  return ct(CtMsg.NEW, familyNumber(tupleFamily(f.orig)), NLM_F_CREATE | NLM_F_EXCL, `create conntrack ${tupleText(f.orig)}`, (w) => writeNewFlow(w, f));
}

/**
 * IPCTNL_MSG_CT_GET as a dump. `family` undefined dumps every family (AF_UNSPEC). With
 * `tupleFilter` the CTA_FILTER attributes are included (see filter.ts).
 */
export function dumpRequest(family: IPFamily | undefined, filter: FlowFilter, tupleFilter: boolean): OutMessage {
  const fam = family === undefined ? AF_UNSPEC : familyNumber(family);
  const label = `dump conntrack ${filterText({ ...filter, ...(family ? { family } : {}) })}`;
  return ct(CtMsg.GET, fam, 0, label, (w) => writeDumpFilter(w, filter, tupleFilter));
}

/** IPCTNL_MSG_CT_GET_STATS: the table's entry count and limit (one reply, not a dump). */
export const statsRequest = (): OutMessage => ct(CtMsg.GET_STATS, AF_UNSPEC, 0, 'get conntrack stats');

/** IPCTNL_MSG_CT_GET_STATS_CPU (a dump): one reply per possible CPU, res_id = the CPU. */
export const statsCpuRequest = (): OutMessage => ct(CtMsg.GET_STATS_CPU, AF_UNSPEC, 0, 'get conntrack per-cpu stats');
