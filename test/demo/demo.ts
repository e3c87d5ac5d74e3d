// `npm run demo`: kube-proxy-ts serving a Service in a throwaway namespace "cluster".
//
// It builds network namespaces standing for a node, three backend pods and a client,
// writes a Service and its EndpointSlice to a manifest directory, starts the real daemon
// (bin/kube-proxy-ts.js) in the node namespace with --manifest-dir (standalone mode, no
// Kubernetes API), sends requests to the ClusterIP and the NodePort from the client, prints
// how they spread, shows a few of the programmed nf_tables objects, changes the manifest,
// and removes everything, also on Ctrl-C. Nothing touches the host's own network namespace.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CLIENT_IP, ECHO, makeCluster, NODE_IP, podIP } from '../helpers/cluster.ts';
import type { Cluster } from '../helpers/cluster.ts';
import { pollUntil, runDaemon, spawnDaemon } from '../helpers/daemon-process.ts';
import type { DaemonProcess } from '../helpers/daemon-process.ts';
import { serviceYAML } from '../helpers/manifests.ts';

const VIP = '10.96.0.10';
const NODE_PORT = 30080;
const REQUESTS = 30;
const started = Date.now();

const bold = (s: string): string => (process.stdout.isTTY ? `\x1b[1m${s}\x1b[0m` : s);
const dim = (s: string): string => (process.stdout.isTTY ? `\x1b[2m${s}\x1b[0m` : s);
const step = (n: number, s: string): void => console.log(`\n${bold(`${n}. ${s}`)}`);
const indent = (s: string, by = '   '): string =>
  s
    .trimEnd()
    .split('\n')
    .map((l) => by + l)
    .join('\n');

const teardowns: (() => Promise<void>)[] = [];
let cleaning: Promise<void> | undefined;
const cleanup = (): Promise<void> =>
  (cleaning ??= (async () => {
    for (const f of teardowns.splice(0).reverse()) {
      try {
        await f();
      } catch (e) {
        console.error(`cleanup step failed: ${(e as Error).message}`);
      }
    }
  })());
process.once('SIGINT', () => {
  console.log('\ninterrupted: removing everything ...');
  void cleanup().then(() => {
    console.log('removed.');
    process.exit(130);
  });
});

function spread(answers: readonly string[]): string {
  const counts = new Map<string, number>();
  for (const a of answers) {
    const who = /^pod\d /.test(a) ? a.split(' ')[0]! : `(${a})`;
    counts.set(who, (counts.get(who) ?? 0) + 1);
  }
  return [...counts.entries()]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([who, n]) => `   ${who.padEnd(6)} ${'#'.repeat(n).padEnd(REQUESTS)} ${n}`)
    .join('\n');
}

