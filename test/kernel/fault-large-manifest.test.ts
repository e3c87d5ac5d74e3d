// A large manifest (just under the 8 MiB limit, YAML: the slow parser) added to the running
// daemon and then removed: its Services land, and after the removal memory goes back near
// where it was before (the issue measured RSS 123 -> 513 MB, still 508 MB after the delete).
// The real daemon with the package's V8 options (as /usr/bin/kube-proxy-ts runs it), nftables
// mode, in a namespace cluster; RSS read from /proc (figures logged for BENCHMARKS.md).
import { readFile, rename, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import test from 'ava';
import { DAEMON_V8_OPTIONS } from '../../src/daemon/v8-options.ts';
import { MAX_MANIFEST_BYTES } from '../../src/sources/manifest-dir.ts';
import { ECHO, makeCluster, podIP } from '../helpers/cluster.ts';
import { BIN, pollUntil } from '../helpers/daemon-process.ts';
import { serviceYAML } from '../helpers/manifests.ts';
import { nodeDaemonArgs, startDaemon, tempDir } from '../helpers/standalone.ts';

const status = async (pid: number, field: 'VmRSS' | 'VmHWM'): Promise<number> => {
  const text = await readFile(`/proc/${pid}/status`, 'utf8');
  return Math.round(Number(new RegExp(`${field}:\\s+(\\d+)`).exec(text)?.[1] ?? 0) / 1024);
};

/** Services of the big file: 10.96.<1..>.<1..250>, one endpoint each, until the file is near the limit. */
function bigManifest(): { text: string; services: number; lastVip: string } {
  const parts: string[] = [];
  let bytes = 0;
  let lastVip = '';
  for (let i = 0; ; i++) {
    const vip = `10.96.${1 + Math.floor(i / 250)}.${1 + (i % 250)}`;
    const doc = serviceYAML({ name: `big-${i}`, clusterIP: vip, port: 80, targetPort: 8080, endpoints: [podIP(0)] });
    if (bytes + doc.length + 4 > MAX_MANIFEST_BYTES - 1024) return { text: parts.join('---\n'), services: i, lastVip };
    parts.push(doc);
    bytes += doc.length + 4;
    lastVip = vip;
  }
}

test.serial('an 8 MiB manifest added, then removed: its Services land, then memory goes back', async (t) => {
  t.timeout(600_000);
  const c = await makeCluster(t, 'bigm', 1);
  const dir = await tempDir(t, 'bigm');
  await writeFile(
    join(dir, 'web.yaml'),
    serviceYAML({ name: 'web', clusterIP: '10.96.0.10', port: 80, targetPort: 8080, endpoints: [podIP(0)] }),
  );
  const d = startDaemon(t, c.node, nodeDaemonArgs('nftables', { manifestDir: dir }), {
    command: [process.execPath, ...DAEMON_V8_OPTIONS, BIN],
  });
  const answers = (vip: string) => async (): Promise<true | undefined> =>
    (await c.clientAgent.call<string>(ECHO, 'tcp', vip, 80, 200)).startsWith('pod1 ') ? true : undefined;
  const fail = (e: unknown): never => {
    t.log(d.log().slice(-5000));
    throw e;
  };
  const released = (): number =>
    d
      .log()
      .split('\n')
      .filter((l) => l.includes('Gave memory back')).length;
  await pollUntil('web to answer', answers('10.96.0.10'), 90_000).catch(fail);
  // The start-up collection runs right after READY; let it and the first idle moments pass.
  await new Promise((resolve) => setTimeout(resolve, 3000));
  const before = await status(d.pid, 'VmRSS');

  const big = bigManifest();
  await writeFile(join(dir, '.big.tmp'), big.text);
  await rename(join(dir, '.big.tmp'), join(dir, 'big.yaml')); // whole, never half-written
  await pollUntil('the last big Service to answer', answers(big.lastVip), 300_000, 500).catch(fail);
  await pollUntil('the collection after the load', async () => (released() >= 1 ? true : undefined), 60_000).catch(
    fail,
  );
  const withFile = await status(d.pid, 'VmRSS');
  const peak = await status(d.pid, 'VmHWM');

  await unlink(join(dir, 'big.yaml'));
  // The removal's collection comes after the sync that drops the Services, at most once a 30 s.
  await pollUntil('the collection after the removal', async () => (released() >= 2 ? true : undefined), 120_000).catch(
    fail,
  );
  const after = await status(d.pid, 'VmRSS');
  t.true(await answers('10.96.0.10')(), 'the small Service still answers');
  t.log(
    `${big.services} Services in ${(big.text.length / 2 ** 20).toFixed(1)} MiB: RSS before ${before} MiB, ` +
      `peak ${peak} MiB, with the file ${withFile} MiB, after its removal ${after} MiB`,
  );
  t.log(
    d
      .log()
      .split('\n')
      .filter((l) => l.includes('Gave memory back'))
      .join('\n'),
  );
  t.true(after - before < (peak - before) / 2, `after ${after} MiB: most of the growth to ${peak} MiB given back`);
});
