// The manifest-directory source on a real temporary directory, fs.watch included.

import test from 'ava';
import type { ExecutionContext } from 'ava';
import { mkdir, mkdtemp, rename, rm, symlink, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FakeClock } from '../../../src/base/clock.ts';
import { memoryLogger } from '../../../src/base/logger.ts';
import type { ManifestDirSourceOptions } from '../../../src/sources/manifest-dir.ts';
import { ManifestDirSource, parseManifest } from '../../../src/sources/manifest-dir.ts';
import type { Reject } from '../../../src/sources/types.ts';
import { Recorder, waitFor } from './recorder.ts';

const SERVICE_AND_SLICE = `# web: a Service and its slice
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  clusterIP: 10.96.0.10
  ports:
  - name: http
    port: 80
    targetPort: 8080
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-1
  labels:
    kubernetes.io/service-name: web
addressType: IPv4
endpoints:
- addresses: [10.0.0.1]
  conditions: {ready: true}
ports:
- name: http
  port: 8080
`;

const LIST_JSON = JSON.stringify(
  {
    apiVersion: 'v1',
    kind: 'List',
    items: [
      {
        apiVersion: 'v1',
        kind: 'Service',
        metadata: { name: 'dns', namespace: 'kube-system' },
        spec: { ports: [{ port: 53, protocol: 'UDP' }] },
      },
      {
        apiVersion: 'v1',
        kind: 'Node',
        metadata: { name: 'node-a' },
        status: { addresses: [{ type: 'InternalIP', address: '192.168.1.10' }] },
      },
      { apiVersion: 'v1', kind: 'Node', metadata: { name: 'node-b' } },
    ],
  },
  null,
  2,
);

function service(name: string, port: number, ns = 'default'): string {
  return `kind: Service\nmetadata:\n  name: ${name}\n  namespace: ${ns}\nspec:\n  ports:\n  - port: ${port}\n`;
}

interface Harness {
  dir: string;
  source: ManifestDirSource;
  rec: Recorder;
  logger: ReturnType<typeof memoryLogger>;
  rejects: Reject[];
}

async function harness(
  t: ExecutionContext,
  files: Record<string, string>,
  opts: Partial<ManifestDirSourceOptions> = {},
): Promise<Harness> {
  const dir = await mkdtemp(join(tmpdir(), 'kpts-manifests-'));
  for (const [name, text] of Object.entries(files)) await writeFile(join(dir, name), text);
  const logger = memoryLogger();
  const rejects: Reject[] = [];
  const source = new ManifestDirSource({
    dir,
    nodeName: 'node-a',
    logger,
    onReject: (r) => rejects.push(r),
    debounceMs: 20,
    rescanIntervalMs: 0,
    ...opts,
  });
  const rec = new Recorder();
  t.teardown(async () => {
    await source.stop();
    await rm(dir, { recursive: true, force: true });
  });
  await source.start(rec);
  return { dir, source, rec, logger, rejects };
}

test('loads multi-document YAML and JSON Lists; defaults the namespace; picks this node', async (t) => {
  const h = await harness(t, { 'web.yaml': SERVICE_AND_SLICE, 'list.json': LIST_JSON, 'README.md': 'not a manifest' });
  t.true(h.source.hasSynced());
  await h.source.waitForSync();
  t.deepEqual([...h.rec.synced].sort(), ['EndpointSlice', 'Node', 'Service', 'ServiceCIDR']);
  t.deepEqual([...h.rec.services.keys()].sort(), ['default/web', 'kube-system/dns']);
  t.deepEqual([...h.rec.slices.keys()], ['default/web-1']);
  t.is(h.rec.services.get('default/web')?.spec?.ports?.[0]?.targetPort, 8080);
  t.deepEqual(h.rec.slices.get('default/web-1')?.endpoints?.[0]?.addresses, ['10.0.0.1']);
  t.is(h.rec.node?.metadata?.name, 'node-a');
  t.deepEqual(h.rec.cidrs, []);
  t.deepEqual(h.rejects, []);
  t.deepEqual(h.rec.violations, []);
});

