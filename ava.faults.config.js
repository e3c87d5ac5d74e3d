// The fault suite (issue 18): the tests that feed the daemon bad input, tamper with its kernel
// state, flood it or make its API server misbehave, run together by `npm run test:faults`.
// Each file also belongs to the unit, kernel or VM suite, which `npm test` runs; this list is not
// run again there. Kernel and VM files need root, as those suites.
export default {
  files: [
    // One bad object never blocks the rest.
    'test/kernel/nft-bad-names.test.ts',
    'test/unit/model/validation.test.ts',
    'test/unit/proxier/nftables/refusal.test.ts',
    // Drift repaired at once, and a storm of it bounded by --min-sync-period.
    'test/kernel/drift-repair.test.ts',
    'test/kernel/fault-drift-storm.test.ts',
    // The same in IPVS mode, under QEMU (Debian's kernel: the machine's has no IPVS).
    'test/vm/ipvs-drift.test.ts',
    // SIGKILL between the batches of a 50,000-Service full sync; the restart converges exactly.
    'test/kernel/fault-kill-mid-sync.test.ts',
    // The API server: hung, hung mid-watch, 401/403, TLS, 410 storms; the Node arriving late.
    'test/unit/sources/kubernetes.test.ts',
    'test/unit/sources/kube-api.test.ts',
    'test/unit/sources/gone-storm.test.ts',
    'test/unit/sources/tls-error.test.ts',
    'test/kernel/fault-api-errors.test.ts',
    'test/kernel/fault-api-hung.test.ts',
    'test/kernel/fault-api-410.test.ts',
    'test/kernel/fault-node-late.test.ts',
    // Floods and big input: /metrics, a large manifest file.
    'test/unit/metrics/render-cache.test.ts',
    'test/unit/health/connection-slots.test.ts',
    'test/unit/health/http-limits.test.ts',
    'test/kernel/fault-http-flood.test.ts',
    // Health checks under 1,000 looping and 1,000 half-open attacker connections.
    'test/kernel/fault-health-flood.test.ts',
    // The userspace proxy's descriptor budget under a low RLIMIT_NOFILE.
    'test/unit/base/descriptor-budget.test.ts',
    'test/kernel/fault-us-budget.test.ts',
    'test/unit/sources/manifest-dir.test.ts',
    // Log forging (controls, bidi and format characters), --write-config-to through a symlink.
    'test/unit/log/log-hygiene.test.ts',
    'test/unit/config/write-config-to.test.ts',
    // Durations past Node's timer limit, 0 and 1ns, from flags and the file.
    'test/unit/config/duration-bounds.test.ts',
    'test/kernel/fault-durations.test.ts',
    // Inputs within limits: FIFOs, devices, sockets, oversized files, alias bombs; memory after a large manifest.
    'test/unit/sources/input-limits.test.ts',
    'test/kernel/fault-large-manifest.test.ts',
    // trace --live: concurrent sessions, a daemon SIGKILLed mid-trace.
    'test/kernel/fault-trace-sessions.test.ts',
  ],
  extensions: { ts: 'module' },
  workerThreads: false,
  concurrency: 2,
  // AVA's time-out is for silence between results: the VM file's boot reports after minutes.
  timeout: '10m',
};
