// Which announcements ask for a repair: changes to our table, in a family we program, made
// by someone else; lost announcements unless our own sync explains them.
import test from 'ava';
import { memoryLogger, type LogRecord } from '../../../../src/base/logger.ts';
import type { NftChange, NftMonitorHandlers } from '../../../../src/netlink/nftables/index.ts';
import { NftDriftWatch } from '../../../../src/proxier/nftables/drift-watch.ts';

function setup() {
  let h!: NftMonitorHandlers;
  let closed = false;
  let now = 10_000;
  let syncing = false;
  const drifts: string[] = [];
  const records: LogRecord[] = [];
  const w = new NftDriftWatch({
    families: ['ip'],
    ownPorts: new Set([111, 222]),
    onDrift: (why) => drifts.push(why),
    syncing: () => syncing,
    logger: memoryLogger(records),
    now: () => now,
    monitor: (handlers) => {
      h = handlers;
      return { localPort: 999, close: () => void (closed = true) };
    },
  });
  const change = (c: Partial<NftChange>): void =>
    h.onChange({
      kind: 'table',
      added: false,
      family: 'ip',
      table: 'kube-proxy-ts',
      object: undefined,
      portId: 555,
      ...c,
    });
  return {
    w,
    h: () => h,
    change,
    drifts,
    records,
    closed: () => closed,
    tick: (ms: number) => void (now += ms),
    setSyncing: (v: boolean) => void (syncing = v),
  };
}

test('a foreign change to our table asks for a repair; ours, other tables and families do not', (t) => {
  const s = setup();
  t.true(s.h().skip?.(111), 'our own announcements are passed over before decoding');
  t.false(s.h().skip?.(555));
  t.false(s.h().skip?.(0));
  s.change({ portId: 111 });
  s.change({ portId: 222, kind: 'element', object: 'service-ips' });
  s.change({ table: 'filter' });
  s.change({ family: 'ip6' });
  s.change({ family: 'inet' });
  s.change({ kind: 'generation', table: undefined });
  s.change({ kind: 'element', object: 'affinity-ABCDEFGH-default/web/tcp/p__10.0.0.1/80' });
  t.deepEqual(s.drifts, []);
  s.change({});
  s.change({ kind: 'element', object: 'service-ips', portId: 0 });
  s.change({ kind: 'rule', added: true, object: 'nat-prerouting' });
  t.deepEqual(s.drifts, [
    'removed table ip kube-proxy-ts (port 555)',
    'removed element ip kube-proxy-ts service-ips (port 0)',
    'added rule ip kube-proxy-ts nat-prerouting (port 555)',
  ]);
  t.is(s.records.filter((r) => r.level === 'warn').length, 1, 'one warning per burst');
  s.w.close();
  t.true(s.closed());
});

test('lost announcements: a repair, unless our own sync runs or just ran', (t) => {
  const s = setup();
  s.setSyncing(true);
  s.h().onOverflow();
  s.setSyncing(false);
  s.change({ portId: 111 });
  s.tick(500);
  s.h().onOverflow();
  t.deepEqual(s.drifts, []);
  s.tick(5_000);
  s.h().onOverflow();
  t.deepEqual(s.drifts, ['nf_tables notifications were lost (receive buffer full)']);
});
