// --cleanup's step runner: every step runs, failures are collected and named.
import test from 'ava';
import { memoryLogger } from '../../../src/base/logger.ts';
import { runCleanupSteps } from '../../../src/leftovers/steps.ts';
import { summarize, type Inventory } from '../../../src/leftovers/inventory.ts';
import { CLEANUP_ORDER, MODES } from '../../../src/daemon/modes/index.ts';
import { PROXY_MODES } from '../../../src/proxier/types.ts';

test('a failed step does not stop the others; failures name the step', async (t) => {
  const ran: string[] = [];
  const logger = memoryLogger();
  const failures = await runCleanupSteps(
    [
      { what: 'nftables table ip kube-proxy-ts', run: () => Promise.resolve(void ran.push('ip')) },
      {
        what: 'ipvs mode objects (IPv4)',
        run: () => Promise.reject(new Error('destroy ipset KUBE-CLUSTER-IP: IPSET_ERR_BUSY')),
      },
      { what: 'nftables table ip6 kube-proxy-ts', run: () => Promise.resolve(void ran.push('ip6')) },
    ],
    logger,
  );
  t.deepEqual(ran, ['ip', 'ip6']);
  t.deepEqual(failures, ['ipvs mode objects (IPv4): destroy ipset KUBE-CLUSTER-IP: IPSET_ERR_BUSY']);
  t.is(logger.records.filter((r) => r.level === 'error').length, 1);
});

test('every proxy mode has one definition, under its own name', (t) => {
  t.deepEqual(Object.keys(MODES), [...PROXY_MODES]);
  for (const mode of PROXY_MODES) t.is(MODES[mode].name, mode);
  t.deepEqual(new Set(CLEANUP_ORDER.map((d) => d.name)), new Set(PROXY_MODES), '--cleanup covers every mode');
});

test('--cleanup summary: what went, by kind, or nothing to clean', (t) => {
  const inv = (o: Partial<Record<keyof Inventory, string[]>>): Inventory => ({
    tables: new Set(o.tables ?? []),
    chains: new Set(o.chains ?? []),
    virtualServers: new Set(o.virtualServers ?? []),
    ipsets: new Set(o.ipsets ?? []),
    links: new Set(o.links ?? []),
  });
  const before = inv({
    tables: ['ip kube-proxy-ts', 'ip nat', 'ip someone-else'],
    chains: ['ip nat KUBE-SERVICES', 'ip nat KUBE-SVC-A', 'ip filter KUBE-FIREWALL'],
    virtualServers: ['tcp 10.96.0.1:443'],
    ipsets: ['KUBE-CLUSTER-IP'],
    links: ['kube-ipvs0'],
  });
  const after = inv({ tables: ['ip nat', 'ip someone-else'], chains: ['ip filter KUBE-FIREWALL'] });
  t.is(
    summarize(before, after),
    'removed nftables table ip kube-proxy-ts; 2 KUBE-* chains (iptables-nft); 1 IPVS virtual server; 1 ipset; link kube-ipvs0',
  );
  t.is(summarize(after, after), 'nothing to clean');
});
