// The link drift watch (src/proxier/drift/link-watch.ts): a removal its target calls ours asks
// for a repair; changes made through our own sockets are passed over; lost announcements ask
// for one unless our own sync explains them or there is nothing to repair yet.
import test from 'ava';
import type { RouteChange, RouteMonitorHandlers } from '../../../../src/netlink/route/index.ts';
import { LinkDriftWatch } from '../../../../src/proxier/drift/link-watch.ts';
import { watchHarness } from './watch-harness.ts';

function setup(synced = true) {
  const harness = watchHarness<RouteMonitorHandlers>();
  const seen: (RouteChange | undefined)[] = [];
  const w = new LinkDriftWatch({
    ...harness.options,
    targets: [
      {
        linkDrifted: (c) => {
          seen.push(c);
          if (!synced) return undefined;
          return !c || (!c.added && c.kind === 'link') ? `gone ${c?.kind ?? '*'}` : undefined;
        },
      },
    ],
    families: ['IPv4'],
  });
  return { ...harness, w, seen };
}

const gone: RouteChange = { kind: 'link', added: false, index: 7, name: 'kube-ipvs0', portId: 555 };

test('a removal the target calls ours asks for a repair; other changes do not', (t) => {
  const s = setup();
  s.h().onChange(gone);
  s.h().onChange({ kind: 'addr', added: true, index: 7, address: '10.96.0.1', prefixLen: 32, portId: 555 });
  t.deepEqual(s.drifts, ['gone link']);
  t.is(s.seen.length, 2);
});

test('changes through our own sockets are passed over, before decoding and after', (t) => {
  const s = setup();
  t.true(s.h().skip!(111));
  t.false(s.h().skip!(555));
  t.false(s.h().skip!(0), 'the kernel (port 0) is never us');
  s.h().onChange({ ...gone, portId: 111 });
  t.deepEqual(s.drifts, []);
  t.is(s.seen.length, 0);
});

test('lost announcements: drift, unless during or just after our own sync, or nothing synced yet', (t) => {
  const s = setup();
  s.setSyncing(true);
  s.h().onOverflow();
  s.setSyncing(false);
  t.deepEqual(s.drifts, []);
  s.h().skip!(111);
  s.tick(500);
  s.h().onOverflow();
  t.deepEqual(s.drifts, [], 'just after a burst of ours');
  s.tick(5_000);
  s.h().onOverflow();
  t.deepEqual(s.drifts, ['rtnetlink notifications were lost (receive buffer full)']);

  const fresh = setup(false);
  fresh.h().onOverflow();
  t.deepEqual(fresh.drifts, [], 'nothing to repair before the first sync');
});
