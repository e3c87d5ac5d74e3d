// V8 options the packaged daemon runs with (/usr/bin/kube-proxy-ts passes them to the bundled
// Node), and that the benchmark gives the process it measures.
//
// --max-semi-space-size=8: Node 24 sizes the young generation by the heap limit, up to tens
// of MiB per semi-space, and keeps them once grown. A daemon's allocations are bursts (a full
// sync) followed by long idle times, so that memory is mostly held for nothing: measured at
// 10,000 Services x 10 after a full sync, RSS 472 MiB with the default and 336-340 MiB with
// 1, 2, 4 or 8 MiB semi-spaces, for the same sync time within the noise.
//
// --expose-gc: lets the daemon run one compacting collection after its first full sync
// (heap.ts), which gives back the pages the start-up's garbage grew the heap into. Measured
// end to end at 10,000 Services x 10 in one run: RSS after the first sync 317 -> 232 MiB,
// after 1,500 endpoint updates 336 -> 258 MiB, daemon CPU to the first sync within the noise.
// Left out, measured in the same run: --optimize-for-size (211 MiB after the churn, but twice
// the cold-start CPU and a new Service answered after 707 ms instead of 18 ms) and a
// --max-old-space-size cap (243 MiB; a cap is a crash at a cluster size it did not foresee).
export const DAEMON_V8_OPTIONS: readonly string[] = ['--max-semi-space-size=8', '--expose-gc'];
