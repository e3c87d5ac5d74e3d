// iptables-nft's tables and built-in chains against the NEWTABLE/NEWCHAIN messages
// iptables-nft-restore sent (test/fixtures/netlink/iptables/, see CAPTURE.md): each built-in
// chain's first NEWCHAIN creates it (type, hook, priority, policy accept); a second one that
// resets its counters follows, which we never send. Known difference, from the shared chain and
// table codecs (which follow nft 1.0.6): nft orders a chain's attributes TYPE, POLICY, HOOK where
// iptables-nft has HOOK, POLICY, TYPE, and nft's NEWTABLE carries NFTA_TABLE_FLAGS 0 without
// NLM_F_CREATE. The kernel reads both the same; these tests compare attribute sets.
import test from 'ava';
import type { IPFamily } from '../../../../../src/base/ip.ts';
import { NftTransaction } from '../../../../../src/netlink/nftables/index.ts';
import type { IptTable } from '../../../../../src/netlink/nftables/iptables/rule.ts';
import {
  BUILTIN_CHAINS,
  IPT_FAMILY,
  addTableAndBuiltins,
  builtinChain,
  builtinChainsOf,
} from '../../../../../src/netlink/nftables/iptables/tables.ts';
import { ruleset } from '../../../../fixtures/netlink/iptables/ruleset.ts';
import { hexdiff } from '../../../../helpers/hexdiff.ts';
import { MSG, captured, ourBytes } from './fixture.ts';

/** A message's header (seq/pid masked, flags as given) and top-level attributes sorted by type, as hex. */
function attrSet(b: Uint8Array, ignoreFlags = 0): string[] {
  const flags = (b[6]! | (b[7]! << 8)) & ~ignoreFlags;
  const out: string[] = [
    `type ${b[4]! | (b[5]! << 8)} flags ${flags} nfgen ${Buffer.from(b.subarray(16, 20)).toString('hex')}`,
  ];
  for (let off = 20; off + 4 <= b.length;) {
    const len = b[off]! | (b[off + 1]! << 8);
    if (len < 4) break;
    out.push(Buffer.from(b.subarray(off, off + len)).toString('hex'));
    off += (len + 3) & ~3;
  }
  return [out[0]!, ...out.slice(1).sort()];
}

/** table -> chain -> the first NEWCHAIN (with a hook) iptables-nft sent for it. */
function capturedBuiltins(fixture: string): Map<string, Uint8Array> {
  const out = new Map<string, Uint8Array>();
  for (const m of captured(fixture).filter((x) => x.type === MSG.NEWCHAIN)) {
    const text = Buffer.from(m.bytes).toString('latin1');
    const [table, chain] = [...text.matchAll(/[A-Za-z-]{3,}(?=\0)/g)].map((x) => x[0]);
    const key = `${table} ${chain}`;
    if (!out.has(key) && m.bytes.length > 60) out.set(key, m.bytes);
  }
  return out;
}

for (const [family, fixture] of [
  ['IPv4', 'restore-ipv4'],
  ['IPv6', 'restore-ipv6'],
] as [IPFamily, string][]) {
  test(`built-in chains of nat, filter, mangle, ${family}: the NEWCHAIN iptables-nft sends`, (t) => {
    const theirs = capturedBuiltins(fixture);
    t.is(theirs.size, 4 + 3 + 5, 'the capture created every built-in chain');
    for (const table of ['nat', 'filter', 'mangle'] as IptTable[]) {
      for (const name of Object.keys(BUILTIN_CHAINS[table])) {
        const want = theirs.get(`${table} ${name}`);
        const got = ourBytes(family, table, builtinChain(table, name)!);
        t.truthy(want, `${table} ${name} captured`);
        if (want)
          t.deepEqual(attrSet(got), attrSet(want), `${table} ${name}\n${hexdiff(got, want, ['ours', 'iptables-nft'])}`);
      }
    }
  });

  test(`the table message, ${family}: NEWTABLE as iptables-nft sends it`, (t) => {
    const theirs = captured(fixture).filter((m) => m.type === MSG.NEWTABLE);
    const NLM_F_CREATE = 0x400;
    for (const table of ['nat', 'filter', 'mangle'] as IptTable[]) {
      const got = attrSet(ourBytes(family, table, { kind: 'table' }), NLM_F_CREATE).filter(
        (a) => a !== '0800020000000000',
      );
      const want = theirs.map((m) => attrSet(m.bytes, NLM_F_CREATE)).find((a) => a[1] === got[1]);
      t.deepEqual(got, want, table);
    }
  });
}

test('addTableAndBuiltins adds the table and only the missing built-in chains, never a flush', (t) => {
  const tx = new NftTransaction({ family: IPT_FAMILY.IPv4, table: 'filter' });
  addTableAndBuiltins(tx, 'filter', ['FORWARD', 'INPUT', 'KUBE-FORWARD', 'FORWARD', 'PREROUTING'], new Set(['INPUT']));
  const text = tx.toString();
  t.regex(text, /add table ip filter/);
  t.regex(text, /add chain ip filter FORWARD \{ type filter hook forward priority 0 ; policy accept ; \}/);
  t.notRegex(text, /INPUT|KUBE-FORWARD|PREROUTING|flush|delete/);
  t.deepEqual(builtinChainsOf(ruleset('IPv4').rules, 'nat'), ['PREROUTING', 'OUTPUT', 'POSTROUTING']);
  t.is(builtinChain('filter', 'PREROUTING'), undefined);
});
