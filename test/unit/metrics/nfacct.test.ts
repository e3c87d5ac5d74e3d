// The nfacct-fed iptables metrics: upstream's names and help, counter type, the kernel's packet
// count read at each scrape, absent without the object, the last value kept on a failed read.
import test from 'ava';
import { Registry } from 'prom-client';
import { registerNfacctMetrics } from '../../../src/metrics/index.ts';

const INVALID = 'kubeproxy_iptables_ct_state_invalid_dropped_packets_total';
const LOCALHOST = 'kubeproxy_iptables_localhost_nodeports_accepted_packets_total';

test('each scrape reads the counter; only existing objects are exported', async (t) => {
  const registry = new Registry();
  let packets = 3n;
  const reads: string[] = [];
  registerNfacctMetrics(registry, {
    names: new Set(['ct_state_invalid_dropped_pkts']),
    read: (name) => {
      reads.push(name);
      return Promise.resolve(packets);
    },
  });
  let text = await registry.metrics();
  t.true(text.includes(`# HELP ${INVALID} packets dropped by iptables to work around conntrack problems`));
  t.true(text.includes(`# TYPE ${INVALID} counter`));
  t.true(text.includes(`\n${INVALID} 3`));
  t.false(text.includes(LOCALHOST));
  packets = 10n;
  text = await registry.metrics();
  t.true(text.includes(`\n${INVALID} 10`));
  t.deepEqual(reads, ['ct_state_invalid_dropped_pkts', 'ct_state_invalid_dropped_pkts']);
});

test('a failed read keeps the last value and is reported; registering twice is harmless', async (t) => {
  const registry = new Registry();
  let fail = false;
  const errors: string[] = [];
  const reader = {
    names: new Set(['localhost_nps_accepted_pkts']),
    read: () => (fail ? Promise.reject(new Error('EIO')) : Promise.resolve(7n)),
  };
  registerNfacctMetrics(registry, reader, (c) => errors.push(c));
  registerNfacctMetrics(registry, reader, (c) => errors.push(c));
  t.true((await registry.metrics()).includes(`\n${LOCALHOST} 7`));
  fail = true;
  t.true((await registry.metrics()).includes(`\n${LOCALHOST} 7`));
  t.deepEqual(errors, ['localhost_nps_accepted_pkts']);
});
