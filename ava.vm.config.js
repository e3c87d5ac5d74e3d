// VM tests: Debian's stock kernel under QEMU (IPVS, systemd). One boot per test file.
export default {
  files: ['test/vm/**/*.test.ts'],
  extensions: { ts: 'module' },
  workerThreads: false,
  concurrency: 1,
  timeout: '10m',
};
