// One proxied TCP connection: the client's socket and the endpoint's, piped both ways.
//
// - Backpressure: pipe() pauses the reading side while the other's write buffer is above its
//   high-water mark, so a side that does not read makes the kernel's windows fill, not our heap.
// - Half-close: both sockets allow half-open; a FIN read on one side becomes end() (a FIN) on
//   the other, and the other direction goes on until it ends too.
// - Resets: an error on one side (ECONNRESET, a keep-alive timeout, ...) resets the other.
// - Idle: no byte either way for idleTimeoutMs resets both (0: never). Any byte moved is
//   activity on both sockets, so the client socket's timer alone measures the connection's.

import type { Socket } from 'node:net';

export interface SpliceEvents {
  /** Called once, when both sockets are closed; with the bytes read from / written to the client. */
  onClosed(bytesIn: number, bytesOut: number): void;
}

export class Splice {
  readonly client: Socket;
  readonly upstream: Socket;
  private closed = 0;

  constructor(client: Socket, upstream: Socket, idleTimeoutMs: number, events: SpliceEvents) {
    this.client = client;
    this.upstream = upstream;
    const onClose = (): void => {
      if (++this.closed === 2) events.onClosed(client.bytesRead, client.bytesWritten);
    };
    wire(client, upstream, onClose);
    wire(upstream, client, onClose);
    if (idleTimeoutMs > 0) {
      client.setTimeout(idleTimeoutMs, () => this.reset());
    }
    client.pipe(upstream);
    upstream.pipe(client);
  }

  /** Bytes held in our write buffers, both directions (bounded by the high-water marks plus a read). */
  get buffered(): number {
    return this.client.writableLength + this.upstream.writableLength;
  }

  /** Resets both sides (daemon exit, idle). */
  reset(): void {
    resetSocket(this.client);
    resetSocket(this.upstream);
  }
}

function wire(from: Socket, to: Socket, onClose: () => void): void {
  from.on('error', () => resetSocket(to));
  from.once('close', (hadError) => {
    onClose();
    if (to.destroyed) return;
    // Closed without an error: both of its directions are done, so the other side gets its FIN
    // (pipe may already have sent it) and closes once the data written to it is flushed.
    if (hadError) resetSocket(to);
    else to.destroySoon();
  });
}

export function resetSocket(s: Socket): void {
  if (s.destroyed) return;
  try {
    s.resetAndDestroy();
  } catch {
    s.destroy();
  }
}
