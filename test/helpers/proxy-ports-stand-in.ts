// A minimal ProxyPorts (src/proxier/userspace/proxy/types.ts) for the userspace proxier's tests
// while the real data path (proxy/index.ts, createProxyPorts) is built elsewhere: a TCP listener
// or UDP socket per spec, plain round robin, no affinity, no failover, no idle expiry beyond
// closing the association after udpIdleTimeoutMs. Tests of the rules only need the sockets.
import { createServer, connect } from 'node:net';
import type { Server } from 'node:net';
import { createSocket } from 'node:dgram';
import type { Socket as UdpSocket } from 'node:dgram';
import type {
  ApplyResult,
  ProxyBackend,
  ProxyPortSpec,
  ProxyPorts,
  ProxyPortsOptions,
  ProxyStats,
} from '../../src/proxier/userspace/proxy/types.ts';

interface Entry {
  spec: ProxyPortSpec;
  next: number;
  port: number;
  close(): void;
}

export function standInProxyPorts(o: ProxyPortsOptions): ProxyPorts {
  const entries = new Map<string, Entry>();
  const pick = (e: Entry): ProxyBackend | undefined => {
    const b = e.spec.backends;
    if (b.length === 0) return undefined;
    return b[e.next++ % b.length];
  };
  const openTcp = (e: Entry): Promise<Server> =>
    new Promise((resolve, reject) => {
      const s = createServer((client) => {
        const b = pick(e);
        if (!b) return client.resetAndDestroy();
        const up = connect(b.port, b.ip);
        client.pipe(up).pipe(client);
        const end = (): void => {
          client.destroy();
          up.destroy();
        };
        client.on('error', end);
        up.on('error', end);
      });
      s.once('error', reject);
      s.listen(0, o.listenIP, () => resolve(s));
    });
  const openUdp = (e: Entry): Promise<UdpSocket> =>
    new Promise((resolve, reject) => {
      const s = createSocket(o.family === 'IPv6' ? 'udp6' : 'udp4');
      const assoc = new Map<string, UdpSocket>();
      s.on('message', (msg, from) => {
        const key = `${from.address}:${from.port}`;
        let up = assoc.get(key);
        if (!up) {
          const b = pick(e);
          if (!b) return;
          const u = createSocket(o.family === 'IPv6' ? 'udp6' : 'udp4');
          up = u;
          assoc.set(key, u);
          u.on('message', (reply) => s.send(reply, from.port, from.address));
          u.on('error', () => u.close());
          u.connect(b.port, b.ip, () => u.send(msg));
          setTimeout(
            () => {
              assoc.delete(key);
              u.close();
            },
            Math.max(o.udpIdleTimeoutMs, 2000),
          ).unref();
          return;
        }
        up.send(msg);
      });
      s.once('error', reject);
      s.bind(0, o.listenIP, () => resolve(s));
    });
  return {
    async apply(specs): Promise<ApplyResult> {
      const ports = new Map<string, number>();
      const errors = new Map<string, Error>();
      const want = new Set(specs.map((s) => s.id));
      for (const [id, e] of entries) {
        if (want.has(id)) continue;
        e.close();
        entries.delete(id);
      }
      for (const spec of specs) {
        let e = entries.get(spec.id);
        if (e) e.spec = spec;
        else {
          e = { spec, next: 0, port: 0, close: () => {} };
          try {
            if (spec.protocol === 'TCP') {
              const s = await openTcp(e);
              e.port = (s.address() as { port: number }).port;
              e.close = () => s.close();
            } else {
              const s = await openUdp(e);
              e.port = s.address().port;
              e.close = () => s.close();
            }
          } catch (err) {
            errors.set(spec.id, err as Error);
            continue;
          }
          entries.set(spec.id, e);
        }
        ports.set(spec.id, e.port);
      }
      return { ports, errors };
    },
    stats(): ProxyStats {
      return { activeConnections: 0, activeUdpAssociations: 0, perPort: new Map() };
    },
    async close() {
      for (const e of entries.values()) e.close();
      entries.clear();
    },
  };
}
