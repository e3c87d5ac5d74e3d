import { createServer } from 'node:net';
import test from 'ava';
import { FakeClock } from '../../../src/base/clock.ts';
import { memoryLogger } from '../../../src/base/logger.ts';
import { serveWithRetry } from '../../../src/daemon/serve.ts';
import { ProxyHealth, startProxyHealthServer } from '../../../src/health/proxy-health.ts';

async function occupiedPort() {
  const s = createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  return {
    port: (s.address() as { port: number }).port,
    release: () => new Promise<void>((resolve) => s.close(() => resolve())),
  };
}

test('a taken healthz port is logged and retried until it frees (bindAddressHardFail false)', async (t) => {
  const clock = new FakeClock();
  const logger = memoryLogger();
  const health = new ProxyHealth({ clock, healthTimeoutMs: 60_000 });
  const busy = await occupiedPort();
  const address = `127.0.0.1:${busy.port}`;
  const served = await serveWithRetry({
    what: 'healthz',
    address,
    clock,
    logger,
    hardFail: false,
    start: () => startProxyHealthServer({ address, health }),
  });
  t.teardown(() => served.close());
  t.is(served.current(), undefined);
  t.is(logger.records[0]?.level, 'error');
  t.is(logger.records[0]?.fields.address, address);

  await busy.release();
  clock.advance(5000);
  const server = await served.started;
  t.is(server.port, busy.port);
  t.is((await fetch(`http://${address}/livez`)).status, 200);
});

test('with bindAddressHardFail a taken port is an error naming the server and address', async (t) => {
  const busy = await occupiedPort();
  t.teardown(() => busy.release());
  const address = `127.0.0.1:${busy.port}`;
  const clock = new FakeClock();
  const health = new ProxyHealth({ clock, healthTimeoutMs: 60_000 });
  const err = await t.throwsAsync(
    serveWithRetry({
      what: 'healthz',
      address,
      clock,
      hardFail: true,
      start: () => startProxyHealthServer({ address, health }),
    }),
  );
  t.is(err?.message, `failed to start healthz server on ${address}`);
  t.is((err?.cause as { code?: string }).code, 'EADDRINUSE');
  t.is(clock.pending, 0);
});
