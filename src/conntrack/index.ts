// The conntrack flusher: stale UDP/SCTP entries deleted after each committed sync,
// and a reconcile of the table after a restart. See flusher.ts for the wiring.
export { ConntrackFlusher, DEFAULT_FLUSH_BATCH, DEFAULT_FLUSH_TIMEOUT_MS, DEFAULT_MAX_ATTEMPTS } from './flusher.ts';
export type { ConntrackFlusherOptions, FlusherClient, FlushRunReport } from './flusher.ts';
export { staleFlowFilters, staleFlowFiltersAll } from './stale-filters.ts';
export { isStaleAgainst, servingIndex, targetKey } from './plan.ts';
export type { ServingIndex } from './plan.ts';
