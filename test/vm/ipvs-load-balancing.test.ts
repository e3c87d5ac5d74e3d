// IPVS mode's per-Service scheduler (the load-balancing annotation: rr, mh, lc) against
// Debian's 6.1 kernel under QEMU: one boot runs every case of scenarios/ipvs-load-balancing.ts;
// each case is reported here as a test.
import { registerVmCases } from './case-tests.ts';
import { cases } from './scenarios/ipvs-load-balancing.ts';

registerVmCases({ scenario: 'test/vm/scenarios/ipvs-load-balancing.ts', cases, timeoutMs: 480_000 });
