// Captures what ipvsadm sends to (and receives from) the kernel's IPVS generic-netlink family,
// inside the QEMU VM (the machine's own kernel has no IPVS), and writes the messages as hex
// fixtures under test/fixtures/netlink/ipvs/. Run by hand when a fixture needs refreshing:
//
//   node test/vm/capture-ipvs-fixtures.ts
//
// Each fixture file holds one message per line (nlmsghdr included, seq and pid zeroed), with
// '#' comment lines naming the command. Only messages of the IPVS family are kept: the
// controller look-up (nlctrl) and plain ACKs are dropped.

import { writeFileSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { runInVm } from './harness.ts';

const OUT = resolve(import.meta.dirname, '../fixtures/netlink/ipvs');

/** name -> ipvsadm arguments, run in this order in one boot (later ones see earlier state). */
export const CAPTURES: ReadonlyArray<readonly [string, string]> = [
  ['svc-add-tcp', '-A -t 10.96.0.1:80 -s rr'],
  ['dest-add-masq', '-a -t 10.96.0.1:80 -r 10.0.0.2:8080 -m -w 1'],
  ['dest-add-thresholds', '-a -t 10.96.0.1:80 -r 10.0.0.3:8080 -m -w 5 -x 100 -y 10'],
  ['dest-edit-weight0', '-e -t 10.96.0.1:80 -r 10.0.0.2:8080 -m -w 0'],
  ['svc-edit-persistent', '-E -t 10.96.0.1:80 -s wrr -p 10800'],
  ['svc-add-persist-netmask', '-A -t 10.96.0.2:443 -s sh -p 300 -M 255.255.255.0 -b sh-fallback,sh-port'],
  ['svc-add-udp6', '-A -u [fd00::10]:53 -s rr'],
  ['dest-add-udp6', '-a -u [fd00::10]:53 -r [fd00::2]:5353 -m -w 2'],
  ['svc-add-fwmark', '-A -f 7 -s rr'],
  ['list', '-Ln'],
  ['timeouts-set', '--set 900 120 300'],
  ['timeouts-get', '-L --timeout'],
  ['dest-del', '-d -t 10.96.0.1:80 -r 10.0.0.2:8080'],
  ['svc-del', '-D -t 10.96.0.1:80'],
  ['flush', '-C'],
];

interface Syscall {
  dir: 'send' | 'recv';
  bytes: Buffer;
}

/** Parses `strace -x -e write=3 -e read=3` output: the hexdump blocks after each syscall line. */
export function parseStrace(text: string): Syscall[] {
  const out: Syscall[] = [];
  let cur: Syscall | undefined;
  let hex: string[] = [];
  const flush = (): void => {
    if (cur) {
      cur.bytes = Buffer.from(hex.join(''), 'hex');
      out.push(cur);
    }
    cur = undefined;
    hex = [];
  };
  for (const line of text.split('\n')) {
    const m = /^(sendmsg|sendto|recvmsg|recvfrom)\(/.exec(line);
    if (m) {
      flush();
      // MSG_PEEK reads are repeated by the real read that follows: skip them.
      if (line.includes('MSG_PEEK')) continue;
      cur = { dir: m[1]!.startsWith('send') ? 'send' : 'recv', bytes: Buffer.alloc(0) };
      continue;
    }
    // " | 00010  03 01 00 00 09 00 02 00  49 50 56 53 00 00 00 00  ........IPVS.... |":
    // the bytes sit in fixed columns, before the ASCII rendering (which may look like hex).
    if (cur && /^ \| [0-9a-f]{5} {2}/.test(line)) hex.push((line.slice(10, 60).match(/[0-9a-f]{2}/g) ?? []).join(''));
  }
  flush();
  return out;
}

const NLCTRL = 0x10;
const NLMSG_ERROR = 2;

/** The IPVS-family messages (and error replies other than plain ACKs), seq and pid zeroed. */
export function ipvsMessages(calls: Syscall[]): { dir: 'send' | 'recv'; hex: string }[] {
  const out: { dir: 'send' | 'recv'; hex: string }[] = [];
  for (const c of calls) {
    for (let off = 0; off + 16 <= c.bytes.length;) {
      const len = c.bytes.readUInt32LE(off);
      if (len < 16 || off + len > c.bytes.length) break;
      const msg = Buffer.from(c.bytes.subarray(off, off + len));
      const type = msg.readUInt16LE(4);
      const isAck = type === NLMSG_ERROR && msg.readInt32LE(16) === 0;
      const ctrl = type === NLCTRL || (type === NLMSG_ERROR && msg.length >= 24 && msg.readUInt16LE(24) === NLCTRL);
      if (!ctrl && !isAck) {
        msg.writeUInt32LE(0, 8);
        msg.writeUInt32LE(0, 12);
        if (type === NLMSG_ERROR && msg.length >= 36) {
          msg.writeUInt32LE(0, 28);
          msg.writeUInt32LE(0, 32);
        }
        out.push({ dir: c.dir, hex: msg.toString('hex') });
      }
      off += (len + 3) & ~3;
    }
  }
  return out;
}

async function main(): Promise<void> {
  const S = '/usr/bin/strace -x -s 65536 -e trace=sendmsg,sendto,recvmsg,recvfrom -e write=3,4,5 -e read=3,4,5';
  const script = [
    'set -u',
    '/usr/sbin/ipvsadm --version >"$RUN_DIR/ipvsadm-version" 2>&1',
    '/usr/bin/strace -V | head -n1 >"$RUN_DIR/strace-version"',
    ...CAPTURES.map(
      ([name, args]) =>
        `${S} -o "$RUN_DIR/cap-${name}.txt" /usr/sbin/ipvsadm ${args} >"$RUN_DIR/out-${name}.txt" 2>&1 || echo "ipvsadm ${args} failed: $?"`,
    ),
  ].join('\n');
  const r = await runInVm({ script, timeoutMs: 240_000, modules: ['ip_vs', 'ip_vs_rr', 'ip_vs_wrr', 'ip_vs_sh'] });
  if (r.status !== 0) throw new Error(`capture run failed (status ${r.status}):\n${r.output}\n${r.console}`);
  if (r.output.trim()) console.log(r.output);
  mkdirSync(OUT, { recursive: true });
  const ipvsadm = (r.file('ipvsadm-version') ?? '').trim();
  const strace = (r.file('strace-version') ?? '').trim();
  for (const [name, args] of CAPTURES) {
    const msgs = ipvsMessages(parseStrace(r.file(`cap-${name}.txt`) ?? ''));
    const lines = [
      `# ipvsadm ${args}`,
      `# ${ipvsadm}; ${strace}; kernel Debian ${process.env.KVER ?? '6.1.0-56-amd64'} under QEMU`,
      '# one message per line: "send" or "recv", then the message in hex (nlmsghdr included, seq and pid zeroed;',
      '# the nlmsg type is the IPVS family id of that boot, dynamic: compare from byte 4 on with the type masked)',
      ...msgs.map((m) => `${m.dir} ${m.hex}`),
    ];
    writeFileSync(join(OUT, `${name}.hex`), `${lines.join('\n')}\n`);
    const text = r.file(`out-${name}.txt`);
    if (text?.trim()) writeFileSync(join(OUT, `${name}.ipvsadm.txt`), text);
    console.log(`${name}: ${msgs.length} messages`);
  }
  console.log(`boot ${r.bootMs} ms, payload ${r.payloadMs} ms, total ${r.totalMs} ms`);
}

if (process.argv[1] && resolve(process.argv[1]) === resolve(import.meta.filename)) await main();
