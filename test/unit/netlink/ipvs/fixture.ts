// Reads the ipvsadm captures in test/fixtures/netlink/ipvs (see CAPTURE.md there): one
// message per line, "send HEX" or "recv HEX", '#' comments.
import { readFileSync } from 'node:fs';
import { parseMessages } from '../../../../src/netlink/core/index.ts';
import type { InMessage } from '../../../../src/netlink/core/index.ts';

export interface Captured {
  dir: 'send' | 'recv';
  raw: Uint8Array;
  msg: InMessage;
}

export function capture(name: string): Captured[] {
  const text = readFileSync(new URL(`../../../fixtures/netlink/ipvs/${name}.hex`, import.meta.url), 'utf8');
  const out: Captured[] = [];
  for (const line of text.split('\n')) {
    if (!line.trim() || line.startsWith('#')) continue;
    const [dir, hex] = line.trim().split(/\s+/) as ['send' | 'recv', string];
    const raw = Uint8Array.from(Buffer.from(hex, 'hex'));
    const [msg] = parseMessages(raw);
    out.push({ dir, raw, msg: msg! });
  }
  return out;
}

/** The sent IPVS message with genl command `cmd` (ipvsadm first asks GET_INFO, which is skipped). */
export function sentCommand(name: string, cmd: number, index?: number): Captured {
  const found = capture(name).filter((c) => c.dir === 'send' && c.msg.payload[0] === cmd);
  if (index === undefined && found.length !== 1)
    throw new Error(`${name}: ${found.length} sent messages with command ${cmd}`);
  const c = found[index ?? 0];
  if (!c) throw new Error(`${name}: no sent message ${index} with command ${cmd}`);
  return c;
}

export const received = (name: string, cmd: number): InMessage[] =>
  capture(name)
    .filter((c) => c.dir === 'recv' && c.msg.payload[0] === cmd && c.msg.type >= 0x10)
    .map((c) => c.msg);

/** The IPVS family id of the capture's boot (the nlmsg type of its messages). */
export const capturedFamily = (name: string): number => capture(name).find((c) => c.dir === 'send')!.msg.type;
