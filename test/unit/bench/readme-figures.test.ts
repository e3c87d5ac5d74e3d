// The README's Status table and its note on `npm run bench` quote the committed run
// (docs/bench/results.json): each quoted figure is formatted here from that JSON as the summary
// formats it, and must stand in its row. A new run that changes a figure fails this test until
// the README says the new one.
import test from 'ava';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Figure, Metric, Mode } from '../../../test/bench/figures.ts';
import { OURS } from '../../../test/bench/figures.ts';
import { figuresOf, readResults } from '../../../test/bench/results.ts';
import { formatValue } from '../../../test/bench/summary.ts';

const root = (p: string): string => fileURLToPath(new URL(`../../../${p}`, import.meta.url));
const results = readResults(root('docs/bench/results.json'));
const figs = figuresOf(results);
const readme = readFileSync(root('README.md'), 'utf8');

interface Pick {
  mode: Mode;
  metric: Metric;
  services: number;
  endpoints?: number;
  variant?: string;
  series?: string;
}

function find(p: Pick): Figure {
  const f = figs.find(
    (x) =>
      x.mode === p.mode &&
      x.metric === p.metric &&
      x.services === p.services &&
      x.endpoints === (p.endpoints ?? 10) &&
      x.series === (p.series ?? OURS) &&
      (p.variant === undefined || x.variant === p.variant),
  );
  if (!f) throw new Error(`the run has no figure ${JSON.stringify(p)}`);
  return f;
}

const value = (p: Pick): string => {
  const f = find(p);
  return formatValue(f.value, f.unit);
};
/** How many times faster ours is than the exec peer, as the README writes it. */
const ratio = (p: Pick, peer: string): string => {
  const r = find({ ...p, series: peer }).value / find(p).value;
  return `${r < 10 ? r.toFixed(1) : r.toFixed(0)}×`;
};

/** The Status table's row whose first cell is `part`. */
function row(part: string): string {
  const line = readme.split('\n').find((l) => l.startsWith(`| ${part} |`));
  if (!line) throw new Error(`README has no Status row "${part}"`);
  return line;
}

const nftChurn = { mode: 'nftables', services: 10_000, variant: '100/s' } as const;
const EXPECTED: Record<string, string[]> = {
  'nftables mode': [
    `Full sync of 10,000 Services × 10 endpoints ${value({ mode: 'nftables', metric: 'fullSync', services: 10_000 })} in process`,
    `\`nft -f\` of the same ruleset: ${value({ mode: 'nftables', metric: 'fullSync', services: 10_000, series: 'nft -f (our ruleset as text)' })}`,
    `of an upstream-shaped one: ${value({ mode: 'nftables', metric: 'fullSync', services: 10_000, series: 'nft -f (upstream-shaped ruleset)' })}`,
    `one endpoint change ${value({ mode: 'nftables', metric: 'oneChange', services: 10_000 })} at 10,000 Services, ${value({ mode: 'nftables', metric: 'oneChange', services: 50_000 })} at 50,000`,
    `cold start to the last Service answering ${value({ mode: 'nftables', metric: 'coldStart', services: 10_000, variant: 'last Service' })} at 10,000 Services`,
    `${value({ ...nftChurn, metric: 'churnCpu' })} and a p99 change latency of ${value({ ...nftChurn, metric: 'churnP99' })} by packets`,
  ],
  'iptables mode': [
    `Full sync at 10,000 Services ${value({ mode: 'iptables', metric: 'fullSync', services: 10_000 })}`,
    `iptables-nft-restore ${value({ mode: 'iptables', metric: 'fullSync', services: 10_000, series: 'iptables-nft-restore' })}`,
    `iptables-legacy-restore ${value({ mode: 'iptables', metric: 'fullSync', services: 10_000, series: 'iptables-legacy-restore' })}`,
    `one endpoint change ${value({ mode: 'iptables', metric: 'oneChange', services: 10_000 })} at 10,000 Services against ${value({ mode: 'iptables', metric: 'oneChange', services: 10_000, series: 'iptables-nft-restore --noflush' })}`,
  ],
  'ipvs mode': [
    `full sync ${ratio({ mode: 'ipvs', metric: 'fullSync', services: 5_000 }, 'ip, ipset, ipvsadm, iptables-nft-restore')} faster`,
    `one endpoint change ${ratio({ mode: 'ipvs', metric: 'oneChange', services: 5_000 }, 'ipvsadm -a, iptables-nft-restore --noflush')} faster`,
  ],
  daemon: [
    `Idle memory ${value({ mode: 'nftables', metric: 'rss', services: 0, endpoints: 0, variant: 'after first sync' })}`,
    `${value({ mode: 'nftables', metric: 'rss', services: 10_000, variant: 'after churn' })} at 10,000 Services after a minute of churn`,
  ],
};

test('the README’s Status figures are the committed run’s', (t) => {
  for (const [part, texts] of Object.entries(EXPECTED))
    for (const text of texts) t.true(row(part).includes(text), `README row "${part}" says "${text}"`);
});

test('the README names the committed run by its date and states how long it took', (t) => {
  t.false(results.quick, 'the committed run is a full one, not --quick');
  const day = results.environment.date.slice(0, 10);
  const kernel = /^\d+\.\d+/.exec(results.environment.kernel)?.[0] ?? '';
  t.true(readme.includes(`-core machine, kernel ${kernel};`), `kernel ${kernel}`);
  const minutes = Math.round(results.totalMs / 60_000);
  t.true(readme.includes(`(its run of ${day} on a ${results.environment.cpus}-core machine`), day);
  t.true(
    readme.includes(`(${minutes} minutes on a ${results.environment.cpus}-CPU machine, the run of ${day};`),
    `${minutes} min`,
  );
});
