// The control socket's queries as the daemon answers them, over the model and the nftables
// proxier on FakeNft: explain (one port, all, an unknown one), trace, its checked inputs, and
// --live handed to the live tracer with the predicted query.
import test from 'ava';
import type { IPFamily } from '../../../src/base/ip.ts';
import { memoryLogger } from '../../../src/base/logger.ts';
import { controlHandler, traceQuery } from '../../../src/daemon/control.ts';
import type { ExplainAnswer } from '../../../src/explain/format.ts';
import type { TraceResult } from '../../../src/explain/trace.ts';
import { createMetrics } from '../../../src/metrics/index.ts';
import type { ChangeTracker } from '../../../src/model/index.ts';
import { ep, newTracker, slice, svc } from '../model/helpers.ts';
import { fakeNftProxiers } from './fakes.ts';

async function setup() {
  const { t: tracker } = newTracker({ clusterCIDRs: ['10.244.0.0/16'] });
  tracker.onService(undefined, svc('web'));
  tracker.onEndpointSlice(slice('web-1', 'web', [ep('10.244.1.1')]), false);
  const proxiers = fakeNftProxiers(['IPv4']);
  const { desired, change } = tracker.checkout();
  await proxiers.proxiers.get('IPv4')!.sync(desired, change, new AbortController().signal);
  const lives: unknown[] = [];
  const handler = controlHandler({
    path: '/run/test.sock',
    trackers: new Map<IPFamily, ChangeTracker>([['IPv4', tracker]]),
    proxiers,
    metrics: createMetrics({ processMetrics: false }),
    localAddresses: () => [],
    logger: memoryLogger(),
    liveTrace: async (q, o) => {
      lives.push({ q, timeoutMs: o.timeoutMs });
      return { seen: false, waitedMs: o.timeoutMs, path: [] };
    },
  });
  return { handler: (r: Record<string, unknown>) => handler(r, new AbortController().signal), lives };
}

test('explain: one port with the kernel read back, all ports, an unknown one refused', async (t) => {
  const { handler } = await setup();
  const one = (await handler({ op: 'explain', target: 'default/web' })) as ExplainAnswer;
  t.is(one.ports.length, 1);
  t.true(one.ports[0]!.kernel!.agrees);
  t.is(one.sync.mode, 'nftables');
  t.deepEqual(one.daemon, { nodeName: 'node-a', mode: 'nftables', pid: process.pid, socket: '/run/test.sock' });
  t.deepEqual(((await handler({ op: 'ping' })) as { daemon: unknown }).daemon, one.daemon);
  t.false(one.sync.pending);
  t.is(((await handler({ op: 'explain' })) as ExplainAnswer).ports.length, 1);
  await t.throwsAsync(handler({ op: 'explain', target: 'default/nope' }), {
    message: /no Service port default\/nope \(the model has 1 service ports\)/,
  });
  await t.throwsAsync(handler({ op: 'explain', target: 7 }), { message: /NAMESPACE\/NAME/ });
  await t.throwsAsync(handler({ op: 'what' }), { message: /unknown query "what"/ });
});

test('trace: predicted; --live goes to the live tracer with the same query; bad inputs named', async (t) => {
  const { handler, lives } = await setup();
  const r = (await handler({ op: 'trace', from: '10.244.1.9', to: '10.96.0.10', port: 80 })) as TraceResult;
  t.is(r.verdict, 'dnat');
  t.is((r as TraceResult & { daemon: { nodeName: string } }).daemon.nodeName, 'node-a');
  const live = (await handler({
    op: 'trace',
    from: '10.244.1.9',
    to: '10.96.0.10',
    port: 80,
    protocol: 'tcp',
    live: { timeoutMs: 1500 },
  })) as { live: { seen: boolean } };
  t.false(live.live.seen);
  t.deepEqual(lives, [{ q: { from: '10.244.1.9', to: '10.96.0.10', port: 80, protocol: 'TCP' }, timeoutMs: 1500 }]);
  await t.throwsAsync(
    handler({ op: 'trace', from: '10.244.1.9', to: '10.96.0.10', port: 80, live: { timeoutMs: 600_000 } }),
    { message: /live.timeoutMs must be 100-60000/ },
  );
  t.throws(() => traceQuery({ from: '', to: '10.96.0.10', port: 80 }), { message: /from must be a non-empty string/ });
  t.throws(() => traceQuery({ from: 'a', to: 'b', port: 0 }), { message: /port must be a port number/ });
  t.throws(() => traceQuery({ from: 'a', to: 'b', port: 80, protocol: 'icmp' }), {
    message: /protocol ICMP is not TCP, UDP or SCTP/,
  });
  t.throws(() => traceQuery({ from: 'a', to: 'b', port: 80, inInterface: 3 }), {
    message: /inInterface must be a string/,
  });
});
