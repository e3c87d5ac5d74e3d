// The run's JSON (docs/bench/results.json after a full run): the environment, the load, every
// module's sections with their figures. BENCHMARKS.md and the charts are rendered from it, and
// `npm run bench -- --render FILE` renders them again from a saved one.

import { readFileSync } from 'node:fs';
import type { Figure } from './figures.ts';
import type { Section } from './section.ts';

export interface ModuleResult {
  name: string;
  /** One line of what the module measures. */
  summary: string;
  ms: number;
  failed: boolean;
  sections: Section[];
}

export interface RunResults {
  /** The document's shape; --render refuses another. */
  version: 1;
  quick: boolean;
  environment: {
    date: string;
    kernel: string;
    cpus: number;
    cpuModel: string;
    memoryGiB: number;
    node: string;
    root: boolean;
    tools: string;
    source: string;
  };
  load: { start: string; end: string; during: string };
  totalMs: number;
  modules: ModuleResult[];
  /** Registered modules this run did not run (a subset, or the slow ones in --quick). */
  skipped?: string[];
  /**
   * What the person who ran it knows and the figures cannot say (other work that shared the
   * machine during a module, a cross-check run after it), added to the JSON by hand and
   * rendered under the run line, so that --render keeps it with the figures it qualifies.
   */
  notes?: string[];
}

export function figuresOf(results: RunResults): Figure[] {
  return results.modules.flatMap((m) => m.sections.flatMap((s) => s.figures ?? []));
}

/** Bounded: a results file is a few hundred KiB; anything much larger is not one. */
const MAX_BYTES = 16 * 2 ** 20;

export function readResults(path: string): RunResults {
  const text = readFileSync(path, 'utf8');
  if (text.length > MAX_BYTES) throw new Error(`${path}: larger than ${MAX_BYTES} bytes, not a results file`);
  const r = JSON.parse(text) as Partial<RunResults>;
  if (r.version !== 1 || !Array.isArray(r.modules) || !r.environment || !r.load)
    throw new Error(`${path}: not a benchmark results file (version 1)`);
  return r as RunResults;
}
