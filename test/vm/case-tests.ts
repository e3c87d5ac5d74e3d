// The host side of a "many cases in one boot" VM test: boots once (runInVm running
// run-cases.ts over a scenario module), then reports the boot and every case as ava tests.
import test from 'ava';
import { runInVm } from './harness.ts';
import type { VmRunOptions, VmRunResult } from './harness.ts';
import type { CaseResult } from './run-cases.ts';

export interface VmCaseTestOptions extends Omit<VmRunOptions, 'script'> {
  /** The scenario module, relative to the repository root (test/vm/scenarios/x.ts). */
  scenario: string;
  /** Its exported cases, to name one ava test each (a case that never ran fails). */
  cases: readonly { name: string }[];
}

export function registerVmCases(o: VmCaseTestOptions): void {
  const { scenario, cases, ...run } = o;
  let vm: VmRunResult | undefined;
  let results = new Map<string, CaseResult>();
  let bootError: Error | undefined;

  test.before(async () => {
    try {
      vm = await runInVm({
        ...run,
        script: `./node_modules/.bin/node test/vm/run-cases.ts ${scenario} "$RUN_DIR/results.json"\n`,
      });
      const parsed = JSON.parse(vm.file('results.json') ?? '[]') as CaseResult[];
      results = new Map(parsed.map((r) => [r.name, r]));
    } catch (e) {
      bootError = e as Error;
    }
  });

  test.serial('the VM booted, ran the cases and powered off', (t) => {
    t.falsy(bootError, String(bootError?.stack));
    t.truthy(vm);
    t.log(`boot ${vm?.bootMs} ms, cases ${vm?.payloadMs} ms, total ${vm?.totalMs} ms (${vm?.runDir})`);
    t.false(vm!.timedOut, `timed out:\n${vm!.output}\n${vm!.console.slice(-4000)}`);
    t.is(vm!.status, 0, `payload status ${vm!.status}:\n${vm!.output}\n${vm!.console.slice(-4000)}`);
  });

  for (const c of cases) {
    test.serial(c.name, (t) => {
      const r = results.get(c.name);
      if (!r) return t.fail(`the case did not run (payload output:\n${vm?.output ?? '(no VM)'})`);
      t.log(`${r.ms} ms${r.notes !== undefined ? ` ${JSON.stringify(r.notes)}` : ''}`);
      t.true(r.ok, r.error);
    });
  }
}
