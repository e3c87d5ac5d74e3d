// nftables mode with KubeProxyNFTablesLocalhostNodePorts: the ruleset's part (UDP and SCTP node
// ports on loopback rejected and counted; TCP is the userspace listeners'), only where
// nodePortAddresses asks for loopback, and gone again when the gate is off.
import { readFileSync } from 'node:fs';
import test from 'ava';
import { memoryLogger } from '../../../../src/base/logger.ts';
import { FakeNft } from '../../../../src/netlink/nftables/fake/index.ts';
import { NftablesProxier, TABLE } from '../../../../src/proxier/nftables/index.ts';
import { ep, newTracker, slice, svc } from '../../model/helpers.ts';

const signal = new AbortController().signal;

function state(nodePortAddresses: string[]) {
  const { t } = newTracker({ clusterCIDRs: ['10.244.0.0/16'], nodePortAddresses });
  const ports = (protocol: string, nodePort: number) => [{ name: 'p', protocol, port: 80, nodePort }];
  t.onService(undefined, svc('dns', { type: 'NodePort', clusterIP: '10.96.0.10', ports: ports('UDP', 30053) }));
  t.onService(undefined, svc('sig', { type: 'NodePort', clusterIP: '10.96.0.11', ports: ports('SCTP', 30068) }));
  t.onService(undefined, svc('web', { type: 'NodePort', clusterIP: '10.96.0.12', ports: ports('TCP', 30080) }));
  for (const name of ['dns', 'sig', 'web']) t.onEndpointSlice(slice(`${name}-1`, name, [ep('10.244.1.2')]), false);
  return t.checkout();
}

const lines = (nft: FakeNft, what: string) =>
  nft
    .dump()
    .split('\n')
    .filter((l) => l.includes(what));

test('gate on, localhost asked for: UDP and SCTP node ports in @localhost-nodeports, rejected and counted on loopback', async (t) => {
  const nft = new FakeNft({ family: 'ip', table: TABLE });
  const log = memoryLogger();
  const p = new NftablesProxier({ nft, logger: log, localhostNodePorts: true });
  const { desired, change } = state(['localhost', '10.0.0.0/8']);
  await p.sync(desired, change, signal);
  t.deepEqual(lines(nft, `add element ip ${TABLE} localhost-nodeports`).sort(), [
    `add element ip ${TABLE} localhost-nodeports { sctp . 30068 }`,
    `add element ip ${TABLE} localhost-nodeports { udp . 30053 }`,
  ]);
  const rules = lines(nft, 'localhost nodeport');
  t.is(rules.length, 2, nft.dump());
  t.regex(rules[0]!, /filter-output ip daddr 127\.0\.0\.0\/8 meta l4proto udp .*@localhost-nodeports counter reject/);
  t.regex(rules[1]!, /meta l4proto sctp .*@localhost-nodeports counter reject/);
  // docs/nftables-ruleset.md shows these rules as the code writes them.
  const doc = readFileSync(new URL('../../../../docs/nftables-ruleset.md', import.meta.url), 'utf8');
  for (const r of rules) t.true(doc.includes(r.slice(r.indexOf('filter-output ') + 'filter-output '.length)), r);
  t.deepEqual(await p.localhostRejectedPackets(), [
    { protocol: 'UDP', packets: 0 },
    { protocol: 'SCTP', packets: 0 },
  ]);
  t.false(
    log.records.some((r) => r.msg.includes('not supported in nftables mode')),
    'no warning with the gate',
  );

  // The gate off again (a restart): the rules and the set go, the warning comes back.
  const off = memoryLogger();
  const again = new NftablesProxier({ nft, logger: off });
  await again.sync(desired, { ...change, full: true }, signal);
  t.deepEqual(lines(nft, 'localhost-nodeports'), []);
  t.deepEqual(await again.localhostRejectedPackets(), []);
  t.true(off.records.some((r) => r.msg.includes('not supported in nftables mode')));
});

test('gate on without loopback in nodePortAddresses: no set, no rules', async (t) => {
  const nft = new FakeNft({ family: 'ip', table: TABLE });
  const p = new NftablesProxier({ nft, logger: memoryLogger(), localhostNodePorts: true });
  const { desired, change } = state(['10.0.0.0/8']);
  await p.sync(desired, change, signal);
  t.deepEqual(lines(nft, 'localhost-nodeports'), []);
  t.deepEqual(await p.localhostRejectedPackets(), []);
});