test('adding, modifying and deleting files is seen through fs.watch', async (t) => {
  const h = await harness(t, { 'a.yaml': service('a', 80) });
  t.deepEqual([...h.rec.services.keys()], ['default/a']);
  await writeFile(join(h.dir, 'b.yml'), service('b', 81));
  await waitFor(() => h.rec.services.has('default/b'), 'b added');
  await writeFile(join(h.dir, 'a.yaml'), service('a', 8080));
  await waitFor(() => h.rec.services.get('default/a')?.spec?.ports?.[0]?.port === 8080, 'a modified');
  t.is(h.rec.count('Service', 'update'), 1);
  await unlink(join(h.dir, 'b.yml'));
  await waitFor(() => !h.rec.services.has('default/b'), 'b deleted');
  // Rewriting a file with the same content delivers nothing.
  const before = h.rec.log.length;
  const scans = h.source.scanCount;
  await writeFile(join(h.dir, 'a.yaml'), service('a', 8080));
  await waitFor(() => h.source.scanCount > scans, 'rescanned');
  t.is(h.rec.log.length, before);
  t.deepEqual(h.rec.violations, []);
});

test('a broken file is reported by name and line, keeps its last good content, and others keep working', async (t) => {
  const h = await harness(t, { 'a.yaml': service('a', 80), 'b.yaml': service('b', 81) });
  t.is(h.rec.services.size, 2);
  // Break a.yaml: an unterminated flow sequence on line 7.
  await writeFile(
    join(h.dir, 'a.yaml'),
    `kind: Service\nmetadata:\n  name: a\n  namespace: default\nspec:\n  ports:\n  - port: [80\n`,
  );
  await waitFor(
    () => h.logger.records.some((r) => r.level === 'warn' && r.fields['file'] === 'a.yaml'),
    'parse error reported',
  );
  const warn = h.logger.records.find((r) => r.level === 'warn' && r.fields['file'] === 'a.yaml')!;
  t.is(typeof warn.fields['line'], 'number');
  t.true((warn.fields['line'] as number) >= 7, `line ${String(warn.fields['line'])}`);
  t.regex(warn.msg, /a\.yaml:\d+:\d+/);
  t.is(h.rec.services.get('default/a')?.spec?.ports?.[0]?.port, 80, 'last good content of the broken file stays');
  t.like(h.rejects[0], { kind: 'Manifest' });
  t.regex(h.rejects[0]!.origin, /^a\.yaml:\d+$/);
  // The other file still works.
  await writeFile(join(h.dir, 'b.yaml'), service('b', 9090));
  await waitFor(() => h.rec.services.get('default/b')?.spec?.ports?.[0]?.port === 9090, 'b modified');
  // The error is reported once, not at every scan.
  t.is(h.logger.records.filter((r) => r.level === 'warn' && r.fields['file'] === 'a.yaml').length, 1);
  // Fixed: its new content arrives.
  await writeFile(join(h.dir, 'a.yaml'), service('a', 8443));
  await waitFor(() => h.rec.services.get('default/a')?.spec?.ports?.[0]?.port === 8443, 'a fixed');
  t.true(h.logger.records.some((r) => r.msg.includes('a.yaml parses again')));
  t.deepEqual(h.rec.violations, []);
});

test('a file that never parsed contributes nothing; deleting a broken file removes its last good objects', async (t) => {
  const h = await harness(t, {
    'bad.json': '{\n  "kind": "Service",\n  "metadata": {"name": "x"\n}\n',
    'good.yaml': service('g', 80),
  });
  t.deepEqual([...h.rec.services.keys()], ['default/g']);
  const warn = h.logger.records.find((r) => r.fields['file'] === 'bad.json');
  t.truthy(warn);
  t.is(warn?.fields['line'], 5);
  await writeFile(join(h.dir, 'good.yaml'), 'kind: Service\nmetadata: [oops\n');
  await waitFor(() => h.logger.records.some((r) => r.fields['file'] === 'good.yaml'), 'good.yaml broken');
  t.true(h.rec.services.has('default/g'));
  await unlink(join(h.dir, 'good.yaml'));
  await waitFor(() => h.rec.services.size === 0, 'deleted');
});

