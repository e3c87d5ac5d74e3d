// The systemd boot test: a debootstrapped Debian with systemd as PID 1 under QEMU, the .deb
// installed and the service started (see test/vm/systemd-boot.test.ts). Run: npm run test:systemd.
export default {
  files: ['test/vm/systemd-boot.test.ts'],
  extensions: { ts: 'module' },
  workerThreads: false,
  concurrency: 1,
  timeout: '40m',
};
