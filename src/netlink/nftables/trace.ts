// nf_tables tracing (what `nft monitor trace` shows): a packet whose nftrace bit is set
// (`meta nftrace set 1`) makes every base and regular chain it passes report, over the
// nfnetlink multicast group NFNLGRP_NFTRACE, an NFT_MSG_TRACE message per rule that decided
// something and per chain policy or return. Numbers from linux/netfilter/nf_tables.h
// (enum nft_trace_attributes, nft_trace_types) and nfnetlink.h (NFNLGRP_NFTRACE).

import type { InMessage } from '../core/index.ts';
import {
  AttrSet,
  NfnlSubsys,
  nfnlCmd,
  nfnlSubsys,
  openRawSocket,
  parseMessages,
  Protocol,
  splitNfPayload,
} from '../core/index.ts';
import { NFPROTO, NFTA_VERDICT_CHAIN, NFTA_VERDICT_CODE, VerdictCode } from './constants.ts';

export const NFNLGRP_NFTRACE = 9;
/** enum nf_tables_msg_types: NFT_MSG_TRACE follows NFT_MSG_GETGEN (16). */
export const NFT_MSG_TRACE = 17;

const TABLE = 1,
  CHAIN = 2,
  RULE_HANDLE = 3,
  TYPE = 4,
  VERDICT = 5,
  ID = 6,
  IIF = 10,
  OIF = 12,
  MARK = 14,
  NFPROTO_ATTR = 15,
  POLICY = 16;
const TYPES = ['unspec', 'policy', 'return', 'rule'] as const;

export interface TraceEvent {
  /** Same for every event of one packet (a pseudo id: a hash of the skb). */
  readonly id: number;
  readonly family: string;
  readonly table: string;
  readonly chain: string;
  /** rule: a rule's verdict; policy: the base chain's policy; return: the end of a regular chain. */
  readonly type: (typeof TYPES)[number];
  readonly ruleHandle?: bigint;
  /** "accept", "drop", "jump CHAIN", "continue" ... */
  readonly verdict?: string;
  readonly iif?: number;
  readonly oif?: number;
  readonly mark?: number;
  /** The netfilter hook family of the packet (ipv4, ipv6). */
  readonly nfproto?: number;
}

function verdictText(v: AttrSet): string | undefined {
  const raw = v.u32(NFTA_VERDICT_CODE, 'net');
  if (raw === undefined) return undefined;
  const code = raw | 0;
  const name =
    (Object.keys(VerdictCode) as (keyof typeof VerdictCode)[]).find((k) => VerdictCode[k] === code) ?? String(code);
  const chain = v.str(NFTA_VERDICT_CHAIN);
  return chain !== undefined ? `${name} ${chain}` : name;
}

/** The event a message carries; undefined for any other message. Throws NetlinkDecodeError on a malformed one. */
export function decodeTrace(msg: InMessage): TraceEvent | undefined {
  if (nfnlSubsys(msg.type) !== NfnlSubsys.NFTABLES || nfnlCmd(msg.type) !== NFT_MSG_TRACE) return undefined;
  const nf = splitNfPayload(msg.payload);
  if (!nf) return undefined;
  const a = new AttrSet(nf.attrs, 'NFT_MSG_TRACE', 4);
  const family =
    (Object.keys(NFPROTO) as (keyof typeof NFPROTO)[]).find((k) => NFPROTO[k] === nf.family) ?? String(nf.family);
  const type = TYPES[a.u32(TYPE, 'net') ?? 0] ?? 'unspec';
  const verdictSet = a.nested(VERDICT);
  const verdict = verdictSet ? verdictText(verdictSet) : undefined;
  const policy = a.u32(POLICY, 'net');
  const handle = a.u64(RULE_HANDLE, 'net');
  const opt = <K extends string, V>(k: K, v: V | undefined): { [P in K]?: V } =>
    v === undefined ? {} : ({ [k]: v } as { [P in K]: V });
  return {
    id: a.u32(ID, 'net') ?? 0,
    family,
    table: a.str(TABLE) ?? '',
    chain: a.str(CHAIN) ?? '',
    type,
    ...opt('ruleHandle', handle),
    ...opt(
      'verdict',
      verdict ??
        (policy !== undefined ? (policy === 1 ? 'accept' : policy === 0 ? 'drop' : String(policy)) : undefined),
    ),
    ...opt('iif', a.u32(IIF, 'net')),
    ...opt('oif', a.u32(OIF, 'net')),
    ...opt('mark', a.u32(MARK, 'net')),
    ...opt('nfproto', a.u32(NFPROTO_ATTR, 'net')),
  };
}

export interface TraceMonitor {
  close(): void;
}

/**
 * Listens to every trace event of this network namespace until closed. Events of a packet
 * arrive in the order the kernel met the rules; a lost datagram (ENOBUFS) is an error.
 */
export function openTraceMonitor(onEvent: (e: TraceEvent) => void, onError: (err: Error) => void): TraceMonitor {
  const sock = openRawSocket(Protocol.NETFILTER, { groups: [NFNLGRP_NFTRACE], recvBufferBytes: 4 << 20 });
  sock.listen(
    (buf) => {
      try {
        for (const m of parseMessages(buf)) {
          const e = decodeTrace(m);
          if (e) onEvent(e);
        }
      } catch (err) {
        onError(err as Error);
      }
    },
    (f) => onError(new Error(`trace monitor: ${f.code}`)),
  );
  return { close: () => sock.close() };
}
