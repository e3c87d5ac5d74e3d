// Every flag of upstream kube-proxy 1.3x's `kube-proxy --help` (cmd/kube-proxy/app/options.go
// AddFlags, component-base logsapi.AddFlags, cAdvisor's globals, verflag's --version) is
// accepted: transcribed here by hand from upstream, with a value of the flag's type, so that
// removing or breaking one fails this test. None may make the command line fail.

import test from 'ava';
import { parseCommandLine } from '../../../src/config/cli.ts';
import { FLAG_NAMES } from '../../../src/config/cli.ts';

/** Upstream's flag -> a valid value ('' for a bool given bare). */
const UPSTREAM_FLAGS: Record<string, string> = {
  'bind-address': '10.0.0.5',
  'bind-address-hard-fail': '',
  'boot-id-file': '/proc/sys/kernel/random/boot_id',
  cleanup: '',
  'cluster-cidr': '10.244.0.0/16',
  config: '',
  'config-sync-period': '15m0s',
  'conntrack-max-per-core': '32768',
  'conntrack-min': '131072',
  'conntrack-tcp-be-liberal': '',
  'conntrack-tcp-timeout-close-wait': '1h0m0s',
  'conntrack-tcp-timeout-established': '24h0m0s',
  'conntrack-udp-timeout': '30s',
  'conntrack-udp-timeout-stream': '2m',
  'detect-local-mode': 'ClusterCIDR',
  'feature-gates': 'AllAlpha=false',
  'healthz-bind-address': '0.0.0.0:10256',
  'healthz-port': '10256',
  'hostname-override': 'node-a',
  'init-only': '',
  'iptables-localhost-nodeports': 'true',
  'iptables-masquerade-bit': '14',
  'iptables-min-sync-period': '1s',
  'iptables-sync-period': '30s',
  'ipvs-exclude-cidrs': '10.1.0.0/16',
  'ipvs-min-sync-period': '0s',
  'ipvs-scheduler': 'rr',
  'ipvs-strict-arp': '',
  'ipvs-sync-period': '30s',
  'ipvs-tcp-timeout': '0s',
  'ipvs-tcpfin-timeout': '0s',
  'ipvs-udp-timeout': '0s',
  'kube-api-burst': '10',
  'kube-api-content-type': 'application/vnd.kubernetes.protobuf',
  'kube-api-qps': '5',
  kubeconfig: '/etc/kubernetes/kubeconfig',
  'log-flush-frequency': '5s',
  'log-json-info-buffer-size': '0',
  'log-json-split-stream': '',
  'log-text-info-buffer-size': '0',
  'log-text-split-stream': '',
  'logging-format': 'text',
  'machine-id-file': '/etc/machine-id,/var/lib/dbus/machine-id',
  'masquerade-all': '',
  master: 'https://10.0.0.1:6443',
  'metrics-bind-address': '127.0.0.1:10249',
  'metrics-port': '10249',
  'nodeport-addresses': 'primary',
  'oom-score-adj': '-999',
  'pod-bridge-interface': 'cbr0',
  'pod-interface-name-prefix': 'veth',
  profiling: '',
  'proxy-mode': 'nftables',
  'show-hidden-metrics-for-version': '1.35',
  v: '2',
  vmodule: 'proxier*=4',
  'write-config-to': '',
};

const argOf = (name: string, value: string): string[] => (value === '' ? [`--${name}`] : [`--${name}=${value}`]);

for (const [name, value] of Object.entries(UPSTREAM_FLAGS)) {
  test(`upstream flag --${name} is accepted`, (t) => {
    t.true(FLAG_NAMES.includes(name), `--${name} is in our flag list`);
    // config/write-config-to need a file or act; give them what they take without acting.
    const argv =
      name === 'config'
        ? ['--config', '/cfg']
        : name === 'write-config-to'
          ? ['--write-config-to', '/tmp/out.yaml']
          : argOf(name, value);
    const r = parseCommandLine(argv, {
      version: 'v1',
      readFile: () => 'apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n',
    });
    t.is(r.kind, 'run', r.kind === 'exit' ? r.stderr : '');
    // The pflag spelling with '_' (klog's habit) is accepted too.
    if (name.includes('-') && name !== 'write-config-to' && name !== 'config') {
      const r2 = parseCommandLine(argOf(name.replaceAll('-', '_'), value), { version: 'v1' });
      t.is(r2.kind, 'run', r2.kind === 'exit' ? r2.stderr : '');
    }
  });
}

test("--help and --version (also verflag's --version=raw) exit 0", (t) => {
  for (const argv of [['--help'], ['-h'], ['--version'], ['--version=raw'], ['--version=true']]) {
    const r = parseCommandLine(argv, { version: 'v1' });
    t.is(r.kind, 'exit', argv.join(' '));
    if (r.kind === 'exit') t.is(r.code, 0, argv.join(' '));
  }
  const off = parseCommandLine(['--version=false'], { version: 'v1' });
  t.is(off.kind, 'run');
});

test('flags with no effect here are each named in exactly one warning', (t) => {
  const noEffect = [
    'vmodule',
    'log-flush-frequency',
    'log-text-split-stream',
    'log-text-info-buffer-size',
    'log-json-split-stream',
    'log-json-info-buffer-size',
    'boot-id-file',
    'machine-id-file',
    'show-hidden-metrics-for-version',
  ];
  for (const name of noEffect) {
    const r = parseCommandLine(argOf(name, UPSTREAM_FLAGS[name]!), { version: 'v1' });
    if (r.kind !== 'run') return t.fail(`--${name}: ${r.stderr}`);
    const lines = r.warnings.filter((w) => w.includes(`--${name} `));
    t.is(lines.length, 1, `--${name}: ${JSON.stringify(r.warnings)}`);
    t.regex(lines[0]!, /no effect/);
  }
});

test('--init-only asks for the init-only action; --cleanup wins over it, as upstream', (t) => {
  const r = parseCommandLine(['--init-only'], { version: 'v1' });
  t.is(r.kind === 'run' ? r.action : r.kind, 'init-only');
  const c = parseCommandLine(['--init-only', '--cleanup'], { version: 'v1' });
  t.is(c.kind === 'run' ? c.action : c.kind, 'cleanup');
});

test('the logging flags still apply with --config (upstream copies them over the file)', (t) => {
  const r = parseCommandLine(['--config', '/cfg', '--vmodule=x=2', '--log-flush-frequency=1s'], {
    version: 'v1',
    readFile: () => 'apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n',
  });
  if (r.kind !== 'run') return t.fail(r.stderr);
  t.false(
    r.warnings.some((w) => w.includes('ignored because --config')),
    JSON.stringify(r.warnings),
  );
});
