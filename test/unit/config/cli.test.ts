import { readFileSync } from 'node:fs';
import test from 'ava';
import { parseCommandLine, type CommandLineResult } from '../../../src/config/cli.ts';
import { parseConfigFile } from '../../../src/config/file.ts';
import { DEFAULTED_MODE_WARNING, resolveConfig } from '../../../src/config/resolve.ts';
import type { ProxyConfig } from '../../../src/config/types.ts';
import { renderConfigYAML } from '../../../src/config/write.ts';

const fixture = (name: string): string =>
  readFileSync(new URL(`../../fixtures/config/${name}`, import.meta.url), 'utf8');

/** Runs the command line with in-memory files. */
function run(argv: string[], files: Record<string, string> = {}): CommandLineResult {
  return parseCommandLine(argv, {
    version: 'v9.9.9',
    readFile: (p) => {
      const f = files[p];
      if (f === undefined)
        throw Object.assign(new Error(`ENOENT: no such file or directory, open '${p}'`), { code: 'ENOENT' });
      return f;
    },
  });
}

function config(argv: string[], files: Record<string, string> = {}): { config: ProxyConfig; warnings: string[] } {
  const r = run(argv, files);
  if (r.kind !== 'run') throw new Error(`expected a config, got exit ${r.code}: ${r.stderr}`);
  return r;
}

function exit(argv: string[], files: Record<string, string> = {}): { code: number; stdout: string; stderr: string } {
  const r = run(argv, files);
  if (r.kind !== 'exit') throw new Error(`expected an exit, got ${r.action}`);
  return r;
}

// ---------------------------------------------------------------------------------------
// Defaults

test('no flags: upstream defaults, iptables mode (as upstream on Linux)', (t) => {
  const { config: c, warnings } = config([]);
  // Upstream 1.37 warns that it picked the mode itself.
  t.deepEqual(warnings, [DEFAULTED_MODE_WARNING]);
  t.is(c.mode, 'iptables');
  t.is(c.syncPeriodMs, 30_000);
  t.is(c.minSyncPeriodMs, 1_000);
  t.is(c.configSyncPeriodMs, 15 * 60_000);
  t.is(c.masqueradeBit, 14);
  t.false(c.masqueradeAll);
  t.is(c.healthzBindAddress, '0.0.0.0:10256');
  t.is(c.metricsBindAddress, '127.0.0.1:10249');
  t.is(c.bindAddress, '0.0.0.0');
  t.is(c.oomScoreAdj, -999);
  t.is(c.ipvs.scheduler, 'rr');
  t.is(c.detectLocalMode, 'ClusterCIDR');
  t.deepEqual(c.nodePortAddresses, ['all']);
  t.deepEqual(c.conntrack, {
    maxPerCore: 32_768,
    min: 131_072,
    tcpEstablishedTimeoutMs: 24 * 3_600_000,
    tcpCloseWaitTimeoutMs: 3_600_000,
    tcpBeLiberal: false,
    udpTimeoutMs: 0,
    udpStreamTimeoutMs: 0,
  });
  t.deepEqual(c.clientConnection, {
    kubeconfig: '',
    master: '',
    contentType: 'application/vnd.kubernetes.protobuf',
    acceptContentTypes: '',
    qps: 5,
    burst: 10,
  });
  t.deepEqual(c.logging, { verbosity: 0, format: 'text' });
  t.is(c.kubeProxyTS.manifestDir, '');
});

test('ipvs mode defaults: minSyncPeriod 0 (upstream), all node IPs for NodePorts', (t) => {
  const { config: c } = config(['--proxy-mode=ipvs']);
  t.is(c.minSyncPeriodMs, 0);
  t.is(c.syncPeriodMs, 30_000);
  t.deepEqual(c.nodePortAddresses, ['all']);
});

test('an IPv6 bind address moves the default servers to [::] and [::1]', (t) => {
  const { config: c } = config(['--bind-address=fd00::1']);
  t.is(c.healthzBindAddress, '[::]:10256');
  t.is(c.metricsBindAddress, '[::1]:10249');
});

// ---------------------------------------------------------------------------------------
// Flags

