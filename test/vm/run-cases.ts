// Runs inside the VM: imports a scenario module and runs its cases in order, each bounded by
// a time-out, writing results to a JSON file after every case (so a crash still leaves the
// results so far). The ava file on the host reads that file and reports one test per case.
//
//   node test/vm/run-cases.ts test/vm/scenarios/ipvs-netlink.ts "$RUN_DIR/results.json"

import { writeFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { resolve } from 'node:path';

export interface CaseResult {
  name: string;
  ok: boolean;
  ms: number;
  error?: string;
  /** Anything a case wants the host to see (timings, outputs). */
  notes?: unknown;
}

export interface VmCase {
  name: string;
  timeoutMs?: number;
  run(note: (value: unknown) => void): Promise<void>;
}

export interface Scenario {
  cases: readonly VmCase[];
  /** Runs after the cases, even when some failed. */
  teardown?: () => Promise<void>;
}

async function main(): Promise<void> {
  const [modPath, outPath] = process.argv.slice(2);
  if (!modPath || !outPath) throw new Error('usage: run-cases.ts SCENARIO.ts OUT.json');
  const mod = (await import(pathToFileURL(resolve(modPath)).href)) as Scenario;
  const results: CaseResult[] = [];
  const save = (): void => writeFileSync(outPath, JSON.stringify(results, null, 1));
  for (const c of mod.cases) {
    const started = performance.now();
    let notes: unknown;
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        c.run((v) => {
          notes = v;
        }),
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () => reject(new Error(`case timed out after ${c.timeoutMs ?? 60_000} ms`)),
            c.timeoutMs ?? 60_000,
          );
        }),
      ]);
      results.push({
        name: c.name,
        ok: true,
        ms: Math.round(performance.now() - started),
        ...(notes !== undefined ? { notes } : {}),
      });
    } catch (e) {
      const err = e as Error;
      results.push({
        name: c.name,
        ok: false,
        ms: Math.round(performance.now() - started),
        error: `${err.stack ?? String(err)}${err.cause ? `\ncause: ${String(err.cause)}` : ''}`,
        ...(notes !== undefined ? { notes } : {}),
      });
    } finally {
      clearTimeout(timer);
    }
    console.log(`${results.at(-1)!.ok ? 'ok  ' : 'FAIL'} ${c.name} (${results.at(-1)!.ms} ms)`);
    save();
  }
  try {
    await mod.teardown?.();
  } catch (e) {
    console.log(`teardown failed: ${String(e)}`);
  }
  save();
  // Sockets or child processes left behind must not keep PID 1's payload alive.
  process.exit(0);
}

if (process.argv[1] && resolve(process.argv[1]) === resolve(import.meta.filename)) await main();
