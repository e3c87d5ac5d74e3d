// Waits until the machine's CPUs are quiet before a measurement. `ip netns del` returns at
// once, but the kernel tears the namespace down afterwards in a work queue: with a large
// nf_tables ruleset in it (the upstream-shaped 10,000 x 10 one has 110,000 chains) that takes
// seconds of CPU, which would otherwise be measured with whatever runs next.
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';

/** Busy and total jiffies of all CPUs together, from /proc/stat's first line. */
function cpuTimes(): { busy: number; total: number } {
  const line = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!;
  // cpu  user nice system idle iowait irq softirq steal guest guest_nice
  const v = line.trim().split(/\s+/).slice(1).map(Number);
  const idle = (v[3] ?? 0) + (v[4] ?? 0);
  const total = v.slice(0, 8).reduce((a, b) => a + b, 0);
  return { busy: total - idle, total };
}

export interface SettleResult {
  /** How long it waited. */
  ms: number;
  /** The busy share of the last window (0..1, all CPUs together). */
  busy: number;
  /** False when the machine stayed busy until the bound (other work on a shared machine). */
  quiet: boolean;
}

/**
 * Returns once two windows in a row had the CPUs at most `maxBusy` busy (all CPUs together,
 * this process included), or after `boundMs` whatever the load (default 60 s, or
 * BENCH_SETTLE_MS: run.ts sets 3 s for --quick, where the figures are not for quoting).
 */
export async function settle(
  opts: { maxBusy?: number; windowMs?: number; boundMs?: number } = {},
): Promise<SettleResult> {
  const maxBusy = opts.maxBusy ?? 0.15;
  const windowMs = opts.windowMs ?? 250;
  const envMs = Number(process.env['BENCH_SETTLE_MS']);
  const defaultMs = Number.isFinite(envMs) && envMs >= 0 ? envMs : 60_000;
  const boundMs = Math.min(opts.boundMs ?? defaultMs, defaultMs);
  const start = performance.now();
  let quietWindows = 0;
  let busy = 1;
  let prev = cpuTimes();
  while (performance.now() - start < boundMs) {
    await sleep(windowMs);
    const now = cpuTimes();
    const dt = now.total - prev.total;
    busy = dt > 0 ? (now.busy - prev.busy) / dt : 0;
    prev = now;
    quietWindows = busy <= maxBusy ? quietWindows + 1 : 0;
    if (quietWindows >= 2) return { ms: performance.now() - start, busy, quiet: true };
  }
  return { ms: performance.now() - start, busy, quiet: false };
}
