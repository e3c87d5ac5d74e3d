// The iptables mode's cold full sync with the socket's send buffer as the batch limit, at three
// limits: Debian's stock net.core.wmem_max (212,992: ~416 KiB batches), 8 MiB asked for (what a
// raised wmem_max allows), and SO_SNDBUFFORCE sized for the whole ruleset in one batch, as
// iptables-nft-restore does. Each run in a fresh namespace.
//
//   npx node test/bench/iptables-batch-size.ts [SERVICES] [RUNS]   (root; default 10,000 × 1)

import { DAEMON_V8_OPTIONS } from '../../src/daemon/v8-options.ts';
import type { SocketOptions } from '../../src/netlink/core/index.ts';
import { Netns } from '../helpers/netns.ts';
import type { SyncTiming } from './iptables-agent.ts';
import { formatMs } from './stats.ts';

const AGENT = new URL('./iptables-agent.ts', import.meta.url).href;

const LIMITS: readonly { name: string; sock: SocketOptions }[] = [
  { name: 'SO_SNDBUF 212,992 (stock cap)', sock: { sendBufferBytes: 212_992 } },
  { name: 'SO_SNDBUF 8 MiB', sock: { sendBufferBytes: 8 << 20 } },
  { name: 'SO_SNDBUFFORCE 1 GiB (one batch)', sock: { sendBufferBytes: 1 << 30, forceBuffers: true } },
];

async function once(n: number, sock: SocketOptions): Promise<SyncTiming> {
  const ns = await Netns.create('iptbs');
  try {
    const a = await ns.agent(DAEMON_V8_OPTIONS);
    await a.call(AGENT, 'start', n, sock);
    const cold = await a.call<SyncTiming>(AGENT, 'fullSync');
    await a.call(AGENT, 'stop');
    return cold;
  } finally {
    await ns.destroy();
  }
}

const n = Number(process.argv[2] ?? 10_000);
const runs = Number(process.argv[3] ?? 1);
for (let r = 0; r < runs; r++) {
  for (const { name, sock } of LIMITS) {
    const c = await once(n, sock);
    console.log(
      `${n} Services, ${name}: total ${formatMs(c.totalMs)}, kernel ${formatMs(c.kernelMs)}, ` +
        `plan ${formatMs(c.planMs)}, ${c.batches} batches, longest ${formatMs(c.longestBatchMs)}; ` +
        `CPU user ${formatMs(c.cpu!.userMs)}, system ${formatMs(c.cpu!.systemMs)}`,
    );
  }
}