const flagTable: [string[], (c: ProxyConfig) => unknown, unknown][] = [
  [['--sync-period=1m30s'], (c) => c.syncPeriodMs, 90_000],
  [['--iptables-sync-period', '45s'], (c) => c.syncPeriodMs, 45_000],
  // A flag applies after upstream's defaulting: 0 stays 0 (every change syncs at once, as --help says).
  [['--iptables-min-sync-period=0'], (c) => c.minSyncPeriodMs, 0],
  [['--min-sync-period=5s'], (c) => c.minSyncPeriodMs, 5_000],
  [
    ['--proxy-mode=ipvs', '--ipvs-sync-period=10s', '--ipvs-min-sync-period=2s'],
    (c) => [c.syncPeriodMs, c.minSyncPeriodMs],
    [10_000, 2_000],
  ],
  [['--proxy-mode=ipvs', '--ipvs-scheduler=wlc'], (c) => c.ipvs.scheduler, 'wlc'],
  [['--ipvs-strict-arp'], (c) => c.ipvs.strictARP, true],
  [
    ['--ipvs-tcp-timeout=900s', '--ipvs-tcpfin-timeout=2m', '--ipvs-udp-timeout=300ms'],
    (c) => [c.ipvs.tcpTimeoutMs, c.ipvs.tcpFinTimeoutMs, c.ipvs.udpTimeoutMs],
    [900_000, 120_000, 300],
  ],
  [['--masquerade-all'], (c) => c.masqueradeAll, true],
  [['--masquerade-all=false'], (c) => c.masqueradeAll, false],
  [['--masquerade_all=true'], (c) => c.masqueradeAll, true], // '_' normalised like upstream
  [['--proxy-mode=iptables', '--iptables-masquerade-bit=15'], (c) => c.masqueradeBit, 15],
  [['--cluster-cidr=10.244.0.0/16,fd00::/56'], (c) => c.clusterCIDRs, ['10.244.0.0/16', 'fd00::/56']],
  [
    ['--detect-local-mode=InterfaceNamePrefix', '--pod-interface-name-prefix=veth'],
    (c) => [c.detectLocalMode, c.detectLocal.interfaceNamePrefix],
    ['InterfaceNamePrefix', 'veth'],
  ],
  [
    ['--nodeport-addresses=10.0.0.0/8,192.168.0.0/16', '--nodeport-addresses', 'localhost'],
    (c) => c.nodePortAddresses,
    ['10.0.0.0/8', '192.168.0.0/16', 'localhost'],
  ],
  [['--healthz-bind-address=127.0.0.1:1234'], (c) => c.healthzBindAddress, '127.0.0.1:1234'],
  [['--healthz-bind-address=10.0.0.1'], (c) => c.healthzBindAddress, '10.0.0.1:10256'],
  [['--metrics-bind-address='], (c) => c.metricsBindAddress, ''], // empty disables
  [['--metrics-port=0'], (c) => c.metricsBindAddress, ''],
  [['--healthz-port=12345'], (c) => c.healthzBindAddress, '0.0.0.0:12345'],
  [['--hostname-override=Node-A '], (c) => c.hostnameOverride, 'node-a'],
  [
    ['--kubeconfig=/etc/kubeconfig', '--master=https://10.0.0.1:6443'],
    (c) => [c.clientConnection.kubeconfig, c.clientConnection.master],
    ['/etc/kubeconfig', 'https://10.0.0.1:6443'],
  ],
  [['--kube-api-qps=20', '--kube-api-burst=40'], (c) => [c.clientConnection.qps, c.clientConnection.burst], [20, 40]],
  [['--conntrack-max-per-core=0', '--conntrack-min=1000'], (c) => [c.conntrack.maxPerCore, c.conntrack.min], [0, 1000]],
  [
    ['--conntrack-tcp-timeout-established=1h', '--conntrack-tcp-timeout-close-wait=30s'],
    (c) => [c.conntrack.tcpEstablishedTimeoutMs, c.conntrack.tcpCloseWaitTimeoutMs],
    [3_600_000, 30_000],
  ],
  [
    ['--conntrack-udp-timeout=30s', '--conntrack-udp-timeout-stream=2m', '--conntrack-tcp-be-liberal'],
    (c) => [c.conntrack.udpTimeoutMs, c.conntrack.udpStreamTimeoutMs, c.conntrack.tcpBeLiberal],
    [30_000, 120_000, true],
  ],
  [['--config-sync-period=5m'], (c) => c.configSyncPeriodMs, 300_000],
  [['--oom-score-adj=-500'], (c) => c.oomScoreAdj, -500],
  [['--v=4'], (c) => c.logging.verbosity, 4],
  [['-v', '2'], (c) => c.logging.verbosity, 2],
  [['-v=3'], (c) => c.logging.verbosity, 3],
  [['--logging-format=json'], (c) => c.logging.format, 'json'],
  [['--manifest-dir=/srv/manifests'], (c) => c.kubeProxyTS.manifestDir, '/srv/manifests'],
  [
    ['--feature-gates=KubeProxyNFTablesLocalhostNodePorts=true,AllAlpha=false'],
    (c) => c.featureGates,
    { KubeProxyNFTablesLocalhostNodePorts: true, AllAlpha: false },
  ],
];

