// The systemd boot test: a debootstrapped Debian with systemd as PID 1 under QEMU, the .deb
// installed and the service started (see test/vm/systemd-boot.test.ts). Run: npm run
// test:systemd (the last step of npm test). All its cases wait on one boot in test.before,
// 5-15 minutes under emulation (more on a loaded machine), hence the long timeout.
export default {
  files: ['test/vm/systemd-boot.test.ts'],
  extensions: { ts: 'module' },
  workerThreads: false,
  concurrency: 1,
  timeout: '40m',
};
