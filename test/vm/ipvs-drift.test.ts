// Drift repair in IPVS mode (issue 18) against Debian's stock 6.1 kernel under QEMU: one boot
// runs every case of scenarios/ipvs-drift.ts (the real daemon, a Service from a manifest
// directory, real connections; each kind of our kernel state tampered with in turn, repaired
// by the drift watch when the kernel announces the change, else by the periodic sync); each
// case is reported here as a test, with its measured repair time.
import { registerVmCases } from './case-tests.ts';
import { cases } from './scenarios/ipvs-drift.ts';

registerVmCases({
  scenario: 'test/vm/scenarios/ipvs-drift.ts',
  cases,
  // Three Node processes besides the runner: multi-threaded TCG kills some Node starts (harness.ts).
  tcgThread: 'single',
  timeoutMs: 480_000,
});
