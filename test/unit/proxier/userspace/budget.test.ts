// The descriptor budget in the data path, with real sockets on the loopback address: a port's
// connections stop at its half of the budget, the next is reset at once and counted, a closed
// connection gives its descriptors back; UDP clients past it are dropped and counted; the
// proxy sockets count as one each.
import test from 'ava';
import { createServer, connect, type Socket } from 'node:net';
import { createSocket } from 'node:dgram';
import type { AddressInfo } from 'node:net';
import { DescriptorBudget } from '../../../../src/base/descriptor-budget.ts';
import { memoryLogger } from '../../../../src/base/logger.ts';
import { createProxyPorts } from '../../../../src/proxier/userspace/proxy/index.ts';
import type { ProxyPortSpec } from '../../../../src/proxier/userspace/proxy/index.ts';

const until = async (what: string, f: () => boolean): Promise<void> => {
  for (let i = 0; i < 300 && !f(); i++) await new Promise((r) => setTimeout(r, 10));
  if (!f()) throw new Error(`not reached: ${what}`);
};

/** One connection through the proxy: 'proxied' once the endpoint's greeting arrives, else how it ended. */
const through = (port: number, open: Socket[]): Promise<string> =>
  new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    s.once('data', () => {
      open.push(s);
      resolve('proxied');
    });
    s.on('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? 'error'));
    s.once('close', () => resolve('closed'));
  });

test('TCP: a port holds at most half the budget; the next connection is reset and counted', async (t) => {
  const endpoint = createServer((c) => {
    c.on('error', () => undefined);
    c.write('hi');
  });
  await new Promise<void>((r) => endpoint.listen(0, '127.0.0.1', r));
  t.teardown(() => endpoint.close());
  // 10 descriptors: a port may hold 5, so two connections (2 each); the listener holds one.
  const budget = new DescriptorBudget(10);
  const ports = createProxyPorts({
    family: 'IPv4',
    listenIP: '127.0.0.1',
    udpIdleTimeoutMs: 250,
    logger: memoryLogger([]),
    budget,
  });
  t.teardown(() => ports.close());
  const spec: ProxyPortSpec = {
    id: 'a',
    name: 'default/a:p',
    protocol: 'TCP',
    backends: [{ ip: '127.0.0.1', port: (endpoint.address() as AddressInfo).port }],
    affinitySeconds: 0,
  };
  const port = (await ports.apply([spec])).ports.get('a')!;
  t.is(budget.inUse, 1, 'the listener');
  const open: Socket[] = [];
  t.teardown(() => open.forEach((s) => s.destroy()));
  t.deepEqual([await through(port, open), await through(port, open)], ['proxied', 'proxied']);
  t.is(budget.inUse, 5);
  t.is(await through(port, open), 'ECONNRESET');
  t.like(ports.stats().perPort.get('default/a:p'), { overBudget: 1, refused: 0, active: 2 });
  open.pop()!.destroy();
  await until('the connection to be released', () => budget.inUse === 3);
  t.is(await through(port, open), 'proxied', 'a released connection makes room');
  await ports.apply([]);
  for (const s of open) s.destroy();
  await until('every descriptor to be released', () => budget.inUse === 0);
});

test('UDP: clients past the budget are dropped and counted', async (t) => {
  const endpoint = createSocket('udp4');
  endpoint.on('message', (m, r) => endpoint.send(m, r.port, r.address));
  await new Promise<void>((r) => endpoint.bind(0, '127.0.0.1', r));
  t.teardown(() => endpoint.close());
  const budget = new DescriptorBudget(5); // a port may hold 2 (the listener is not its)
  const ports = createProxyPorts({
    family: 'IPv4',
    listenIP: '127.0.0.1',
    udpIdleTimeoutMs: 60_000,
    logger: memoryLogger([]),
    budget,
  });
  t.teardown(() => ports.close());
  const spec: ProxyPortSpec = {
    id: 'u',
    name: 'default/u:p',
    protocol: 'UDP',
    backends: [{ ip: '127.0.0.1', port: endpoint.address().port }],
    affinitySeconds: 0,
  };
  const port = (await ports.apply([spec])).ports.get('u')!;
  const clients = [createSocket('udp4'), createSocket('udp4'), createSocket('udp4')];
  t.teardown(() => clients.forEach((c) => c.close()));
  for (const c of clients) {
    c.send('x', port, '127.0.0.1');
    await until('the datagram to be seen', () => ports.stats().perPort.get('default/u:p')!.bytesIn >= 1);
  }
  await until('three datagrams', () => ports.stats().perPort.get('default/u:p')!.bytesIn === 3);
  t.like(ports.stats().perPort.get('default/u:p'), { accepted: 2, active: 2, overBudget: 1 });
  t.is(budget.inUse, 3, 'the socket and two associations');
  await ports.apply([]);
  t.is(budget.inUse, 0);
});
