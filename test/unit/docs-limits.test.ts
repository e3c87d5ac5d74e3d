// docs/limits.md states the limits the code sets: its table and numbers are checked here.
import { readFileSync } from 'node:fs';
import test from 'ava';
import { OTHER_DESCRIPTORS_RESERVED } from '../../src/base/descriptor-budget.ts';
import {
  DEFAULT_HTTP_LIMITS,
  HEALTH_SLOTS,
  HTTP_CONNECTIONS_MAX,
  HTTP_SERVER_OPTIONS,
  METRICS_SLOTS,
  SERVICE_HEALTH_SLOTS,
} from '../../src/health/http-limits.ts';

const doc = readFileSync(new URL('../../docs/limits.md', import.meta.url), 'utf8');
const n = (x: number) => x.toLocaleString('en-US');

test('the slot table is the code', (t) => {
  for (const [what, p] of [
    ['health port', HEALTH_SLOTS],
    ['metrics port', METRICS_SLOTS],
    ['Service health-check ports, together', SERVICE_HEALTH_SLOTS],
  ] as const)
    t.true(doc.includes(`| ${what} | ${n(p.maxConnections)} | ${n(p.perSourceMax)} |`), what);
});

test('the deadlines and the descriptor reserve are the code', (t) => {
  t.true(doc.includes(`headers must arrive within ${DEFAULT_HTTP_LIMITS.headersTimeoutMs / 1000} s`));
  t.true(doc.includes(`within ${DEFAULT_HTTP_LIMITS.requestTimeoutMs / 1000} s; an idle keep-alive`));
  t.true(doc.includes(`closed after ${DEFAULT_HTTP_LIMITS.keepAliveTimeoutMs / 1000} s`));
  t.true(doc.includes(`limited to ${HTTP_SERVER_OPTIONS.maxHeaderSize / 1024} KiB`));
  const reserve = HTTP_CONNECTIONS_MAX + OTHER_DESCRIPTORS_RESERVED;
  t.true(doc.includes(`reserve of ${n(reserve)} (${n(HTTP_CONNECTIONS_MAX)} for the HTTP`));
  t.true(doc.includes(`${n(OTHER_DESCRIPTORS_RESERVED)} for the API`));
  t.true(doc.includes(`(under ${n(2 * reserve)})`));
});
