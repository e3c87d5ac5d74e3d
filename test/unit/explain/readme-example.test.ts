// README's explain/trace example ("Seeing what the proxy does") against the code: each
// command's output there is what the formatters print for the demo's Service (the daemon
// line first), so the example changes when the output does.
import { readFileSync } from 'node:fs';
import test from 'ava';
import type { IPFamily } from '../../../src/base/ip.ts';
import { balancingOf } from '../../../src/explain/balancing.ts';
import { explainPort } from '../../../src/explain/explain.ts';
import { daemonLine, formatExplain, formatExplainPort, formatTrace } from '../../../src/explain/format.ts';
import { trace } from '../../../src/explain/trace.ts';
import type { DesiredState } from '../../../src/model/index.ts';
import { ep, newTracker, node, slice, svc } from '../model/helpers.ts';

const README = readFileSync(new URL('../../../README.md', import.meta.url), 'utf8');
const DAEMON = {
  nodeName: 'demo-node',
  mode: 'nftables',
  pid: 2817,
  socket: '/tmp/kube-proxy-ts-demo-Xq3v9T/control.sock',
};

/** The lines README shows after `$ kube-proxy-ts ARGS`, up to the next command or the end of the block. */
function shown(args: string): string {
  const section = README.slice(README.indexOf('## Seeing what the proxy does'));
  const start = section.indexOf(`$ kube-proxy-ts ${args}\n`);
  if (start < 0) throw new Error(`README shows no "$ kube-proxy-ts ${args}"`);
  const rest = section.slice(start).split('\n').slice(1);
  const end = rest.findIndex((l) => l.startsWith('$ ') || l.startsWith('```'));
  return rest.slice(0, end).join('\n') + '\n';
}

/** The demo's Service: web, NodePort 10.96.0.10:80 and 30080, three endpoints on demo-node. */
function demo(): DesiredState {
  const { t } = newTracker({ nodeName: 'demo-node', clusterCIDRs: ['10.244.0.0/16'], serviceCIDRs: ['10.96.0.0/16'] });
  t.onNode(node('demo-node', { internal: ['10.1.0.1'] }));
  t.onService(
    undefined,
    svc('web', {
      type: 'NodePort',
      clusterIP: '10.96.0.10',
      ports: [{ name: 'http', protocol: 'TCP', port: 80, targetPort: 8080, nodePort: 30080 }],
    }),
  );
  const eps = [1, 2, 3].map((i) => ep(`10.244.${i}.2`, { node: 'demo-node' }));
  t.onEndpointSlice(slice('web-1', 'web', eps, { ports: [{ name: 'http', protocol: 'TCP', port: 8080 }] }), false);
  return t.checkout().desired;
}

test('README: trace prints what the code prints, the answering daemon first', (t) => {
  const states = new Map<IPFamily, DesiredState>([['IPv4', demo()]]);
  const r = trace(
    { states, localAddresses: ['10.1.0.1'], mode: 'nftables' },
    { from: '10.1.0.2', to: '10.96.0.10', port: 80, protocol: 'TCP' },
  );
  t.is(shown('trace --from 10.1.0.2 --to 10.96.0.10:80/tcp'), formatTrace({ ...r, daemon: DAEMON }));
});

test('README: explain (the table, and the start of one port) prints what the code prints', (t) => {
  const state = demo();
  const info = [...state.services.values()][0]!;
  const entry = { where: 'service-ips', key: '10.96.0.10 . tcp . 80', value: 'goto pick-internal-3' };
  const port = explainPort(
    state,
    info,
    { mode: 'nftables', kernel: [entry], expected: [entry] },
    balancingOf('nftables', info),
  );
  const sync = {
    mode: 'nftables',
    lastSync: { IPv4: '2026-11-26T19:05:41.287Z' },
    lastChange: { IPv4: '2026-11-26T19:05:41.232Z' },
    pending: false,
  };
  t.is(shown('explain'), formatExplain({ daemon: DAEMON, sync, ports: [port] }, false));
  // The one-port report is shortened ("...") in README: its first lines, up to the endpoints.
  const report = shown('explain default/web').split('\n');
  const code = (daemonLine(DAEMON) + formatExplainPort(port)).split('\n');
  const upTo = report.findIndex((l) => l.trim() === '...');
  t.true(upTo > 10);
  t.deepEqual(report.slice(0, upTo), code.slice(0, upTo));
});
