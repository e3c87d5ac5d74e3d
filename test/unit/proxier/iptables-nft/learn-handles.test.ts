// learnHandles: after a full sync, the rules it added to shared chains take the handles of
// listed rules with their keys that no entry of the same chain holds yet.
import test from 'ava';
import type { NftRule } from '../../../../src/netlink/nftables/index.ts';
import type { IptTable } from '../../../../src/netlink/nftables/iptables/rule.ts';
import type { RuleCodec } from '../../../../src/proxier/iptables-nft/codec.ts';
import { learnHandles } from '../../../../src/proxier/iptables-nft/learn-handles.ts';
import type { SharedEntry, WriterState } from '../../../../src/proxier/iptables-nft/state.ts';
import type { TableClient } from '../../../../src/proxier/iptables-nft/writer-types.ts';

/** Keys are the rules' comments here. */
const codec: RuleCodec = {
  encode: () => {
    throw new Error('not used');
  },
  key: () => {
    throw new Error('not used');
  },
  kernelKey: (r: NftRule) => r.comment,
  jumpTarget: () => undefined,
};

function client(table: IptTable, chains: Record<string, [bigint, string][]>): TableClient {
  return {
    scope: { family: 'ip', table },
    listRules: (chain?: string) =>
      Promise.resolve(
        (chains[chain ?? ''] ?? []).map(([handle, comment]): NftRule => ({
          kind: 'rule',
          chain: chain!,
          exprs: [],
          handle,
          comment,
        })),
      ),
  } as unknown as TableClient;
}

const entry = (table: IptTable, chain: string, key: string, handle?: bigint): SharedEntry => ({
  table,
  chain,
  key,
  handle,
});

test('a handle held in one table does not hide the rule with the same handle in another (handles are per table)', async (t) => {
  // A restart after a partial sync: nat KUBE-SERVICES rules kept from before (handles 19, 20),
  // filter INPUT's jumps new; the kernel numbered one of them 19 too.
  const kept = [entry('nat', 'KUBE-SERVICES', 'svc-a', 19n), entry('nat', 'KUBE-SERVICES', 'svc-b', 20n)];
  const jumps = [entry('filter', 'INPUT', 'to-firewall'), entry('filter', 'INPUT', 'to-services')];
  const state: WriterState = {
    skeleton: { chains: [], content: new Map(), shared: jumps },
    units: new Map([['a', { chains: [], content: new Map(), shared: kept }]]),
  };
  const clients = new Map<IptTable, TableClient>([
    [
      'nat',
      client('nat', {
        'KUBE-SERVICES': [
          [19n, 'svc-a'],
          [20n, 'svc-b'],
        ],
      }),
    ],
    [
      'filter',
      client('filter', {
        INPUT: [
          [19n, 'to-firewall'],
          [21n, 'to-services'],
        ],
      }),
    ],
  ]);
  t.is(await learnHandles(state, clients, codec), 0);
  t.deepEqual(
    jumps.map((e) => e.handle),
    [19n, 21n],
  );
});

test('within a chain, a listed rule an entry already holds is not given to another entry with its key', async (t) => {
  const held = entry('nat', 'KUBE-SERVICES', 'same', 5n);
  const fresh = entry('nat', 'KUBE-SERVICES', 'same');
  const state: WriterState = {
    skeleton: { chains: [], content: new Map(), shared: [] },
    units: new Map([['a', { chains: [], content: new Map(), shared: [held, fresh] }]]),
  };
  const clients = new Map<IptTable, TableClient>([
    [
      'nat',
      client('nat', {
        'KUBE-SERVICES': [
          [5n, 'same'],
          [9n, 'same'],
        ],
      }),
    ],
  ]);
  t.is(await learnHandles(state, clients, codec), 0);
  t.is(fresh.handle, 9n);
  const lost = entry('nat', 'KUBE-SERVICES', 'gone');
  const state2: WriterState = {
    skeleton: { chains: [], content: new Map(), shared: [] },
    units: new Map([['b', { chains: [], content: new Map(), shared: [lost] }]]),
  };
  t.is(await learnHandles(state2, clients, codec), 1, 'a rule not listed is counted missing');
});
