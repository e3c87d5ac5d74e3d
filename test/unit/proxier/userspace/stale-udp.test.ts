// Which UDP conntrack entries lead to a proxy port no longer in use.
import test from 'ava';
import type { Flow } from '../../../../src/netlink/conntrack/index.ts';
import { staleUdpFlows } from '../../../../src/proxier/userspace/stale-udp.ts';

const flow = (dst: string, dport: number, replySrc: string, replySport: number): Flow => ({
  family: 'IPv4',
  orig: { src: '10.1.0.2', dst, proto: 17, srcPort: 40053, dstPort: dport },
  reply: { src: replySrc, dst: '10.1.0.2', proto: 17, srcPort: replySport, dstPort: 40053 },
  status: 0,
  unknown: [],
});

test('translated to another port than the current socket: stale; to it, or untranslated: kept', (t) => {
  const services = [{ portals: [{ ip: '10.96.0.53', port: 53 }], nodePort: 30053, proxyPort: 41000 }];
  const old = flow('10.96.0.53', 53, '10.1.0.1', 39999);
  const current = flow('10.96.0.53', 53, '10.1.0.1', 41000);
  const kernelMode = flow('10.96.0.53', 53, '10.244.1.2', 8080);
  const nodePortOld = flow('10.1.0.1', 30053, '10.1.0.1', 39999);
  const otherService = flow('10.96.0.54', 53, '10.1.0.1', 39999);
  const notTranslated = flow('192.0.2.1', 30053, '192.0.2.1', 30053);
  t.deepEqual(staleUdpFlows([old, current, kernelMode, nodePortOld, otherService, notTranslated], services), [
    old,
    kernelMode,
    nodePortOld,
  ]);
});
