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

// Bidi and other format characters (Unicode Cf) make a line read differently from its bytes
// ("exe.txt" shown for "txt.exe"); every Cc and Cf character is escaped, in both formats.
const FORMAT_CHARS = ['\u202e', '\u202d', '\u2066', '\u2069', '\u200b', '\u200f', '\u00ad', '\ufeff', '\u{e0001}'];
const RAW_CC_CF = /[\p{Cc}\p{Cf}\u2028\u2029]/u;

test('escapeControls writes every Cc and Cf character as a JSON escape', (t) => {
  t.is(escapeControls('evil\u202etxt.exe'), 'evil\\u202etxt.exe');
  t.is(escapeControls('tag\u{e0001}'), 'tag\\udb40\\udc01', 'a character above U+FFFF: its surrogate pair');
  for (let cp = 0; cp <= 0x10ffff; cp++) {
    if (cp >= 0xd800 && cp <= 0xdfff) continue;
    const c = String.fromCodePoint(cp);
    if (!RAW_CC_CF.test(c)) continue;
    const out = escapeControls(`a${c}b`);
    if (RAW_CC_CF.test(out) || JSON.parse(`"${out}"`) !== `a${c}b`) t.fail(`U+${cp.toString(16)}: ${out}`);
  }
  t.pass();
});

for (const format of ['text', 'json'] as const) {
  test(`${format} format: bidi and format characters in messages and values are escaped`, async (t) => {
    const c = captureLog({ format });
    const name = `default/${FORMAT_CHARS.join('x')}`;
    c.logger.warn(`skipping ${name}`, { object: name, nested: { name } });
    c.logger.error('Sync failed', { err: new Error(`refused ${name}`) });
    const text = await c.text();
    const lines = text.split('\n').filter((l) => l !== '');
    t.true(lines.length >= 2, 'the warning and the error (in text format, its stack frames)');
    t.false(
      lines.some((l) => RAW_CC_CF.test(l)),
      JSON.stringify(text),
    );
    t.true(text.includes('\\u202e'), text);
    if (format === 'json') {
      const [warn] = text
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { msg: string; object: string });
      t.is(warn!.object, name, 'JSON parses back to the original text');
      t.is(warn!.msg, `skipping ${name}`);
    }
  });
}
