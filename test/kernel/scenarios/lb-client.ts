// Runs in the client namespace (netns agent): one TCP connection from each of many source
// addresses (an AnyIP range routed to lo, so no address is added one by one), a few at a
// time, answering the backend's "<pod> <peer>" per source.
import { connect } from 'node:net';

/** Connections in flight at once: bounded, so the agent never opens thousands of sockets. */
const PARALLEL = 16;

function tcpFrom(host: string, port: number, localAddress: string, timeoutMs = 3000): Promise<string> {
  return new Promise((resolve) => {
    const s = connect({ host, port, localAddress });
    let data = '';
    const timer = setTimeout(() => {
      s.destroy();
      resolve('ETIMEDOUT');
    }, timeoutMs);
    s.on('data', (d) => (data += d.toString()));
    s.on('end', () => {
      clearTimeout(timer);
      resolve(data);
    });
    s.on('error', (e: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      resolve(e.code ?? 'ERROR');
    });
  });
}

/** The pod each source reached (the answer's first word), in the order of `sources`. */
export async function podPerSource(host: string, port: number, sources: string[]): Promise<string[]> {
  const out = new Array<string>(sources.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < sources.length) {
      const i = next++;
      out[i] = (await tcpFrom(host, port, sources[i]!)).split(' ')[0]!;
    }
  };
  await Promise.all(Array.from({ length: PARALLEL }, worker));
  return out;
}
