// The ctnetlink layer against Debian's stock 6.1 kernel under QEMU: one boot runs every case
// of scenarios/conntrack-netlink.ts; each case is reported here as a test.
import { registerVmCases } from './case-tests.ts';
import { cases } from './scenarios/conntrack-netlink.ts';

registerVmCases({
  scenario: 'test/vm/scenarios/conntrack-netlink.ts',
  cases,
  modules: ['nf_conntrack', 'nf_conntrack_netlink', 'nf_tables', 'nft_ct', 'veth'],
  timeoutMs: 480_000,
});
