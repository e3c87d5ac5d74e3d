// VM tests: Debian's stock kernel under QEMU (IPVS, conntrack). One boot per test file.
// The systemd boot test has its own config (ava.systemd.config.js, `npm run test:systemd`,
// which `npm test` runs after these): its one boot takes longer than this config's timeout.
export default {
  files: ['test/vm/**/*.test.ts', '!test/vm/systemd-boot.test.ts'],
  extensions: { ts: 'module' },
  workerThreads: false,
  concurrency: 1,
  timeout: '10m',
};
