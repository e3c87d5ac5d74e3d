// The IPVS generic-netlink client against Debian's stock 6.1 kernel under QEMU: one boot runs
// every case of scenarios/ipvs-netlink.ts (see there); each case is reported here as a test.
import { registerVmCases } from './case-tests.ts';
import { cases } from './scenarios/ipvs-netlink.ts';

registerVmCases({
  scenario: 'test/vm/scenarios/ipvs-netlink.ts',
  cases,
  // No modules and no autoloader at first: the first case checks a kernel without IPVS.
  modules: [],
  autoload: false,
  timeoutMs: 420_000,
});