for (const [argv, get, want] of flagTable) {
  test(`flags ${argv.join(' ')}`, (t) => {
    t.deepEqual(get(config(argv).config), want);
  });
}

test('--iptables-sync-period is ignored in ipvs mode, with a warning (upstream applies it only outside ipvs)', (t) => {
  const { config: c, warnings } = config(['--proxy-mode=ipvs', '--iptables-sync-period=5s']);
  t.is(c.syncPeriodMs, 30_000);
  t.true(warnings.some((w) => w.includes('--iptables-sync-period') && w.includes('ipvs')));
});

test('--iptables-masquerade-bit does not change nftables mode (as upstream), and says so', (t) => {
  const { config: c, warnings } = config(['--proxy-mode=nftables', '--iptables-masquerade-bit=15']);
  t.is(c.masqueradeBit, 14);
  t.true(warnings.some((w) => w.includes('nftables.masqueradeBit')));
});

// ---------------------------------------------------------------------------------------
// Usage errors: exit 2 with a clear message

const usageTable: [string[], RegExp][] = [
  [['--no-such-flag'], /unknown option '--no-such-flag'/],
  [['--proxy-mod=ipvs'], /unknown option '--proxy-mod=ipvs'\n\(Did you mean --proxy-mode\?\)/],
  [['--proxy-mod', 'ipvs'], /unknown option '--proxy-mod'\n\(Did you mean --proxy-mode\?\)/],
  [['--sync-period=abc'], /--sync-period.*"abc" is not a duration/],
  [['--sync-period'], /--sync-period.*argument missing/],
  [['--iptables-masquerade-bit=x'], /"x" is not an integer/],
  [['--masquerade-all=maybe'], /"maybe" is not a boolean/],
  [['stray-argument'], /unknown command "stray-argument": the commands are explain, trace, completion and profile/],
  [
    ['--proxy-mode=kernelspace'],
    /mode \(from --proxy-mode\): "kernelspace" must be one of nftables, ipvs, iptables, userspace/,
  ],
  [
    ['--proxy-mode=ipvs', '--ipvs-scheduler=rrr'],
    /ipvs\.scheduler \(from --ipvs-scheduler\): "rrr" is not a known scheduler/,
  ],
  [
    ['--iptables-masquerade-bit=32', '--proxy-mode=iptables'],
    /iptables\.masqueradeBit \(from --iptables-masquerade-bit\): 32 must be within the range \[0, 31\]/,
  ],
  [
    ['--sync-period=1s', '--min-sync-period=5s'],
    /iptables\.syncPeriod.*"1s" must be greater than or equal to iptables\.minSyncPeriod \("5s"\)/,
  ],
  [['--sync-period=-1s'], /iptables\.syncPeriod \(from --sync-period\): "-1s" must be greater than 0/],
  [['--healthz-bind-address=nonsense:80'], /healthzBindAddress.*"nonsense" is not a valid IP/],
  [['--cluster-cidr=10.0.0.0/8,10.1.0.0/16'], /clusterCIDR.*dual-stack pair/],
  [['--cluster-cidr=banana'], /clusterCIDR.*"banana" must be a valid CIDR/],
  [['--nodeport-addresses=10.0.0.1'], /nodePortAddresses\[0\].*"10.0.0.1" must be a valid CIDR/],
  [['--detect-local-mode=BridgeInterface'], /detectLocal\.bridgeInterface/],
  [['--detect-local-mode=Magic'], /detectLocalMode.*"Magic" must be one of/],
  [['--oom-score-adj=-1001'], /oomScoreAdj.*-1001 must be within the range \[-1000, 1000\]/],
  [['--conntrack-min=-1'], /conntrack\.min.*-1 must be greater than or equal to 0/],
  [['--logging-format=xml'], /logging\.format.*"xml" must be one of text, json/],
];

