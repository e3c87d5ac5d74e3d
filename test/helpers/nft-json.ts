// `nft -j list ruleset` output made comparable across namespaces: no handles, no expiry
// countdowns, element lists and objects sorted.
import type { NftJsonObject } from './netns.ts';

export function normaliseNftJson(objs: NftJsonObject[]): unknown[] {
  const strip = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(strip);
    if (v && typeof v === 'object') {
      const out: Record<string, unknown> = {};
      for (const [k, x] of Object.entries(v)) {
        if (k === 'handle' || k === 'expires') continue;
        out[k] =
          k === 'elem' && Array.isArray(x)
            ? x.map(strip).sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)))
            : strip(x);
      }
      return out;
    }
    return v;
  };
  return objs.map(strip).sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)));
}
