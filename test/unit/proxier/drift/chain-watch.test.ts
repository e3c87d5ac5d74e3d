// Which nf_tables announcements mark our chains: rules of iptables-nft tables changed by
// someone else, told to the proxier of their family; our own and the built-in chains' changes
// do not; lost announcements mark everything unless our own sync explains them.
import test from 'ava';
import type { NftChange, NftMonitorHandlers } from '../../../../src/netlink/nftables/index.ts';
import type { IptTable } from '../../../../src/netlink/nftables/iptables/rule.ts';
import { ChainDriftWatch } from '../../../../src/proxier/drift/chain-watch.ts';
import type { DriftTarget } from '../../../../src/proxier/drift/chain-watch.ts';
import { watchHarness } from './watch-harness.ts';

function setup() {
  const w = watchHarness<NftMonitorHandlers>();
  const told: string[] = [];
  const target = (fam: string): DriftTarget => ({
    drifted: (table?: IptTable, chain?: string, what?: string, jump?: string) => {
      told.push(`${fam} ${table ?? '*'} ${chain ?? '*'} ${what ?? ''}${jump ? ` -j ${jump}` : ''}`.trim());
      return chain === undefined || chain.startsWith('KUBE-') || !!jump?.startsWith('KUBE-');
    },
  });
  new ChainDriftWatch({
    ...w.options,
    targets: new Map([
      ['ip', target('ip')],
      ['ip6', target('ip6')],
    ]),
  });
  const change = (c: Partial<NftChange>): void =>
    w.h().onChange({ kind: 'rule', added: false, family: 'ip', table: 'nat', object: 'KUBE-SVC-X', portId: 555, ...c });
  return { ...w, change, told };
}

test('a rule of one of our chains changed by someone else is told to its family and asks for a repair', (t) => {
  const s = setup();
  s.change({});
  s.change({ family: 'ip6', table: 'filter', object: 'KUBE-FORWARD', added: true });
  s.change({ kind: 'chain', object: 'KUBE-SEP-Y' });
  t.deepEqual(s.told, ['ip nat KUBE-SVC-X rule', 'ip6 filter KUBE-FORWARD rule', 'ip nat KUBE-SEP-Y chain']);
  t.is(s.drifts.length, 3);
});

test('a removed rule of a built-in chain is told with its jump; ours asks for a repair, others do not', (t) => {
  const s = setup();
  s.change({ object: 'PREROUTING', jump: 'KUBE-SERVICES' });
  s.change({ object: 'PREROUTING', jump: 'DOCKER' });
  t.deepEqual(s.told, ['ip nat PREROUTING rule -j KUBE-SERVICES', 'ip nat PREROUTING rule -j DOCKER']);
  t.deepEqual(s.drifts, ['removed rule ip nat PREROUTING (-j KUBE-SERVICES)']);
});

test('our own changes, other tables, a chain added and a chain not ours ask for nothing', (t) => {
  const s = setup();
  s.change({ portId: 111 });
  s.change({ table: 'kube-proxy-ts' });
  s.change({ family: 'inet' });
  s.change({ kind: 'chain', added: true });
  s.change({ object: 'DOCKER' });
  t.deepEqual(s.told, ['ip nat DOCKER rule']);
  t.deepEqual(s.drifts, []);
});

test('a table deleted, or announcements lost outside our syncs, mark everything', (t) => {
  const s = setup();
  s.change({ kind: 'table', object: undefined });
  t.deepEqual(s.told, ['ip * *']);
  s.told.length = 0;
  s.setSyncing(true);
  s.h().onOverflow();
  s.setSyncing(false);
  s.change({ portId: 111 });
  s.h().onOverflow();
  t.deepEqual(s.told, [], 'during or just after our own sync: ours');
  s.tick(5_000);
  s.h().onOverflow();
  t.deepEqual(s.told, ['ip * *', 'ip6 * *']);
  t.is(s.drifts.length, 2);
});

test('paused while our full syncs run: the socket is closed, and opened again after as many resumes', (t) => {
  let opened = 0;
  let open = 0;
  const w = new ChainDriftWatch({
    ...watchHarness<NftMonitorHandlers>().options,
    targets: new Map(),
    monitor: () => {
      opened++;
      open++;
      return { localPort: 1, close: () => void open-- };
    },
  });
  t.is(open, 1);
  w.pause();
  w.pause();
  t.is(open, 0);
  w.resume();
  t.is(open, 0);
  w.resume();
  t.is(open, 1);
  w.resume();
  t.is(opened, 2, 'an extra resume opens nothing');
  w.close();
  w.pause();
  w.resume();
  t.is(open, 0, 'closed for good');
});