test('structurally bad objects and unsupported kinds are skipped with file and line, and counted', async (t) => {
  const text = `kind: Service
metadata:
  name: ok
---
kind: Deployment
metadata:
  name: app
---
kind: Service
metadata:
  namespace: default
spec: {}
---
kind: EndpointSlice
metadata:
  name: s1
endpoints: "nope"
`;
  const h = await harness(t, { 'mixed.yaml': text });
  t.deepEqual([...h.rec.services.keys()], ['default/ok']);
  t.deepEqual(
    h.rejects.map((r) => [r.kind, r.origin, r.reason]),
    [
      ['Deployment', 'mixed.yaml:5', 'unsupported kind Deployment'],
      ['Service', 'mixed.yaml:9', 'metadata.name is missing'],
      ['EndpointSlice', 'mixed.yaml:14', 'endpoints is not a list'],
    ],
  );
  // An object that turns bad keeps its last good version.
  await writeFile(join(h.dir, 'mixed.yaml'), 'kind: Service\nmetadata:\n  name: ok\nspec: [1]\n');
  await waitFor(() => h.rejects.length === 4, 'reject of the bad update');
  t.true(h.rec.services.has('default/ok'));
  t.deepEqual(h.rec.violations, []);
});

test("an object in two files is taken from the first; other proxies' and headless objects are skipped", async (t) => {
  const h = await harness(t, {
    '10-a.yaml': service('dup', 80),
    '20-b.yaml':
      service('dup', 99) +
      '---\n' +
      'kind: Service\nmetadata:\n  name: theirs\n  labels:\n    service.kubernetes.io/service-proxy-name: other\n',
  });
  t.deepEqual([...h.rec.services.keys()], ['default/dup']);
  t.is(h.rec.services.get('default/dup')?.spec?.ports?.[0]?.port, 80);
  t.true(h.logger.records.some((r) => r.level === 'warn' && r.msg.includes('already defined in 10-a.yaml')));
  await unlink(join(h.dir, '10-a.yaml'));
  await waitFor(() => h.rec.services.get('default/dup')?.spec?.ports?.[0]?.port === 99, 'second definition takes over');
  t.deepEqual(h.rec.violations, []);
});

test('without fs.watch, the periodic rescan on the injected clock finds changes; a missing directory is waited for', async (t) => {
  const clock = new FakeClock();
  const parent = await mkdtemp(join(tmpdir(), 'kpts-manifests-'));
  t.teardown(() => rm(parent, { recursive: true, force: true }));
  const dir = join(parent, 'later');
  const logger = memoryLogger();
  const source = new ManifestDirSource({ dir, logger, clock, watch: false, rescanIntervalMs: 1000 });
  const rec = new Recorder();
  t.teardown(() => source.stop());
  await source.start(rec);
  t.true(source.hasSynced(), 'a missing directory is an empty one, synced');
  t.is(rec.services.size, 0);
  await mkdir(dir);
  await writeFile(join(dir, 'x.yaml'), service('x', 80));
  const scans = source.scanCount;
  clock.advance(999);
  t.is(source.scanCount, scans);
  clock.advance(1);
  await waitFor(() => source.scanCount > scans, 'rescan ran');
  t.true(rec.services.has('default/x'));
  t.is(clock.pending, 1, 'the next rescan is armed');
});

