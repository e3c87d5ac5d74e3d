// One nfacct object (an accounting counter) over nfnetlink: its requests and its reply decoder.
//
//   new ct_state_invalid_dropped_pkts            (what `nfacct add` 1.0.2 sends)
//   nfgenmsg { AF_UNSPEC, v0, res_id 0 } ┬ NAME "…\0" ┬ PKTS be64 0 ┬ BYTES be64 0
//   flags REQUEST|ACK|CREATE, no EXCL: an existing object answers EBUSY (EEXIST only with EXCL)
//
//   get NAME / dump (no NAME, NLM_F_DUMP) → NAME, PKTS be64, BYTES be64, USE be32 [, FLAGS, QUOTA]
//   del NAME → EBUSY while a rule still refers to the object
//
// nfacct writes the counters without NLA_F_NET_BYTEORDER although they are big-endian; so do we.

import {
  AttrSet,
  NetlinkDecodeError,
  NfnlSubsys,
  NLM_F_ACK,
  NLM_F_CREATE,
  NLM_F_DUMP,
  NLM_F_REQUEST,
  nfMessage,
  splitNfPayload,
} from '../core/index.ts';
import type { InMessage, OutMessage } from '../core/index.ts';
import { NFACCT_NAME_MAX, NfacctAttr, NfacctCmd } from './constants.ts';

/** What the kernel reports of one object. */
export interface NfacctCounter {
  readonly name: string;
  readonly packets: bigint;
  readonly bytes: bigint;
  /** How many references it has (the object itself counts one; each xt_nfacct rule one more). */
  readonly use: number;
}

const AF_UNSPEC = 0;

/** Throws a TypeError naming the problem when `name` is not a valid nfacct name. */
export function checkNfacctName(name: string): string {
  const len = Buffer.byteLength(name, 'utf8');
  if (len === 0 || len >= NFACCT_NAME_MAX || name.includes('\0'))
    throw new TypeError(`nfacct name ${JSON.stringify(name)}: must be 1 to ${NFACCT_NAME_MAX - 1} bytes without NUL`);
  return name;
}

function message(cmd: number, flags: number, label: string, name?: string, zero = false): OutMessage {
  return nfMessage(NfnlSubsys.ACCT, cmd, AF_UNSPEC, NLM_F_REQUEST | flags, label, (w) => {
    if (name !== undefined) w.str(NfacctAttr.NAME, checkNfacctName(name));
    if (zero) w.u64(NfacctAttr.PKTS, 0n, 'net').u64(NfacctAttr.BYTES, 0n, 'net');
  });
}

/** NFNL_MSG_ACCT_NEW with zero counters; without NLM_F_EXCL, as nfacct sends it. */
export const newMessage = (name: string): OutMessage =>
  message(NfacctCmd.NEW, NLM_F_ACK | NLM_F_CREATE, `add nfacct ${name}`, name, true);

/** NFNL_MSG_ACCT_GET of one object. */
export const getMessage = (name: string): OutMessage => message(NfacctCmd.GET, NLM_F_ACK, `get nfacct ${name}`, name);

/** NFNL_MSG_ACCT_GET as a dump: every object of the namespace. */
export const dumpMessage = (): OutMessage => message(NfacctCmd.GET, NLM_F_DUMP, 'list nfacct');

/** NFNL_MSG_ACCT_DEL of one object. */
export const delMessage = (name: string): OutMessage => message(NfacctCmd.DEL, NLM_F_ACK, `del nfacct ${name}`, name);

/** One object of a GET reply or dump. Throws NetlinkDecodeError on a malformed message. */
export function decodeCounter(msg: InMessage, where = 'nfacct reply'): NfacctCounter {
  const nf = splitNfPayload(msg.payload);
  if (!nf) throw new NetlinkDecodeError(where, 0, 'shorter than nfgenmsg');
  const a = new AttrSet(nf.attrs, where, 4);
  return {
    name: a.require(NfacctAttr.NAME, a.str(NfacctAttr.NAME)),
    packets: a.require(NfacctAttr.PKTS, a.u64(NfacctAttr.PKTS, 'net')),
    bytes: a.require(NfacctAttr.BYTES, a.u64(NfacctAttr.BYTES, 'net')),
    use: a.u32(NfacctAttr.USE, 'net') ?? 0,
  };
}
