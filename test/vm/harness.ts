// Boots Debian's stock 6.1 kernel under QEMU (software emulation: KVM does not work on these
// machines) with the host's / shared read-write over virtio-9p, runs one shell script inside
// as the payload of PID 1, and hands back its output and exit status. One boot should run
// many test cases: batch them into one script (see run-cases.ts).
//
//   host                                     VM (QEMU, -no-reboot)
//   prepare.sh -> .cache/vm/{root,initrd.gz}  initramfs /init: insmod virtio+9p, mount hostroot,
//   runs/<id>/init.sh  (written here)          switch_root -> /bin/sh runs/<id>/init.sh
//   runs/<id>/payload.sh (the caller's)        init.sh: tmpfs /tmp /run, modprobe -d, payload,
//   runs/<id>/{output,status,timings}  <----   writes output + status, powers off
//
// QEMU is always killed: on time-out, on abort, and when this process exits.

import { spawn, spawnSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

const REPO = resolve(import.meta.dirname, '../..');
export const VM_CACHE = process.env.KPTS_VM_CACHE ?? join(REPO, '.cache/vm');

/** Modules loaded (with their dependencies) before the payload starts, unless overridden. */
export const DEFAULT_MODULES: readonly string[] = [
  'ip_vs',
  'ip_vs_rr',
  'ip_vs_wrr',
  'ip_vs_lc',
  'ip_vs_wlc',
  'ip_vs_sh',
  'ip_vs_dh',
  'ip_vs_mh',
  'ip_vs_sed',
  'ip_vs_nq',
  'nf_conntrack',
  'nf_conntrack_netlink',
  'veth',
  'dummy',
  'ip_set',
  'ip_set_hash_ip',
  'ip_set_hash_ipport',
  'ip_set_hash_ipportip',
  'ip_set_hash_ipportnet',
  'ip_set_hash_net',
  'ip_set_bitmap_port',
  'nf_tables',
  'nft_compat',
  'nft_chain_nat',
  'nft_ct',
  'nft_nat',
  'nft_masq',
  'xt_set',
  'xt_mark',
  'xt_comment',
  'xt_MASQUERADE',
  'xt_addrtype',
  'xt_conntrack',
];

export interface VmRunOptions {
  /** Shell script (sh) run inside the VM from /work/main (the repo), as root. */
  script: string;
  /** Hard bound on the whole run, boot included. QEMU is killed when it expires. */
  timeoutMs: number;
  /** Modules to load before the payload; default DEFAULT_MODULES. */
  modules?: readonly string[];
  /**
   * Point the kernel's module autoloader (/proc/sys/kernel/modprobe) at the unpacked package,
   * as on a real node (default true). The payload can switch it later: `echo $VM_MODPROBE >
   * /proc/sys/kernel/modprobe`.
   */
  autoload?: boolean;
  memoryMb?: number;
  cpus?: number;
  /**
   * 'single': one host thread runs every vCPU (`-accel tcg,thread=single`). QEMU's default for
   * -smp 2 is multi-threaded TCG, under which about one Node start in four died with a V8 fatal
   * error (Wasm tier-up; see test/vm/systemd/boot.ts), and every VM here runs Node, so the
   * default is 'single'. A 2-core host gains little from a second TCG thread anyway.
   */
  tcgThread?: 'single' | 'multi';
  signal?: AbortSignal;
}

export interface VmRunResult {
  /** The payload's exit status; null when it never finished (time-out, crash). */
  status: number | null;
  /** The payload's stdout and stderr, interleaved. */
  output: string;
  /** The serial console and the init script's own log: what to read when status is null. */
  console: string;
  timedOut: boolean;
  /**
   * Wall-clock ms not spent in the payload: QEMU start, kernel, initramfs, 9p mount, module
   * loading and power-off (total minus payloadMs).
   */
  bootMs: number | null;
  /** Ms the payload itself ran, by the guest's clock. */
  payloadMs: number | null;
  totalMs: number;
  /** Where the payload could leave more files ($RUN_DIR inside the VM). */
  runDir: string;
  /** Reads a file the payload wrote into $RUN_DIR (undefined if absent). */
  file(name: string): string | undefined;
}

export interface KernelInfo {
  kver: string;
  vmlinuz: string;
  initrd: string;
  modulesRoot: string;
}

let prepared: KernelInfo | undefined;

/** Runs prepare.sh (idempotent: a no-op once the cache is complete) and reads what it made. */
export function prepareVm(): KernelInfo {
  if (prepared) return prepared;
  const r = spawnSync('/bin/bash', [join(import.meta.dirname, 'prepare.sh'), VM_CACHE], {
    encoding: 'utf8',
    timeout: 600_000,
  });
  if (r.status !== 0)
    throw new Error(`test/vm/prepare.sh failed (status ${r.status}, signal ${r.signal}):\n${r.stderr}`);
  const env = Object.fromEntries(
    readFileSync(join(VM_CACHE, 'kernel.env'), 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => l.split('=', 2) as [string, string]),
  );
  const kver = env.KVER;
  const vmlinuz = env.VMLINUZ;
  if (!kver || !vmlinuz) throw new Error(`${VM_CACHE}/kernel.env is incomplete`);
  prepared = { kver, vmlinuz, initrd: join(VM_CACHE, 'initrd.gz'), modulesRoot: join(VM_CACHE, 'root') };
  return prepared;
}

const live = new Set<ChildProcess>();
let exitHookInstalled = false;
function killAllOnExit(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
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

/** Run directories are kept for reading after a failure; only the most recent few. */
function pruneRuns(keep = 8): void {
  const dir = join(VM_CACHE, 'runs');
  if (!existsSync(dir)) return;
  const old = readdirSync(dir).sort().slice(0, -keep);
  for (const d of old) rmSync(join(dir, d), { recursive: true, force: true });
}

const shq = (s: string): string => `'${s.replaceAll("'", `'\\''`)}'`;

function initScript(
  k: KernelInfo,
  runDir: string,
  modules: readonly string[],
  autoload: boolean,
  timeoutMs: number,
): string {
  // Runs as PID 1 under the host's /bin/sh (dash). Must never exit: it powers off instead.
  return `#!/bin/sh
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root LANG=C.UTF-8
RUN_DIR=${shq(runDir)}
exec >"$RUN_DIR/init.log" 2>&1
off() { sync; echo o >/proc/sysrq-trigger; /bin/busybox poweroff -f; }
trap off EXIT
# Private scratch space, except where the repository itself lives (a clone under /tmp,
# as CI may make): hiding it would hide the run directory and the code under test.
scratch() { case "$RUN_DIR/" in "$1"/*) return 1 ;; esac; mount -t tmpfs -o "mode=$2" tmpfs "$1" 2>/dev/null || true; }
scratch /run 755
mkdir -p /run/netns /run/lock
kept_tmp=0
scratch /tmp 1777 || kept_tmp=1
scratch /var/tmp 1777
# A kept /tmp is the host's over 9p, where a unix socket cannot be bound (listen: ENXIO):
# the guest's own temporary files go to a private directory on /run's tmpfs instead.
if [ "$kept_tmp" = 1 ]; then mkdir -p /run/vm-tmp && chmod 1777 /run/vm-tmp && export TMPDIR=/run/vm-tmp; fi
echo "boot $(cut -d' ' -f1 /proc/uptime)" >>"$RUN_DIR/timings"
cat >"$RUN_DIR/vm-modprobe" <<'EOF'
#!/bin/sh
exec /usr/sbin/modprobe -d ${shq(k.modulesRoot)} "$@"
EOF
chmod +x "$RUN_DIR/vm-modprobe"
export VM_MODPROBE="$RUN_DIR/vm-modprobe" VM_MODULES_ROOT=${shq(k.modulesRoot)} VM_KVER=${shq(k.kver)} RUN_DIR
echo 1 >/proc/sys/kernel/sysrq
${autoload ? 'echo "$VM_MODPROBE" >/proc/sys/kernel/modprobe' : 'echo /bin/false >/proc/sys/kernel/modprobe'}
mods=${shq(modules.join(' '))}
if [ -n "$mods" ] && ! "$VM_MODPROBE" -a $mods; then
  for m in $mods; do "$VM_MODPROBE" "$m" || echo "vm: modprobe $m failed"; done
fi
ip link set lo up
echo "modules $(cut -d' ' -f1 /proc/uptime)" >>"$RUN_DIR/timings"
# A second bound, inside: should the host process die without killing QEMU, the guest
# still powers itself off (its clock starts after boot, so the host's timer fires first).
( sleep ${Math.ceil(timeoutMs / 1000)}; echo "vm: watchdog fired after ${Math.ceil(timeoutMs / 1000)} s" >>"$RUN_DIR/init.log"; off ) &
cd ${shq(REPO)}
/bin/sh "$RUN_DIR/payload.sh" >"$RUN_DIR/output" 2>&1 </dev/null
echo $? >"$RUN_DIR/status"
echo "done $(cut -d' ' -f1 /proc/uptime)" >>"$RUN_DIR/timings"
off
`;
}

/** Boots the VM once, runs `script`, and always leaves no QEMU behind. */
export async function runInVm(opts: VmRunOptions): Promise<VmRunResult> {
  const k = prepareVm();
  killAllOnExit();
  const runDir = join(
    VM_CACHE,
    'runs',
    `${new Date().toISOString().replace(/[:.]/g, '-')}-${process.pid}-${Math.floor(Math.random() * 1e6)}`,
  );
  pruneRuns();
  mkdirSync(runDir, { recursive: true });
  writeFileSync(join(runDir, 'payload.sh'), opts.script);
  const init = join(runDir, 'init.sh');
  writeFileSync(init, initScript(k, runDir, opts.modules ?? DEFAULT_MODULES, opts.autoload ?? true, opts.timeoutMs), {
    mode: 0o755,
  });

  const args = [
    '-accel',
    `tcg,thread=${opts.tcgThread ?? 'single'}`,
    '-m',
    `${opts.memoryMb ?? 2048}M`,
    '-smp',
    String(opts.cpus ?? 2),
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
    // no_timer_check: under software emulation on a loaded host the kernel's IO-APIC timer
    // check can fail ("IO-APIC + timer doesn't work!") and panic the boot; skip it.
    '-append',
    `console=ttyS0 quiet loglevel=3 panic=-1 mitigations=off no_timer_check VMINIT=${init}`,
    '-fsdev',
    'local,id=r,path=/,security_model=passthrough,multidevs=remap',
    '-device',
    'virtio-9p-pci,fsdev=r,mount_tag=hostroot',
  ];
  const started = Date.now();
  const qemu = spawn('/usr/bin/qemu-system-x86_64', args, { stdio: ['ignore', 'pipe', 'pipe'] });
  live.add(qemu);
  let consoleText = '';
  const keepTail = (d: Buffer): void => {
    consoleText += d.toString('utf8');
    if (consoleText.length > 200_000) consoleText = consoleText.slice(-100_000);
  };
  qemu.stdout.on('data', keepTail);
  qemu.stderr.on('data', keepTail);

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
  const totalMs = Date.now() - started;

  const read = (name: string): string | undefined => {
    const p = join(runDir, name);
    return existsSync(p) ? readFileSync(p, 'utf8') : undefined;
  };
  const statusText = read('status');
  const status = statusText === undefined ? null : Number.parseInt(statusText.trim(), 10);
  // Guest uptimes: boot = payload about to start after modules; map to host ms from the end.
  const timings = new Map(
    (read('timings') ?? '')
      .split('\n')
      .filter(Boolean)
      .map((l) => l.split(' ') as [string, string])
      .map(([a, b]) => [a, Number(b) * 1000]),
  );
  const modulesAt = timings.get('modules');
  const doneAt = timings.get('done');
  const payloadMs = modulesAt !== undefined && doneAt !== undefined ? Math.round(doneAt - modulesAt) : null;
  // The guest clock starts a little after QEMU: attribute everything not spent in the payload to boot.
  const bootMs = payloadMs !== null ? totalMs - payloadMs : null;
  const result: VmRunResult = {
    status: Number.isNaN(status) ? null : status,
    output: read('output') ?? '',
    console: `${consoleText}\n--- init.log ---\n${read('init.log') ?? '(none)'}\n--- timings ---\n${read('timings') ?? '(none)'}`,
    timedOut,
    bootMs,
    payloadMs,
    totalMs,
    runDir,
    file: read,
  };
  return result;
}
