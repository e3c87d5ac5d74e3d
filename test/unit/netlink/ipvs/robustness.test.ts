// Decoders on hostile input: random bytes, and every truncation and single-byte corruption of
// the real kernel replies, end in a value or a NetlinkDecodeError; never another error.
import test from 'ava';
import fc from 'fast-check';
import { NetlinkDecodeError } from '../../../../src/netlink/core/index.ts';
import type { InMessage } from '../../../../src/netlink/core/index.ts';
import {
  IpvsCmd,
  parseConfigReply,
  parseDestReply,
  parseInfoReply,
  parseServiceReply,
} from '../../../../src/netlink/ipvs/index.ts';
import { received } from './fixture.ts';

const decoders: Array<[string, (m: InMessage) => unknown]> = [
  ['service', parseServiceReply],
  ['destination', (m) => parseDestReply(m)],
  ['config', parseConfigReply],
  ['info', parseInfoReply],
];

const asMsg = (payload: Uint8Array): InMessage => ({ type: 0x20, flags: 0, seq: 0, pid: 0, payload });

function safely(decode: (m: InMessage) => unknown, payload: Uint8Array): boolean {
  try {
    decode(asMsg(payload));
    return true;
  } catch (e) {
    if (e instanceof NetlinkDecodeError) return true;
    throw e;
  }
}

test('random payloads', (t) => {
  for (const [name, decode] of decoders) {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 400 }), (b) => safely(decode, b)),
      { numRuns: 500 },
    );
    // With a plausible genl header in front, so the attribute parsers get exercised.
    for (const cmd of [IpvsCmd.NEW_SERVICE, IpvsCmd.NEW_DEST, IpvsCmd.SET_CONFIG, IpvsCmd.SET_INFO]) {
      fc.assert(
        fc.property(fc.uint8Array({ maxLength: 400 }), (b) => safely(decode, Uint8Array.from([cmd, 1, 0, 0, ...b]))),
        { numRuns: 300 },
      );
    }
    t.pass(name);
  }
});

test('every truncation and corruption of captured replies', (t) => {
  const samples: Array<[(m: InMessage) => unknown, Uint8Array]> = [
    ...received('list', IpvsCmd.NEW_SERVICE).map(
      (m) => [parseServiceReply, m.payload] as [(m: InMessage) => unknown, Uint8Array],
    ),
    ...received('list', IpvsCmd.NEW_DEST).map(
      (m) => [(x: InMessage) => parseDestReply(x), m.payload] as [(m: InMessage) => unknown, Uint8Array],
    ),
    ...received('timeouts-get', IpvsCmd.SET_CONFIG).map(
      (m) => [parseConfigReply, m.payload] as [(m: InMessage) => unknown, Uint8Array],
    ),
  ];
  let cases = 0;
  for (const [decode, payload] of samples) {
    for (let n = 0; n <= payload.length; n++) {
      t.true(safely(decode, payload.subarray(0, n)));
      cases++;
    }
    for (let i = 0; i < payload.length; i++) {
      for (const v of [0x00, 0xff, payload[i]! ^ 0x80, 3]) {
        const b = Uint8Array.from(payload);
        b[i] = v;
        safely(decode, b);
        cases++;
      }
    }
  }
  t.log(`${cases} inputs`);
});

test('a decode error names where and at which offset', (t) => {
  const [svc] = received('list', IpvsCmd.NEW_SERVICE);
  const cut = svc!.payload.subarray(0, 30);
  const e = t.throws(() => parseServiceReply(asMsg(cut)), { instanceOf: NetlinkDecodeError });
  t.regex(e!.message, /^ipvs service at offset \d+: /);
});
