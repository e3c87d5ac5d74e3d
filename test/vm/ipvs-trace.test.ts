// `kube-proxy-ts trace` against real packets in IPVS mode (Debian's 6.1 kernel under QEMU):
// one boot runs scenarios/ipvs-trace.ts, the policy cases the other modes run in
// test/kernel/explain-trace-policies.test.ts; each case is reported here as a test.
import { registerVmCases } from './case-tests.ts';
import { cases } from './scenarios/ipvs-trace.ts';

registerVmCases({
  scenario: 'test/vm/scenarios/ipvs-trace.ts',
  cases,
  // Seven Node processes (agents, the daemon): multi-threaded TCG kills some Node starts (harness.ts).
  tcgThread: 'single',
  // Seen: the start 283 s at a load of 21 (seven Node starts under emulation); the bound stays
  // inside ava's 10-minute timeout (ava.vm.config.js) with the boot's preparation.
  timeoutMs: 560_000,
});
