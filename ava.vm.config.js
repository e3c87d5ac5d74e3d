// VM tests: Debian's stock kernel under QEMU (IPVS, conntrack). One boot per test file.
// The systemd boot test has its own config (ava.systemd.config.js, `npm run test:systemd`):
// in one of two clean CI runs the packaged Node died inside the emulated VM with a V8 fatal
// error ("Check failed: it->second.Size() > offset") before READY; until that is understood
// it is not part of `npm test` (issue 8 stays open for it).
export default {
  files: ['test/vm/**/*.test.ts', '!test/vm/systemd-boot.test.ts'],
  extensions: { ts: 'module' },
  workerThreads: false,
  concurrency: 1,
  timeout: '10m',
};
