// The fake is held to the kernel: one script of IpsetClient calls runs against the machine's
// kernel (in a fresh namespace) and against FakeIpsetKernel, and every outcome must match:
// the same successes, the same errno names and messages, the same listed state.
import test from 'ava';
import { fakeIpset } from '../../src/netlink/ipset/fake/index.ts';
import { netnsFor } from '../helpers/netns.ts';
import { runCalls } from './scenarios/ipset.ts';
import type { Call, Outcome } from './scenarios/ipset.ts';

const S = new URL('./scenarios/ipset.ts', import.meta.url).href;

const e = (i: number, extra: Record<string, unknown> = {}) => ({
  ip: `10.96.0.${i}`,
  proto: 'tcp',
  port: 80 + i,
  ...extra,
});

const SCRIPT: Call[] = [
  ['create', 'KUBE-A', 'hash:ip,port', { comment: true }],
  ['create', 'KUBE-B', 'hash:ip,port', { comment: true }],
  ['create', 'KUBE-C', 'hash:net', {}],
  ['create', 'KUBE-D', 'bitmap:port', { comment: true }],
  ['create', 'KUBE-E', 'hash:ip', { family: 'inet6' }],
  ['create', 'KUBE-F', 'hash:ip,port,net', { family: 'inet6', comment: true }],
  ['create', 'KUBE-A', 'hash:ip,port', { comment: true }],
  ['create', 'KUBE-A', 'hash:ip,port', { comment: true, exist: true }],
  ['create', 'KUBE-A', 'hash:ip', { exist: true }],
  ['create', 'KUBE-X', 'hash:mac', {}],
  ['add', 'KUBE-A', e(1, { comment: 'one' })],
  ['add', 'KUBE-A', e(1)],
  ['add', 'KUBE-A', e(1, { comment: 'uno' }), { exist: true }],
  ['add', 'KUBE-A', e(2)],
  ['addMany', 'KUBE-A', [e(3), e(1), e(4)]],
  ['addMany', 'KUBE-A', [e(3), e(4), e(5)], { exist: true }],
  ['addMany', 'KUBE-NOPE', [e(3)]],
  ['del', 'KUBE-A', e(2)],
  ['del', 'KUBE-A', e(2)],
  ['del', 'KUBE-A', e(2), { exist: true }],
  ['delMany', 'KUBE-A', [e(5), e(6)], { exist: true }],
  ['delMany', 'KUBE-A', [e(4), e(6)]],
  ['test', 'KUBE-A', e(1)],
  ['test', 'KUBE-A', e(2)],
  ['test', 'KUBE-NOPE', e(2)],
  ['add', 'KUBE-C', { ip: '10.1.2.3', cidr: 8 }],
  ['add', 'KUBE-C', { ip: '10.9.9.9', cidr: 8 }],
  ['add', 'KUBE-C', { ip: '192.168.0.0', cidr: 16, comment: 'no comments here' }],
  ['add', 'KUBE-D', { port: 30080, comment: 'np' }],
  ['add', 'KUBE-D', { port: 30080 }],
  ['add', 'KUBE-E', { ip: 'fd00::1' }],
  ['add', 'KUBE-E', { ip: '10.0.0.1' }],
  ['add', 'KUBE-F', { ip: 'fd00::1', proto: 'udp', port: 53, ip2: 'fd00:1::5', cidr2: 64 }],
  ['add', 'KUBE-A', { ip: '10.0.0.1', proto: 'tcp', port: 1, timeout: 5 }],
  ['list'],
  ['swap', 'KUBE-A', 'KUBE-B'],
  ['get', 'KUBE-A'],
  ['get', 'KUBE-B'],
  ['rename', 'KUBE-B', 'KUBE-B2'],
  ['rename', 'KUBE-A', 'KUBE-B2'],
  ['rename', 'KUBE-NOPE', 'KUBE-Z'],
  ['swap', 'KUBE-A', 'KUBE-C'],
  ['swap', 'KUBE-A', 'KUBE-NOPE'],
  ['swap', 'KUBE-NOPE', 'KUBE-A'],
  ['getByName', 'KUBE-B2'],
  ['getByName', 'KUBE-NOPE'],
  ['flush', 'KUBE-B2'],
  ['flush', 'KUBE-NOPE'],
  ['destroy', 'KUBE-NOPE'],
  ['destroy', 'KUBE-A'],
  ['create', 'KUBE-G', 'hash:ip', {}],
  ['getByName', 'KUBE-G'],
  ['names'],
  ['headers'],
  ['list'],
];

/** Drops what legitimately differs (memory size, hash size after resizes, bucket size). */
function normalize(o: Outcome): unknown {
  if (!o.ok) return { error: o.error.code, message: o.error.message };
  const strip = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(strip);
    if (v && typeof v === 'object') {
      const { memSize: _m, hashSize: _h, bucketSize: _b, entries, ...rest } = v as Record<string, unknown>;
      const out: Record<string, unknown> = { ...rest };
      if (Array.isArray(entries)) out.entries = entries.map((x) => JSON.stringify(x)).sort();
      return out;
    }
    return v;
  };
  return strip(o.value);
}

test('FakeIpsetKernel answers a full script exactly as the kernel does', async (t) => {
  const ns = await netnsFor(t, 'ipset-contract');
  const a = await ns.agent();
  const kernel = await a.call<Outcome[]>(S, 'calls', SCRIPT);
  const { client } = fakeIpset();
  const fake = await runCalls(client, SCRIPT);
  t.is(fake.length, SCRIPT.length);
  SCRIPT.forEach((call, i) => {
    t.deepEqual(normalize(fake[i]!), normalize(kernel[i]!), `call ${i}: ${JSON.stringify(call).slice(0, 120)}`);
  });
  // The script does exercise failures, on both sides.
  t.true(kernel.filter((o) => !o.ok).length >= 15);
  if (process.env.KPTS_DEBUG)
    t.log(kernel.map((o, i) => `${i} ${JSON.stringify(normalize(o)).slice(0, 200)}`).join('\n'));
});
