// Run by a netns agent: health checks as the kubelet and load balancers make them, one fresh
// connection each (the kubelet's prober disables keep-alive), one after another.

import { get } from 'node:http';

export interface ProbeRun {
  url: string;
  /** Answered 200. */
  ok: number;
  /** Answered 200 within 1 s. */
  within1s: number;
  failed: number;
  /** Latencies of the answered ones, ms, sorted. */
  ms: number[];
}

function probe(url: string, timeoutMs: number): Promise<number | undefined> {
  const start = performance.now();
  return new Promise((resolve) => {
    const req = get(url, { agent: false, headers: { connection: 'close' } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode === 200 ? performance.now() - start : undefined));
      res.on('error', () => resolve(undefined));
    });
    req.setTimeout(timeoutMs, () => req.destroy());
    req.on('error', () => resolve(undefined));
  });
}

/** `count` probes of `url`, each given timeoutMs. */
export async function probeRun(url: string, count: number, timeoutMs = 10_000): Promise<ProbeRun> {
  const run: ProbeRun = { url, ok: 0, within1s: 0, failed: 0, ms: [] };
  for (let i = 0; i < count; i++) {
    const ms = await probe(url, timeoutMs);
    if (ms === undefined) run.failed++;
    else {
      run.ok++;
      if (ms <= 1000) run.within1s++;
      run.ms.push(Math.round(ms));
    }
  }
  run.ms.sort((a, b) => a - b);
  return run;
}
