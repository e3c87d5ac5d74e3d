// MirrorTrust: the writer's mirror stands in for the kernel only after a sync succeeded with
// nothing announced meanwhile; drift during a sync is for the next one.
import test from 'ava';
import { MirrorTrust } from '../../../../src/proxier/iptables-nft/trust.ts';

test('new: a full sync is due and nothing is trusted; a success makes it trusted', (t) => {
  const m = new MirrorTrust();
  t.true(m.fullDue);
  t.false(m.begin(), 'the first full sync may not trust the mirror');
  t.true(m.fullDue, 'due until the sync succeeds');
  m.succeeded();
  t.false(m.fullDue);
  t.true(m.trusted);
  t.true(m.begin(), 'the next sync may trust it');
});

test('drift of anything during a sync: the sync still ends, the next one is full and trusts nothing', (t) => {
  const m = new MirrorTrust();
  m.begin();
  m.succeeded();
  m.begin();
  m.distrustAll();
  m.succeeded();
  t.true(m.fullDue);
  t.false(m.trusted);
  t.false(m.begin());
});

test('a tainted chain: the next sync is full, trusts the rest, and takes the chain once', (t) => {
  const m = new MirrorTrust();
  m.begin();
  m.succeeded();
  m.taint('nat/KUBE-SVC-X');
  t.true(m.fullDue);
  t.true(m.begin(), 'one chain changed: the rest of the mirror holds');
  t.deepEqual([...m.takeTainted()], ['nat/KUBE-SVC-X']);
  t.deepEqual([...m.takeTainted()], []);
  m.succeeded();
  t.false(m.fullDue);
  m.begin();
  m.takeTainted();
  m.taint('nat/KUBE-SEP-Y'); // while that sync runs
  m.succeeded();
  t.true(m.fullDue, 'announced during the sync: for the next one');
  t.true(m.begin());
  t.deepEqual([...m.takeTainted()], ['nat/KUBE-SEP-Y']);
});

test('a failed sync (no success reported) leaves a full sync due and the mirror untrusted; lost() likewise', (t) => {
  const m = new MirrorTrust();
  m.begin();
  m.succeeded();
  m.begin();
  t.true(m.fullDue);
  t.false(m.trusted);
  m.succeeded();
  m.lost();
  t.true(m.fullDue);
  t.false(m.begin());
});