for (const [argv, re] of usageTable) {
  test(`exit 2: ${argv.join(' ')}`, (t) => {
    const r = exit(argv);
    t.is(r.code, 2);
    t.is(r.stdout, '');
    t.regex(r.stderr, re);
    t.true(r.stderr.startsWith('kube-proxy-ts: '), r.stderr);
  });
}

test('--help and --version exit 0 on stdout', (t) => {
  const help = exit(['--help']);
  t.is(help.code, 0);
  for (const flag of [
    '--config',
    '--proxy-mode',
    '--ipvs-scheduler',
    '--conntrack-max-per-core',
    '--write-config-to',
    '--cleanup',
    '--manifest-dir',
  ])
    t.true(help.stdout.includes(flag), flag);
  t.true(help.stdout.includes('[kube-proxy-ts]'), 'our own flags are marked');
  // Every subcommand is listed, and commander's note for programmers is not.
  t.regex(help.stdout, /^Usage: kube-proxy-ts \[flags\] \| explain\|trace\|completion\|profile \.\.\.$/m);
  t.regex(help.stdout, /^ {2}kube-proxy-ts profile cpu\|heap /m);
  t.false(help.stdout.includes('preset'));
  const version = exit(['--version']);
  t.deepEqual(version, { kind: 'exit', code: 0, stdout: 'kube-proxy-ts v9.9.9\n', stderr: '' });
});

test('actions: --cleanup and --write-config-to', (t) => {
  const c = run(['--cleanup']);
  t.is(c.kind === 'run' && c.action, 'cleanup');
  const w = run(['--write-config-to=/tmp/out.yaml']);
  t.true(w.kind === 'run' && w.action === 'write-config' && w.writeConfigTo === '/tmp/out.yaml');
});

// ---------------------------------------------------------------------------------------
// Config files

test('kubeadm-style nftables config file (upstream v1alpha1 layout): defaults fill every zero value', (t) => {
  const { config: c, warnings } = config(['--config=/etc/kube-proxy/config.conf'], {
    '/etc/kube-proxy/config.conf': fixture('kubeadm-nftables.yaml'),
  });
  t.deepEqual(warnings, []);
  t.is(c.mode, 'nftables');
  t.deepEqual(c.clusterCIDRs, ['10.244.0.0/16']);
  t.is(c.clientConnection.kubeconfig, '/var/lib/kube-proxy/kubeconfig.conf');
  t.is(c.syncPeriodMs, 30_000);
  t.is(c.minSyncPeriodMs, 1_000);
  t.is(c.configSyncPeriodMs, 900_000);
  t.is(c.masqueradeBit, 14);
  t.is(c.healthzBindAddress, '0.0.0.0:10256');
  t.is(c.metricsBindAddress, '127.0.0.1:10249');
  t.is(c.oomScoreAdj, -999);
  t.is(c.conntrack.maxPerCore, 32_768);
  t.is(c.conntrack.tcpEstablishedTimeoutMs, 86_400_000);
  t.deepEqual(c.nodePortAddresses, ['primary']);
  t.is(c.clientConnection.contentType, 'application/vnd.kubernetes.protobuf');
  t.is(c.clientConnection.qps, 5);
  t.is(c.clientConnection.burst, 10);
});

test('JSON config file with nftables tuning and our kubeProxyTS section', (t) => {
  const { config: c, warnings } = config(['--config', '/c.json'], { '/c.json': fixture('nftables-tuned.json') });
  t.deepEqual(warnings, []);
  t.is(c.syncPeriodMs, 90_000);
  t.is(c.minSyncPeriodMs, 2_000);
  t.is(c.masqueradeBit, 15);
  t.true(c.masqueradeAll);
  t.deepEqual(c.clusterCIDRs, ['10.244.0.0/16', 'fd00:10:244::/56']);
  t.is(c.metricsBindAddress, '0.0.0.0:10249');
  t.is(c.healthzBindAddress, '[::]:10256');
  t.deepEqual(c.nodePortAddresses, ['192.168.0.0/16', 'localhost']);
  t.is(c.conntrack.maxPerCore, 0);
  t.is(c.conntrack.tcpEstablishedTimeoutMs, 12 * 3_600_000);
  t.is(c.conntrack.udpTimeoutMs, 30_000);
  t.is(c.kubeProxyTS.manifestDir, '/etc/kube-proxy-ts/manifests');
});

