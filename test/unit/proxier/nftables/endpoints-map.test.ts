// The nftables proxier's endpoints maps, exactly as it declares them, against the bytes nft
// 1.0.6 sends for the same maps (test/fixtures/netlink/nftables, see CAPTURE.md).
import test from 'ava';
import { NftTransaction, rule } from '../../../../src/netlink/nftables/index.ts';
import { balancingMapDef } from '../../../../src/proxier/nftables/balancing.ts';
import type { FamilyTraits } from '../../../../src/proxier/nftables/family.ts';
import { IPV4, IPV6 } from '../../../../src/proxier/nftables/family.ts';
import { endpointsMap } from '../../../../src/proxier/nftables/pickers.ts';
import { compare } from '../../netlink/nftables/fixture.ts';

const cases: [fixture: string, traits: FamilyTraits, name: string][] = [
  ['map-endpoints-frontend', IPV4, 'endpoints-2'],
  ['map-endpoints-frontend6', IPV6, 'endpoints-2'],
  ['map-endpoints-nodeport', IPV4, 'nodeport-endpoints-2'],
];

for (const [fixture, traits, name] of cases) {
  test(`endpointsMap(${traits.nft}, ${name}) sends what nft sends: ${fixture}`, (t) => {
    const tx = new NftTransaction({ family: traits.nft, table: 'kube-proxy' });
    tx.add(endpointsMap(traits, name));
    t.is(tx.error, undefined);
    const diff = compare(
      fixture,
      tx.messages(() => undefined),
    );
    if (diff) t.fail(`\n${diff}`);
    else t.pass();
  });
}

// The per-Service balancing map, sent with its picking rule as the proxier writes them.
const balancingCases: [fixture: string, traits: FamilyTraits][] = [
  ['rule-dnat-jhash-map', IPV4],
  ['rule-dnat-jhash-map6', IPV6],
];
for (const [fixture, traits] of balancingCases) {
  test(`balancingMapDef(${traits.nft}) and its jhash rule send what nft sends: ${fixture}`, (t) => {
    const tx = new NftTransaction({ family: traits.nft, table: 'kube-proxy' });
    tx.add(balancingMapDef(traits, 'lb'));
    const r = rule(traits.nft, 'c');
    const l4 = traits.nft === 'ip' ? 'tcp' : 'udp';
    tx.add(
      r
        .match('meta l4proto', l4)
        .dnatHashSource(traits.nft === 'ip' ? 1009 : 101, 0, 'lb')
        .build(),
    );
    t.is(tx.error, undefined);
    const diff = compare(
      fixture,
      tx.messages(() => undefined),
    );
    if (diff) t.fail(`\n${diff}`);
    else t.pass();
  });
}
