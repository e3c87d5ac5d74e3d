// diffOwned: an owned chain brought to its wanted rules by handle. Rules that stay keep their
// handles (never deleted), missing ones land before the next rule that stays, and the
// kernel's chain after applying the plan reads as wanted.
import test from 'ava';
import type { NftRule } from '../../../../src/netlink/nftables/index.ts';
import type { IptRule } from '../../../../src/netlink/nftables/iptables/rule.ts';
import { Plan } from '../../../../src/proxier/iptables-nft/groups.ts';
import type { ListedEntry } from '../../../../src/proxier/iptables-nft/kernel-state.ts';
import type { Encoded } from '../../../../src/proxier/iptables-nft/plan-common.ts';
import { commonRun, diffOwned } from '../../../../src/proxier/iptables-nft/plan-diff.ts';

const chain = { table: 'nat', name: 'KUBE-SERVICES' } as const;

/** A wanted rule whose key (and nft comment, to follow it through the plan) is `k`. */
function want(k: string): Encoded {
  const rule: IptRule = { table: 'nat', chain: chain.name, matches: [], target: { t: 'RETURN' } };
  const nft: NftRule = { kind: 'rule', chain: chain.name, exprs: [], comment: k };
  return { rule, nft, key: k };
}

/** Applies the plan's operations to a listed chain as the kernel would: the keys in chain order. */
function apply(plan: Plan, have: readonly ListedEntry[]): { keys: (string | undefined)[]; deleted: bigint[] } {
  const rows: { handle: bigint; key: string | undefined }[] = have.map((e) => ({ handle: e.handle, key: e.key }));
  const deleted: bigint[] = [];
  let next = 1000n;
  for (const op of plan.groups.flat()) {
    const r = op.obj as NftRule;
    if (op.verb === 'delete') {
      deleted.push(r.handle!);
      rows.splice(
        rows.findIndex((x) => x.handle === r.handle),
        1,
      );
    } else if (op.verb === 'add') rows.push({ handle: next++, key: r.comment });
    else if (op.verb === 'insert') {
      const at = rows.findIndex((x) => x.handle === r.position);
      if (at < 0) throw new Error(`insert before a handle not in the chain: ${r.position}`);
      rows.splice(at, 0, { handle: next++, key: r.comment });
    } else throw new Error(`unexpected ${op.verb}`);
  }
  return { keys: rows.map((x) => x.key), deleted };
}

const listed = (keys: (string | undefined)[]): ListedEntry[] => keys.map((key, i) => ({ handle: BigInt(i + 1), key }));

test('commonRun: the longest run of equal keys in order; an unknown listed rule matches nothing', (t) => {
  t.deepEqual(
    [...commonRun(['a', 'b', 'c', 'd'], ['a', 'x', 'c', 'd'])],
    [
      [0, 0],
      [2, 2],
      [3, 3],
    ],
  );
  t.deepEqual([...commonRun([undefined, 'a'], ['a'])], [[0, 1]]);
  t.is(commonRun([], ['a']).size, 0);
});

test('equal content: nothing planned', (t) => {
  const plan = new Plan();
  diffOwned(plan, chain, ['a', 'b'].map(want), listed(['a', 'b']));
  t.is(plan.size, 0);
});

test('one rule added in the middle and one removed: two operations, the rest keep their handles', (t) => {
  const have = listed(['a', 'b', 'c', 'd', 'e']);
  const wanted = ['a', 'b', 'x', 'c', 'e'];
  const plan = new Plan();
  diffOwned(plan, chain, wanted.map(want), have);
  t.is(plan.size, 2);
  const r = apply(plan, have);
  t.deepEqual(r.keys, wanted);
  t.deepEqual(r.deleted, [4n]);
});

test('reordered, foreign and appended rules: the chain reads as wanted; one group', (t) => {
  const cases: [(string | undefined)[], string[]][] = [
    [
      ['a', 'b', 'c'],
      ['c', 'b', 'a'],
    ],
    [
      ['a', undefined, 'b'],
      ['a', 'b', 'z'],
    ],
    [[], ['a', 'b']],
    [['a', 'b'], []],
    [
      ['x', 'a', 'y'],
      ['p', 'a', 'q', 'r'],
    ],
  ];
  for (const [h, w] of cases) {
    const plan = new Plan();
    diffOwned(plan, chain, w.map(want), listed(h));
    t.deepEqual(apply(plan, listed(h)).keys, w, `${JSON.stringify(h)} -> ${JSON.stringify(w)}`);
    t.true(plan.groups.length <= 1, 'one atomic group');
  }
});
