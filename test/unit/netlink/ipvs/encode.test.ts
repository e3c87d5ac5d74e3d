// What our client sends, byte for byte against what ipvsadm 1.31 sent to Debian's 6.1 kernel
// (test/fixtures/netlink/ipvs, captured with strace inside the QEMU VM; CAPTURE.md). The
// requests go through the real connection code over a fake kernel; seq and pid are masked.
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { NetlinkConnection, parseMessages } from '../../../../src/netlink/core/index.ts';
import {
  IP_VS_SVC_F_SCHED_SH_FALLBACK,
  IP_VS_SVC_F_SCHED_SH_PORT,
  IpvsClient,
  IpvsCmd,
} from '../../../../src/netlink/ipvs/index.ts';
import type { IpvsServiceKey } from '../../../../src/netlink/ipvs/index.ts';
import { hexdiff, maskSeqPid } from '../../../helpers/fixtures.ts';
import { capturedFamily, sentCommand } from './fixture.ts';
import { FakeIpvs } from './fake-ipvs.ts';

const WEB: IpvsServiceKey = { family: 'IPv4', protocol: 'tcp', address: '10.96.0.1', port: 80 };
const DNS6: IpvsServiceKey = { family: 'IPv6', protocol: 'udp', address: 'fd00::10', port: 53 };

/** A client on a fake kernel that accepts everything, with the capture's family id. */
function setup(fixture: string): { client: IpvsClient; fake: FakeIpvs; last: () => Uint8Array } {
  const fake = new FakeIpvs(capturedFamily(fixture));
  fake.schedulers.add('sh').add('wrr');
  const client = new IpvsClient(new NetlinkConnection(fake.kernel, { timeoutMs: 1000 }));
  return { client, fake, last: () => maskSeqPid(fake.kernel.sent.at(-1)!) };
}

function sameBytes(t: ExecutionContext, actual: Uint8Array, expected: Uint8Array, what: string): void {
  t.true(Buffer.from(actual).equals(Buffer.from(expected)), `${what}\n${hexdiff(actual, expected)}`);
}

test('add service: ipvsadm -A -t 10.96.0.1:80 -s rr', async (t) => {
  const { client, last } = setup('svc-add-tcp');
  await client.addService({ ...WEB, scheduler: 'rr' });
  sameBytes(t, last(), sentCommand('svc-add-tcp', IpvsCmd.NEW_SERVICE).raw, 'NEW_SERVICE');
});

test('add service with persistence, netmask and sh flags: ipvsadm -A -t 10.96.0.2:443 -s sh -p 300 -M 255.255.255.0 -b sh-fallback,sh-port', async (t) => {
  const { client, last } = setup('svc-add-persist-netmask');
  await client.addService({
    family: 'IPv4',
    protocol: 'tcp',
    address: '10.96.0.2',
    port: 443,
    scheduler: 'sh',
    flags: IP_VS_SVC_F_SCHED_SH_FALLBACK | IP_VS_SVC_F_SCHED_SH_PORT,
    timeout: 300,
    netmask: 24,
  });
  sameBytes(t, last(), sentCommand('svc-add-persist-netmask', IpvsCmd.NEW_SERVICE).raw, 'NEW_SERVICE');
});

test('add IPv6 UDP service: ipvsadm -A -u [fd00::10]:53 -s rr', async (t) => {
  const { client, last } = setup('svc-add-udp6');
  await client.addService({ ...DNS6, scheduler: 'rr' });
  sameBytes(t, last(), sentCommand('svc-add-udp6', IpvsCmd.NEW_SERVICE).raw, 'NEW_SERVICE');
});

test('add fwmark service: ipvsadm -A -f 7 -s rr', async (t) => {
  const { client, last } = setup('svc-add-fwmark');
  await client.addService({ family: 'IPv4', fwmark: 7, scheduler: 'rr' });
  sameBytes(t, last(), sentCommand('svc-add-fwmark', IpvsCmd.NEW_SERVICE).raw, 'NEW_SERVICE');
});

