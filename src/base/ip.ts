// IP addresses and CIDRs as values: parsed once, compared and encoded as bytes. Pure code.

const HEXTET = /^[0-9a-fA-F]{1,4}$/;

/**
 * Dotted quad to a u32, each part 0-255, no leading zeros (which some parsers read as octal);
 * -1 when the text is not one. A scan rather than a regex: the model parses every endpoint.
 */
export function v4Number(s: string): number {
  let acc = 0;
  let part = 0;
  let digits = 0;
  let dots = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 46) {
      if (digits === 0 || dots === 3) return -1;
      acc = acc * 256 + part;
      part = 0;
      digits = 0;
      dots++;
    } else if (c >= 48 && c <= 57) {
      if (digits > 0 && part === 0) return -1; // leading zero
      part = part * 10 + (c - 48);
      if (++digits > 3 || part > 255) return -1;
    } else return -1;
  }
  if (digits === 0 || dots !== 3) return -1;
  return acc * 256 + part;
}

const isIPv4 = (s: string): boolean => v4Number(s) >= 0;

/** RFC 4291 text form: eight hextets, one `::` for a run of zeros, an optional IPv4 tail. */
function isIPv6(s: string): boolean {
  if (s.length < 2 || s.length > 45) return false;
  let text = s;
  let groups = 0;
  const lastColon = text.lastIndexOf(':');
  if (text.includes('.', lastColon)) {
    if (!isIPv4(text.slice(lastColon + 1))) return false;
    text = text.slice(0, lastColon + 1) + '0:0';
  }
  const halves = text.split('::');
  if (halves.length > 2) return false;
  for (const half of halves) {
    if (half === '') continue;
    const parts = half.split(':');
    if (!parts.every((p) => HEXTET.test(p))) return false;
    groups += parts.length;
  }
  return halves.length === 2 ? groups <= 7 : groups === 8;
}

export type IPFamily = 'IPv4' | 'IPv6';

export interface IPAddr {
  readonly family: IPFamily;
  /** 4 or 16 bytes, network order. */
  readonly bytes: Uint8Array;
  /** Canonical text: dotted quad, or RFC 5952 for IPv6. */
  readonly text: string;
}

export interface CIDR {
  readonly family: IPFamily;
  /** The network address (host bits cleared). */
  readonly addr: IPAddr;
  readonly prefix: number;
  readonly text: string;
}

function parseV4(s: string): Uint8Array {
  const b = new Uint8Array(4);
  const parts = s.split('.');
  for (let i = 0; i < 4; i++) b[i] = Number(parts[i]);
  return b;
}

function parseV6(s: string): Uint8Array {
  let text = s;
  const b = new Uint8Array(16);
  // An embedded IPv4 tail (::ffff:1.2.3.4) becomes two hextets.
  const lastColon = text.lastIndexOf(':');
  if (text.includes('.', lastColon)) {
    const v4 = parseV4(text.slice(lastColon + 1));
    text = `${text.slice(0, lastColon + 1)}${((v4[0]! << 8) | v4[1]!).toString(16)}:${((v4[2]! << 8) | v4[3]!).toString(16)}`;
  }
  const [head, tail] = text.includes('::') ? (text.split('::') as [string, string]) : [text, undefined];
  const headParts = head === '' ? [] : head.split(':');
  const tailParts = tail === undefined || tail === '' ? [] : tail.split(':');
  const fill = 8 - headParts.length - tailParts.length;
  const groups = [...headParts, ...Array<string>(tail === undefined ? 0 : fill).fill('0'), ...tailParts];
  groups.forEach((g, i) => {
    const v = parseInt(g, 16);
    b[i * 2] = v >> 8;
    b[i * 2 + 1] = v & 0xff;
  });
  return b;
}

function formatV6(b: Uint8Array): string {
  const groups: number[] = [];
  for (let i = 0; i < 16; i += 2) groups.push((b[i]! << 8) | b[i + 1]!);
  // RFC 5952: compress the longest run of two or more zero groups, the first on a tie.
  let bestStart = -1;
  let bestLen = 0;
  for (let i = 0; i < 8;) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen && j - i >= 2) {
      bestStart = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (bestStart < 0) return hex.join(':');
  return `${hex.slice(0, bestStart).join(':')}::${hex.slice(bestStart + bestLen).join(':')}`;
}

const makeAddr = (family: IPFamily, bytes: Uint8Array): IPAddr => ({
  family,
  bytes,
  text: family === 'IPv4' ? Array.from(bytes).join('.') : formatV6(bytes),
});

