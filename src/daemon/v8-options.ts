// V8 options the packaged daemon runs with (/usr/bin/kube-proxy-ts passes them to the bundled
// Node), and that the benchmark gives the process it measures.
//
// --max-semi-space-size=8: Node 24 sizes the young generation by the heap limit, up to tens
// of MiB per semi-space, and keeps them once grown. A daemon's allocations are bursts (a full
// sync) followed by long idle times, so that memory is mostly held for nothing: measured at
// 10,000 Services x 10 after a full sync, RSS 472 MiB with the default and 336-340 MiB with
// 1, 2, 4 or 8 MiB semi-spaces, for the same sync time within the noise.
export const DAEMON_V8_OPTIONS: readonly string[] = ['--max-semi-space-size=8'];
