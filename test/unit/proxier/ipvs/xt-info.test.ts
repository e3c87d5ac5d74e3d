// The xtables info structs of the companion rules against what iptables-nft 1.8.9 really sent
// (strace capture from the VM: test/vm/scenarios/ipvs-proxier-companion.capture.txt), and the
// match/target codecs' round trip.
import test from 'ava';
import { readFileSync } from 'node:fs';
import { AttrSet, AttrWriter, ByteWriter } from '../../../../src/netlink/core/index.ts';
import {
  XT_ADDRTYPE_LOCAL,
  addrtypeMatch,
  commentMatch,
  ctstateMatch,
  ipvsMatch,
  markTarget,
  masqueradeTarget,
  physdevNotIsInMatch,
  rejectTarget,
  setMatch,
} from '../../../../src/netlink/nftables/iptables/xt-info.ts';
import { xtMatch } from '../../../../src/netlink/nftables/expr/xt-match.ts';
import { xtTarget } from '../../../../src/netlink/nftables/expr/xt-target.ts';

interface Captured {
  chain: string;
  kind: 'match' | 'target';
  name: string;
  rev: number;
  info: string;
}

function unescape(s: string): Uint8Array {
  const out: number[] = [];
  for (let i = 0; i < s.length;) {
    if (s[i] === '\\' && s[i + 1] === 'x') {
      out.push(parseInt(s.slice(i + 2, i + 4), 16));
      i += 4;
    } else if (s[i] === '\\') {
      const m: Record<string, number> = { n: 10, t: 9, '\\': 92, '"': 34, '0': 0 };
      out.push(m[s[i + 1]!] ?? s.charCodeAt(i + 1));
      i += 2;
    } else out.push(s.charCodeAt(i++));
  }
  return Uint8Array.from(out);
}

function* attrs(b: Uint8Array): Generator<[number, Uint8Array]> {
  const v = new DataView(b.buffer, b.byteOffset, b.byteLength);
  for (let o = 0; o + 4 <= b.length;) {
    const len = v.getUint16(o, true);
    if (len < 4) return;
    yield [v.getUint16(o + 2, true) & 0x3fff, b.subarray(o + 4, o + len)];
    o += (len + 3) & ~3;
  }
}

const cstr = (b: Uint8Array | undefined): string => new TextDecoder().decode(b ?? new Uint8Array()).replace(/\0+$/, '');
const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex');

function captured(): Captured[] {
  const text = readFileSync(
    new URL('../../../vm/scenarios/ipvs-proxier-companion.capture.txt', import.meta.url),
    'utf8',
  );
  const trace = text.slice(text.indexOf('######## strace'));
  const out: Captured[] = [];
  for (const part of trace.split('NFT_MSG_NEWRULE').slice(1)) {
    const msg = part.split('nlmsg_type=')[0]!;
    const chain = cstr(unescape(/nla_type=0x2\}, "((?:[^"\\]|\\.)*)"/.exec(msg)![1]!));
    const exprs = unescape(/nla_type=NLA_F_NESTED\|0x4\}, "((?:[^"\\]|\\.)*)"/.exec(msg)![1]!);
    for (const [, el] of attrs(exprs)) {
      const e = new Map(attrs(el));
      const kind = cstr(e.get(1));
      if (kind !== 'match' && kind !== 'target') continue;
      const d = new Map(attrs(e.get(2)!));
      out.push({
        chain,
        kind,
        name: cstr(d.get(1)),
        rev: new DataView(d.get(2)!.buffer, d.get(2)!.byteOffset).getUint32(0, false),
        info: hex(d.get(3)!),
      });
    }
  }
  return out;
}

const CAP = captured();
const find = (chain: string, name: string, pred: (c: Captured) => boolean = () => true): Captured => {
  const c = CAP.find((x) => x.chain === chain && x.name === name && pred(x));
  if (!c) throw new Error(`no ${name} in ${chain} in the capture`);
  return c;
};

test('the capture has the rules', (t) => {
  t.true(CAP.length > 40);
});

