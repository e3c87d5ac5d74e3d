// The counters of retired proxy ports: kept by name for the most recent RETIRED_NAMES_KEPT, then
// summed into one record, so Service churn cannot grow the daemon's memory without bound while the
// totals (Prometheus counters) never go backwards. Real UDP sockets on the loopback address.
import test from 'ava';
import { createSocket } from 'node:dgram';
import { memoryLogger } from '../../../../src/base/logger.ts';
import { createProxyPorts } from '../../../../src/proxier/userspace/proxy/index.ts';
import type { ProxyPortSpec, ProxyStats } from '../../../../src/proxier/userspace/proxy/index.ts';
import { RETIRED_NAMES_KEPT } from '../../../../src/proxier/userspace/proxy/ports.ts';

const spec = (name: string): ProxyPortSpec => ({
  id: name,
  name,
  protocol: 'UDP',
  backends: [],
  affinitySeconds: 0,
});

const total = (s: ProxyStats, pick: 'bytesIn' | 'refused'): number =>
  [...s.perPort.values(), s.retiredOther].reduce((sum, p) => sum + p[pick], 0);

async function sendTo(port: number, payload: string): Promise<void> {
  const client = createSocket('udp4');
  await new Promise<void>((resolve, reject) =>
    client.send(payload, port, '127.0.0.1', (err) => (err ? reject(err) : resolve())),
  );
  client.close();
}

test('retired ports: the newest names are kept, older ones summed; totals never go backwards', async (t) => {
  const ports = createProxyPorts({
    family: 'IPv4',
    listenIP: '127.0.0.1',
    udpIdleTimeoutMs: 250,
    logger: memoryLogger([]),
  });
  t.teardown(() => ports.close());

  // The first port sees one datagram (no endpoint: refused) before it is retired.
  const first = (await ports.apply([spec('default/first:p')])).ports.get('default/first:p')!;
  await sendTo(first, 'hello');
  for (let i = 0; i < 200 && ports.stats().perPort.get('default/first:p')?.refused !== 1; i++)
    await new Promise((r) => setTimeout(r, 10));
  t.like(ports.stats().perPort.get('default/first:p'), { refused: 1, bytesIn: 5 });

  // Then a churn of RETIRED_NAMES_KEPT + 10 other names, each opened and retired.
  for (let i = 0; i < RETIRED_NAMES_KEPT + 10; i++) await ports.apply([spec(`default/churn-${i}:p`)]);
  await ports.apply([]);

  const s = ports.stats();
  t.is(s.perPort.size, RETIRED_NAMES_KEPT, 'names kept are bounded');
  t.false(s.perPort.has('default/first:p'), 'the oldest names were folded');
  t.true(s.perPort.has(`default/churn-${RETIRED_NAMES_KEPT + 9}:p`), 'the newest name is kept');
  t.like(s.retiredOther, { refused: 1, bytesIn: 5 }, 'the folded counters live on in the sum');
  t.is(total(s, 'refused'), 1);
  t.is(total(s, 'bytesIn'), 5);
});