/** Parses an IP address; undefined when the text is not one (no zone ids, no CIDR suffix). */
export function parseIP(text: string): IPAddr | undefined {
  if (typeof text !== 'string') return undefined;
  const n = v4Number(text);
  // A valid dotted quad is already in canonical form: keep the caller's string.
  if (n >= 0)
    return { family: 'IPv4', bytes: Uint8Array.of(n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255), text };
  if (isIPv6(text) && !text.includes('%')) return makeAddr('IPv6', parseV6(text));
  return undefined;
}

/** An address's family and canonical text, without its bytes. */
export interface IPText {
  readonly family: IPFamily;
  readonly text: string;
}

/**
 * parseIP for callers that keep text only (the model parses every endpoint address): the
 * same answer, without allocating the bytes of an IPv4 address.
 */
export function parseIPText(text: string): IPText | undefined {
  if (typeof text !== 'string') return undefined;
  if (v4Number(text) >= 0) return { family: 'IPv4', text };
  return parseIP(text);
}

export function ipFromBytes(bytes: Uint8Array): IPAddr {
  if (bytes.length === 4) return makeAddr('IPv4', Uint8Array.from(bytes));
  if (bytes.length === 16) return makeAddr('IPv6', Uint8Array.from(bytes));
  throw new RangeError(`an IP address has 4 or 16 bytes, not ${bytes.length}`);
}

/** Parses "a.b.c.d/n" or "x::/n"; host bits are cleared. A bare address is a /32 or /128. */
export function parseCIDR(text: string): CIDR | undefined {
  if (typeof text !== 'string') return undefined;
  const slash = text.indexOf('/');
  const ip = parseIP(slash < 0 ? text : text.slice(0, slash));
  if (!ip) return undefined;
  const max = ip.bytes.length * 8;
  let prefix = max;
  if (slash >= 0) {
    const p = text.slice(slash + 1);
    if (!/^\d{1,3}$/.test(p)) return undefined;
    prefix = Number(p);
    if (prefix > max) return undefined;
  }
  const net = maskBytes(ip.bytes, prefix);
  const addr = makeAddr(ip.family, net);
  return { family: ip.family, addr, prefix, text: `${addr.text}/${prefix}` };
}

/**
 * parseCIDR for encoders that need only the network's bytes and prefix: the same answer
 * without the canonical texts (an IPv4 address's text is an array join, per rule of a sync).
 */
export function parseCIDRBytes(text: string): { family: IPFamily; bytes: Uint8Array; prefix: number } | undefined {
  if (typeof text !== 'string') return undefined;
  const slash = text.indexOf('/');
  const n = v4Number(slash < 0 ? text : text.slice(0, slash));
  if (n < 0) {
    const c = parseCIDR(text);
    return c && { family: c.family, bytes: c.addr.bytes, prefix: c.prefix };
  }
  let prefix = 32;
  if (slash >= 0) {
    const p = text.slice(slash + 1);
    if (!/^\d{1,3}$/.test(p)) return undefined;
    prefix = Number(p);
    if (prefix > 32) return undefined;
  }
  const bytes = Uint8Array.of(n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255);
  return { family: 'IPv4', bytes: prefix === 32 ? bytes : maskBytes(bytes, prefix), prefix };
}

function maskBytes(bytes: Uint8Array, prefix: number): Uint8Array {
  const out = Uint8Array.from(bytes);
  for (let i = 0; i < out.length; i++) {
    const bits = Math.max(0, Math.min(8, prefix - i * 8));
    out[i]! &= (0xff << (8 - bits)) & 0xff;
  }
  return out;
}

export function cidrContains(cidr: CIDR, ip: IPAddr): boolean {
  if (cidr.family !== ip.family) return false;
  const masked = maskBytes(ip.bytes, cidr.prefix);
  for (let i = 0; i < masked.length; i++) if (masked[i] !== cidr.addr.bytes[i]) return false;
  return true;
}

/** The last address of a CIDR (for interval sets: [first, last]). */
export function cidrLast(cidr: CIDR): IPAddr {
  const out = Uint8Array.from(cidr.addr.bytes);
  for (let i = 0; i < out.length; i++) {
    const bits = Math.max(0, Math.min(8, cidr.prefix - i * 8));
    out[i]! |= 0xff >> bits;
  }
  return makeAddr(cidr.family, out);
}

export const isLoopback = (ip: IPAddr): boolean =>
  ip.family === 'IPv4' ? ip.bytes[0] === 127 : ip.bytes.every((b, i) => (i === 15 ? b === 1 : b === 0));

export function compareIP(a: IPAddr, b: IPAddr): number {
  if (a.bytes.length !== b.bytes.length) return a.bytes.length - b.bytes.length;
  for (let i = 0; i < a.bytes.length; i++) if (a.bytes[i] !== b.bytes[i]) return a.bytes[i]! - b.bytes[i]!;
  return 0;
}
