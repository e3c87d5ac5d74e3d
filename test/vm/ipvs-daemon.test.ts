// The real daemon in IPVS mode (node + src/daemon/v8-options.ts + bin/kube-proxy-ts.js, as the
// package runs it) against Debian's stock 6.1 kernel under QEMU, fed by the test API server
// through a kubeconfig: one boot runs every case of scenarios/ipvs-daemon.ts (start and
// healthz, TCP ClusterIP/NodePort traffic, UDP endpoint replacement with the conntrack flush,
// IPv6 with its ip6 companion rules, externalIP, LoadBalancer source ranges,
// externalTrafficPolicy=Local with its health check node port, ClientIP affinity, SIGTERM and
// --cleanup); each case is reported here as a test.
import { registerVmCases } from './case-tests.ts';
import { cases } from './scenarios/ipvs-daemon.ts';

registerVmCases({
  scenario: 'test/vm/scenarios/ipvs-daemon.ts',
  cases,
  // This boot starts a dozen Node processes (the daemon twice more for --cleanup, agents):
  // multi-threaded TCG kills about one Node start in four (see harness.ts, tcgThread).
  tcgThread: 'single',
  // Seen: 5 minutes on an idle machine; the bound leaves room for a loaded one, inside ava's
  // 10-minute timeout (ava.vm.config.js) with the boot's preparation.
  timeoutMs: 560_000,
});
