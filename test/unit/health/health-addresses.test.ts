// Health-check node ports bind to the node IPs nodePortAddresses selects, as upstream's
// service health server: a probe on another local address is refused; a new node IP moves
// every listener.
import { createServer } from 'node:net';
import test from 'ava';
import { FakeClock } from '../../../src/base/clock.ts';
import { memoryLogger } from '../../../src/base/logger.ts';
import { healthCheckAddresses } from '../../../src/daemon/health-addresses.ts';
import { ServiceHealthServers } from '../../../src/health/service-health.ts';

const node = (primaryIP: string) => ({ node: { name: 'n', known: true, zone: '', primaryIP, podCIDRs: [] } });
const LOCAL = ['127.0.0.1', '::1', '10.1.0.1', '192.168.7.3', 'fd01::1'];

test('which addresses: all, CIDRs over the local IPs, primary = the node IPs, localhost, and the fallback', (t) => {
  t.deepEqual(healthCheckAddresses([], [], LOCAL), { addresses: [''] });
  t.deepEqual(healthCheckAddresses(['all'], [], LOCAL), { addresses: [''] });
  t.deepEqual(healthCheckAddresses(['0.0.0.0/0', '::/0'], [], LOCAL), { addresses: [''] });
  t.deepEqual(healthCheckAddresses(['10.0.0.0/8', 'fd01::/64'], [], LOCAL), { addresses: ['10.1.0.1', 'fd01::1'] });
  t.deepEqual(
    healthCheckAddresses(['0.0.0.0/0'], [], LOCAL),
    { addresses: ['10.1.0.1', '127.0.0.1', '192.168.7.3'] },
    "one family's zero CIDR: its IPs",
  );
  t.deepEqual(healthCheckAddresses(['primary'], [node('10.1.0.1'), node('fd01::1')], LOCAL), {
    addresses: ['10.1.0.1', 'fd01::1'],
  });
  t.deepEqual(healthCheckAddresses(['localhost'], [], LOCAL), { addresses: ['127.0.0.1', '::1'] });
  const none = healthCheckAddresses(['primary'], [node('')], LOCAL);
  t.deepEqual(none.addresses, ['']);
  t.regex(none.fallback ?? '', /no node IP matches/);
});

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

async function probe(host: string, port: number): Promise<number | 'refused'> {
  try {
    return (await fetch(`http://${host}:${port}/`)).status;
  } catch {
    return 'refused';
  }
}

test('listeners bind only the chosen address and move when it changes (real sockets on 127.0.0.1 / 127.0.0.2)', async (t) => {
  const servers = new ServiceHealthServers({
    proxyHealthy: () => true,
    clock: new FakeClock(),
    logger: memoryLogger(),
  });
  t.teardown(() => servers.close());
  const port = await freePort();
  const wanted = new Map([['default/lb', { port, localEndpoints: 1 }]]);
  await servers.sync(wanted, ['127.0.0.1']);
  t.is(await probe('127.0.0.1', port), 200);
  t.is(await probe('127.0.0.2', port), 'refused', 'another local address does not answer');
  await servers.sync(wanted, ['127.0.0.2']);
  t.deepEqual(servers.listenAddresses(), ['127.0.0.2']);
  t.is(await probe('127.0.0.2', port), 200);
  t.is(await probe('127.0.0.1', port), 'refused', 'the old address is closed');
  await servers.sync(wanted, []);
  t.deepEqual(servers.listenAddresses(), [''], 'nothing chosen: every address');
  t.is(await probe('127.0.0.1', port), 200);
});
