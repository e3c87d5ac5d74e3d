// Reads the multi-message fixtures of test/fixtures/netlink/{ipset,route}/ (one netlink message
// per line, `#` comments naming the command, tool version and kernel) and compares encoder
// output with them, seq and pid masked.
import { readFileSync } from 'node:fs';
import type { ExecutionContext } from 'ava';
import {
  encodeMessage,
  NLM_F_ACK,
  NLM_F_DUMP,
  NLM_F_REQUEST,
  parseMessages,
} from '../../../../src/netlink/core/index.ts';
import type { InMessage, OutMessage } from '../../../../src/netlink/core/index.ts';
import { hexdiff, maskSeqPid } from '../../../helpers/fixtures.ts';

export function fixtureLines(path: string): Uint8Array[] {
  const text = readFileSync(new URL(`../../../fixtures/netlink/${path}`, import.meta.url), 'utf8');
  return text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'))
    .map((l) => Uint8Array.from(Buffer.from(l, 'hex')));
}

/** The n-th (1-based) message of a fixture, parsed. */
export function fixtureMessage(path: string, n: number): InMessage {
  const line = fixtureLines(path)[n - 1];
  if (!line) throw new Error(`${path} has no message ${n}`);
  return parseMessages(line)[0]!;
}

/**
 * Frames `msg` as the connection would send it (REQUEST plus ACK, or DUMP for a dump) and
 * compares it with message `n` of the fixture, seq and pid masked. `maskFlags` also ignores
 * the flags, for requests the tool sends without NLM_F_ACK (our connection always asks).
 */
export function sameAsFixture(
  t: ExecutionContext,
  msg: OutMessage,
  path: string,
  n: number,
  opts: { dump?: boolean; maskFlags?: boolean } = {},
): void {
  const expected = maskSeqPid(fixtureLines(path)[n - 1]!);
  const flags = msg.flags | NLM_F_REQUEST | (opts.dump ? NLM_F_DUMP : NLM_F_ACK);
  const actual = maskSeqPid(encodeMessage({ ...msg, flags }, 0, 0));
  if (opts.maskFlags) {
    actual[6] = expected[6]!;
    actual[7] = expected[7]!;
  }
  const same = Buffer.from(actual).equals(Buffer.from(expected));
  t.true(same, `${path} message ${n} (${msg.label})\n${same ? '' : hexdiff(actual, expected)}`);
}
