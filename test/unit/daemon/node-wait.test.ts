// The first sync's wait for this node's Node: passes at once when it is known, waits for one
// with an address, and gives up (logged) after its time-out, as upstream's getNodeIPs.
import test from 'ava';
import { FakeClock } from '../../../src/base/clock.ts';
import { memoryLogger } from '../../../src/base/logger.ts';
import { NodeWait } from '../../../src/daemon/node-wait.ts';

const withAddress = { metadata: { name: 'a' }, status: { addresses: [{ type: 'InternalIP', address: '10.0.0.1' }] } };
const tick = () => new Promise((r) => setImmediate(r));

function setup(timeoutMs = 30_000) {
  const clock = new FakeClock();
  const logger = memoryLogger();
  return { clock, logger, wait: new NodeWait({ nodeName: 'a', timeoutMs, clock, logger }) };
}

test('a Node known before the sources synced: no wait', async (t) => {
  const { wait, logger } = setup();
  wait.node(withAddress);
  await wait.gate(Promise.resolve(), new AbortController().signal);
  t.false(logger.records.some((r) => r.msg.includes('Waiting')));
});

test('waits for a Node with an address; one without does not count', async (t) => {
  const { wait, logger } = setup();
  let passed = false;
  void wait.gate(Promise.resolve(), new AbortController().signal).then(() => (passed = true));
  await tick();
  t.true(logger.records.some((r) => r.msg.includes("Waiting for this node's Node")));
  wait.node({ metadata: { name: 'a' }, status: { addresses: [] } });
  await tick();
  t.false(passed);
  wait.node(withAddress);
  await tick();
  t.true(passed);
  t.true(logger.records.some((r) => r.msg === 'Node arrived; starting the first sync'));
});

test('gives up after its time-out, logged; standalone (0) never waits', async (t) => {
  const { wait, logger, clock } = setup(30_000);
  let passed = false;
  void wait.gate(Promise.resolve(), new AbortController().signal).then(() => (passed = true));
  await tick();
  clock.advance(29_999);
  await tick();
  t.false(passed);
  clock.advance(1);
  await tick();
  t.true(passed);
  t.true(logger.records.some((r) => r.level === 'warn' && r.msg.startsWith('Node not seen in time')));
  const standalone = setup(0);
  await standalone.wait.gate(Promise.resolve(), new AbortController().signal);
  t.is(standalone.logger.records.length, 0);
});
