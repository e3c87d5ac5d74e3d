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
  timeoutMs: 540_000,
});
