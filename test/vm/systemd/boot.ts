// Boots a debootstrapped Debian 12 tree with systemd as PID 1 under QEMU (Debian's stock
// kernel, software emulation), installs the .deb there and runs payload.sh as a oneshot
// unit; hands back what the payload recorded in /kpts/out.
//
//   host                                         VM
//   prepare-tree.sh -> .cache/systemd-vm/bookworm (pristine, reused)
//   runs/<id>/root = copy of it + /kpts/{deb,payload.sh,init.sh,manifests,
//                    standin-main.js,topology.sh,traffic.mjs}
//   QEMU: 9p "hostroot" = runs/<id>/root         initramfs (test/vm/prepare.sh's): 9p root,
//         9p "kmods" = the kernel's modules        switch_root -> /kpts/init.sh: mount kmods
//                                                  on /usr/lib/modules, exec systemd;
//                                                  kpts-test.service runs payload.sh, then
//                                                  SuccessAction/FailureAction=poweroff-force
// The kernel, initramfs and modules are the ones test/vm/harness.ts prepares (prepareVm).
// QEMU is killed on time-out, on abort, and when this process exits.

import { spawn, spawnSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { prepareVm } from '../harness.ts';

const REPO = resolve(import.meta.dirname, '../../..');
export const SYSTEMD_VM_CACHE = process.env.KPTS_SYSTEMD_VM_CACHE ?? join(REPO, '.cache/systemd-vm');
const HERE = import.meta.dirname;

export interface BootResult {
  /** 0 when the payload ran to its end; null if it never finished. */
  status: number | null;
  timedOut: boolean;
  totalMs: number;
  /** Serial console (systemd's boot messages), for reading when status is null. */
  console: string;
  runDir: string;
  /** A file the payload wrote into /kpts/out (undefined if absent). */
  out(name: string): string | undefined;
  /** The exit status of a payload step (undefined if it did not run). */
  rc(step: string): number | undefined;
}

/** Runs prepare-tree.sh (a no-op once the cached tree is complete). */
export function prepareTree(): string {
  const r = spawnSync('/bin/bash', [join(HERE, 'prepare-tree.sh'), SYSTEMD_VM_CACHE], {
    encoding: 'utf8',
    timeout: 900_000,
  });
  if (r.status !== 0)
    throw new Error(`test/vm/systemd/prepare-tree.sh failed (status ${r.status}, signal ${r.signal}):\n${r.stderr}`);
  return join(SYSTEMD_VM_CACHE, 'bookworm');
}

const live = new Set<ChildProcess>();
let hooked = false;
function killOnExit(): void {
  if (hooked) return;
  hooked = true;
  const killAll = (): void => {
    for (const p of live) p.kill('SIGKILL');
  };
  process.on('exit', killAll);
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    process.once(sig, () => {
      killAll();
      process.kill(process.pid, sig);
    });
  }
}

/** Each run's tree is ~450 MB once the package is in: keep only the latest two. */
function pruneRuns(keep = 2): void {
  const dir = join(SYSTEMD_VM_CACHE, 'runs');
  if (!existsSync(dir)) return;
  for (const d of readdirSync(dir).sort().slice(0, -keep)) rmSync(join(dir, d), { recursive: true, force: true });
}

// PID 1 between the initramfs and systemd. The 9p root is slow to write under emulation
// (dpkg unpacks ~2500 files), so systemd gets an overlay: the 9p tree read-only below, a
// tmpfs above; /kpts (the payload and its results) stays the host's, bound through.
const INIT = `#!/bin/sh
log() { echo "kpts-init: $*" >>/kpts/out/init.log; }
mkdir -p /usr/lib/modules
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,ro kmods /usr/lib/modules || log "no modules share"
echo /usr/sbin/modprobe >/proc/sys/kernel/modprobe
modprobe overlay || log "modprobe overlay failed"
mount -t tmpfs -o size=1800M,mode=755 kpts-ovl /mnt
mkdir -p /mnt/upper /mnt/work /mnt/root
if mount -t overlay overlay -o lowerdir=/,upperdir=/mnt/upper,workdir=/mnt/work /mnt/root; then
  mount --bind /kpts /mnt/root/kpts
  mount --move /usr/lib/modules /mnt/root/usr/lib/modules
  for d in dev proc sys; do mount --move /$d /mnt/root/$d; done
  cd /mnt/root
  mkdir -p oldroot
  pivot_root . oldroot || log "pivot_root failed"
  log "root is an overlay on tmpfs"
  exec /usr/sbin/chroot . /lib/systemd/systemd
fi
log "overlay failed: running on the 9p root"
exec /lib/systemd/systemd
`;

