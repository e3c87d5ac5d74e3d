// The IPVS proxier against Debian's stock 6.1 kernel under QEMU: one boot runs every case of
// scenarios/ipvs-proxier.ts (real TCP/UDP traffic through kube-ipvs0 VIPs, read-back with
// ipvsadm, ipset and ip); each case is reported here as a test.
import test from 'ava';
import { runInVm } from './harness.ts';
import type { VmRunResult } from './harness.ts';
import type { CaseResult } from './run-cases.ts';
import { cases } from './scenarios/ipvs-proxier.ts';

let vm: VmRunResult | undefined;
let results = new Map<string, CaseResult>();
let bootError: Error | undefined;

test.before(async () => {
  try {
    vm = await runInVm({
      timeoutMs: 600_000,
      script: './node_modules/.bin/node test/vm/run-cases.ts test/vm/scenarios/ipvs-proxier.ts "$RUN_DIR/results.json"\n',
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
