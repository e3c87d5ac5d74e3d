// /statusz and /flagz in upstream's formats (k8s.io/apiserver statusz and flagz, v1.37): the
// text pages byte for byte with a fixed delimiter, every delimiter upstream picks from, the
// config.k8s.io objects, content negotiation, /metrics/slis; all through the real metrics server.

import test from 'ava';
import { parseCommandLine } from '../../../src/config/cli.ts';
import { flagzValues, pflagText } from '../../../src/daemon/flagz.ts';
import { metricsOps } from '../../../src/daemon/ops.ts';
import { createMetrics } from '../../../src/metrics/metrics.ts';
import { opsRoutes } from '../../../src/metrics/ops-endpoints.ts';
import { startMetricsServer } from '../../../src/metrics/server.ts';
import { createSliMetrics } from '../../../src/metrics/slis.ts';
import {
  flagzText,
  negotiateZPage,
  pickDelimiter,
  statuszText,
  unixDate,
  uptimeText,
  ZPAGES_DELIMITERS,
} from '../../../src/metrics/zpages.ts';
import { MODES } from '../../../src/daemon/modes/index.ts';

const WARNING =
  'Warning: This endpoint is not meant to be machine parseable, has no formatting compatibility guarantees and is for debugging purposes only.';

// 2026-09-24 00:00:00 UTC, up 1 h 1 min 5 s.
const START = Date.UTC(2026, 8, 24, 0, 0, 0);
const INFO = {
  component: 'kube-proxy',
  startMs: START,
  nowMs: START + 3_665_000,
  runtimeVersion: 'v24.21.0',
  binaryVersion: 'v0.1.0',
  emulationVersion: '1.37',
  paths: ['/metrics', '/healthz/ping', '/configz', '/healthz', '/metrics/slis', '/proxyMode', '/flagz'],
};

test('statusz text: upstream layout, Go time formats, paths by first segment', (t) => {
  t.is(
    statuszText(INFO, ':'),
    `
kube-proxy statusz
${WARNING}

Started: Thu Sep 24 00:00:00 UTC 2026
Up: 1 hr 01 min 05 sec
Go version: v24.21.0
Binary version: v0.1.0
Emulation version: 1.37
Paths: /configz /flagz /healthz /metrics /proxyMode
`,
  );
  // Without an emulation version and paths, their lines stay empty (upstream's template).
  t.is(
    statuszText({ ...INFO, emulationVersion: undefined, paths: [] } as never, '='),
    `\nkube-proxy statusz\n${WARNING}\n\nStarted= Thu Sep 24 00:00:00 UTC 2026\nUp= 1 hr 01 min 05 sec\nGo version= v24.21.0\nBinary version= v0.1.0\n\n\n`,
  );
});

test('Go formats: UnixDate pads the day with a space; uptime pads minutes and seconds', (t) => {
  t.is(unixDate(Date.UTC(2026, 0, 5, 9, 3, 7)), 'Mon Jan  5 09:03:07 UTC 2026');
  t.is(uptimeText(0), '0 hr 00 min 00 sec');
  t.is(uptimeText(90_061), '25 hr 01 min 01 sec');
});

test('the delimiter is one of upstream four, each reachable', (t) => {
  t.deepEqual(ZPAGES_DELIMITERS, [':', ': ', '=', ' ']);
  t.deepEqual(
    [0, 0.3, 0.6, 0.99].map((r) => pickDelimiter(() => r)),
    [':', ': ', '=', ' '],
  );
});

test('flagz text: header, then every flag sorted, name + delimiter + value', (t) => {
  t.is(
    flagzText('kube-proxy', { v: '2', 'bind-address': '0.0.0.0', 'feature-gates': '' }, ': '),
    `\nkube-proxy flagz\n${WARNING}\nbind-address: 0.0.0.0\nfeature-gates: \nv: 2\n`,
  );
});

test('flagz values: every flag, as pflag prints it, effective values from the configuration', (t) => {
  const r = parseCommandLine([
    '--proxy-mode=nftables',
    '--nodeport-addresses=10.0.0.0/8,primary',
    '--feature-gates=KubeProxyNFTablesLocalhostNodePorts=true,AllBeta=false',
    '--nftables-sync-period=1m'.replace('nftables-', ''),
    '-v=3',
  ]);
  if (r.kind !== 'run') return t.fail(r.stderr);
  const f = flagzValues(r.config, '');
  t.is(f['proxy-mode'], 'nftables');
  t.is(f['nodeport-addresses'], '[10.0.0.0/8,primary]');
  t.is(f['feature-gates'], 'AllBeta=false,KubeProxyNFTablesLocalhostNodePorts=true');
  t.is(f['sync-period'], '1m0s');
  t.is(f['iptables-sync-period'], '1m0s', 'the mode section holds the period, as upstream resolves it');
  t.is(f['v'], '3');
  t.is(f['metrics-port'], '10249');
  t.is(f['cleanup'], 'false');
  t.is(f['ipvs-exclude-cidrs'], '[]');
  t.is(f['profiling'], 'false');
  t.is(Object.keys(f).length, 65, 'every flag');
  t.is(pflagText('duration', 250), '250ms');
});

