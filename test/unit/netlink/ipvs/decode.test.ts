// Decoding what Debian's 6.1 kernel answered ipvsadm (test/fixtures/netlink/ipvs/list.hex etc.).
// The expected values are read off `ipvsadm -Ln` of the same boot (list.ipvsadm.txt).
import test from 'ava';
import {
  IP_VS_SVC_F_PERSISTENT,
  IP_VS_SVC_F_SCHED_SH_FALLBACK,
  IP_VS_SVC_F_SCHED_SH_PORT,
  IpvsCmd,
  parseConfigReply,
  parseDestReply,
  parseInfoReply,
  parseServiceReply,
  zeroStats,
} from '../../../../src/netlink/ipvs/index.ts';
import { received } from './fixture.ts';

test('service dump entries decode to what ipvsadm -Ln printed', (t) => {
  const services = received('list', IpvsCmd.NEW_SERVICE).map(parseServiceReply);
  const brief = services.map(({ stats, unknown, ...s }) => {
    t.deepEqual(stats, zeroStats());
    t.deepEqual(unknown, []);
    return s;
  });
  t.deepEqual(brief, [
    {
      family: 'IPv4',
      protocol: 'tcp',
      address: '10.96.0.2',
      port: 443,
      scheduler: 'sh',
      flags: IP_VS_SVC_F_PERSISTENT | IP_VS_SVC_F_SCHED_SH_FALLBACK | IP_VS_SVC_F_SCHED_SH_PORT,
      timeout: 300,
      netmask: 24,
    },
    {
      family: 'IPv6',
      protocol: 'udp',
      address: 'fd00::10',
      port: 53,
      scheduler: 'rr',
      flags: 0,
      timeout: 0,
      netmask: 128,
    },
    {
      family: 'IPv4',
      protocol: 'tcp',
      address: '10.96.0.1',
      port: 80,
      scheduler: 'wrr',
      flags: IP_VS_SVC_F_PERSISTENT,
      timeout: 10800,
      netmask: 32,
    },
    { family: 'IPv4', fwmark: 7, scheduler: 'rr', flags: 0, timeout: 0, netmask: 32 },
  ]);
});

test('destination dump entries decode to what ipvsadm -Ln printed', (t) => {
  const dests = received('list', IpvsCmd.NEW_DEST).map((m) => parseDestReply(m));
  t.deepEqual(
    dests.map((d) => [
      d.family,
      d.address,
      d.port,
      d.forward,
      d.weight,
      d.upperThreshold,
      d.lowerThreshold,
      d.activeConns,
      d.inactiveConns,
      d.persistentConns,
    ]),
    [
      ['IPv4', '10.0.0.3', 8080, 'masq', 5, 100, 10, 0, 0, 0],
      ['IPv4', '10.0.0.2', 8080, 'masq', 0, 0, 0, 0, 0, 0],
      ['IPv6', 'fd00::2', 5353, 'masq', 2, 0, 0, 0, 0, 0],
    ],
  );
  t.true(dests.every((d) => d.unknown.length === 0 && d.tunnelType === 0));
});

test('GET_CONFIG and GET_INFO replies', (t) => {
  const [config] = received('timeouts-get', IpvsCmd.SET_CONFIG);
  t.deepEqual(parseConfigReply(config!), { tcp: 900, tcpFin: 120, udp: 300 });
  const [info] = received('list', IpvsCmd.SET_INFO);
  t.deepEqual(parseInfoReply(info!), { version: '1.2.1', connTableSize: 4096 });
});