test('edit service: ipvsadm -E -t 10.96.0.1:80 -s wrr -p 10800', async (t) => {
  const { client, fake, last } = setup('svc-edit-persistent');
  await client.addService({ ...WEB, scheduler: 'rr' });
  await client.editService({ ...WEB, scheduler: 'wrr', timeout: 10800 });
  sameBytes(t, last(), sentCommand('svc-edit-persistent', IpvsCmd.SET_SERVICE).raw, 'SET_SERVICE');
  t.is(fake.services.size, 1);
});

test('add destination: ipvsadm -a -t 10.96.0.1:80 -r 10.0.0.2:8080 -m -w 1 (and with -x 100 -y 10)', async (t) => {
  const { client, last } = setup('dest-add-masq');
  await client.addService({ ...WEB, scheduler: 'rr' });
  await client.addDestination(WEB, { address: '10.0.0.2', port: 8080, weight: 1 });
  sameDestRequest(t, last(), sentCommand('dest-add-masq', IpvsCmd.NEW_DEST).raw);
  await client.addDestination(WEB, {
    address: '10.0.0.3',
    port: 8080,
    forward: 'masq',
    weight: 5,
    upperThreshold: 100,
    lowerThreshold: 10,
  });
  sameDestRequest(t, last(), sentCommand('dest-add-thresholds', IpvsCmd.NEW_DEST).raw);
});

test('IPv6 destination: ipvsadm -a -u [fd00::10]:53 -r [fd00::2]:5353 -m -w 2', async (t) => {
  const { client, last } = setup('dest-add-udp6');
  await client.addService({ ...DNS6, scheduler: 'rr' });
  await client.addDestination(DNS6, { address: 'fd00::2', port: 5353, weight: 2 });
  sameDestRequest(t, last(), sentCommand('dest-add-udp6', IpvsCmd.NEW_DEST).raw);
});

test('edit destination weight: ipvsadm -e -t 10.96.0.1:80 -r 10.0.0.2:8080 -m -w 0', async (t) => {
  const { client, last } = setup('dest-edit-weight0');
  await client.addService({ ...WEB, scheduler: 'rr' });
  await client.addDestination(WEB, { address: '10.0.0.2', port: 8080, weight: 1 });
  await client.editDestination(WEB, { address: '10.0.0.2', port: 8080, weight: 0 });
  sameDestRequest(t, last(), sentCommand('dest-edit-weight0', IpvsCmd.SET_DEST).raw);
});

test('set timeouts: ipvsadm --set 900 120 300', async (t) => {
  const { client, last } = setup('timeouts-set');
  await client.setTimeouts({ tcp: 900, tcpFin: 120, udp: 300 });
  sameBytes(t, last(), sentCommand('timeouts-set', IpvsCmd.SET_CONFIG).raw, 'SET_CONFIG');
});

test('flush and the simple GETs: ipvsadm -C, -L --timeout, and the GET_INFO it sends first', async (t) => {
  const { client, last } = setup('flush');
  await client.flushAll();
  sameBytes(t, last(), sentCommand('flush', IpvsCmd.FLUSH).raw, 'FLUSH');
  await client.getTimeouts();
  sameBytes(t, last(), sentCommand('timeouts-get', IpvsCmd.GET_CONFIG).raw, 'GET_CONFIG');
  await client.info().catch(() => undefined); // the fake does not answer GET_INFO
  sameBytes(t, last(), sentCommand('flush', IpvsCmd.GET_INFO).raw, 'GET_INFO');
});

/** Attributes of a nest as [type, hex] pairs, ignoring the NLA_F_NESTED bit. */
function attrList(b: Uint8Array): [number, string][] {
  const out: [number, string][] = [];
  for (let off = 0; off + 4 <= b.length;) {
    const len = b[off]! | (b[off + 1]! << 8);
    const type = (b[off + 2]! | (b[off + 3]! << 8)) & 0x3fff;
    out.push([type, Buffer.from(b.subarray(off + 4, off + len)).toString('hex')]);
    off += (len + 3) & ~3;
  }
  return out;
}

