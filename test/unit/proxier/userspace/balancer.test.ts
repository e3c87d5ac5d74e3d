// The userspace proxy's round robin with ClientIP affinity (upstream's LoadBalancerRR), driven
// by a fake clock.
import test from 'ava';
import { FakeClock } from '../../../../src/base/clock.ts';
import { RoundRobinBalancer } from '../../../../src/proxier/userspace/proxy/balancer.ts';

const b = (i: number) => ({ ip: `10.244.${i}.2`, port: 8080 });
const names = (xs: ({ ip: string } | undefined)[]) => xs.map((x) => x?.ip.split('.')[2] ?? '-').join('');

test('round robin: each endpoint in turn, whatever the client', (t) => {
  const lb = new RoundRobinBalancer(new FakeClock(), [b(1), b(2), b(3)]);
  const picks = Array.from({ length: 7 }, (_, i) => lb.next(`10.1.0.${i}`));
  t.is(names(picks), '1231231');
});

test('no endpoints: undefined', (t) => {
  const lb = new RoundRobinBalancer(new FakeClock(), []);
  t.is(lb.next('10.1.0.2'), undefined);
  lb.update([b(1)], 0);
  t.deepEqual(lb.next('10.1.0.2'), b(1));
  lb.update([], 0);
  t.is(lb.next('10.1.0.2'), undefined);
});

test('affinity: a client sticks to its endpoint while it keeps coming within the timeout', (t) => {
  const clock = new FakeClock();
  const lb = new RoundRobinBalancer(clock, [b(1), b(2), b(3)], 10);
  const first = lb.next('10.1.0.2');
  t.deepEqual(lb.next('10.1.0.3'), b(2), 'another client takes the rotation on');
  for (let i = 0; i < 5; i++) {
    clock.advance(9_000); // each use restarts the entry's clock
    t.deepEqual(lb.next('10.1.0.2'), first);
  }
});

test('affinity expires after the timeout without use; the client then takes the rotation', (t) => {
  const clock = new FakeClock();
  const lb = new RoundRobinBalancer(clock, [b(1), b(2), b(3)], 10);
  t.deepEqual(lb.next('10.1.0.2'), b(1));
  clock.advance(10_000);
  t.deepEqual(lb.next('10.1.0.2'), b(2));
  t.deepEqual(lb.next('10.1.0.2'), b(2), 'and sticks to the new one');
});

test('sessionAffinityReset (a failed dial) moves the client on and records the new endpoint', (t) => {
  const lb = new RoundRobinBalancer(new FakeClock(), [b(1), b(2), b(3)], 10);
  t.deepEqual(lb.next('10.1.0.2'), b(1));
  t.deepEqual(lb.next('10.1.0.2', true), b(2));
  t.deepEqual(lb.next('10.1.0.2'), b(2));
});

test('an affinity entry whose endpoint is removed is dropped; the others stay', (t) => {
  const lb = new RoundRobinBalancer(new FakeClock(), [b(1), b(2), b(3)], 10);
  t.deepEqual(lb.next('10.1.0.2'), b(1));
  t.deepEqual(lb.next('10.1.0.3'), b(2));
  lb.update([b(2), b(3)], 10);
  t.is(lb.affinityEntries, 1);
  t.deepEqual(lb.next('10.1.0.3'), b(2));
  t.deepEqual(lb.next('10.1.0.2'), b(3), 'the orphaned client takes the rotation');
});

test('update: the same endpoints keep the rotation; a change goes on from the endpoint next in line', (t) => {
  const lb = new RoundRobinBalancer(new FakeClock(), [b(1), b(2), b(3)]);
  lb.next('c');
  lb.update([b(1), b(2), b(3)], 0);
  t.deepEqual(lb.next('c'), b(2), 'an unchanged list does not restart at the first');
  lb.update([b(4), b(3), b(1)], 0);
  t.deepEqual(lb.next('c'), b(3), 'b3 was next and is still there');
  t.deepEqual(lb.next('c'), b(1));
  t.deepEqual(lb.next('c'), b(4));
  lb.update([b(5)], 0);
  t.deepEqual(lb.next('c'), b(5));
});

test('turning affinity off forgets every entry; sweep drops expired ones', (t) => {
  const clock = new FakeClock();
  const lb = new RoundRobinBalancer(clock, [b(1), b(2)], 5);
  lb.next('a');
  clock.advance(3000);
  lb.next('b');
  clock.advance(2500);
  lb.sweep();
  t.is(lb.affinityEntries, 1, 'a expired, b did not');
  lb.update([b(1), b(2)], 0);
  t.is(lb.affinityEntries, 0);
});

test('round robin spreads evenly over many picks', (t) => {
  const lb = new RoundRobinBalancer(new FakeClock(), [b(1), b(2), b(3)]);
  const count = new Map<string, number>();
  for (let i = 0; i < 300; i++) {
    const ip = lb.next('c')!.ip;
    count.set(ip, (count.get(ip) ?? 0) + 1);
  }
  t.deepEqual([...count.values()], [100, 100, 100]);
});

test('a bad affinity timeout is refused by name', (t) => {
  t.throws(() => new RoundRobinBalancer(new FakeClock(), [], -1), { message: /session affinity timeout -1/ });
});
