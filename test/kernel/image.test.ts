// The OCI image (`npm run image`, scripts/image.sh), read and run as a container runtime
// would: its config (entry point, ports), its unpacked root (only what the daemon needs: no
// shell, no package manager, no docs; its size bounded), and that root run with its entry
// point in the node namespace of a namespace cluster (unshare + chroot: its own mount
// namespace with /proc, /sys, /dev, as a privileged hostNetwork pod gets), configured like
// the DaemonSet (deploy/: the ConfigMap's file, the container's flags, the service account's
// token and CA, KUBERNETES_SERVICE_HOST/PORT) against the test API server: traffic to a
// Service flows, and every request it made is one deploy/rbac.yaml's ClusterRole allows.
// `kube-proxy-ts explain` and `trace` run inside that root as `kubectl exec ds/kube-proxy-ts --
// kube-proxy-ts explain` runs them: the image's /usr/bin/kube-proxy-ts (the native launcher; no
// shell in the image) in the pod's mount and network namespaces, against the daemon running there.
// Then again without privileges, as deploy/README.md describes (NET_ADMIN, /proc/sys and /sys
// read-only, conntrack settings left to the node).

import { lstat, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { execFile, execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { selfSignedLoopbackCert } from '../helpers/tls.ts';
import test from 'ava';
import type { ExecutionContext } from 'ava';
import type { Cluster } from '../helpers/cluster.ts';
import { CLIENT_IP, ECHO, makeCluster, NODE_IP, podIP } from '../helpers/cluster.ts';
import type { DaemonProcess } from '../helpers/daemon-process.ts';
import { pollUntil, spawnDaemon } from '../helpers/daemon-process.ts';
import type { PolicyRule } from '../helpers/deploy-manifests.ts';
import { loadDeployManifests, manifestOf, requestAttributes, rulesAllow } from '../helpers/deploy-manifests.ts';
import type { KObject, LoggedRequest } from '../helpers/fake-apiserver.ts';
import { systemTool } from '../helpers/netns.ts';
import type { OciImage } from '../helpers/oci-image.ts';
import { ensureImage, REPO, unpackImage } from '../helpers/oci-image.ts';

const API = new URL('./apiserver-agent.ts', import.meta.url).href;
const AGENT = new URL('./daemon-agent.ts', import.meta.url).href;
const LIB = '/usr/lib/kube-proxy-ts';
const VIP = '10.96.0.10';
const MiB = 1024 * 1024;
/** Bounds on what a node pulls and stores (today ~53 MiB compressed, ~190 MiB unpacked). */
const MAX_COMPRESSED = 64 * MiB;
const MAX_UNPACKED = 220 * MiB;

let image: OciImage;
let root: string;

test.before(async (t) => {
  t.timeout(1_500_000, 'building the .deb and the image');
  image = await ensureImage();
  root = await mkdtemp(join(tmpdir(), 'kpts-image-root-'));
  await unpackImage(image, root);
});
test.after.always(async () => {
  if (root) await rm(root, { recursive: true, force: true });
});

interface Entry {
  path: string;
  kind: 'file' | 'dir' | 'symlink' | 'other';
  mode: number;
  size: number;
}

async function walk(dir: string, rel = ''): Promise<Entry[]> {
  const out: Entry[] = [];
  for (const name of (await readdir(join(dir, rel))).sort()) {
    const path = `${rel}/${name}`;
    const st = await lstat(join(dir, path));
    const kind = st.isFile() ? 'file' : st.isDirectory() ? 'dir' : st.isSymbolicLink() ? 'symlink' : 'other';
    out.push({ path, kind, mode: st.mode & 0o7777, size: st.size });
    if (kind === 'dir') out.push(...(await walk(dir, path)));
  }
  return out;
}

test.serial(
  "the image config: the entry point is kube-proxy-ts (the package's launcher), upstream's ports, a fixed date",
  (t) => {
    const c = image.config;
    t.is(c.os, 'linux');
    t.is(c.architecture, 'amd64');
    t.deepEqual(c.config.Entrypoint, ['/usr/bin/kube-proxy-ts']);
    t.is(c.config.Cmd, undefined, "no default arguments: the flags are the pod's");
    t.deepEqual(Object.keys(c.config.ExposedPorts ?? {}).sort(), ['10249/tcp', '10256/tcp']);
    const epoch = Number(
      execFileSync('/usr/bin/dpkg-parsechangelog', ['-l', join(REPO, 'debian/changelog'), '-S', 'Timestamp'], {
        encoding: 'utf8',
      }).trim(),
    );
    t.is(
      c.created,
      new Date(epoch * 1000).toISOString().replace('.000Z', 'Z'),
      "the changelog's date, not the build's",
    );
    t.is(image.manifest.layers.length, c.rootfs.diff_ids.length);
    t.log(image.log.trim());
  },
);

test.serial(
  'the image root: the daemon, its libraries and a dpkg database; no shell, no tools, no package manager, no docs; size bounded',
  async (t) => {
    const entries = await walk(root);
    const paths = new Set(entries.map((e) => e.path));
    const compressed = image.manifest.layers.reduce((s, l) => s + l.size, 0);
    const unpacked = entries.filter((e) => e.kind === 'file').reduce((s, e) => s + e.size, 0);
    t.log(
      `layers ${(compressed / MiB).toFixed(1)} MiB compressed, root ${(unpacked / MiB).toFixed(1)} MiB unpacked, ${entries.length} entries`,
    );
    t.true(compressed < MAX_COMPRESSED, `${compressed} bytes compressed`);
    t.true(unpacked < MAX_UNPACKED, `${unpacked} bytes unpacked`);

    for (const p of [
      '/usr/bin/kube-proxy-ts',
      `${LIB}/node_modules/node/bin/node`,
      `${LIB}/bin/kube-proxy-ts.js`,
      `${LIB}/src/daemon/main.ts`,
      '/lib64/ld-linux-x86-64.so.2',
      '/var/lib/dpkg/status',
    ]) {
      t.true(paths.has(p), `${p} is there`);
    }
    // Executables: the launcher and the Node runtime; everything else executable is a shared object.
    const executables = entries.filter((e) => e.kind === 'file' && (e.mode & 0o111) !== 0).map((e) => e.path);
    const notLibraries = executables.filter((p) => !/\.so(\.\d+)*$|\.node$/.test(p));
    t.deepEqual(notLibraries, ['/usr/bin/kube-proxy-ts', `${LIB}/node_modules/node/bin/node`]);
    t.deepEqual(
      entries.filter((e) => e.path.startsWith('/usr/bin/')).map((e) => e.path),
      ['/usr/bin/kube-proxy-ts'],
      'nothing else in /usr/bin',
    );
    for (const dir of [
      '/bin',
      '/sbin',
      '/usr/sbin',
      '/usr/local',
      '/etc/apt',
      '/var/lib/apt',
      '/var/cache',
      '/usr/share/man',
      '/usr/share/locale',
      '/usr/share/info',
    ]) {
      t.false(
        [...paths].some((p) => p === dir || p.startsWith(`${dir}/`)),
        `nothing under ${dir}`,
      );
    }
    t.deepEqual(
      entries
        .filter((e) => e.kind !== 'dir' && e.path.startsWith('/usr/share/'))
        .filter((e) => !(e.kind === 'file' && /^\/usr\/share\/doc\/[^/]+\/copyright$/.test(e.path)))
        .filter((e) => !(e.kind === 'symlink' && /^\/usr\/share\/doc\/[^/]+$/.test(e.path)))
        .map((e) => e.path),
      [],
      'only copyright files (and links to doc directories) under /usr/share',
    );
    t.false(
      entries.some((e) => e.kind === 'other'),
      'no device nodes, fifos or sockets',
    );

    // The dpkg database (for scanners): our package and the libraries, each with its copyright.
    const status = await readFile(join(root, 'var/lib/dpkg/status'), 'utf8');
    const packages = [...status.matchAll(/^Package: (\S+)$/gm)].map((m) => m[1]!);
    t.true(packages.includes('kube-proxy-ts') && packages.includes('libc6'), packages.join(' '));
    t.is((status.match(/^Status: install ok installed$/gm) ?? []).length, packages.length);
    for (const p of packages) t.true(existsSync(join(root, `usr/share/doc/${p}/copyright`)), `${p}'s copyright`);
    t.false(
      packages.some((p) => /^(dash|bash|coreutils|busybox|apt|dpkg|gcc(-\d+)?|cpp|binutils|perl-base)$/.test(p)),
      packages.join(' '),
    );
  },
);

const manifests = loadDeployManifests();
const container = manifestOf(manifests, 'DaemonSet', 'kube-proxy-ts')['spec'].template.spec.containers[0];
const rules = manifestOf(manifests, 'ClusterRole', 'kube-proxy-ts')['rules'] as PolicyRule[];

function apiObjects(): KObject[] {
  return [
    {
      kind: 'Node',
      metadata: { name: 'node-a', labels: { 'kubernetes.io/hostname': 'node-a' } },
      status: { addresses: [{ type: 'InternalIP', address: NODE_IP }] },
    },
    {
      kind: 'Service',
      metadata: { name: 'web', namespace: 'default' },
      spec: {
        type: 'ClusterIP',
        clusterIP: VIP,
        clusterIPs: [VIP],
        ipFamilies: ['IPv4'],
        ports: [{ name: 'http', port: 80, protocol: 'TCP', targetPort: 8080 }],
      },
    },
    {
      kind: 'EndpointSlice',
      metadata: { name: 'web-1', namespace: 'default', labels: { 'kubernetes.io/service-name': 'web' } },
      addressType: 'IPv4',
      endpoints: [0, 1].map((i) => ({ addresses: [podIP(i)], conditions: { ready: true }, nodeName: 'node-a' })),
      ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
    },
  ];
}

/** A CA-less self-signed server certificate for 127.0.0.1, which the pod trusts as its ca.crt. */
function serverCertificate(dir: string): Promise<{ key: string; cert: string }> {
  return Promise.resolve(selfSignedLoopbackCert(dir));
}

/**
 * The container: a private mount namespace with /proc, /sys (the node namespace's) and /dev
 * mounted into the root, then chroot into it and exec the entry point (one pid all along).
 * Unprivileged: /proc/sys and /sys read-only, as a runtime mounts them for a container that
 * is not privileged, and only NET_ADMIN in the bounding set (and SYS_CHROOT, which the chroot
 * itself needs and the daemon has no use for).
 */
function containerCommand(rootDir: string, privileged: boolean): string[] {
  const mounts = privileged
    ? 'mount -t proc proc "$0/proc" && mount -t sysfs sysfs "$0/sys"'
    : 'mount -t proc proc "$0/proc" && mount --bind "$0/proc/sys" "$0/proc/sys" && mount -o remount,bind,ro "$0/proc/sys" && mount -t sysfs -o ro sysfs "$0/sys"';
  const exec = privileged
    ? '/usr/sbin/chroot'
    : '/usr/bin/setpriv --bounding-set=-all,+net_admin,+sys_chroot --inh-caps=-all /usr/sbin/chroot';
  const script = `${mounts} && mount --rbind /dev "$0/dev" && exec ${exec} "$0" "$@"`;
  return [
    systemTool('unshare'),
    '--mount',
    '--propagation',
    'private',
    '/bin/sh',
    '-c',
    script,
    rootDir,
    ...image.config.config.Entrypoint!,
  ];
}

/**
 * Starts the test API server in the node namespace and the daemon from the image's root, as
 * the kubelet would start the pod: the service account's files, the ConfigMap's file, the
 * container's flags with $(NODE_NAME) expanded, KUBERNETES_SERVICE_HOST/PORT.
 */
async function startPod(
  t: ExecutionContext,
  c: Cluster,
  configText: string,
  privileged: boolean,
): Promise<DaemonProcess> {
  const work = await mkdtemp(join(tmpdir(), 'kpts-image-run-'));
  t.teardown(() => rm(work, { recursive: true, force: true }));
  const tls = await serverCertificate(work);
  const token = 'kube-proxy-ts-sa-token';
  const port = await c.nodeAgent.call<number>(API, 'startApiServer', tls, token, apiObjects());
  t.teardown(() => c.nodeAgent.call(API, 'stopApiServer').catch(() => undefined));
  const sa = join(root, 'var/run/secrets/kubernetes.io/serviceaccount');
  await mkdir(sa, { recursive: true });
  await writeFile(join(sa, 'ca.crt'), tls.cert);
  await writeFile(join(sa, 'token'), token);
  await writeFile(join(sa, 'namespace'), 'kube-system');
  await mkdir(join(root, 'var/lib/kube-proxy-ts'), { recursive: true });
  await writeFile(join(root, 'var/lib/kube-proxy-ts/config.conf'), configText);
  t.teardown(() => rm(join(root, 'var/run'), { recursive: true, force: true }));
  const args = (container.args as string[]).map((a) => a.replace('$(NODE_NAME)', 'node-a'));
  // The control socket where the DaemonSet's pod has it, the default (named only so that the
  // helper does not pick a test path): /run/kube-proxy-ts/control.sock in the image's root.
  args.push('--control-socket', '/run/kube-proxy-ts/control.sock');
  const d = spawnDaemon(c.node, args, {
    command: containerCommand(root, privileged),
    // A container's environment: only what the image and the kubelet set, none of this process's.
    env: {
      ...Object.fromEntries(Object.keys(process.env).map((k) => [k, undefined])),
      PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
      KUBERNETES_SERVICE_HOST: '127.0.0.1',
      KUBERNETES_SERVICE_PORT: String(port),
      NODE_NAME: 'node-a',
    },
  });
  t.teardown(() => d.kill());
  return d;
}

const CONFIG = manifestOf(manifests, 'ConfigMap', 'kube-proxy-ts')['data']['config.conf'] as string;

/**
 * `kubectl exec ds/kube-proxy-ts -- kube-proxy-ts ARGS`: the image's own /usr/bin/kube-proxy-ts
 * run in the pod's mount namespace, root and network namespace (nsenter into the daemon's),
 * with the container's PATH only. No shell is involved, and none is in the image.
 */
function execInPod(
  d: DaemonProcess,
  args: readonly string[],
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((done) => {
    execFile(
      systemTool('nsenter'),
      ['--target', String(d.pid), '--mount', '--net', '--root', '--wd', '/usr/bin/kube-proxy-ts', ...args],
      {
        encoding: 'utf8',
        timeout: 60_000,
        maxBuffer: 4 * 1024 * 1024,
        env: { PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' },
      },
      (err, stdout, stderr) => done({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr }),
    );
  });
}

test.serial(
  'the image root runs as the DaemonSet runs it: in-cluster config, traffic to a Service flows, requests within the ClusterRole',
  async (t) => {
    t.timeout(180_000);
    const c = await makeCluster(t, 'img', 2);
    const d = await startPod(t, c, CONFIG, true);
    const started = Date.now();
    const tcp = (ip: string, p: number) => c.clientAgent.call<string>(ECHO, 'tcp', ip, p);
    try {
      await pollUntil(
        'the ClusterIP to answer',
        async () => ((await tcp(VIP, 80)).startsWith('pod') ? true : undefined),
        60_000,
        250,
      );
    } catch (e) {
      t.log(d.log());
      throw e;
    }
    // How long a node runs on the rules it had when its proxy changes (deploy/README.md,
    // "Stale rules"): from the container's start, cold (no compile cache in the image).
    t.log(`container start to the first answer through the ClusterIP: ${Date.now() - started} ms`);
    const answers = await c.clientAgent.call<string[]>(ECHO, 'tcpMany', VIP, 80, 10);
    t.true(
      answers.every((a) => /^pod[12] /.test(a)),
      answers.join(', '),
    );
    const get = (path: string, p: number) =>
      c.nodeAgent.call<{ status: number; body: string }>(AGENT, 'httpGet', `http://127.0.0.1:${p}${path}`);
    t.is((await get('/livez', 10256)).status, 200);
    t.is((await get('/healthz', 10256)).status, 200);
    t.regex((await get('/metrics', 10249)).body, /kubeproxy_sync_proxy_rules_duration_seconds_count/);

    // kubectl exec ds/kube-proxy-ts -- kube-proxy-ts explain (and trace), against this daemon.
    const explain = await execInPod(d, ['explain']);
    t.is(explain.code, 0, explain.stderr);
    t.regex(
      explain.stdout,
      /^default\/web:http\/TCP\s+IPv4\s+ClusterIP\s+10\.96\.0\.10:80\b.*\b2\/2\s+in sync$/m,
      explain.stdout,
    );
    t.log(`kube-proxy-ts explain in the image root:\n${explain.stdout.trim()}`);
    const trace = await execInPod(d, ['trace', '--from', CLIENT_IP, '--to', `${VIP}:80`]);
    t.is(trace.code, 0, trace.stderr);
    t.true(trace.stdout.includes(podIP(0)) && trace.stdout.includes(podIP(1)), trace.stdout);

    // A change through the API reaches the rules: pod2 only.
    const slice = apiObjects()[2]!;
    slice['endpoints'] = [{ addresses: [podIP(1)], conditions: { ready: true }, nodeName: 'node-a' }];
    await c.nodeAgent.call(API, 'apiUpsert', slice);
    await pollUntil(
      'pod2 only',
      async () =>
        (await c.clientAgent.call<string[]>(ECHO, 'tcpMany', VIP, 80, 6)).every((a) => a.startsWith('pod2 '))
          ? true
          : undefined,
      20_000,
      200,
    );

    // RBAC: every request it made (lists, watches, the start-up event) is one the ClusterRole allows.
    await pollUntil(
      'the Starting event',
      async () => ((await c.nodeAgent.call<unknown[]>(API, 'apiEvents')).length > 0 ? true : undefined),
      20_000,
      200,
    );
    const requests = await c.nodeAgent.call<LoggedRequest[]>(API, 'apiRequests');
    const seen = new Set<string>();
    for (const r of requests) {
      const a = requestAttributes(r.method, r.path, r.watch);
      if (!a) {
        t.fail(`${r.method} ${r.path} is not a resource request`);
        continue;
      }
      seen.add(`${a.verb} ${a.group}/${a.resource}`);
      t.true(rulesAllow(rules, a), `${r.method} ${r.path}: ${a.verb} ${a.group}/${a.resource} is not granted`);
    }
    t.log(`requests: ${[...seen].sort().join(', ')}`);
    for (const need of [
      'list /services',
      'watch /services',
      'list discovery.k8s.io/endpointslices',
      'create events.k8s.io/events',
    ])
      t.true(seen.has(need), need);

    d.signal('SIGTERM');
    t.deepEqual(await d.exited, { code: 0, signal: null }, d.log());
    t.true((await tcp(VIP, 80)).startsWith('pod2 '), 'the rules stay when the pod stops');
  },
);

test.serial(
  'without privileges (deploy/README.md): NET_ADMIN only, /proc/sys and /sys read-only, conntrack left alone: traffic flows',
  async (t) => {
    t.timeout(180_000);
    const c = await makeCluster(t, 'imgu', 2);
    const timeouts = async () =>
      Promise.all(
        ['established', 'close_wait'].map((k) =>
          c.node.run('sysctl', '-n', `net.netfilter.nf_conntrack_tcp_timeout_${k}`),
        ),
      );
    const before = await timeouts().catch(() => undefined);
    const config = CONFIG.replace(
      /^conntrack:\n(?: {2}.*\n)+/m,
      'conntrack:\n  maxPerCore: 0\n  tcpEstablishedTimeout: 0s\n  tcpCloseWaitTimeout: 0s\n',
    );
    t.regex(config, /maxPerCore: 0/);
    const d = await startPod(t, c, config, false);
    try {
      await pollUntil(
        'the ClusterIP to answer',
        async () => ((await c.clientAgent.call<string>(ECHO, 'tcp', VIP, 80)).startsWith('pod') ? true : undefined),
        60_000,
        250,
      );
    } catch (e) {
      t.log(d.log());
      throw e;
    }
    const answers = await c.clientAgent.call<string[]>(ECHO, 'tcpMany', VIP, 80, 6);
    t.true(
      answers.every((a) => /^pod[12] /.test(a)),
      answers.join(', '),
    );
    t.is((await c.nodeAgent.call<{ status: number }>(AGENT, 'httpGet', 'http://127.0.0.1:10256/healthz')).status, 200);
    if (before) t.deepEqual(await timeouts(), before, 'the conntrack time-outs are as they were');
    d.signal('SIGTERM');
    t.deepEqual(await d.exited, { code: 0, signal: null }, d.log());
    t.deepEqual(
      d
        .log()
        .split('\n')
        .filter((l) => /^\S+\s+(warn\w*|error)\b/.test(l)),
      [],
      'no warning or error logged',
    );
  },
);