test('with --config, the file wins; flags upstream ignores are reported, override flags still apply', (t) => {
  const file =
    'apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: ipvs\nhostnameOverride: from-file\nipvs:\n  scheduler: lc\n';
  const { config: c, warnings } = config(
    [
      '--config=/c.yaml',
      '--proxy-mode=nftables',
      '--ipvs-scheduler=sh',
      '--hostname-override=from-flag',
      '-v=4',
      '--manifest-dir=/m',
    ],
    { '/c.yaml': file },
  );
  t.is(c.mode, 'ipvs');
  t.is(c.ipvs.scheduler, 'lc');
  t.is(c.hostnameOverride, 'from-flag');
  t.is(c.logging.verbosity, 4);
  t.is(c.kubeProxyTS.manifestDir, '/m');
  t.true(warnings.some((w) => w.startsWith('--ipvs-scheduler is ignored because --config is given')));
  t.true(warnings.some((w) => w.startsWith('--proxy-mode is ignored because --config is given')));
});

test('the mode section of the selected mode provides the sync periods (upstream conversion)', (t) => {
  const file = [
    'apiVersion: kubeproxy.config.k8s.io/v1alpha1',
    'kind: KubeProxyConfiguration',
    'mode: ipvs',
    'iptables: {syncPeriod: 10s, minSyncPeriod: 2s}',
    'nftables: {syncPeriod: 20s, minSyncPeriod: 3s}',
    'ipvs: {syncPeriod: 40s, minSyncPeriod: 4s}',
  ].join('\n');
  const { config: c } = config(['--config=/c.yaml'], { '/c.yaml': file });
  t.is(c.syncPeriodMs, 40_000);
  t.is(c.minSyncPeriodMs, 4_000);
  const nft = config(['--config=/c.yaml'], { '/c.yaml': file.replace('mode: ipvs', 'mode: nftables') }).config;
  t.deepEqual([nft.syncPeriodMs, nft.minSyncPeriodMs], [20_000, 3_000]);
  const ipt = config(['--config=/c.yaml'], { '/c.yaml': file.replace('mode: ipvs', 'mode: iptables') }).config;
  t.deepEqual([ipt.syncPeriodMs, ipt.minSyncPeriodMs], [10_000, 2_000]);
});

test('unknown fields in the file are warnings, not errors (upstream decodes leniently)', (t) => {
  const file =
    'apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nfancyNewField: 1\nipvs:\n  turbo: true\n';
  const { warnings } = config(['--config=/c.yaml'], { '/c.yaml': file });
  t.true(warnings.some((w) => w.includes('"fancyNewField"')));
  t.true(warnings.some((w) => w.includes('"ipvs.turbo"')));
});

const fileErrors: [string, RegExp][] = [
  ['kind: KubeProxyConfiguration\n', /apiVersion: "" is not supported \(want "kubeproxy.config.k8s.io\/v1alpha1"\)/],
  [
    'apiVersion: kubeproxy.config.k8s.io/v1alpha2\nkind: KubeProxyConfiguration\n',
    /apiVersion: "kubeproxy.config.k8s.io\/v1alpha2" is not supported/,
  ],
  [
    'apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeletConfiguration\n',
    /kind: "KubeletConfiguration" is not supported/,
  ],
  [
    'apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: ipvs\nipvs:\n  scheduler: rrr\n',
    /ipvs\.scheduler: "rrr" is not a known scheduler/,
  ],
  [
    'apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nnftables:\n  syncPeriod: 30\n',
    /nftables\.syncPeriod: 30 must be a duration string/,
  ],
  [
    'apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nnftables:\n  syncPeriod: soon\n',
    /nftables\.syncPeriod: "soon" is not a duration/,
  ],
  [
    'apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: nftables\nnftables:\n  masqueradeBit: 40\n',
    /nftables\.masqueradeBit: 40 must be within the range \[0, 31\]/,
  ],
  [
    'apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmasqueradeAll: yes\nconntrack:\n  min: "many"\n',
    /conntrack\.min: "many" must be an integer/,
  ],
  [
    'apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nconntrack: 5\n',
    /conntrack: 5 must be an object/,
  ],
  ['{ not yaml', /\/c\.yaml:1:11: not valid YAML or JSON: /],
  ['kind: KubeProxyConfiguration\nmode: [nftables\n', /\/c\.yaml:3:1: not valid YAML or JSON: Flow sequence/],
  ['- a\n- list\n', /must contain a KubeProxyConfiguration object/],
];

