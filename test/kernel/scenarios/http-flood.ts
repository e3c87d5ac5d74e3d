// Run by a netns agent: clients looping on one URL over keep-alive connections, as fast as the
// server lets them (a failed request is retried at once), until stopFlood().

import { Agent, get } from 'node:http';

interface Flood {
  stop: boolean;
  ok: number;
  failed: number;
  agent: Agent;
  loops: Promise<void>[];
}

let flood: Flood | undefined;

function once(url: string, agent: Agent): Promise<boolean> {
  return new Promise((resolve) => {
    const req = get(url, { agent }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode === 200));
      res.on('error', () => resolve(false));
    });
    req.setTimeout(60_000, () => req.destroy());
    req.on('error', () => resolve(false));
  });
}

/** Starts `clients` loops on `url`; resolves once each has started. */
export function startFlood(url: string, clients: number): void {
  if (flood) throw new Error('a flood is already running in this agent');
  const f: Flood = {
    stop: false,
    ok: 0,
    failed: 0,
    agent: new Agent({ keepAlive: true, maxSockets: clients }),
    loops: [],
  };
  flood = f;
  for (let i = 0; i < clients; i++)
    f.loops.push(
      (async () => {
        while (!f.stop) {
          if (await once(url, f.agent)) f.ok++;
          else {
            f.failed++;
            await new Promise((r) => setImmediate(r));
          }
        }
      })(),
    );
}

/** Requests answered 200 and failed so far. */
export function floodCount(): { ok: number; failed: number } {
  return { ok: flood?.ok ?? 0, failed: flood?.failed ?? 0 };
}

export async function stopFlood(): Promise<{ ok: number; failed: number }> {
  const f = flood;
  if (!f) return { ok: 0, failed: 0 };
  f.stop = true;
  f.agent.destroy();
  await Promise.all(f.loops);
  flood = undefined;
  return { ok: f.ok, failed: f.failed };
}
