// --oom-score-adj is written to /proc/self/oom_score_adj; a refusal is logged, not fatal.
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { memoryLogger } from '../../../src/base/logger.ts';
import { applyOomScoreAdj, OOM_SCORE_ADJ_PATH } from '../../../src/daemon/oom-score.ts';

test('the value is written to /proc/self/oom_score_adj', async (t) => {
  const writes: [string, string][] = [];
  await applyOomScoreAdj(-999, memoryLogger(), (p, text) => Promise.resolve(void writes.push([p, text])));
  t.deepEqual(writes, [[OOM_SCORE_ADJ_PATH, '-999\n']]);
});

test('a real file receives the value; a refusal only logs', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'kpts-oom-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const file = join(dir, 'oom_score_adj');
  await writeFile(file, '0\n');
  await applyOomScoreAdj(500, memoryLogger(), undefined, file);
  t.is(await readFile(file, 'utf8'), '500\n');
  const m = memoryLogger();
  await applyOomScoreAdj(-999, m, () => Promise.reject(Object.assign(new Error('EACCES'), { code: 'EACCES' })));
  t.true(
    m.records.some((l) => l.msg === 'Failed to apply OOMScore'),
    JSON.stringify(m.records),
  );
});
