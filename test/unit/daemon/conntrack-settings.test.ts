// Conntrack sizing and tunables as upstream's pkg/proxy/conntrack/sysctls.go, against a fake
// /proc/sys and /sys: max = maxPerCore x CPUs capped at 2^20, else min; nf_conntrack_max only
// raised; hashsize grown to max/4; upstream's log lines; read-only files only logged.
import test from 'ava';
import { memoryLogger } from '../../../src/base/logger.ts';
import {
  applyConntrackSettings,
  CONNTRACK_MAX_LIMIT,
  conntrackMax,
  conntrackSysctls,
  HASHSIZE_PATH,
} from '../../../src/daemon/conntrack-settings.ts';
import type { ConntrackIO } from '../../../src/daemon/conntrack-settings.ts';
import { config } from './fakes.ts';

class FakeIO implements ConntrackIO {
  readonly sysctls = new Map<string, number>();
  readonly files = new Map<string, string>();
  readonly writes: string[] = [];
  readOnly = new Set<string>();
  getSysctl(path: string) {
    return Promise.resolve(this.sysctls.get(path));
  }
  setSysctl(path: string, value: number) {
    if (this.readOnly.has(path)) return Promise.reject(Object.assign(new Error(`EROFS: ${path}`), { code: 'EROFS' }));
    this.writes.push(`${path}=${value}`);
    this.sysctls.set(path, value);
    return Promise.resolve();
  }
  readFile(path: string) {
    const v = this.files.get(path);
    return v === undefined
      ? Promise.reject(Object.assign(new Error(`ENOENT: ${path}`), { code: 'ENOENT' }))
      : Promise.resolve(`${v}\n`);
  }
  writeFile(path: string, text: string) {
    if (this.readOnly.has(path)) return Promise.reject(Object.assign(new Error(`EROFS: ${path}`), { code: 'EROFS' }));
    this.writes.push(`${path}=${text}`);
    this.files.set(path, text);
    return Promise.resolve();
  }
}

const MAX = 'net/netfilter/nf_conntrack_max';

test('max: per core x CPUs, the min when larger, capped at 1048576, 0 per core leaves it alone', (t) => {
  t.is(conntrackMax({ maxPerCore: 32768, min: 131072 }, 2), 131072, 'min wins on a small machine');
  t.is(conntrackMax({ maxPerCore: 32768, min: 131072 }, 8), 262144);
  t.is(conntrackMax({ maxPerCore: 32768, min: 131072 }, 40), CONNTRACK_MAX_LIMIT, '40 x 32768 is capped');
  t.is(
    conntrackMax({ maxPerCore: 32768, min: 2_000_000 }, 64),
    CONNTRACK_MAX_LIMIT,
    'the cap applies before the min, as upstream',
  );
  t.is(conntrackMax({ maxPerCore: 0, min: 131072 }, 8), 0);
  t.is(CONNTRACK_MAX_LIMIT, 2 ** 20);
});

test("nf_conntrack_max is raised and the hash table grown to max/4, with upstream's log lines", async (t) => {
  const io = new FakeIO();
  io.sysctls.set(MAX, 65536);
  io.files.set(HASHSIZE_PATH, '16384');
  const logger = memoryLogger();
  await applyConntrackSettings(config().conntrack, 8, io, logger);
  t.is(io.sysctls.get(MAX), 262144);
  t.is(io.files.get(HASHSIZE_PATH), '65536');
  const lines = logger.records.filter((r) => r.level === 'info').map((r) => `${r.msg} ${JSON.stringify(r.fields)}`);
  t.true(lines.includes('Set sysctl {"entry":"net/netfilter/nf_conntrack_max","value":262144}'), lines.join('\n'));
  t.true(lines.includes('Set conntrack hashsize {"conntrackHashsize":65536}'), lines.join('\n'));
});

test('nf_conntrack_max is written when it differs, lowered too (as upstream); a larger hash table stays; equal values are not rewritten', async (t) => {
  const io = new FakeIO();
  io.sysctls.set(MAX, 4_000_000);
  io.files.set(HASHSIZE_PATH, '1000000');
  io.sysctls.set('net/netfilter/nf_conntrack_tcp_timeout_established', 86400);
  io.sysctls.set('net/netfilter/nf_conntrack_tcp_timeout_close_wait', 60);
  await applyConntrackSettings(config().conntrack, 8, io, memoryLogger());
  t.deepEqual(io.writes, [
    'net/netfilter/nf_conntrack_max=262144',
    'net/netfilter/nf_conntrack_tcp_timeout_close_wait=3600',
  ]);
  t.is(io.files.get(HASHSIZE_PATH), '1000000', 'the hash table is only ever grown');

  const again = new FakeIO();
  again.sysctls.set(MAX, 262144);
  again.files.set(HASHSIZE_PATH, '65536');
  again.sysctls.set('net/netfilter/nf_conntrack_tcp_timeout_established', 86400);
  again.sysctls.set('net/netfilter/nf_conntrack_tcp_timeout_close_wait', 3600);
  await applyConntrackSettings(config().conntrack, 8, again, memoryLogger());
  t.deepEqual(again.writes, [], 'nothing differs: nothing written');
});

test('the other tunables, 0 leaving each alone', (t) => {
  const cfg = config();
  t.deepEqual(conntrackSysctls(cfg.conntrack), [
    ['net/netfilter/nf_conntrack_tcp_timeout_established', 86400],
    ['net/netfilter/nf_conntrack_tcp_timeout_close_wait', 3600],
  ]);
  const none = config(['--conntrack-tcp-timeout-established', '0s', '--conntrack-tcp-timeout-close-wait', '0s']);
  t.deepEqual(
    conntrackSysctls({ ...none.conntrack, tcpBeLiberal: true, udpTimeoutMs: 30_000, udpStreamTimeoutMs: 120_000 }),
    [
      ['net/netfilter/nf_conntrack_tcp_be_liberal', 1],
      ['net/netfilter/nf_conntrack_udp_timeout', 30],
      ['net/netfilter/nf_conntrack_udp_timeout_stream', 120],
    ],
  );
});

test('read-only /proc/sys or /sys (a container, another netns): logged, the rest still applied, nothing thrown', async (t) => {
  const io = new FakeIO();
  io.sysctls.set(MAX, 65536);
  io.files.set(HASHSIZE_PATH, '16384');
  io.readOnly.add(HASHSIZE_PATH);
  const logger = memoryLogger();
  await applyConntrackSettings(config().conntrack, 8, io, logger);
  t.is(io.sysctls.get(MAX), 262144);
  t.is(io.files.get(HASHSIZE_PATH), '16384');
  t.true(logger.records.some((r) => r.msg.includes('read-only') && r.fields['what'] === 'nf_conntrack_max'));
  // Never "Set" and then "read-only" for the same thing: a write is logged once it succeeded.
  t.false(logger.records.some((r) => r.msg === 'Set conntrack hashsize'));
  t.is(io.sysctls.get('net/netfilter/nf_conntrack_tcp_timeout_close_wait'), 3600, 'the timeouts still applied');
  const missing = new FakeIO();
  missing.readOnly.add(MAX);
  const l2 = memoryLogger();
  await applyConntrackSettings(config().conntrack, 2, missing, l2);
  t.true(l2.records.some((r) => r.msg.includes('read-only')));
  t.false(
    l2.records.some((r) => r.msg === 'Set sysctl' && r.fields['entry'] === MAX),
    l2.records.map((r) => r.msg).join('\n'),
  );
});
