// --service-traffic-metrics end to end in nftables and iptables modes: the daemon
// (bin/kube-proxy-ts.js, fed from a manifest directory) exports kubeproxyts_service_* on
// /metrics, and they rise by exactly the datagrams and flows sent (the IPVS mode's are in
// test/vm/scenarios/ipvs-proxier.ts).
import { join } from 'node:path';
import test from 'ava';
import { ECHO, makeCluster, podIP } from '../helpers/cluster.ts';
import { pollUntil, runDaemon } from '../helpers/daemon-process.ts';
import { writeServiceManifests } from '../helpers/manifests.ts';
import { nodeDaemonArgs, startDaemon, tempDir } from '../helpers/standalone.ts';
import { ep, svc } from '../unit/model/helpers.ts';

const AGENT = new URL('./daemon-agent.ts', import.meta.url).href;
const VIP = '10.96.0.53';
/** "hello" in one IPv4 UDP datagram: 20 + 8 + 5 bytes. */
const DATAGRAM = 33;
const LABELS = 'namespace="default",service="dns",port="dns",protocol="UDP",frontend="cluster-ip"';

for (const mode of ['nftables', 'iptables'] as const) {
  test.serial(`${mode} mode: kubeproxyts_service_* on /metrics count the traffic sent`, async (t) => {
    const c = await makeCluster(t, `std-${mode.slice(0, 3)}`, 1);
    const dir = await tempDir(t, 'traffic');
    await writeServiceManifests(dir, [
      {
        svc: svc('dns', { clusterIP: VIP, ports: [{ name: 'dns', protocol: 'UDP', port: 53, targetPort: 8080 }] }),
        eps: [ep(podIP(0), { node: 'node-a' })],
        ports: [{ name: 'dns', protocol: 'UDP', port: 8080 }],
      },
    ]);
    const d = startDaemon(
      t,
      c.node,
      nodeDaemonArgs(mode, { manifestDir: dir }, [
        '--control-socket',
        join(dir, 'control.sock'),
        '--service-traffic-metrics',
      ]),
    );
    const udp = (srcPort: number) => c.clientAgent.call<string>(ECHO, 'udp', VIP, 53, srcPort);
    const metrics = async (): Promise<string> =>
      (await c.nodeAgent.call<{ body: string }>(AGENT, 'httpGet', 'http://127.0.0.1:10249/metrics')).body;
    const value = (text: string, name: string): number | undefined => {
      const m = new RegExp(`^kubeproxyts_service_${name}_total\\{${LABELS}\\} (\\d+)$`, 'm').exec(text);
      return m ? Number(m[1]) : undefined;
    };
    try {
      // Programmed (and counted from) the first answer on: wait for the counters' series to appear.
      await pollUntil(
        'the Service to answer',
        async () => ((await udp(44000)).startsWith('pod') ? true : undefined),
        20_000,
      );
      await pollUntil('the traffic metrics', async () => value(await metrics(), 'connections'), 10_000);
    } catch (e) {
      t.log(d.log());
      throw e;
    }
    const before = await metrics();
    for (let i = 1; i <= 3; i++) t.regex(await udp(44000 + i), /^pod1 /);
    // A scrape may be served from the read of one just before (kept up to a second): poll.
    const after = await pollUntil(
      'the connections to be counted',
      async () => {
        const m = await metrics();
        return value(m, 'connections')! >= value(before, 'connections')! + 3 ? m : undefined;
      },
      10_000,
    );
    t.is(value(after, 'connections')! - value(before, 'connections')!, 3);
    if (mode === 'nftables') {
      t.is(value(after, 'packets')! - value(before, 'packets')!, 3);
      t.is(value(after, 'bytes')! - value(before, 'bytes')!, 3 * DATAGRAM);
    } else {
      t.is(value(after, 'packets'), undefined, 'iptables mode counts connections only');
    }
    // explain reads the counting objects back as well: in sync, not a false drift.
    const explain = await runDaemon(c.node, ['explain', 'default/dns', '--control-socket', join(dir, 'control.sock')]);
    t.regex(explain.stdout, new RegExp(`Kernel \\(${mode}\\): in sync`), explain.stdout);
    d.signal('SIGTERM');
    t.is((await d.exited).code, 0);
  });
}
