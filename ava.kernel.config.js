// Kernel tests: root, one fresh network namespace per test, real packets.
export default {
  files: ['test/kernel/**/*.test.ts'],
  extensions: { ts: 'module' },
  workerThreads: false,
  concurrency: 2,
  timeout: '120s',
};
