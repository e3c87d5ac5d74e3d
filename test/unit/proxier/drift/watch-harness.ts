// What the drift watch tests give every watch: our port 111, a clock and a "syncing" flag they
// move, the repairs asked for, and the monitor's handlers captured instead of a socket.
import { memoryLogger } from '../../../../src/base/logger.ts';
import type { DriftWatchOptionsOf } from '../../../../src/proxier/drift/gate.ts';

export function watchHarness<H>() {
  let h: H | undefined;
  let now = 10_000;
  let syncing = false;
  const drifts: string[] = [];
  const options: DriftWatchOptionsOf<H> = {
    ownPorts: new Set([111]),
    onDrift: (why) => drifts.push(why),
    syncing: () => syncing,
    logger: memoryLogger(),
    now: () => now,
    monitor: (handlers) => {
      h = handlers;
      return { localPort: 999, close: () => {} };
    },
  };
  return {
    options,
    drifts,
    /** The handlers the watch gave its monitor. */
    h: (): H => h!,
    tick: (ms: number) => void (now += ms),
    setSyncing: (v: boolean) => void (syncing = v),
  };
}
