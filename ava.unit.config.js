// Unit tests: no root, no kernel. Node 24 runs TypeScript directly (type stripping).
export default {
  files: ['test/unit/**/*.test.ts'],
  extensions: { ts: 'module' },
  workerThreads: false,
  timeout: '60s',
};
