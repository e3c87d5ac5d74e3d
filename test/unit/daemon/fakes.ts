// Fakes for the daemon's wiring tests: a source driven by the test, nftables proxiers over
// FakeNft, and a ready-made configuration.
import { parseCommandLine } from '../../../src/config/index.ts';
import type { ProxyConfig } from '../../../src/config/index.ts';
import type { IPFamily } from '../../../src/base/ip.ts';
import { memoryLogger } from '../../../src/base/logger.ts';
import { FakeNft } from '../../../src/netlink/nftables/fake/index.ts';
import { NftablesProxier, TABLE } from '../../../src/proxier/nftables/index.ts';
import type { Proxier } from '../../../src/proxier/types.ts';
import type { Source, SourceHandler } from '../../../src/sources/index.ts';
import type { ProxierSet } from '../../../src/daemon/modes/index.ts';

export function config(argv: string[] = []): ProxyConfig {
  const r = parseCommandLine(argv);
  if (r.kind !== 'run') throw new Error(`bad test flags: ${r.stderr}`);
  return r.config;
}

export class FakeSource implements Source {
  handler: SourceHandler | undefined;
  stopped = false;
  private synced = false;
  private release!: () => void;
  private readonly syncedP = new Promise<void>((resolve) => (this.release = resolve));

  start(handler: SourceHandler): Promise<void> {
    this.handler = handler;
    return Promise.resolve();
  }
  stop(): Promise<void> {
    this.stopped = true;
    return Promise.resolve();
  }
  hasSynced(): boolean {
    return this.synced;
  }
  waitForSync(signal?: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      void this.syncedP.then(resolve);
      signal?.addEventListener('abort', () => reject(new Error('aborted')));
    });
  }
  /** Marks Services and EndpointSlices listed. */
  markSynced(): void {
    this.synced = true;
    this.handler?.onSynced('Service');
    this.handler?.onSynced('EndpointSlice');
    this.release();
  }
}

export interface FakeProxiers extends ProxierSet {
  nft: Map<IPFamily, FakeNft>;
  closed: boolean;
}

export function fakeNftProxiers(families: readonly IPFamily[]): FakeProxiers {
  const nft = new Map<IPFamily, FakeNft>();
  const proxiers = new Map<IPFamily, Proxier>();
  for (const f of families) {
    const n = new FakeNft({ family: f === 'IPv4' ? 'ip' : 'ip6', table: TABLE });
    nft.set(f, n);
    proxiers.set(f, new NftablesProxier({ nft: n, logger: memoryLogger() }));
  }
  const set: FakeProxiers = {
    mode: 'nftables',
    proxiers,
    nft,
    closed: false,
    init: () => Promise.resolve(),
    close: () => {
      set.closed = true;
    },
  };
  return set;
}

/** Resolves when f() is true, polling on the event loop (real timers). */
export async function eventually(f: () => boolean, timeoutMs = 3000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!f()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}
