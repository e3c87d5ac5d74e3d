// IpvsClient over a fake IPVS kernel (fake-ipvs.ts): the verbs, the not-found and exists
// predicates, the named scheduler error, the missing-family error, and deleteServices.
import test from 'ava';
import { NetlinkConnection, NetlinkError } from '../../../../src/netlink/core/index.ts';
import {
  IpvsClient,
  IpvsSchedulerError,
  isDestinationNotFound,
  isIpvsExists,
  isSchedulerMissing,
  isServiceNotFound,
} from '../../../../src/netlink/ipvs/index.ts';
import type { IpvsServiceKey, IpvsServiceSpec } from '../../../../src/netlink/ipvs/index.ts';
import { FakeIpvs } from './fake-ipvs.ts';

const WEB: IpvsServiceSpec = { family: 'IPv4', protocol: 'tcp', address: '10.96.0.1', port: 80, scheduler: 'rr' };
const OTHER: IpvsServiceKey = { family: 'IPv4', protocol: 'udp', address: '10.96.0.10', port: 53 };

function setup(): { fake: FakeIpvs; client: IpvsClient } {
  const fake = new FakeIpvs();
  return { fake, client: new IpvsClient(new NetlinkConnection(fake.kernel, { timeoutMs: 1000 })) };
}

test('a kernel without IPVS: a clear NetlinkError; the look-up is retried later', async (t) => {
  const { fake, client } = setup();
  fake.available = false;
  const e = await t.throwsAsync(client.listServices(), { instanceOf: NetlinkError });
  t.is(e!.message, 'get genl family IPVS: not available in this kernel: ENOENT');
  t.is(e!.op, 'get genl family IPVS');
  t.is(e!.code, 'ENOENT');
  fake.available = true;
  t.deepEqual(await client.listServices(), []);
});

test('services: add, get, list, edit, delete; errors by name', async (t) => {
  const { client } = setup();
  await client.addService(WEB);
  t.true(isIpvsExists(await t.throwsAsync(client.addService(WEB))));
  t.like(await client.getService(WEB), { address: '10.96.0.1', scheduler: 'rr', timeout: 0, netmask: 32 });
  await client.editService({ ...WEB, scheduler: 'wrr', timeout: 60 });
  t.like((await client.listServices())[0], { scheduler: 'wrr', timeout: 60, flags: 1 });
  t.is(await client.getService(OTHER), undefined);
  const missing = await t.throwsAsync(client.editService({ ...OTHER, scheduler: 'rr' }));
  t.true(isServiceNotFound(missing));
  t.regex(missing!.message, /^edit ipvs service UDP 10\.96\.0\.10:53 scheduler rr: ESRCH/);
  await client.deleteService(WEB);
  t.deepEqual(await client.listServices(), []);
});

test('an unknown scheduler is an IpvsSchedulerError naming the module', async (t) => {
  const { client } = setup();
  const e = await t.throwsAsync(client.addService({ ...WEB, scheduler: 'nosuch' }), { instanceOf: IpvsSchedulerError });
  t.true(isSchedulerMissing(e));
  t.is(e!.code, 'ENOENT');
  t.is(e!.scheduler, 'nosuch');
  t.regex(
    e!.message,
    /add ipvs service TCP 10\.96\.0\.1:80 scheduler nosuch: scheduler "nosuch" is not available \(is module ip_vs_nosuch loadable\?\): ENOENT/,
  );
  t.true(e!.cause instanceof NetlinkError);
});

test('destinations: add, list, edit weight, delete; ENOENT and ESRCH', async (t) => {
  const { client } = setup();
  await client.addService(WEB);
  await client.addDestination(WEB, { address: '10.0.0.2', port: 8080, weight: 1 });
  await client.addDestination(WEB, { address: '10.0.0.3', port: 8080, weight: 1, upperThreshold: 5 });
  t.true(isIpvsExists(await t.throwsAsync(client.addDestination(WEB, { address: '10.0.0.2', port: 8080, weight: 1 }))));
  await client.editDestination(WEB, { address: '10.0.0.2', port: 8080, weight: 0 });
  t.deepEqual(
    (await client.listDestinations(WEB)).map((d) => [d.address, d.weight, d.upperThreshold, d.forward]),
    [
      ['10.0.0.2', 0, 0, 'masq'],
      ['10.0.0.3', 1, 5, 'masq'],
    ],
  );
  await client.deleteDestination(WEB, { address: '10.0.0.2', port: 8080 });
  const e = await t.throwsAsync(client.deleteDestination(WEB, { address: '10.0.0.2', port: 8080 }));
  t.true(isDestinationNotFound(e));
  t.is(e!.message, 'delete ipvs destination 10.0.0.2:8080 of TCP 10.96.0.1:80: ENOENT');
  t.true(isServiceNotFound(await t.throwsAsync(client.listDestinations(OTHER))));
});

test('deleteServices deletes only what it is given and skips what is gone', async (t) => {
  const { fake, client } = setup();
  await client.addService(WEB);
  await client.addService({ ...OTHER, scheduler: 'rr' });
  t.is(await client.deleteServices([WEB, { ...WEB, port: 81 }]), 1);
  t.deepEqual([...fake.services.keys()], ['UDP 10.96.0.10:53']);
});

test('timeouts: get, set all, set one', async (t) => {
  const { client } = setup();
  t.deepEqual(await client.getTimeouts(), { tcp: 900, tcpFin: 120, udp: 300 });
  await client.setTimeouts({ udp: 30 });
  t.deepEqual(await client.getTimeouts(), { tcp: 900, tcpFin: 120, udp: 30 });
});

test('one family look-up per client', async (t) => {
  const { fake, client } = setup();
  await client.listServices();
  await client.getTimeouts();
  await client.flushAll();
  t.is(fake.requests.filter((r) => r.type === 0x10).length, 1);
});

test('add service on a kernel without IPVS: the family error, not a scheduler error', async (t) => {
  const { fake, client } = setup();
  fake.available = false;
  const e = await t.throwsAsync(client.addService(WEB));
  t.false(isSchedulerMissing(e));
  t.is(e!.message, 'get genl family IPVS: not available in this kernel: ENOENT');
});

test('a missing persistence engine is named with the scheduler', async (t) => {
  const { client } = setup();
  const e = await t.throwsAsync(client.addService({ ...WEB, scheduler: 'nosuch', peName: 'sip' }), {
    instanceOf: IpvsSchedulerError,
  });
  t.is(e!.peName, 'sip');
  t.regex(
    e!.message,
    /scheduler "nosuch" or persistence engine "sip" is not available \(modules ip_vs_nosuch, ip_vs_pe_sip\): ENOENT$/,
  );
});
