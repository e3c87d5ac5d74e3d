// Companion rules as nf_tables expressions, in iptables-nft's shape: the expression sequence of
// each kind of rule matches what `nft --debug=netlink` listed for the rules iptables-nft-restore
// loaded in the VM (test/vm/scenarios/ipvs-proxier-companion.capture.txt).
import test from 'ava';
import { readFileSync } from 'node:fs';
import { companionRules } from '../../../../src/proxier/ipvs/rules.ts';
import type { IptRule } from '../../../../src/proxier/ipvs/rules.ts';
import { ruleExprs } from '../../../../src/netlink/nftables/iptables/encode.ts';
import type { NftExpr as CompatExpr } from '../../../../src/netlink/nftables/index.ts';
import { SetName } from '../../../../src/proxier/ipvs/index.ts';
import type { LocalDetector } from '../../../../src/model/index.ts';
import { NftMsg, NO_SET_IDS } from '../../../../src/netlink/nftables/index.ts';
import { decodeRule, ruleMessage } from '../../../../src/netlink/nftables/rule.ts';

const noDetect: LocalDetector = { mode: 'ClusterCIDR', cidrs: [], interfaceName: '', implemented: false };

/** "meta" / "cmp eq" / "match set" ... : the shape nft --debug=netlink shows. */
function kinds(exprs: readonly CompatExpr[]): string[] {
  return exprs.map((e) => {
    switch (e.type) {
      case 'xtmatch':
        return `match ${e.name} ${e.rev}`;
      case 'xttarget':
        return `target ${e.name} ${e.rev}`;
      case 'cmp':
        return `cmp ${e.op}`;
      case 'meta':
        return `meta ${e.key}`;
      case 'immediate':
        return 'verdict' in e ? `immediate ${e.verdict.verdict}` : 'immediate';
      case 'payload':
        return `payload ${e.len}b+${e.offset}`;
      default:
        return e.type;
    }
  });
}

/** The same from the capture: chain -> rules -> kinds. */
function capturedKinds(table: string): Map<string, string[][]> {
  const text = readFileSync(
    new URL('../../../vm/scenarios/ipvs-proxier-companion.capture.txt', import.meta.url),
    'utf8',
  );
  const out = new Map<string, string[][]>();
  const section = text
    .slice(text.indexOf(`######## nft --debug=netlink list table ip ${table}`))
    .split('\ntable ip ')[0]!;
  for (const block of section.split(`\nip ${table} `).slice(1)) {
    const [head, ...lines] = block.split('\n');
    const chain = head!.split(' ')[0]!;
    const ks = lines
      .map((l) => /^\s+\[ (.*) \]$/.exec(l)?.[1])
      .filter((l): l is string => !!l)
      .map((l) => {
        let m;
        if ((m = /^match name (\S+) rev (\d+)/.exec(l))) return `match ${m[1]} ${m[2]}`;
        if ((m = /^target name (\S+) rev (\d+)/.exec(l))) return `target ${m[1]} ${m[2]}`;
        if ((m = /^cmp (\w+)/.exec(l))) return `cmp ${m[1]}`;
        if ((m = /^meta load (\w+)/.exec(l))) return `meta ${m[1]}`;
        if ((m = /^payload load (\d+)b @ network header \+ (\d+)/.exec(l))) return `payload ${m[1]}b+${m[2]}`;
        if ((m = /^immediate reg 0 (\w+)/.exec(l))) return `immediate ${m[1]}`;
        return l.split(' ')[0]!;
      });
    const l = out.get(chain) ?? [];
    l.push(ks);
    out.set(chain, l);
  }
  return out;
}

const rules = companionRules({
  family: 'IPv4',
  nonEmptySets: new Set(Object.values(SetName)),
  noNodeAccess: [{ ip: '198.51.100.30', protocol: 'tcp', port: 80 }],
  masqueradeAll: false,
  detectLocal: noDetect,
});
const idx = (_name: string): number => 1;

