// `npm run demo`, the README's first command, run as a newcomer would: it must finish, show
// both Service addresses spreading over the three pods, and leave no namespace behind, also
// when interrupted with Ctrl-C halfway.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import test from 'ava';
import { namespacesOfProcess, sh } from '../helpers/netns.ts';

const DEMO = fileURLToPath(new URL('../demo/demo.ts', import.meta.url));
const BOUND_MS = 120_000;

interface DemoRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  output: string;
  pid: number;
}

/** Runs the demo as `npm run demo` does (node test/demo/demo.ts), no stdin; `onOutput` may interrupt it. */
function runDemo(onOutput?: (soFar: string, child: ReturnType<typeof spawn>) => void): Promise<DemoRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [DEMO], { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    const take = (b: Buffer): void => {
      output += b.toString();
      onOutput?.(output, child);
    };
    child.stdout.on('data', take);
    child.stderr.on('data', take);
    const timer = setTimeout(() => child.kill('SIGKILL'), BOUND_MS);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, output, pid: child.pid! });
    });
  });
}

/** "   pod2   #####   5" lines of one numbered step of the output. */
function spreadOf(output: string, stepTitle: RegExp): Map<string, number> {
  const from = output.search(stepTitle);
  const rest = output.slice(from);
  const end = rest.slice(1).search(/\n\d+\. /);
  const block = end < 0 ? rest : rest.slice(0, end + 1);
  return new Map([...block.matchAll(/^\s+(pod\d)\s+#+\s+(\d+)$/gm)].map((m) => [m[1]!, Number(m[2])]));
}

test.serial(
  'npm run demo: both Service addresses spread over the three pods; the edit and --cleanup work; nothing is left',
  async (t) => {
    const r = await runDemo();
    t.teardown(async () => {
      for (const n of await namespacesOfProcess(r.pid)) await sh('ip', 'netns', 'del', n);
    });
    t.is(r.code, 0, r.output);
    for (const title of [
      /\n4\. \d+ connections from the client to the ClusterIP/,
      /\n5\. \d+ connections from the client to the NodePort/,
    ]) {
      const spread = spreadOf(r.output, title);
      t.deepEqual(
        [...spread.keys()].sort(),
        ['pod1', 'pod2', 'pod3'],
        `${String(title)}: every pod answered\n${r.output}`,
      );
    }
    t.regex(
      r.output,
      /\$ kube-proxy-ts explain\n\s+daemon: node demo-node, mode nftables, pid \d+, socket \S+\/control\.sock\n\s+SERVICE PORT[^\n]*\n\s+default\/web:http\/TCP .* 3\/3\s+in sync/,
      'the demo shows explain',
    );
    t.regex(
      r.output,
      /verdict: DNAT: cluster-ip 10\.96\.0\.10:80\/TCP of default\/web:http\/TCP/,
      'the demo shows trace',
    );
    const afterEdit = spreadOf(r.output, /\n7\. Edit the manifest: pod2 goes away/);
    t.deepEqual([...afterEdit.keys()].sort(), ['pod1', 'pod3'], 'pod2 no longer answers after the edit');
    t.regex(r.output, /SIGTERM: exit code 0; rules left in place/);
    t.regex(r.output, /--cleanup: exit code 0; table ip kube-proxy-ts removed/);
    t.regex(r.output, /namespaces and manifests removed/);
    t.deepEqual(await namespacesOfProcess(r.pid), [], 'no namespace left behind');
  },
);

test.serial('Ctrl-C halfway: the demo removes everything it made and exits 130', async (t) => {
  let interrupted = false;
  const r = await runDemo((soFar, child) => {
    // Once the daemon runs and the traffic starts: the most there is to clean up.
    if (!interrupted && /\n4\. /.test(soFar)) {
      interrupted = true;
      child.kill('SIGINT');
    }
  });
  t.teardown(async () => {
    for (const n of await namespacesOfProcess(r.pid)) await sh('ip', 'netns', 'del', n);
  });
  t.true(interrupted, `the demo never reached step 4:\n${r.output}`);
  t.is(r.code, 130, r.output);
  t.regex(r.output, /interrupted: removing everything/);
  t.regex(r.output, /\nremoved\./);
  t.deepEqual(await namespacesOfProcess(r.pid), [], 'no namespace left behind');
});
