// Benchmarks whose code under test does not exist yet. They keep their place in BENCHMARKS.md
// with every row marked "not yet measured" and the reason, so a missing figure is never
// mistaken for a good one. When a module lands, point its line in run.ts's registry at it.

import type { Bench, Section } from './section.ts';
import { notMeasured } from './section.ts';

const SIZES_NFT = ['1,000 × 10', '5,000 × 10', '10,000 × 10'];

/** Issue 4: the lead adds test/bench/nftables.ts; until then this stands in for it. */
export const nftables: Bench = {
  needsRoot: false,
  run: async (): Promise<Section[]> => {
    const s = notMeasured(
      'nftables proxier (issue 4): full sync and one-endpoint update',
      'kube-proxy-ts’s nftables proxier (model + one nfnetlink batch) side by side with (a) our own ruleset written as text through `nft -f` and ' +
        '(b) an upstream-shaped ruleset (per-Service chains, `numgen random mod N vmap { … }`) through `nft -f`, in one run.',
      [
        ...SIZES_NFT.map((s) => ['full sync from empty (model + kernel)', s] as const),
        ...SIZES_NFT.map((s) => ['one endpoint added to one Service', s] as const),
        ['daemon RSS, steady and peak', '10,000 × 10'],
        ['stretch: full sync / one-endpoint update', '50,000 × 10'],
        ['first-packet TCP connect, first vs last Service', '10,000 Services'],
      ],
      'its module, test/bench/nftables.ts, is not written yet (the lead adds it with the proxier)',
      [
        { what: '#4 full sync 10,000 × 10', target: '< 1 s' },
        { what: '#4 full sync 5,000 × 10 vs exec', target: '≥ 2× faster than (a), ≥ 40× faster than (b)' },
        { what: '#4 one endpoint added', target: '< 10 ms at every size; 10,000 within 1.5× of 1,000' },
        { what: '#4 daemon RSS at 10,000 × 10', target: '< 160 MiB steady, < 256 MiB peak' },
        { what: '#4 stretch 50,000 × 10', target: 'full sync < 10 s, one-endpoint update < 20 ms' },
        { what: '#4 first-packet latency, first vs last of 10,000', target: 'within 10 %' },
      ],
    );
    return [
      {
        ...s,
        notes: [
          ...(s.notes ?? []),
          'Figures to beat, from ../shared/docs/ANCHORS.md (earlier runs on this project’s machines and upstream reports, **not measured in this run**): ' +
            'upstream-shaped ruleset through `nft -f`, full load 0.83 s / 43 s / 145–174 s and one-endpoint change 0.06 s / 0.30 s / 1.0 s at 1,000 / 5,000 / 10,000 Services × 10; ' +
            'upstream nftables mode adding one Service at 10k ≈ 141 ms, peak memory ≈ 260 MiB (PR 126013).',
        ],
      },
    ];
  },
};

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