/** Units a test boot does not need (timers, fs checks, logins): fewer jobs under emulation. */
const MASK = [
  'e2scrub_reap.service',
  'e2scrub_all.timer',
  'apt-daily.timer',
  'apt-daily-upgrade.timer',
  'dpkg-db-backup.timer',
  'fstrim.timer',
  'systemd-logind.service',
  'systemd-update-utmp.service',
  'systemd-update-utmp-runlevel.service',
];

const TEST_UNIT = `[Unit]
Description=kube-proxy-ts systemd boot test payload
After=multi-user.target systemd-journald.service dbus.service
SuccessAction=poweroff-force
FailureAction=poweroff-force

[Service]
Type=oneshot
ExecStart=/bin/sh /kpts/payload.sh
StandardOutput=file:/kpts/out/payload.log
StandardError=inherit
TimeoutStartSec=infinity

[Install]
WantedBy=multi-user.target
`;

export interface BootOptions {
  deb: string;
  /** Files placed in /kpts/manifests (the manifest-directory source). */
  manifests?: Record<string, string>;
  timeoutMs: number;
  signal?: AbortSignal;
}

export async function bootWithPackage(opts: BootOptions): Promise<BootResult> {
  const k = prepareVm();
  const tree = prepareTree();
  killOnExit();
  pruneRuns();
  const runDir = join(SYSTEMD_VM_CACHE, 'runs', `${new Date().toISOString().replace(/[:.]/g, '-')}-${process.pid}`);
  const root = join(runDir, 'root');
  mkdirSync(runDir, { recursive: true });
  // A fresh copy of the pristine tree: dpkg and systemd write into it.
  const cp = spawnSync('/bin/cp', ['-a', '--reflink=auto', tree, root], { encoding: 'utf8' });
  if (cp.status !== 0) throw new Error(`copying the tree failed: ${cp.stderr}`);
  const kpts = join(root, 'kpts');
  mkdirSync(join(kpts, 'out'), { recursive: true });
  mkdirSync(join(kpts, 'manifests'), { recursive: true });
  cpSync(opts.deb, join(kpts, 'kube-proxy-ts.deb'));
  cpSync(join(HERE, 'payload.sh'), join(kpts, 'payload.sh'));
  cpSync(join(HERE, 'standin-main.js'), join(kpts, 'standin-main.js'));
  cpSync(join(HERE, 'topology.sh'), join(kpts, 'topology.sh'));
  cpSync(join(HERE, 'traffic.mjs'), join(kpts, 'traffic.mjs'));
  for (const [name, text] of Object.entries(opts.manifests ?? {})) writeFileSync(join(kpts, 'manifests', name), text);
  writeFileSync(join(kpts, 'init.sh'), INIT, { mode: 0o755 });
  writeFileSync(join(root, 'etc/systemd/system/kpts-test.service'), TEST_UNIT);
  for (const u of MASK) spawnSync('/bin/ln', ['-sf', '/dev/null', join(root, 'etc/systemd/system', u)]);
  mkdirSync(join(root, 'etc/systemd/system/multi-user.target.wants'), { recursive: true });
  spawnSync('/bin/ln', [
    '-sf',
    '/etc/systemd/system/kpts-test.service',
    join(root, 'etc/systemd/system/multi-user.target.wants/kpts-test.service'),
  ]);

  const args = [
    // One host thread runs both vCPUs (thread=single), not one thread per vCPU (QEMU's
    // multi-threaded TCG, the default for -smp 2). Under multi-threaded TCG about one start
    // in four of the packaged Node died while loading the daemon, before any log line: V8's
    // fatal "Check failed: it->second.Size() > offset" (a stack walk in
    // Runtime_WasmTriggerTierUp met a return address into Wasm code V8 no longer had
    // registered; Node's TypeScript stripper is Wasm) or a SIGSEGV. Measured: 14 of 56
    // starts with -cpu max, with it minus AVX, BMI or PKU/LA57/FSGSBASE, and with a
    // conservative qemu64+SSE4.2; 0 of 30 with thread=single; 0 of 40 on the host. So it is
    // the emulator's cross-vCPU handling of code that V8 writes from one thread while another
    // runs it, not a CPU feature and not the product. Two guest CPUs remain for the daemon's
    // threads, and on two shared host cores one QEMU thread is no slower.
    '-accel',
    'tcg,thread=single',
    '-m',
    '2048M',
    '-smp',
    '2',
    '-cpu',
    'max',
    '-nographic',
    '-no-reboot',
    '-nodefaults',
    '-serial',
    'stdio',
    '-kernel',
    k.vmlinuz,
    '-initrd',
    k.initrd,
    // no_timer_check: under emulation on a loaded host the kernel's IO-APIC timer check can
    // fail and panic the boot (as in test/vm/harness.ts).
    '-append',
    'console=ttyS0 loglevel=3 panic=-1 mitigations=off no_timer_check VMINIT=/kpts/init.sh systemd.show_status=auto systemd.journald.forward_to_console=0',
    '-fsdev',
    `local,id=r,path=${root},security_model=passthrough,multidevs=remap`,
    '-device',
    'virtio-9p-pci,fsdev=r,mount_tag=hostroot',
    '-fsdev',
    `local,id=m,path=${join(k.modulesRoot, 'lib/modules')},security_model=passthrough,readonly=on`,
    '-device',
    'virtio-9p-pci,fsdev=m,mount_tag=kmods',
  ];
  const started = Date.now();
  const qemu = spawn('/usr/bin/qemu-system-x86_64', args, { stdio: ['ignore', 'pipe', 'pipe'] });
  live.add(qemu);
  let consoleText = '';
  const keep = (d: Buffer): void => {
    consoleText += d.toString('utf8');
    if (consoleText.length > 400_000) consoleText = consoleText.slice(-200_000);
  };
  qemu.stdout.on('data', keep);
  qemu.stderr.on('data', keep);
  let timedOut = false;
  const exited = new Promise<void>((res) => {
    qemu.once('exit', () => res());
    qemu.once('error', (e) => {
      consoleText += `\nspawn qemu: ${e.message}\n`;
      res();
    });
  });
  const timer = setTimeout(() => {
    timedOut = true;
    qemu.kill('SIGKILL');
  }, opts.timeoutMs);
  const onAbort = (): void => {
    qemu.kill('SIGKILL');
  };
  opts.signal?.addEventListener('abort', onAbort, { once: true });
  try {
    await exited;
  } finally {
    clearTimeout(timer);
    opts.signal?.removeEventListener('abort', onAbort);
    if (qemu.exitCode === null && qemu.signalCode === null) qemu.kill('SIGKILL');
    live.delete(qemu);
  }
  writeFileSync(join(runDir, 'console.log'), consoleText);
  const out = (name: string): string | undefined => {
    const p = join(kpts, 'out', name);
    return existsSync(p) ? readFileSync(p, 'utf8') : undefined;
  };
  const statusText = out('status');
  return {
    status: statusText === undefined ? null : Number.parseInt(statusText.trim(), 10),
    timedOut,
    totalMs: Date.now() - started,
    console: consoleText,
    runDir,
    out,
    rc: (step) => {
      const t = out(`${step}.rc`);
      return t === undefined ? undefined : Number.parseInt(t.trim(), 10);
    },
  };
}
