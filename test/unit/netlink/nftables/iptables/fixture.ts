// The iptables-nft-restore captures of test/fixtures/netlink/iptables/ (one netlink message per
// line, `#` comments first; see CAPTURE.md), and our messages framed the same way for comparison.
import { readFileSync } from 'node:fs';
import type { IPFamily } from '../../../../../src/base/ip.ts';
import { encodeMessage, NLM_F_REQUEST } from '../../../../../src/netlink/core/index.ts';
import type { OutMessage } from '../../../../../src/netlink/core/index.ts';
import { NftTransaction } from '../../../../../src/netlink/nftables/index.ts';
import type { NftObject } from '../../../../../src/netlink/nftables/index.ts';
import { IPT_FAMILY } from '../../../../../src/netlink/nftables/iptables/tables.ts';
import type { IptTable } from '../../../../../src/netlink/nftables/iptables/rule.ts';
import { zeroAttrPadding } from '../../../../helpers/fixtures.ts';
import { fromHex } from '../../../../helpers/hexdiff.ts';

/** NFT_MSG_* as nfnetlink message types (NFNL_SUBSYS_NFTABLES << 8). */
export const MSG = { NEWTABLE: 0x0a00, NEWCHAIN: 0x0a03, NEWRULE: 0x0a06 } as const;

export interface Captured {
  type: number;
  /** The message with seq and pid zeroed, and attribute padding (iptables-nft leaves garbage there). */
  bytes: Uint8Array;
}

export function captured(name: string): Captured[] {
  const text = readFileSync(new URL(`../../../../fixtures/netlink/iptables/${name}.hex`, import.meta.url), 'utf8');
  return text
    .split('\n')
    .filter((l) => l.trim() !== '' && !l.startsWith('#'))
    .map((l) => {
      const bytes = fromHex(l);
      bytes.fill(0, 8, 16);
      zeroAttrPadding(bytes, 20, bytes.length);
      return { type: bytes[4]! | (bytes[5]! << 8), bytes };
    });
}

/** The bytes one object's message has when sent in a transaction (REQUEST, no ACK), seq/pid 0. */
export function ourBytes(family: IPFamily, table: IptTable, obj: NftObject): Uint8Array {
  const tx = new NftTransaction({ family: IPT_FAMILY[family], table });
  tx.add(obj);
  const msgs: OutMessage[] = tx.messages();
  if (msgs.length !== 1) throw new Error(`expected one message, got ${msgs.length}`);
  return encodeMessage({ ...msgs[0]!, flags: msgs[0]!.flags | NLM_F_REQUEST }, 0, 0);
}