test('parseManifest: lines of List items and of parse errors', (t) => {
  const r = parseManifest(LIST_JSON);
  t.deepEqual(
    r.objects.map((o) => [o.kind, o.key]),
    [
      ['Service', 'kube-system/dns'],
      ['Node', 'node-a'],
      ['Node', 'node-b'],
    ],
  );
  const lines = r.objects.map((o) => o.line);
  t.is(lines[0], 5, 'the line where the first item opens');
  t.true(lines[0]! < lines[1]! && lines[1]! < lines[2]!);
  const bad = parseManifest('kind: Service\nmetadata:\n  name: a\n  name: b\n');
  t.is(bad.error?.line, 4);
  t.deepEqual(parseManifest('').objects, []);
  t.deepEqual(parseManifest('---\n---\n').objects, []);
  const aliases = parseManifest(
    'a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n',
  );
  t.truthy(aliases.error, 'alias bombs are refused');
});

test('parseManifest: canonical one-line JSON gives what YAML gives; other JSON still goes through YAML', (t) => {
  const list = {
    apiVersion: 'v1',
    kind: 'List',
    items: [
      JSON.parse(LIST_JSON).items[0],
      { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'x' } },
      { apiVersion: 'v1', kind: 'Service', metadata: { name: 'bad' }, spec: { ports: 'none' } },
      { apiVersion: 'v1', kind: 'Node', metadata: { name: 'node-a', labels: { 'a\u00e9"b': 'é' } } },
    ],
  };
  const canonical = JSON.stringify(list);
  const fast = parseManifest(`${canonical}\n`);
  // A trailing blank makes it not canonical: the YAML parser reads the same single line.
  const viaYaml = parseManifest(`${canonical} \n`);
  t.deepEqual(fast, viaYaml);
  t.deepEqual(
    fast.objects.map((o) => [o.kind, o.key, o.line]),
    [
      ['Service', 'kube-system/dns', 1],
      ['Node', 'node-a', 1],
    ],
  );
  t.deepEqual(
    fast.rejects.map((r) => [r.line, r.kind]),
    [
      [1, 'ConfigMap'],
      [1, 'Service'],
    ],
  );
  // JSON.parse would take the last of two equal keys; the file is refused, as YAML refuses it.
  const dup = parseManifest('{"apiVersion":"v1","kind":"Node","kind":"Node","metadata":{"name":"n"}}');
  t.regex(dup.error?.message ?? '', /unique|duplicate/i);
  t.deepEqual(dup.objects, []);
});

test('a ConfigMap volume (files behind a ..data symlink swapped atomically) is followed', async (t) => {
  const h = await harness(t, {});
  await mkdir(join(h.dir, '..v1'));
  await writeFile(join(h.dir, '..v1', 'svc.yaml'), service('cm', 80));
  await symlink('..v1', join(h.dir, '..data'));
  await symlink('..data/svc.yaml', join(h.dir, 'svc.yaml'));
  await waitFor(() => h.rec.services.get('default/cm')?.spec?.ports?.[0]?.port === 80, 'first version');
  // The kubelet writes a new timestamped directory and renames a new ..data link over the old one.
  await mkdir(join(h.dir, '..v2'));
  await writeFile(join(h.dir, '..v2', 'svc.yaml'), service('cm', 81));
  await symlink('..v2', join(h.dir, '..data_tmp'));
  await rename(join(h.dir, '..data_tmp'), join(h.dir, '..data'));
  await waitFor(() => h.rec.services.get('default/cm')?.spec?.ports?.[0]?.port === 81, 'second version');
  t.deepEqual(h.rec.violations, []);
});