function nests(raw: Uint8Array): [number, [number, string][]][] {
  const [m] = parseMessages(raw);
  return attrList(m!.payload.subarray(4)).map(([type, hex]) => [type, attrList(Buffer.from(hex, 'hex'))]);
}

/**
 * Destination requests: ipvsadm names the service with every service attribute (an empty
 * scheduler, flags, timeout, netmask); we send its key only, which is all the kernel reads
 * there. The destination nest must be identical, byte for byte.
 */
function sameDestRequest(t: ExecutionContext, ours: Uint8Array, theirs: Uint8Array): void {
  t.deepEqual(Array.from(ours.subarray(4, 8)), Array.from(theirs.subarray(4, 8)), 'nlmsg type and flags');
  t.deepEqual(Array.from(ours.subarray(16, 20)), Array.from(theirs.subarray(16, 20)), 'genlmsghdr');
  const [oursSvc, oursDest] = nests(ours);
  const [theirSvc, theirDest] = nests(theirs);
  t.deepEqual(oursDest, theirDest, 'IPVS_CMD_ATTR_DEST');
  t.is(oursSvc![0], theirSvc![0]);
  t.deepEqual(
    oursSvc![1],
    theirSvc![1].filter(([ty]) => [1, 2, 3, 4, 5].includes(ty)),
    'service key attributes',
  );
}

// For deletes and dumps ipvsadm sends the whole service (with an empty scheduler) and the whole
// destination; the kernel needs only the key, which is what we send. Every attribute we send
// is one ipvsadm sent, identical, in the same order; and the command header is the same.
for (const [fixture, cmd, act] of [
  ['svc-del', IpvsCmd.DEL_SERVICE, (c: IpvsClient) => c.deleteService(WEB)],
  ['dest-del', IpvsCmd.DEL_DEST, (c: IpvsClient) => c.deleteDestination(WEB, { address: '10.0.0.2', port: 8080 })],
  ['list', IpvsCmd.GET_DEST, (c: IpvsClient) => c.listDestinations(WEB)],
] as const) {
  test(`${fixture}: our key attributes are a subset of what ipvsadm sent`, async (t) => {
    const { client, fake, last } = setup(fixture);
    await client.addService({ ...WEB, scheduler: 'rr' });
    if (cmd === IpvsCmd.DEL_DEST) await client.addDestination(WEB, { address: '10.0.0.2', port: 8080, weight: 1 });
    await act(client);
    const ours = last();
    const theirs = sentCommand(fixture, cmd, 0).raw;
    t.deepEqual(Array.from(ours.subarray(16, 20)), Array.from(theirs.subarray(16, 20)), 'genlmsghdr');
    const want = nests(theirs);
    for (const [type, attrs] of nests(ours)) {
      const theirNest = want.find(([ty]) => ty === type)?.[1] ?? [];
      const subset = theirNest.filter(([ty]) => attrs.some(([a]) => a === ty));
      t.deepEqual(attrs, subset, `nest ${type}`);
    }
    t.is(fake.requests.at(-1)!.payload[0], cmd);
  });
}

test("dumps: the service dump request is ipvsadm's GET_SERVICE; flags carry NLM_F_DUMP", async (t) => {
  const { client, last } = setup('list');
  await client.listServices();
  const ours = last();
  const theirs = sentCommand('list', IpvsCmd.GET_SERVICE).raw;
  t.deepEqual(Array.from(ours.subarray(16)), Array.from(theirs.subarray(16)));
  const flags = (b: Uint8Array): number => b[6]! | (b[7]! << 8);
  t.is(flags(ours) & 0x300, 0x300);
  t.is(flags(theirs) & 0x300, 0x300);
});