test('set match v4: index, dimensions and src flags as iptables-nft sends them', (t) => {
  // KUBE-LOOP-BACK dst,dst,src (index 0), KUBE-CLUSTER-IP src,dst, KUBE-NODE-PORT-TCP dst.
  const loop = find('KUBE-POSTROUTING', 'set');
  t.is(hex(setMatch(0, ['dst', 'dst', 'src']).info), loop.info);
  const cip = find('KUBE-SERVICES', 'set', (c) => c.info.startsWith('0100020200'));
  t.is(hex(setMatch(1, ['src', 'dst']).info), cip.info);
  const np = find('KUBE-NODE-PORT', 'set', (c) => c.info.startsWith('0900'));
  t.is(hex(setMatch(9, ['dst']).info), np.info);
  t.is(loop.rev, 4);
});

test('comment, addrtype, physdev, conntrack and ipvs matches', (t) => {
  const c = find('OUTPUT', 'comment');
  t.is(hex(commentMatch('kubernetes service portals').info), c.info);
  t.is(
    hex(addrtypeMatch('src', XT_ADDRTYPE_LOCAL, true).info),
    find('KUBE-SERVICES', 'addrtype', (x) => x.info.startsWith('04')).info,
  );
  t.is(
    hex(addrtypeMatch('dst', XT_ADDRTYPE_LOCAL).info),
    find('KUBE-SERVICES', 'addrtype', (x) => x.info.startsWith('0000')).info,
  );
  t.is(hex(physdevNotIsInMatch().info), find('KUBE-SERVICES', 'physdev').info);
  t.is(hex(ctstateMatch(['RELATED', 'ESTABLISHED']).info), find('KUBE-FORWARD', 'conntrack').info);
  t.is(hex(ctstateMatch(['NEW']).info), find('KUBE-IPVS-FILTER', 'conntrack').info);
  t.is(hex(ipvsMatch(Uint8Array.of(198, 51, 100, 30), 6, 80).info), find('KUBE-IPVS-OUT-FILTER', 'ipvs').info);
});

test('MARK, MASQUERADE and REJECT targets', (t) => {
  t.is(hex(markTarget(0x4000, 0).info), find('KUBE-POSTROUTING', 'MARK').info);
  t.is(hex(markTarget(0x4000, 0x4000).info), find('KUBE-MARK-MASQ', 'MARK').info);
  t.is(
    hex(masqueradeTarget(false).info),
    find('KUBE-POSTROUTING', 'MASQUERADE', (x) => x.info.startsWith('0100000000')).info,
  );
  t.is(
    hex(masqueradeTarget(true).info),
    find('KUBE-POSTROUTING', 'MASQUERADE', (x) => x.info.startsWith('0100000010')).info,
  );
  t.is(hex(rejectTarget().info), find('KUBE-IPVS-FILTER', 'REJECT').info);
});

// What ip6tables-nft 1.8.9 sends as NFTA_TARGET_INFO, from `strace -f -e trace=sendmsg -xx
// ip6tables-nft -t nat -A KUBE-X -j MASQUERADE [--random-fully]` and `-t filter -A KUBE-Y -j
// REJECT` in a throwaway namespace (kernel 6.18): nf_nat_range (40 bytes) and ip6t_reject_info.
test('ip6 MASQUERADE and REJECT targets carry the IPv6 structs', (t) => {
  const zeros = (n: number) => '00'.repeat(n);
  t.is(hex(masqueradeTarget(false, 'IPv6').info), zeros(40));
  t.is(hex(masqueradeTarget(true, 'IPv6').info), `10000000${zeros(36)}`);
  t.is(hex(rejectTarget('IPv6').info), '0400000000000000'); // 4 bytes, XT_ALIGNed to 8
});

test('match and target codecs round-trip', (t) => {
  for (const [codec, e] of [
    [xtMatch, setMatch(3, ['dst', 'dst'])],
    [xtTarget, markTarget(0x4000, 0x4000)],
  ] as const) {
    const out = new ByteWriter();
    (codec.encode as (w: AttrWriter, e: unknown, c: unknown) => void)(new AttrWriter(out), e, undefined);
    const back = codec.decode(new AttrSet(out.toBytes(), 'test'));
    t.deepEqual({ ...back, info: hex(back.info) }, { ...e, info: hex(e.info) });
  }
  t.is(xtMatch.render(setMatch(3, ['dst'])).slice(0, 27), 'match name set rev 4 info 0');
});