for (const [text, re] of fileErrors) {
  test(`bad file exits 1: ${re.source.slice(0, 60)}`, (t) => {
    const r = exit(['--config=/c.yaml'], { '/c.yaml': text });
    t.is(r.code, 1);
    t.regex(r.stderr, re);
    t.true(r.stderr.includes('--config /c.yaml'));
  });
}

test('a bad value in the file is located by line and column, whether the reader or validation refused it', (t) => {
  const text =
    'apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: nftables\n' +
    'conntrack:\n  maxPerCore: abc\nnftables:\n  masqueradeBit: 40\n';
  const r = exit(['--config=/c.yaml'], { '/c.yaml': text });
  t.is(r.code, 1);
  t.regex(r.stderr, /^ {2}\/c\.yaml:5:15: conntrack\.maxPerCore: "abc" must be an integer$/m);
  t.regex(r.stderr, /^ {2}\/c\.yaml:7:18: nftables\.masqueradeBit: 40 must be within the range \[0, 31\]$/m);
});

test('an unreadable --config exits 1 naming the path', (t) => {
  const r = exit(['--config=/missing.yaml']);
  t.is(r.code, 1);
  t.regex(r.stderr, /cannot read --config \/missing\.yaml: does not exist \(ENOENT\)/);
});

// ---------------------------------------------------------------------------------------
// --write-config-to output

test('the written config reads back to the same effective config, in every mode', (t) => {
  for (const argv of [
    [],
    ['--proxy-mode=ipvs', '--ipvs-scheduler=wrr', '--ipvs-exclude-cidrs=10.0.0.0/8', '--ipvs-min-sync-period=0s'],
    ['--proxy-mode=iptables', '--masquerade-all', '--iptables-masquerade-bit=12', '--sync-period=1m'],
    [
      '--cluster-cidr=10.244.0.0/16,fd00::/56',
      '--nodeport-addresses=10.0.0.0/8',
      '--manifest-dir=/m',
      '--metrics-bind-address=0.0.0.0:9999',
      '-v=5',
      '--logging-format=json',
    ],
  ]) {
    const first = config(argv).config;
    const yaml = renderConfigYAML(first);
    const parsed = parseConfigFile(yaml);
    t.deepEqual(parsed.errors, [], argv.join(' '));
    t.deepEqual(parsed.warnings, [], argv.join(' '));
    const again = resolveConfig(parsed.values);
    t.deepEqual(again.errors, []);
    t.deepEqual(again.config, first, argv.join(' '));
  }
});

test('the written config is upstream-shaped YAML', (t) => {
  const yaml = renderConfigYAML(config([]).config);
  t.regex(yaml, /^apiVersion: kubeproxy\.config\.k8s\.io\/v1alpha1$/m);
  t.regex(yaml, /^kind: KubeProxyConfiguration$/m);
  t.regex(yaml, /^mode: iptables$/m);
  t.regex(yaml, /^ {2}syncPeriod: 30s$/m);
  t.regex(yaml, /^configSyncPeriod: 15m0s$/m);
  t.regex(yaml, /^ {2}tcpEstablishedTimeout: 24h0m0s$/m);
  t.regex(yaml, /^healthzBindAddress: 0\.0\.0\.0:10256$/m);
});

test('--load-balancing: a known value reaches the config; an unknown one is one clear line, exit 1 or 2', (t) => {
  t.is(config(['--load-balancing', 'round-robin']).config.kubeProxyTS.loadBalancing, 'round-robin');
  t.is(config([]).config.kubeProxyTS.loadBalancing, '');
  const bad = exit(['--load-balancing', 'maglev']);
  t.not(bad.code, 0);
  t.regex(bad.stderr, /kubeProxyTS\.loadBalancing.*"maglev".*must be one of random, round-robin, consistent-hash/);
  t.is(bad.stderr.trim().split('\n').length, 1);
});