test('content negotiation as upstream: text by default, structured objects only by as/g/v, else none', (t) => {
  t.deepEqual(negotiateZPage(undefined, 'Statusz'), { kind: 'text' });
  t.deepEqual(negotiateZPage('*/*', 'Statusz'), { kind: 'text' });
  t.deepEqual(negotiateZPage('text/plain; charset=utf-8', 'Flagz'), { kind: 'text' });
  t.deepEqual(negotiateZPage('application/json;as=Statusz;v=v1beta1;g=config.k8s.io', 'Statusz'), {
    kind: 'json',
    version: 'v1beta1',
  });
  t.deepEqual(negotiateZPage('application/json', 'Statusz'), { kind: 'none' });
  t.deepEqual(negotiateZPage('application/json;as=Flagz;v=v1beta1;g=config.k8s.io', 'Statusz'), { kind: 'none' });
  t.deepEqual(
    negotiateZPage('text/plain;q=0.5, application/json;as=Flagz;v=v1alpha1;g=config.k8s.io', 'Flagz'),
    { kind: 'json', version: 'v1alpha1' },
    'by quality',
  );
});

test('the metrics server serves /statusz, /flagz, /metrics/slis and counts /healthz for the SLIs', async (t) => {
  const slis = createSliMetrics(1_790_000_000);
  const metrics = createMetrics({ mode: 'nftables', groups: MODES.nftables.metrics.groups, processMetrics: false });
  const server = await startMetricsServer({
    address: '127.0.0.1:0',
    metrics,
    proxyMode: 'nftables',
    opsRoutes: opsRoutes({
      component: 'kube-proxy',
      slis,
      random: () => 0,
      statusz: () => INFO,
      flagz: () => ({ v: '0' }),
    }),
    onHealthz: () => slis.observe('ping', 'healthz', true),
  });
  t.teardown(() => server.close());
  const get = (path: string, init: RequestInit = {}) => fetch(`http://127.0.0.1:${server.port}${path}`, init);

  const statusz = await get('/statusz');
  t.is(statusz.status, 200);
  t.is(statusz.headers.get('content-type'), 'text/plain; charset=utf-8');
  t.regex(await statusz.text(), /^\nkube-proxy statusz\n[^\n]+\n\nStarted: Thu Sep 24/);
  const json = await get('/statusz', { headers: { Accept: 'application/json;as=Statusz;v=v1beta1;g=config.k8s.io' } });
  t.is(json.status, 200);
  t.like(await json.json(), {
    kind: 'Statusz',
    apiVersion: 'config.k8s.io/v1beta1',
    metadata: { name: 'kube-proxy' },
    startTime: '2026-09-24T00:00:00Z',
    uptimeSeconds: 3665,
    binaryVersion: 'v0.1.0',
  });
  const alpha = await get('/flagz', { headers: { Accept: 'application/json;as=Flagz;v=v1alpha1;g=config.k8s.io' } });
  t.deepEqual(await alpha.json(), {
    kind: 'Flagz',
    apiVersion: 'config.k8s.io/v1alpha1',
    metadata: { name: 'kube-proxy' },
    flags: { v: '0' },
  });
  t.regex(alpha.headers.get('warning') ?? '', /^299 - "This version of the flagz endpoint is deprecated/);
  t.is((await get('/flagz', { headers: { Accept: 'application/json' } })).status, 406);
  t.is(await (await get('/flagz')).text(), `\nkube-proxy flagz\n${WARNING}\nv:0\n`);

  await get('/healthz');
  await get('/healthz');
  const sli = await (await get('/metrics/slis')).text();
  t.regex(sli, /^kubernetes_healthcheck\{name="ping",type="healthz"\} 1$/m);
  t.regex(sli, /^kubernetes_healthchecks_total\{name="ping",type="healthz",status="success"\} 2$/m);
  t.regex(sli, /^process_start_time_seconds 1790000000$/m);
  t.is(await (await get('/metrics/slis', { method: 'DELETE' })).text(), 'metrics reset\n');
  t.notRegex(await (await get('/metrics/slis')).text(), /kubernetes_healthchecks_total\{/);
  t.is((await get('/nothing')).status, 404);
});

test('kubernetes_feature_enabled lists every gate; ComponentStatusz=false and ComponentFlagz=false turn the pages off', async (t) => {
  const r = parseCommandLine(['--feature-gates=ComponentStatusz=false,ComponentFlagz=false,AllAlpha=true']);
  if (r.kind !== 'run') return t.fail(r.stderr);
  const metrics = createMetrics({ mode: 'iptables', groups: MODES.iptables.metrics.groups, processMetrics: false });
  const ops = metricsOps(r.config, { version: 'v0.1.0', metrics });
  const text = await metrics.registry.metrics();
  t.regex(text, /^kubernetes_feature_enabled\{name="KubeProxyNFTablesLocalhostNodePorts",stage="ALPHA"\} 1$/m);
  t.regex(text, /^kubernetes_feature_enabled\{name="ComponentStatusz",stage="BETA"\} 0$/m);
  t.regex(text, /^kubernetes_feature_enabled\{name="NFTablesProxyMode",stage=""\} 1$/m);
  t.regex(text, /^kubernetes_feature_enabled\{name="KubeProxyIPVS",stage="DEPRECATED"\} 1$/m);
  const req = { headers: {}, method: 'GET' } as never;
  t.is(ops.routes('/statusz', req), undefined);
  t.is(ops.routes('/flagz', req), undefined);
  t.truthy(ops.routes('/metrics/slis', req));
});
