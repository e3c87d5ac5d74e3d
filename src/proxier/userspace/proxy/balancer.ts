// Round robin over one service port's endpoints with ClientIP session affinity: upstream's
// LoadBalancerRR (pkg/proxy/userspace/roundrobin.go), one instance per service port.
//
// next(clientIP, sessionAffinityReset): with affinity and no reset, a client whose entry was
// used within the timeout gets the same endpoint again (and the entry's clock restarts);
// otherwise the rotation's next endpoint, recorded as the client's new affinity. A failed dial
// asks again with sessionAffinityReset, so the client moves on instead of retrying a dead one.
//
// Unlike upstream, update() keeps the rotation where it was when the endpoints change (upstream
// shuffles and restarts at 0): the proxier already orders them, and a restart would send the next
// connections to the first endpoints after every unrelated resync.

import type { Clock } from '../../../base/clock.ts';
import type { ProxyBackend } from './types.ts';

interface Affinity {
  backend: ProxyBackend;
  lastUsed: number;
}

const key = (b: ProxyBackend): string => `${b.ip}|${b.port}`;

export class RoundRobinBalancer {
  private backends: readonly ProxyBackend[] = [];
  private index = 0;
  private ttlMs = 0;
  private readonly affinity = new Map<string, Affinity>();
  private readonly clock: Clock;

  constructor(clock: Clock, backends: readonly ProxyBackend[] = [], affinitySeconds = 0) {
    this.clock = clock;
    this.update(backends, affinitySeconds);
  }

  get size(): number {
    return this.backends.length;
  }

  /** Client addresses with an affinity entry (expired ones included until sweep()). */
  get affinityEntries(): number {
    return this.affinity.size;
  }

  /**
   * Takes a new endpoint list and affinity timeout. The same endpoints in the same order: nothing
   * changes. Otherwise the rotation goes on from the endpoint that was next when it is still
   * present, and affinity entries of endpoints that are gone are dropped.
   */
  update(backends: readonly ProxyBackend[], affinitySeconds: number): void {
    if (!Number.isFinite(affinitySeconds) || affinitySeconds < 0)
      throw new Error(`session affinity timeout ${affinitySeconds}: must be a number of seconds >= 0`);
    this.ttlMs = affinitySeconds * 1000;
    if (this.ttlMs === 0) this.affinity.clear();
    if (sameList(this.backends, backends)) return;
    const upNext = this.backends[this.index];
    this.backends = [...backends];
    const kept = upNext === undefined ? -1 : this.backends.findIndex((b) => key(b) === key(upNext));
    this.index = kept >= 0 ? kept : this.backends.length === 0 ? 0 : this.index % this.backends.length;
    if (this.affinity.size === 0) return;
    const present = new Set(this.backends.map(key));
    for (const [client, a] of this.affinity) if (!present.has(key(a.backend))) this.affinity.delete(client);
  }

  /** The endpoint for a new connection or UDP association from clientIP; undefined: none. */
  next(clientIP: string, sessionAffinityReset = false): ProxyBackend | undefined {
    if (this.backends.length === 0) return undefined;
    const now = this.clock.now();
    if (this.ttlMs > 0 && !sessionAffinityReset) {
      const a = this.affinity.get(clientIP);
      if (a && now - a.lastUsed < this.ttlMs) {
        a.lastUsed = now;
        return a.backend;
      }
    }
    const backend = this.backends[this.index]!;
    this.index = (this.index + 1) % this.backends.length;
    if (this.ttlMs > 0) {
      const a = this.affinity.get(clientIP);
      if (a) {
        a.backend = backend;
        a.lastUsed = now;
      } else this.affinity.set(clientIP, { backend, lastUsed: now });
    }
    return backend;
  }

  /** Drops expired affinity entries (upstream's CleanupStaleStickySessions), so the map stays bounded. */
  sweep(): void {
    const now = this.clock.now();
    for (const [client, a] of this.affinity) if (now - a.lastUsed >= this.ttlMs) this.affinity.delete(client);
  }
}

function sameList(a: readonly ProxyBackend[], b: readonly ProxyBackend[]): boolean {
  return a.length === b.length && a.every((x, i) => x.ip === b[i]!.ip && x.port === b[i]!.port);
}
