// IPVS mode, Local traffic policies without a usable local endpoint and with remote
// terminating endpoints around, against Debian's 6.1 kernel under QEMU: one boot runs every
// case of scenarios/ipvs-local-policy.ts; each case is reported here as a test.
import { registerVmCases } from './case-tests.ts';
import { cases } from './scenarios/ipvs-local-policy.ts';

registerVmCases({ scenario: 'test/vm/scenarios/ipvs-local-policy.ts', cases, timeoutMs: 600_000 });