test('every rule of ours has the expression shape iptables-nft gives the same rule', (t) => {
  const nat = capturedKinds('nat');
  const filter = capturedKinds('filter');
  t.true(nat.size > 3 && filter.size > 3, 'the capture parsed');
  let checked = 0;
  for (const r of rules.rules) {
    const got = kinds(ruleExprs(r, 'IPv4', { setIndex: idx }));
    const seen = (r.table === 'nat' ? nat : filter).get(r.chain) ?? [];
    // The VM's state had fewer sets in use, so not every rule is in the capture; those that are must match one.
    const sameTarget = seen.filter((k) => k.at(-1) === got.at(-1) && k.length === got.length);
    if (sameTarget.length === 0) continue;
    t.true(
      sameTarget.some((k) => JSON.stringify(k) === JSON.stringify(got)),
      `${r.chain}: ${got.join(' | ')} not among ${JSON.stringify(sameTarget)}`,
    );
    checked++;
  }
  t.true(checked >= 20, `compared ${checked} rules`);
});

test('bytes of the native parts: -s as a 1-byte load for /8, mark mask and value, l4proto', (t) => {
  const lo = ruleExprs(
    rules.rules.find((r) => r.chain === 'KUBE-SERVICES' && r.matches[0]?.m === 'src')!,
    'IPv4',
    { setIndex: idx },
  );
  t.deepEqual(lo.slice(0, 2), [
    { type: 'payload', base: 'network', offset: 12, len: 1, dreg: 1 },
    { type: 'cmp', sreg: 1, op: 'eq', data: Uint8Array.of(127) },
  ]);
  const notMarked = ruleExprs(
    rules.rules.find((r) => r.chain === 'KUBE-POSTROUTING' && r.matches[0]?.m === 'mark')!,
    'IPv4',
    { setIndex: idx },
  );
  t.deepEqual(notMarked.slice(0, 3), [
    { type: 'meta', key: 'mark', dreg: 1 },
    { type: 'bitwise', sreg: 1, dreg: 1, len: 4, mask: Uint8Array.of(0, 0x40, 0, 0), xor: new Uint8Array(4) },
    { type: 'cmp', sreg: 1, op: 'neq', data: Uint8Array.of(0, 0x40, 0, 0) },
  ]);
  const np: IptRule = rules.rules.find((r) => r.chain === 'KUBE-NODE-PORT' && r.matches[0]?.m === 'proto')!;
  t.deepEqual(ruleExprs(np, 'IPv4', { setIndex: idx }).slice(0, 2), [
    { type: 'meta', key: 'l4proto', dreg: 1 },
    { type: 'cmp', sreg: 1, op: 'eq', data: Uint8Array.of(6) },
  ]);
  const v6 = ruleExprs(
    { table: 'nat', chain: 'X', matches: [{ m: 'src', cidr: 'fd00::/12', invert: true }], target: { t: 'ACCEPT' } },
    'IPv6',
    { setIndex: idx },
  );
  // A prefix that is not whole bytes: iptables-nft loads the whole address and masks it
  // (test/fixtures/netlink/iptables/restore-ipv6.hex, `-s fd00:244::/36`).
  const full = (...head: number[]): Uint8Array =>
    Uint8Array.from([...head, ...new Array<number>(16 - head.length).fill(0)]);
  t.deepEqual(v6.slice(0, 3), [
    { type: 'payload', base: 'network', offset: 8, len: 16, dreg: 1 },
    { type: 'bitwise', sreg: 1, dreg: 1, len: 16, mask: full(0xff, 0xf0), xor: new Uint8Array(16) },
    { type: 'cmp', sreg: 1, op: 'neq', data: full(0xfd, 0x00) },
  ]);
});

test('every companion rule, xt match and target included, decodes from its own message to the same expressions', (t) => {
  const scope = { family: 'ip', table: 'nat' } as const;
  for (const r of rules.rules) {
    const exprs = ruleExprs(r, 'IPv4', { setIndex: idx });
    const msg = ruleMessage(
      scope,
      NftMsg.NEWRULE,
      0,
      { kind: 'rule', chain: r.chain, exprs },
      r.chain,
      { handle: false, body: true },
      NO_SET_IDS,
    );
    const back = decodeRule({ payload: msg.payload }).rule.exprs;
    t.deepEqual(back, exprs, r.chain);
    t.false(
      back.some((e) => e.type === 'unknown'),
      `${r.chain}: every expression has a codec`,
    );
  }
});
