// Every decoder has its encoder: entries written the kernel's way decode to the same struct,
// unknown attributes included; request specs decode back to themselves.
import test from 'ava';
import fc from 'fast-check';
import { AttrSet, AttrWriter } from '../../../../src/netlink/core/index.ts';
import { ipFromBytes } from '../../../../src/base/ip.ts';
import {
  decodeDestination,
  decodeService,
  IP_VS_SVC_F_PERSISTENT,
  writeDestinationEntry,
  writeDestinationSpec,
  writeServiceEntry,
  writeServiceSpec,
} from '../../../../src/netlink/ipvs/index.ts';
import type { IpvsDestination, IpvsService, IpvsServiceSpec, IpvsStats } from '../../../../src/netlink/ipvs/index.ts';

const v4 = fc.uint8Array({ minLength: 4, maxLength: 4 }).map((b) => ipFromBytes(b).text);
const v6 = fc.uint8Array({ minLength: 16, maxLength: 16 }).map((b) => ipFromBytes(b).text);
const u64 = fc.bigInt({ min: 0n, max: (1n << 64n) - 1n });
const u32 = fc.integer({ min: 0, max: 0xffffffff });
const stats: fc.Arbitrary<IpvsStats> = fc.record({
  conns: u64,
  inPkts: u64,
  outPkts: u64,
  inBytes: u64,
  outBytes: u64,
  cps: u64,
  inPps: u64,
  outPps: u64,
  inBps: u64,
  outBps: u64,
});
const sched = fc.constantFrom('rr', 'wrr', 'lc', 'wlc', 'sh', 'dh', 'mh', 'sed', 'nq', 'fo', 'ovf');
// An attribute type above every IPVS_SVC/DEST_ATTR_* (kept as unknown), with any payload.
const unknownAttrs = fc.array(
  fc.record({ type: fc.integer({ min: 16, max: 0x3fff }), data: fc.uint8Array({ maxLength: 12 }) }),
  { maxLength: 2 },
);

const family = fc.constantFrom('IPv4' as const, 'IPv6' as const);
const serviceArb: fc.Arbitrary<IpvsService> = fc
  .record({
    family,
    kind: fc.constantFrom('addr', 'fwmark'),
    a4: v4,
    a6: v6,
    protocol: fc.constantFrom('tcp' as const, 'udp' as const, 'sctp' as const),
    port: fc.integer({ min: 0, max: 65535 }),
    fwmark: fc.integer({ min: 1, max: 0xffffffff }),
    scheduler: sched,
    flags: fc.integer({ min: 0, max: 0x3d }),
    timeout: u32,
    prefix4: fc.integer({ min: 0, max: 32 }),
    prefix6: fc.integer({ min: 0, max: 128 }),
    stats,
    unknown: unknownAttrs,
    pe: fc.option(fc.constant('sip'), { nil: undefined }),
  })
  .map((r) => {
    const key =
      r.kind === 'fwmark'
        ? { family: r.family, fwmark: r.fwmark }
        : { family: r.family, protocol: r.protocol, address: r.family === 'IPv4' ? r.a4 : r.a6, port: r.port };
    return {
      ...key,
      scheduler: r.scheduler,
      flags: r.flags & ~2,
      timeout: r.timeout,
      netmask: r.family === 'IPv4' ? r.prefix4 : r.prefix6,
      ...(r.pe !== undefined ? { peName: r.pe } : {}),
      stats: r.stats,
      unknown: r.unknown.map((u) => ({ type: u.type, nested: false, netOrder: false, data: u.data, offset: 0 })),
    } as IpvsService;
  });

const strip = <T extends { unknown: readonly { type: number; data: Uint8Array }[] }>(
  x: T,
): Omit<T, 'unknown'> & { unknown: [number, string][] } => ({
  ...x,
  unknown: x.unknown.map((u) => [u.type, Buffer.from(u.data).toString('hex')] as [number, string]),
});

test('service entries: decode(write(s)) == s, unknown attributes kept', (t) => {
  fc.assert(
    fc.property(serviceArb, (s) => {
      const w = new AttrWriter();
      writeServiceEntry(w, 1, s);
      const outer = new AttrSet(w.finish(), 'rt');
      const back = decodeService(outer.nested(1)!);
      t.deepEqual(strip(back), strip(s));
    }),
    { numRuns: 300 },
  );
});

