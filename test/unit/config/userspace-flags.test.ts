// --proxy-port-range and --udp-timeout (the userspace mode's flags, as upstream's).
import test from 'ava';
import { parseCommandLine } from '../../../src/config/cli.ts';
import { parsePortRange } from '../../../src/config/resolve.ts';

const run = (argv: string[]) =>
  parseCommandLine(argv, {
    version: 'v9.9.9',
    readFile: () => {
      throw new Error('no files');
    },
  });

const range = (text: string): { first: number; last: number } | undefined | string => {
  let msg: string | undefined;
  const r = parsePortRange(text, (m) => (msg = m));
  return msg ?? r;
};

test("port ranges in upstream's forms; blank, 0 and 0-0 leave the port to the kernel", (t) => {
  t.deepEqual(range('36000-36999'), { first: 36000, last: 36999 });
  t.deepEqual(range('36000+9'), { first: 36000, last: 36009 });
  t.deepEqual(range('36000'), { first: 36000, last: 36000 });
  for (const none of ['', '0', '0-0']) t.is(range(none), undefined, none);
});

test('bad port ranges are named with the reason', (t) => {
  t.is(range('a-b'), '"a-b" must be "begin-end", "begin+offset" or a single port (e.g. 30000-32767)');
  t.is(range('60000-70000'), '"60000-70000" must lie within 1-65535');
  t.is(range('65000+1000'), '"65000+1000" must lie within 1-65535');
  t.is(range('3000-2000'), '"3000-2000": the end port 2000 is below the first 3000');
});

test('the flags reach the configuration; --udp-timeout defaults to 250ms', (t) => {
  const r = run(['--proxy-mode=userspace', '--proxy-port-range=40000-40100', '--udp-timeout=2s']);
  if (r.kind !== 'run') return t.fail(r.kind === 'exit' ? r.stderr : 'not run');
  t.is(r.config.mode, 'userspace');
  t.deepEqual(r.config.portRange, { first: 40000, last: 40100 });
  t.is(r.config.udpIdleTimeoutMs, 2000);
  const d = run([]);
  if (d.kind !== 'run') return t.fail();
  t.is(d.config.udpIdleTimeoutMs, 250);
  t.is(d.config.portRange, undefined);
});

test('a bad --proxy-port-range stops the start, naming the flag', (t) => {
  const r = run(['--proxy-port-range=9-1']);
  if (r.kind !== 'exit') return t.fail(r.kind);
  t.not(r.code, 0);
  t.regex(r.stderr, /proxy-port-range|portRange/);
  t.regex(r.stderr, /the end port 1 is below the first 9/);
});
