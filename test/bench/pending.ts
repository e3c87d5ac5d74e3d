// Benchmarks whose code under test does not exist yet. They keep their place in BENCHMARKS.md
// with every row marked "not yet measured" and the reason, so a missing figure is never
// mistaken for a good one. When a module lands, point its line in run.ts's registry at it.

import type { Bench, Section } from './section.ts';
import { notMeasured } from './section.ts';

/** Issue 5: needs the IPVS proxier (being written) and a QEMU boot of Debian's stock kernel. */
export const ipvs: Bench = {
  needsRoot: false,
  run: async (): Promise<Section[]> => {
    const s = notMeasured(
      'IPVS proxier (issue 5, under QEMU): full sync and one-endpoint update',
      'kube-proxy-ts’s IPVS proxier (generic netlink + ipset nfnetlink + nf_tables companion rules) side by side with the exec approach ' +
        '(`ipvsadm --restore` + `ipset restore` + `iptables-nft-restore` of the same state), in the same QEMU boot of Debian’s stock 6.1 kernel ' +
        '(this machine’s kernel has no IPVS), so its figures are relative to each other, not to the other sections.',
      [
        ['full sync from empty', '1,000 × 10'],
        ['full sync from empty', '5,000 × 10'],
        ['one endpoint changed', '1,000 × 10'],
        ['one endpoint changed', '5,000 × 10'],
      ],
      'the IPVS proxier (src/proxier/ipvs) is still being written: there is nothing of ours to time yet',
      [{ what: '#5 IPVS full sync and one-endpoint update, 1,000 and 5,000 × 10, vs exec', target: 'figures side by side (no threshold set)' }],
    );
    return [
      {
        ...s,
        notes: [
          ...(s.notes ?? []),
          'Figures to beat, from ../shared/docs/ANCHORS.md (upstream reports, **not measured in this run**): upstream IPVS mode ≈ 20 s per endpoint change at ≈ 4k endpoints (73382); ' +
            '65 % of a core at 2k Services (88212); kube-router ≈ 16 s full resync per endpoint change at 2.7k Services.',
        ],
      },
    ];
  },
};
