// The IPVS proxier against Debian's stock 6.1 kernel under QEMU: one boot runs every case of
// scenarios/ipvs-proxier.ts (real TCP/UDP traffic through kube-ipvs0 VIPs, read-back with
// ipvsadm, ipset and ip); each case is reported here as a test.
import { registerVmCases } from './case-tests.ts';
import { cases } from './scenarios/ipvs-proxier.ts';

registerVmCases({ scenario: 'test/vm/scenarios/ipvs-proxier.ts', cases, timeoutMs: 600_000 });
