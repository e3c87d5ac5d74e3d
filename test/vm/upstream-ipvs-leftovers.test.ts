// Upstream kube-proxy's IPVS-mode leftovers (kube-ipvs0, KUBE-* ipsets, virtual servers and the
// companion rules that keep the sets busy) removed when kube-proxy-ts starts in nftables mode,
// against Debian's stock 6.1 kernel under QEMU: one boot runs the cases of
// scenarios/upstream-ipvs-leftovers.ts; each is reported here as a test.
import { registerVmCases } from './case-tests.ts';
import { cases } from './scenarios/upstream-ipvs-leftovers.ts';

registerVmCases({
  scenario: 'test/vm/scenarios/upstream-ipvs-leftovers.ts',
  cases,
  // Several Node processes start in this boot (backend, daemon, probes): see harness.ts, tcgThread.
  tcgThread: 'single',
  timeoutMs: 540_000,
});
