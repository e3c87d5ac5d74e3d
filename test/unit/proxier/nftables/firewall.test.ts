// firewall-allow's sources for a load balancer with loadBalancerSourceRanges (upstream's
// firewall chain): the node admitted through its VIPs when a range holds the node IP, nested
// ranges reduced to the widest (the kernel refuses overlapping intervals of one key).
import test from 'ava';
import { firewallSources } from '../../../../src/proxier/nftables/firewall.ts';

test('a range holding the node IP also admits the VIPs as sources', (t) => {
  t.deepEqual(firewallSources(['10.1.0.0/24'], ['192.0.2.1', '192.0.2.2'], '10.1.0.7'), [
    '10.1.0.0/24',
    '192.0.2.1/32',
    '192.0.2.2/32',
  ]);
});

test('ranges without the node IP, or no node IP known: the ranges only', (t) => {
  t.deepEqual(firewallSources(['10.1.0.0/24'], ['192.0.2.1'], '10.2.0.1'), ['10.1.0.0/24']);
  t.deepEqual(firewallSources(['10.1.0.0/24'], ['192.0.2.1'], ''), ['10.1.0.0/24']);
  t.deepEqual(firewallSources(['fd00::/64'], ['fd01::1'], '10.1.0.1'), ['fd00::/64'], 'another family never matches');
});

test('nested ranges and VIPs inside a range leave the widest; equal ones once', (t) => {
  t.deepEqual(
    firewallSources(
      ['10.1.0.0/24', '10.0.0.0/8', '10.1.0.0/24', '192.0.2.0/25'],
      ['10.60.0.1', '203.0.113.9'],
      '10.1.0.1',
    ),
    ['10.0.0.0/8', '192.0.2.0/25', '203.0.113.9/32'],
  );
  t.deepEqual(firewallSources(['0.0.0.0/0', '10.0.0.0/8'], ['10.60.0.1'], '10.1.0.1'), ['0.0.0.0/0']);
});
