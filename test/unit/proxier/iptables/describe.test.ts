// describe() of the iptables mode on a fake kernel listing: a port's chains and its rules in the
// shared chains (found by upstream's comments) are read back and decoded; compared with what
// the last sync wrote, a deleted rule shows missing, a leftover chain unexpected, and other
// ports' rules in the shared chains are not the port's.
import test from 'ava';
import { compareEntries } from '../../../../src/explain/explain.ts';
import type { NftRule } from '../../../../src/netlink/nftables/index.ts';
import type { IptTable } from '../../../../src/netlink/nftables/iptables/rule.ts';
import { iptablesNftCodec } from '../../../../src/proxier/iptables-nft/codec.ts';
import { describeIptPort } from '../../../../src/proxier/iptables/describe.ts';
import { unitOf } from '../../../../src/proxier/iptables/desired.ts';
import { portContext, servicePortRules } from '../../../../src/proxier/iptables/index.ts';
import type { Unit } from '../../../../src/proxier/iptables-nft/units.ts';
import type { TableClient } from '../../../../src/proxier/iptables-nft/writer-types.ts';
import { cluster, ep, slice, svc } from './harness.ts';

const P80 = [{ name: 'p80', protocol: 'TCP', port: 80 }];
const codec = iptablesNftCodec('IPv4');

function model() {
  const t = cluster();
  t.onService(
    undefined,
    svc('web', { ns: 'ns1', type: 'NodePort', clusterIP: '172.30.0.41', ports: [{ ...P80[0]!, nodePort: 3001 }] }),
  );
  t.onService(undefined, svc('other', { ns: 'ns1', clusterIP: '172.30.0.42', ports: P80 }));
  t.onEndpointSlice(slice('web-1', 'web', [ep('10.180.0.1'), ep('10.180.0.2')], { ns: 'ns1', ports: P80 }), false);
  t.onEndpointSlice(slice('other-1', 'other', [ep('10.180.0.3')], { ns: 'ns1', ports: P80 }), false);
  const { desired } = t.checkout();
  const ctx = portContext(desired);
  const units = new Map(
    [...desired.services].map(([id, info]) => [id, unitOf(servicePortRules(info, desired.selections.get(id), ctx))]),
  );
  const info = (name: string) => [...desired.services.values()].find((p) => p.name === name)!;
  return { units, web: info('web'), other: info('other') };
}

/** A kernel holding the units' rules, encoded as iptables-nft would send them. */
function fakeKernel(units: readonly Unit[]) {
  const chains = new Map<string, NftRule[]>();
  const add = (table: IptTable, chain: string, r?: NftRule) => {
    const id = `${table}/${chain}`;
    if (!chains.has(id)) chains.set(id, []);
    if (r) chains.get(id)!.push({ ...r, chain, handle: BigInt(chains.get(id)!.length + 1) });
  };
  for (const u of units) {
    for (const c of u.chains) add(c.table, c.name);
    for (const r of u.rules) add(r.table, r.chain, codec.encode(r));
  }
  const client = (table: IptTable): TableClient =>
    ({
      scope: { family: 'ip', table },
      listChains: () =>
        Promise.resolve(
          [...chains.keys()]
            .filter((id) => id.startsWith(`${table}/`))
            .map((id) => ({ kind: 'chain', name: id.slice(table.length + 1) })),
        ),
      listRules: (chain?: string) => {
        const rules = chains.get(`${table}/${chain}`);
        // As the kernel: a chain that is not there lists no rules.
        return Promise.resolve(rules ?? []);
      },
    }) as unknown as TableClient;
  const clients = new Map<IptTable, TableClient>((['nat', 'filter', 'mangle'] as const).map((t) => [t, client(t)]));
  return { chains, clients };
}

test("in sync: the port's chains and its shared rules, not the other port's", async (t) => {
  const m = model();
  const unit = m.units.get(m.web.id)!;
  const k = fakeKernel([...m.units.values()]);
  const d = await describeIptPort(m.web, { clients: k.clients, family: 'IPv4', unit });
  t.is(d.mode, 'iptables');
  t.deepEqual(compareEntries(d.expected, d.kernel), { missing: [], unexpected: [] });
  t.true(d.kernel.some((e) => e.where === 'nat KUBE-SERVICES' && e.key.includes('--comment "ns1/web:p80 cluster IP"')));
  t.true(d.kernel.some((e) => e.where === 'nat KUBE-NODEPORTS' && e.key.includes('--dport 3001')));
  t.is(d.kernel.filter((e) => e.where === 'chain' && e.key.startsWith('nat KUBE-SEP-')).length, 2);
  t.false(
    d.kernel.some((e) => e.key.includes('ns1/other')),
    "the other port's rules are not this one's",
  );
});

test('drift: a shared rule deleted is missing; a leftover chain of the port is unexpected', async (t) => {
  const m = model();
  const unit = m.units.get(m.web.id)!;
  const k = fakeKernel([...m.units.values()]);
  const services = k.chains.get('nat/KUBE-SERVICES')!;
  const portal = services.findIndex(
    (r) =>
      r.exprs.length > 0 &&
      JSON.stringify(r.exprs, (_k, v: unknown) =>
        typeof v === 'bigint' ? String(v) : v instanceof Uint8Array ? Buffer.from(v).toString('latin1') : v,
      ).includes('ns1/web:p80 cluster IP'),
  );
  t.true(portal >= 0);
  services.splice(portal, 1);
  const svl = unit.chains.find((c) => c.name.startsWith('KUBE-SVC-'))!.name.replace('KUBE-SVC-', 'KUBE-SVL-');
  k.chains.set(`nat/${svl}`, []);
  const session = new Map<string, unknown>();
  const d = await describeIptPort(m.web, { clients: k.clients, family: 'IPv4', unit }, { session });
  const drift = compareEntries(d.expected, d.kernel);
  t.deepEqual(
    drift.missing.map((e) => e.where),
    ['nat KUBE-SERVICES'],
  );
  t.regex(
    drift.missing[0]!.key,
    /^-A KUBE-SERVICES -d 172\.30\.0\.41\/32 -p tcp -m comment --comment "ns1\/web:p80 cluster IP"/,
  );
  t.deepEqual(drift.unexpected, [{ where: 'chain', key: `nat ${svl}`, value: '' }]);
  // Never programmed: everything found is unexpected, nothing expected.
  const fresh = await describeIptPort(m.other, { clients: k.clients, family: 'IPv4', unit: undefined }, { session });
  t.deepEqual(fresh.expected, []);
  t.true(fresh.kernel.length > 0);
});