test('a directory that disappears keeps what was loaded; when it is back, it is watched again', async (t) => {
  const clock = new FakeClock();
  const parent = await mkdtemp(join(tmpdir(), 'kpts-manifests-'));
  t.teardown(() => rm(parent, { recursive: true, force: true }));
  const dir = join(parent, 'm');
  await mkdir(dir);
  await writeFile(join(dir, 'a.yaml'), service('a', 80));
  const logger = memoryLogger();
  const source = new ManifestDirSource({ dir, logger, clock, debounceMs: 10, rescanIntervalMs: 1000 });
  const rec = new Recorder();
  t.teardown(() => source.stop());
  await source.start(rec);
  t.true(rec.services.has('default/a'));
  await rm(dir, { recursive: true });
  let scans = source.scanCount;
  clock.advance(1000);
  await waitFor(() => source.scanCount > scans, 'rescan');
  t.true(rec.services.has('default/a'), 'an unreadable directory is not "everything deleted"');
  t.true(logger.records.some((r) => r.msg.includes('cannot read the manifest directory')));
  await mkdir(dir);
  await writeFile(join(dir, 'b.yaml'), service('b', 81));
  scans = source.scanCount;
  clock.advance(1000);
  await waitFor(() => source.scanCount > scans, 'rescan');
  t.deepEqual([...rec.services.keys()], ['default/b'], 'back: its content is the truth again');
  // And fs.watch works on the new directory (the debounce runs on the fake clock).
  await writeFile(join(dir, 'c.yaml'), service('c', 82));
  scans = source.scanCount;
  let advanced = 0;
  await waitFor(() => {
    if (advanced < 990) {
      clock.advance(2);
      advanced += 2;
    }
    return source.scanCount > scans;
  }, 'watch-triggered scan');
  t.true(advanced < 990, 'scanned on the watch event, before the periodic rescan was due');
  t.true(rec.services.has('default/c'));
  t.deepEqual(rec.violations, []);
});

test('a file over the size limit is refused by name and limit; the others keep working', async (t) => {
  const h = await harness(t, { 'a.yaml': service('a', 80) }, { maxFileBytes: 4096 });
  const big = Array.from({ length: 100 }, (_, i) => service(`big-${i}`, 80)).join('---\n');
  await writeFile(join(h.dir, 'big.yaml'), big);
  await writeFile(join(h.dir, 'b.yaml'), service('b', 81));
  await waitFor(() => h.rec.services.has('default/b'), 'b loaded');
  await waitFor(() => h.logger.records.some((r) => r.fields['file'] === 'big.yaml'), 'big.yaml refused');
  const warn = h.logger.records.find((r) => r.level === 'warn' && r.fields['file'] === 'big.yaml')!;
  t.regex(warn.msg, new RegExp(`^manifest big\\.yaml:1:1: file is ${big.length} bytes, over the limit of 4096 bytes`));
  t.false([...h.rec.services.keys()].some((k) => k.startsWith('default/big-')));
  t.true(h.rec.services.has('default/a'));
});

test('documents are parsed one at a time: a later broken document refuses the whole file, with its line', (t) => {
  const docs = Array.from({ length: 50 }, (_, i) => service(`s-${i}`, 80 + i));
  const r = parseManifest(docs.join('---\n'));
  t.is(r.objects.length, 50);
  t.is(r.error, undefined);
  const broken = parseManifest([...docs, 'kind: Service\nmetadata: [oops\n'].join('---\n'));
  t.truthy(broken.error);
  t.true(broken.error!.line > 400, `the error is in the last document, line ${broken.error!.line}`);
});

test('reading or removing a large file after the first scan asks for the memory back (onLargeInput)', async (t) => {
  let asked = 0;
  const big = Array.from({ length: 40 }, (_, i) => service(`big-${i}`, 80)).join('---\n');
  const h = await harness(t, { 'big.yaml': big }, { largeFileBytes: 2048, onLargeInput: () => asked++ });
  t.true(h.rec.services.has('default/big-0'));
  t.is(asked, 0, 'not for the first scan (the daemon releases after its first sync)');
  await writeFile(join(h.dir, 'small.yaml'), service('small', 80));
  await waitFor(() => h.rec.services.has('default/small'), 'small loaded');
  t.is(asked, 0, 'not for a small file');
  await unlink(join(h.dir, 'big.yaml'));
  await waitFor(() => !h.rec.services.has('default/big-0'), 'big removed');
  await waitFor(() => asked === 1, 'asked once');
  t.pass();
});
