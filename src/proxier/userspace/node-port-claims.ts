// Upstream's claimNodePort: the userspace mode holds each node port open on the node (a TCP
// listener or a bound UDP socket that never receives: the rules take the traffic first), so
// that no other program can take the port while a Service uses it. A port something else
// already holds cannot be claimed: upstream then left that Service's node-port rules out.

import { createServer } from 'node:net';
import type { Server } from 'node:net';
import { createSocket } from 'node:dgram';
import type { Socket } from 'node:dgram';
import type { IPFamily } from '../../base/ip.ts';
import { errorMessage } from '../../base/errors.ts';

export interface NodePortClaim {
  readonly protocol: 'TCP' | 'UDP';
  readonly port: number;
  /** The service port's id: a port claimed by one owner is not given to another. */
  readonly owner: string;
}

interface Held {
  readonly owner: string;
  close(): void;
}

const keyOf = (c: { protocol: string; port: number }): string => `${c.protocol}/${c.port}`;

// The IPv6 family's sockets are IPv6 only: the IPv4 family holds the same port number for itself.
function listenTcp(family: IPFamily, host: string, port: number): Promise<Server> {
  return new Promise((resolve, reject) => {
    // Connections reach it only when the rules do not take them (none do): closed at once.
    const s = createServer((c) => c.destroy());
    s.once('error', reject);
    s.listen({ host, port, exclusive: true, ipv6Only: family === 'IPv6' }, () => {
      s.off('error', reject);
      s.on('error', () => {});
      resolve(s);
    });
  });
}

function bindUdp(family: IPFamily, host: string, port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = createSocket({ type: family === 'IPv6' ? 'udp6' : 'udp4', ipv6Only: family === 'IPv6' });
    s.once('error', reject);
    s.bind({ address: host, port, exclusive: true }, () => {
      s.off('error', reject);
      s.on('error', () => {});
      resolve(s);
    });
  });
}

export class NodePortClaims {
  private readonly held = new Map<string, Held>();
  private readonly family: IPFamily;
  private readonly host: string;

  /** `host`: the proxy sockets' listen address ('0.0.0.0' / '::' or --bind-address). */
  constructor(family: IPFamily, host: string) {
    this.family = family;
    this.host = host;
  }

  /**
   * Holds exactly the wanted ports: releases the others first (a port may pass from a deleted
   * Service to a new one in one sync), then opens the missing ones. Returns the owners whose
   * port could not be claimed, with why.
   */
  async sync(wanted: readonly NodePortClaim[]): Promise<Map<string, Error>> {
    const want = new Map(wanted.map((c) => [keyOf(c), c]));
    for (const [key, h] of this.held) {
      if (want.get(key)?.owner === h.owner) continue;
      h.close();
      this.held.delete(key);
    }
    const failed = new Map<string, Error>();
    for (const [key, c] of want) {
      if (this.held.has(key)) continue;
      try {
        if (c.protocol === 'TCP') {
          const s = await listenTcp(this.family, this.host, c.port);
          this.held.set(key, { owner: c.owner, close: () => s.close() });
        } else {
          const s = await bindUdp(this.family, this.host, c.port);
          this.held.set(key, { owner: c.owner, close: () => s.close() });
        }
      } catch (e) {
        failed.set(c.owner, new Error(`can't open node port ${key}: ${errorMessage(e)}`, { cause: e }));
      }
    }
    return failed;
  }

  /** Releases every port (daemon exit). */
  close(): void {
    for (const h of this.held.values()) h.close();
    this.held.clear();
  }
}