async function main(): Promise<void> {
  console.log(bold('kube-proxy-ts demo'));
  console.log('A Service made reachable by kube-proxy-ts, in throwaway network namespaces. Needs root; takes ~20 s.');

  step(1, 'Build a namespace "cluster"');
  const c: Cluster = await makeCluster({ teardown: (f) => void teardowns.push(f) }, 'demo', 3);
  console.log(
    indent(
      [
        `client  ${CLIENT_IP}  ──>  node ${NODE_IP}   (kube-proxy-ts runs here)`,
        ...[0, 1, 2].map(
          (i) =>
            `                     node ──> pod${i + 1} ${podIP(i)}:8080   (answers "pod${i + 1} <source address>")`,
        ),
      ].join('\n'),
    ),
  );

  step(2, 'Write a Service and its EndpointSlice to a manifest directory');
  const dir = await mkdtemp(join(tmpdir(), 'kube-proxy-ts-demo-'));
  teardowns.push(() => rm(dir, { recursive: true, force: true }));
  const web = { name: 'web', clusterIP: VIP, port: 80, nodePort: NODE_PORT, targetPort: 8080, nodeName: 'demo-node' };
  await writeFile(join(dir, 'web.yaml'), serviceYAML({ ...web, endpoints: [podIP(0), podIP(1), podIP(2)] }));
  console.log(
    indent(
      `${dir}/web.yaml: Service default/web, type NodePort, ${VIP}:80 and node port ${NODE_PORT} -> 3 endpoints on :8080`,
    ),
  );

  step(3, 'Start kube-proxy-ts in the node namespace');
  const sock = join(dir, 'control.sock');
  const args = [
    '--proxy-mode',
    'nftables',
    '--manifest-dir',
    dir,
    '--control-socket',
    sock,
    '--hostname-override',
    'demo-node',
    '--cluster-cidr',
    '10.244.0.0/16',
    '--healthz-bind-address',
    '127.0.0.1:10256',
    '--metrics-bind-address',
    '127.0.0.1:10249',
    '--min-sync-period',
    '100ms',
  ];
  console.log(indent(dim(`ip netns exec ${c.node.name} node bin/kube-proxy-ts.js ${args.join(' ')}`)));
  const d: DaemonProcess = spawnDaemon(c.node, args);
  teardowns.push(async () => {
    d.signal('SIGTERM');
    await Promise.race([d.exited, new Promise((resolve) => setTimeout(resolve, 3000))]);
    await d.kill();
  });
  const t0 = Date.now();
  const tcp = (ip: string, port: number) => c.clientAgent.call<string>(ECHO, 'tcp', ip, port);
  const tcpMany = (ip: string, port: number, n: number) => c.clientAgent.call<string[]>(ECHO, 'tcpMany', ip, port, n);
  try {
    await pollUntil(
      'the Service to answer',
      async () => ((await tcp(VIP, 80)).startsWith('pod') ? true : undefined),
      20_000,
    );
  } catch (e) {
    console.error(indent(d.log()));
    throw e;
  }
  console.log(indent(`the Service answers ${Date.now() - t0} ms after start (first full sync done, READY)`));
  const firstLines = d
    .log()
    .split('\n')
    .filter((l) => /started|ready|Serving/i.test(l))
    .slice(0, 4);
  if (firstLines.length > 0) console.log(indent(dim(firstLines.join('\n'))));

  step(4, `${REQUESTS} connections from the client to the ClusterIP ${VIP}:80`);
  console.log(spread(await tcpMany(VIP, 80, REQUESTS)));
  step(5, `${REQUESTS} connections from the client to the NodePort ${NODE_IP}:${NODE_PORT}`);
  const np = await tcpMany(NODE_IP, NODE_PORT, REQUESTS);
  console.log(spread(np));
  console.log(
    indent(
      dim(
        `the pods saw the source ${[...new Set(np.map((a) => a.split(' ')[1]))].join(', ')}: masqueraded to the node's address on the pod link`,
      ),
    ),
  );

  step(6, 'What kube-proxy-ts programmed (nft list, table ip kube-proxy-ts; kube-proxy-ts explain and trace)');
  console.log(indent(dim('The `services` chain: one verdict-map lookup per packet, whatever the number of Services;')));
  console.log(indent(dim('the `service-ips` map sends each service IP . protocol . port to a picker chain (one per')));
  console.log(
    indent(dim('number of endpoints, shared by the Services that have as many), which picks one at random.')),
  );
  const services = await c.node.exec('nft', ['list', 'chain', 'ip', 'kube-proxy-ts', 'services']);
  console.log(indent(services.code === 0 ? services.stdout : services.stderr));
  const map = await c.node.exec('nft', ['list', 'map', 'ip', 'kube-proxy-ts', 'service-ips']);
  console.log(indent(map.code === 0 ? map.stdout : map.stderr));
  const chains = await c.node.exec('nft', ['list', 'chains', 'ip']);
  const serviceChains = chains.stdout
    .split('\n')
    .map((l) => /chain ((?:service|external)-[A-Z0-9]{8}-\S+)/.exec(l)?.[1])
    .filter((n): n is string => n !== undefined);
  const svcChain = serviceChains.find((n) => n.startsWith('service-'));
  if (svcChain !== undefined) {
    const chain = await c.node.exec('nft', ['list', 'chain', 'ip', 'kube-proxy-ts', svcChain]);
    console.log(indent(dim("The Service's own chain: masquerade if needed, then a random pick of an endpoint:")));
    console.log(indent(chain.code === 0 ? chain.stdout : chain.stderr));
  }
  console.log(
    indent(
      dim("The same in Kubernetes' terms, read back from the kernel: kube-proxy-ts explain (the daemon answers on"),
    ),
  );
  console.log(
    indent(
      dim('its control socket), then what a packet from the client to the ClusterIP would meet: kube-proxy-ts trace'),
    ),
  );
  for (const cmd of [
    ['explain'],
    ['explain', 'default/web'],
    ['trace', '--from', CLIENT_IP, '--to', `${VIP}:80/tcp`],
  ]) {
    const r = await runDaemon(c.node, [...cmd, '--control-socket', sock]);
    console.log(indent(`$ kube-proxy-ts ${cmd.join(' ')}`));
    console.log(indent(r.code === 0 ? r.stdout : r.stderr));
  }
  const health = await c.nodeAgent.call<{ status: number; body: string }>(
    new URL('../kernel/daemon-agent.ts', import.meta.url).href,
    'httpGet',
    'http://127.0.0.1:10256/healthz',
  );
  console.log(indent(`GET /healthz on the node: ${health.status} ${health.body}`));

  step(7, 'Edit the manifest: pod2 goes away');
  await writeFile(join(dir, 'web.yaml'), serviceYAML({ ...web, endpoints: [podIP(0), podIP(2)] }));
  const t1 = Date.now();
  // Done when no programmed rule or element mentions pod2's address any more.
  const pod2Gone = async () =>
    (await c.node.run('nft', 'list', 'table', 'ip', 'kube-proxy-ts')).includes(podIP(1)) ? undefined : true;
  await pollUntil('pod2 to be gone', pod2Gone, 10_000, 50);
  console.log(indent(`applied within ${Date.now() - t1} ms (a partial sync: only this Service's elements changed)`));
  console.log(spread(await tcpMany(VIP, 80, REQUESTS)));

  step(8, 'Stop and clean up');
  d.signal('SIGTERM');
  const exit = await d.exited;
  const kept = (await c.node.exec('nft', ['list', 'table', 'ip', 'kube-proxy-ts'])).code === 0;
  const still = await tcp(VIP, 80);
  console.log(
    indent(
      `SIGTERM: exit code ${exit.code}; rules ${kept ? 'left in place' : 'GONE'}; the Service still answers: ${still}`,
    ),
  );
  const cl = await runDaemon(c.node, ['--cleanup']);
  const gone = (await c.node.exec('nft', ['list', 'table', 'ip', 'kube-proxy-ts'])).code !== 0;
  console.log(
    indent(`kube-proxy-ts --cleanup: exit code ${cl.code}; table ip kube-proxy-ts ${gone ? 'removed' : 'STILL THERE'}`),
  );
}

if (process.getuid?.() !== 0) {
  console.error('The demo makes network namespaces and nf_tables rules: run it as root (sudo npm run demo).');
  process.exit(1);
}

let failed = false;
try {
  await main();
} catch (e) {
  failed = true;
  console.error(`\ndemo failed: ${(e as Error).stack ?? String(e)}`);
} finally {
  await cleanup();
  console.log(`\nnamespaces and manifests removed; ${((Date.now() - started) / 1000).toFixed(1)} s in all.`);
}
process.exit(failed ? 1 : 0);
