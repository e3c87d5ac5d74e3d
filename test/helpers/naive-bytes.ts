// A deliberately naive byte builder for expected values in tests: plain arrays of numbers,
// written field by field. It shares no code with src/netlink/core, so encoder tests are not
// tautologies (the pg-protocol BufferList idea).

export const le16 = (v: number): number[] => [v & 0xff, (v >> 8) & 0xff];
export const be16 = (v: number): number[] => [(v >> 8) & 0xff, v & 0xff];
export const le32 = (v: number): number[] => [v & 0xff, (v >>> 8) & 0xff, (v >>> 16) & 0xff, (v >>> 24) & 0xff];
export const be32 = (v: number): number[] => le32(v).reverse();
export const cstr = (s: string): number[] => [...Buffer.from(s, 'utf8'), 0];
export const pad4 = (b: number[]): number[] => [...b, ...new Array<number>((4 - (b.length % 4)) % 4).fill(0)];

/** One attribute: len (header + payload), type, payload, padding. */
export const attr = (type: number, payload: number[]): number[] =>
  pad4([...le16(4 + payload.length), ...le16(type), ...payload]);
export const nestedAttr = (type: number, ...children: number[][]): number[] => attr(type | 0x8000, children.flat());

/** One message: nlmsghdr + payload (padding included in the length, as the kernel expects). */
export const nlmsg = (type: number, flags: number, seq: number, pid: number, payload: number[]): number[] => {
  const body = pad4(payload);
  return [...le32(16 + body.length), ...le16(type), ...le16(flags), ...le32(seq), ...le32(pid), ...body];
};

export const fromHex = (hex: string): Uint8Array => Uint8Array.from(Buffer.from(hex.trim(), 'hex'));
export const bytes = (a: number[]): Uint8Array => Uint8Array.from(a);
