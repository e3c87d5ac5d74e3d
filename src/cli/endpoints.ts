// The address arguments of `trace`: IP[:PORT] and IP:PORT[/PROTO], IPv6 in brackets when a
// port follows ("[fd00::1]:80/udp"), as kubectl and ss print them.

import { parseIP } from '../base/ip.ts';

export class AddressError extends Error {}

function split(text: string, what: string): { ip: string; port: string | undefined } {
  if (text.startsWith('[')) {
    const close = text.indexOf(']');
    if (close < 0) throw new AddressError(`${what} ${text}: no closing ]`);
    const rest = text.slice(close + 1);
    if (rest !== '' && !rest.startsWith(':')) throw new AddressError(`${what} ${text}: expected :PORT after ]`);
    return { ip: text.slice(1, close), port: rest === '' ? undefined : rest.slice(1) };
  }
  const colons = text.split(':').length - 1;
  if (colons === 0) return { ip: text, port: undefined };
  if (colons > 1) return { ip: text, port: undefined }; // a bare IPv6 address
  const i = text.indexOf(':');
  return { ip: text.slice(0, i), port: text.slice(i + 1) };
}

function port(text: string, what: string): number {
  const n = /^\d{1,5}$/.test(text) ? Number(text) : NaN;
  if (!(n >= 1 && n <= 65535)) throw new AddressError(`${what}: port ${text} is not 1-65535`);
  return n;
}

function ip(text: string, what: string): string {
  const a = parseIP(text);
  if (!a) throw new AddressError(`${what}: ${text} is not an IP address`);
  return a.text;
}

export function parseFrom(text: string): { ip: string; port?: number } {
  const s = split(text, '--from');
  return s.port === undefined ? { ip: ip(s.ip, '--from') } : { ip: ip(s.ip, '--from'), port: port(s.port, '--from') };
}

export function parseTo(text: string): { ip: string; port: number; protocol: 'TCP' | 'UDP' | 'SCTP' } {
  const slash = text.lastIndexOf('/');
  const proto = slash < 0 ? 'TCP' : text.slice(slash + 1).toUpperCase();
  if (proto !== 'TCP' && proto !== 'UDP' && proto !== 'SCTP')
    throw new AddressError(`--to: protocol ${proto} is not tcp, udp or sctp`);
  const s = split(slash < 0 ? text : text.slice(0, slash), '--to');
  if (s.port === undefined) throw new AddressError(`--to ${text}: needs IP:PORT`);
  return { ip: ip(s.ip, '--to'), port: port(s.port, '--to'), protocol: proto };
}
