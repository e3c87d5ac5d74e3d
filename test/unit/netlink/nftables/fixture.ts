// Loads the nft byte fixtures (test/fixtures/netlink/nftables/<case>.hex, one netlink
// message per line, captured by test/fixtures/netlink/capture-nft.sh) and compares our
// messages with them, seq and pid masked.
import { readFileSync } from 'node:fs';
import { encodeMessage, NLM_F_REQUEST } from '../../../../src/netlink/core/index.ts';
import type { OutMessage } from '../../../../src/netlink/core/index.ts';
import { fromHex, hexdiff } from '../../../helpers/hexdiff.ts';

const DIR = new URL('../../../fixtures/netlink/nftables/', import.meta.url);

export interface Fixture {
  command: string;
  /** The messages between BATCH_BEGIN and BATCH_END, seq and pid zeroed. */
  messages: Uint8Array[];
}

const mask = (b: Uint8Array): Uint8Array => {
  const c = Uint8Array.from(b);
  c.fill(0, 8, 16);
  return c;
};

export function loadFixture(name: string): Fixture {
  const text = readFileSync(new URL(`${name}.hex`, DIR), 'utf8');
  const command = /^# nft: (.*)$/m.exec(text)?.[1] ?? '';
  const messages = text
    .split('\n')
    .filter((l) => l.trim() !== '' && !l.startsWith('#'))
    .map(fromHex)
    .filter((b) => b[4] !== 0x10 && b[4] !== 0x11)
    .map(mask);
  return { command, messages };
}

/** The bytes the transport would send for an OutMessage (REQUEST set, no ACK), seq/pid 0. */
export const wire = (m: OutMessage): Uint8Array => encodeMessage({ ...m, flags: m.flags | NLM_F_REQUEST }, 0, 0);

/** '' when our messages equal the fixture's, else a readable report per differing message. */
export function compare(
  name: string,
  ours: readonly OutMessage[],
  pick?: readonly number[],
  theirs?: readonly number[],
): string {
  const all = loadFixture(name);
  const fx = { ...all, messages: theirs ? theirs.map((i) => all.messages[i]!) : all.messages };
  const mine = (pick ? pick.map((i) => ours[i]!) : ours).map(wire);
  const out: string[] = [];
  if (mine.length !== fx.messages.length)
    out.push(`${name}: ${mine.length} messages, nft sent ${fx.messages.length} (${fx.command})`);
  for (let i = 0; i < Math.min(mine.length, fx.messages.length); i++) {
    const d = hexdiff(mine[i]!, fx.messages[i]!, ['ours', 'nft']);
    if (d) out.push(`${name} message ${i} (${fx.command}):\n${d}`);
  }
  return out.join('\n\n');
}
