import test from 'ava';
import { memoryLogger } from '../../../src/base/logger.ts';
import { LoadBalancingNotices } from '../../../src/daemon/load-balancing-notices.ts';
import type { EventRef } from '../../../src/sources/events.ts';

test('a refused load balancing is said once per Service and value: a warning and a Warning Event on the Service', (t) => {
  const log = memoryLogger();
  const n = new LoadBalancingNotices(log);
  const events: { ref: EventRef; type: string; reason: string; note: string }[] = [];
  n.events = { eventf: (ref, type, reason, _action, note) => events.push({ ref, type, reason, note }) };
  const svc = { namespace: 'shop', name: 'db' };
  for (let i = 0; i < 3; i++) n.notice(svc, 'least-connection', 'least-connection is not supported in nftables mode');
  n.notice(svc, 'maglev', 'unknown value "maglev"');
  t.is(events.length, 2);
  t.deepEqual(events[0]!.ref, { kind: 'Service', namespace: 'shop', name: 'db' });
  t.is(events[0]!.type, 'Warning');
  t.is(events[0]!.reason, 'LoadBalancingUnsupported');
  t.regex(events[0]!.note, /"least-connection" not applied: least-connection is not supported in nftables mode/);
  const warns = log.records.filter((r) => r.level === 'warn');
  t.is(warns.length, 2);
  t.is(warns[0]!.fields['service'], 'shop/db');
});
