// The streaming heap-snapshot reader agrees with JSON.parse of the same file, whatever the
// chunk boundaries (inside numbers, escapes, multi-byte characters, the array markers).
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { writeHeapSnapshot } from 'node:v8';
import test from 'ava';
import { readHeapSnapshot } from '../../../test/bench/heap-snapshot-reader.ts';

interface Parsed {
  snapshot: { meta: { node_fields: string[]; node_types: [string[]] } };
  nodes: number[];
  strings: string[];
}

/** The same summary from the whole file in memory: bytes by type, and by constructor for objects. */
function expected(p: Parsed): { total: number; byType: Map<string, number>; objects: Map<string, number> } {
  const f = p.snapshot.meta.node_fields;
  const [iType, iName, iSize] = [f.indexOf('type'), f.indexOf('name'), f.indexOf('self_size')];
  const byType = new Map<string, number>();
  const objects = new Map<string, number>();
  let total = 0;
  for (let i = 0; i < p.nodes.length; i += f.length) {
    const type = p.snapshot.meta.node_types[0][p.nodes[i + iType]!]!;
    const size = p.nodes[i + iSize]!;
    total += size;
    byType.set(type, (byType.get(type) ?? 0) + size);
    if (type === 'object') {
      const name = p.strings[p.nodes[i + iName]!]!;
      objects.set(name, (objects.get(name) ?? 0) + size);
    }
  }
  return { total, byType, objects };
}

test('a real snapshot of this process: the same totals as JSON.parse, with 1 MiB and with 4 kB chunks', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'kpts-snap-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  class MarkerThing {
    text = 'quote " backslash \\ newline \n ünïcødé €';
  }
  const held = Array.from({ length: 1000 }, () => new MarkerThing());
  const file = writeHeapSnapshot(join(dir, 'x.heapsnapshot'));
  t.is(held.length, 1000);
  const want = expected(JSON.parse(await readFile(file, 'utf8')) as Parsed);
  for (const chunk of [1 << 20, 4096]) {
    const got = await readHeapSnapshot(file, 5, chunk);
    t.is(got.total, want.total);
    t.deepEqual(Object.fromEntries(got.byType), Object.fromEntries(want.byType));
    const marker = got.byName.find(([n]) => n === 'object:MarkerThing');
    t.is(marker?.[1].count, 1000);
    t.is(marker?.[1].size, want.objects.get('MarkerThing'));
    t.is(got.topStrings.length, 5);
  }
});

test('a snapshot cut short is an error naming where it stopped', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'kpts-snap-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const { writeFile } = await import('node:fs/promises');
  const file = join(dir, 'cut.heapsnapshot');
  const meta = { node_fields: ['type', 'name', 'id', 'self_size'], node_types: [['object']] };
  await writeFile(file, `{"snapshot":{"meta":${JSON.stringify(meta)},"node_count":2},\n"nodes":[0,0,1,8\n,0,0,2`);
  await t.throwsAsync(readHeapSnapshot(file), { message: /incomplete \(stopped in nodes\)/ });
});
