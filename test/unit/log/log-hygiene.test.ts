// Log forging: values from Kubernetes objects (a Service name with a newline and ANSI escapes)
// never end a line, start a forged one, or reach a terminal as control sequences.
import test from 'ava';
import { escapeControls } from '../../../src/log/logger.ts';
import { captureLog } from '../../helpers/log-capture.ts';

const EVIL = 'web\n2026-11-23T03:04:05.678Z info  all good\u001b[2J\u001b[31m\u009b31m\u007f\u2028x';
// eslint-disable-next-line no-control-regex -- finding raw control characters is the point
const RAW_CONTROL = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u2028\u2029]/;

for (const journal of [false, true]) {
  test(`text format${journal ? ' under journald' : ''}: control characters in messages and values are escaped`, async (t) => {
    const c = captureLog({ journal });
    c.logger.warn(`skipping invalid parts of Service default/${EVIL}: invalid-name`, {
      object: `default/${EVIL}`,
      plain: 'a\u001bb',
    });
    c.logger.error('Sync failed', { err: new Error(`refused ${EVIL}`) });
    const text = await c.text();
    const lines = text.split('\n').filter((l) => l !== '');
    t.false(RAW_CONTROL.test(text), JSON.stringify(text));
    t.false(
      lines.some((l) => /^(<\d>)?2026-11-23T03:04:05\.678Z info {2}all good/.test(l)),
      'no forged line',
    );
    t.true(lines[0]!.includes('default/web\\n2026'), lines[0]);
    t.true(lines[0]!.includes('\\u001b[2J'), lines[0]);
    t.true(lines[0]!.includes('plain="a\\u001bb"'), lines[0]);
    t.true(lines[0]!.includes('\\u009b31m'), lines[0]);
    // The warning is one line; the error is its line, the stack's head (escaped), its frames.
    t.regex(lines[2]!, /^(<\d>)?Error: refused web\\n2026/);
    const frames = lines.slice(3);
    t.true(frames.length > 0);
    t.true(
      frames.every((l) => /^(<\d>)?\s+at /.test(l)),
      frames.join('\n'),
    );
  });
}

test('escapeControls leaves ordinary text alone (also non-ASCII)', (t) => {
  const s = 'default/web é 😀 "quoted" back\\slash';
  t.is(escapeControls(s), s);
  t.is(escapeControls('a\tb\rc\u0000'), 'a\\tb\\rc\\u0000');
});

test('JSON format keeps escaping on its own', async (t) => {
  const c = captureLog({ format: 'json' });
  c.logger.warn(`x ${EVIL}`, { object: EVIL });
  const text = await c.text();
  t.is(text.trim().split('\n').length, 1);
  t.is(JSON.parse(text).object, EVIL);
});
