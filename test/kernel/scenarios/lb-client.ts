// Runs in the client namespace (netns agent): one TCP connection from each of many source
// addresses (an AnyIP range routed to lo, so no address is added one by one), a few at a
// time, answering the backend's "<pod> <peer>" per source.
import { tcp } from './echo.ts';

/** Connections in flight at once: bounded, so the agent never opens thousands of sockets. */
const PARALLEL = 16;

/** The pod each source reached (the answer's first word), in the order of `sources`. */
export async function podPerSource(host: string, port: number, sources: string[]): Promise<string[]> {
  const out = new Array<string>(sources.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < sources.length) {
      const i = next++;
      out[i] = (await tcp(host, port, 3000, sources[i]!)).split(' ')[0]!;
    }
  };
  await Promise.all(Array.from({ length: PARALLEL }, worker));
  return out;
}