const destArb: fc.Arbitrary<IpvsDestination> = fc
  .record({
    family,
    a4: v4,
    a6: v6,
    port: fc.integer({ min: 0, max: 65535 }),
    forward: fc.constantFrom('masq' as const, 'local' as const, 'tunnel' as const, 'route' as const, 'bypass' as const),
    weight: fc.integer({ min: 0, max: 0x7fffffff }),
    u: u32,
    l: u32,
    a: u32,
    i: u32,
    p: u32,
    tt: fc.integer({ min: 0, max: 2 }),
    tp: fc.integer({ min: 0, max: 65535 }),
    tf: fc.integer({ min: 0, max: 3 }),
    stats,
    unknown: unknownAttrs,
  })
  .map((r) => ({
    family: r.family,
    address: r.family === 'IPv4' ? r.a4 : r.a6,
    port: r.port,
    forward: r.forward,
    weight: r.weight,
    upperThreshold: r.u,
    lowerThreshold: r.l,
    activeConns: r.a,
    inactiveConns: r.i,
    persistentConns: r.p,
    tunnelType: r.tt,
    tunnelPort: r.tp,
    tunnelFlags: r.tf,
    stats: r.stats,
    unknown: r.unknown.map((u) => ({ type: u.type, nested: false, netOrder: false, data: u.data, offset: 0 })),
  }));

test('destination entries: decode(write(d)) == d, unknown attributes kept', (t) => {
  fc.assert(
    fc.property(destArb, (d) => {
      const w = new AttrWriter();
      writeDestinationEntry(w, 2, d);
      const back = decodeDestination(new AttrSet(w.finish(), 'rt').nested(2)!);
      t.deepEqual(strip(back), strip(d));
    }),
    { numRuns: 300 },
  );
});

test('request specs decode back to themselves (PERSISTENT follows the timeout)', (t) => {
  fc.assert(
    fc.property(serviceArb, (s) => {
      const { stats: _s, unknown: _u, ...spec } = s;
      const w = new AttrWriter();
      w.nested(1, (n) => writeServiceSpec(n, spec as IpvsServiceSpec));
      const back = decodeService(new AttrSet(w.finish(), 'rt').nested(1)!);
      const { stats: _s2, unknown, ...backSpec } = back;
      t.deepEqual(unknown, []);
      const flags = (spec.flags | (spec.timeout > 0 ? IP_VS_SVC_F_PERSISTENT : 0)) >>> 0;
      t.deepEqual(backSpec, { ...spec, flags });
    }),
    { numRuns: 200 },
  );
  fc.assert(
    fc.property(destArb, (d) => {
      const w = new AttrWriter();
      w.nested(2, (n) => writeDestinationSpec(n, d));
      const back = decodeDestination(new AttrSet(w.finish(), 'rt').nested(2)!);
      t.like(back, {
        family: d.family,
        address: d.address,
        port: d.port,
        forward: d.forward,
        weight: d.weight,
        upperThreshold: d.upperThreshold,
        lowerThreshold: d.lowerThreshold,
      });
    }),
    { numRuns: 200 },
  );
});

test('encoders refuse values the kernel would misread', (t) => {
  const base: IpvsServiceSpec = { family: 'IPv4', protocol: 'tcp', address: '10.0.0.1', port: 80, scheduler: 'rr' };
  const write = (s: IpvsServiceSpec): void => {
    new AttrWriter().nested(1, (n) => writeServiceSpec(n, s));
  };
  t.throws(() => write({ ...base, address: 'fd00::1' }), { instanceOf: TypeError, message: /not an IPv4 address/ });
  t.throws(() => write({ ...base, address: '10.0.0.256' }), { instanceOf: TypeError });
  t.throws(() => write({ ...base, port: 65536 }), { instanceOf: TypeError });
  t.throws(() => write({ ...base, scheduler: 'a-name-far-too-long' }), { instanceOf: TypeError });
  t.throws(() => write({ ...base, netmask: 33 }), { instanceOf: TypeError });
  t.throws(() => write({ family: 'IPv4', fwmark: 0, scheduler: 'rr' }), { instanceOf: TypeError });
  t.throws(
    () => new AttrWriter().nested(2, (n) => writeDestinationSpec(n, { address: '10.0.0.2', port: 1, weight: -1 })),
    { instanceOf: TypeError },
  );
});
