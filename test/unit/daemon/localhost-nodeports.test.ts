// The daemon's localhost NodePort listeners around the nftables proxier: they follow its syncs,
// a listener that cannot be made is counted per attempt, logged once, and tried again.
import test from 'ava';
import { memoryLogger } from '../../../src/base/logger.ts';
import { FakeNft } from '../../../src/netlink/nftables/fake/index.ts';
import { NftablesProxier, TABLE } from '../../../src/proxier/nftables/index.ts';
import type { ApplyResult, ProxyPorts, ProxyPortSpec } from '../../../src/proxier/userspace/proxy/index.ts';
import { LocalhostNodePortsProxier } from '../../../src/daemon/localhost-nodeports.ts';
import { ep, newTracker, slice, svc } from '../model/helpers.ts';

const signal = new AbortController().signal;

/** Ports whose listeners fail while their port is in `taken`. */
class FakePorts implements ProxyPorts {
  taken = new Set<number>();
  applied: ProxyPortSpec[][] = [];
  apply(specs: readonly ProxyPortSpec[]): Promise<ApplyResult> {
    this.applied.push([...specs]);
    const ports = new Map<string, number>();
    const errors = new Map<string, Error>();
    for (const s of specs)
      if (this.taken.has(s.listenPort!)) errors.set(s.id, new Error('listen EADDRINUSE'));
      else ports.set(s.id, s.listenPort!);
    return Promise.resolve({ ports, errors });
  }
  stats() {
    return { activeConnections: 0, activeUdpAssociations: 0, perPort: new Map(), retiredOther: {} as never };
  }
  close(): Promise<void> {
    return Promise.resolve();
  }
}

test('listeners follow the syncs; a port taken is counted each try, logged once, and tried again', async (t) => {
  const { t: tr } = newTracker({ clusterCIDRs: ['10.244.0.0/16'], nodePortAddresses: ['localhost'] });
  for (const [name, ip, np] of [
    ['a', '10.96.0.10', 30080],
    ['b', '10.96.0.11', 30081],
  ] as const) {
    tr.onService(
      undefined,
      svc(name, { type: 'NodePort', clusterIP: ip, ports: [{ name: 'p', protocol: 'TCP', port: 80, nodePort: np }] }),
    );
    tr.onEndpointSlice(slice(`${name}-1`, name, [ep('10.244.1.2')]), false);
  }
  const ports = new FakePorts();
  ports.taken.add(30081);
  const log = memoryLogger();
  const inner = new NftablesProxier({
    nft: new FakeNft({ family: 'ip', table: TABLE }),
    logger: log,
    localhostNodePorts: true,
  });
  const p = new LocalhostNodePortsProxier(inner, ports, 'IPv4', log);
  let { desired, change } = tr.checkout();
  await p.sync(desired, change, signal);
  t.deepEqual(p.sample(), { family: 'IPv4', listeners: 1, creationFailures: 1 });
  ({ desired, change } = tr.checkout());
  await p.sync(desired, change, signal); // nothing changed: the failed one is tried again
  t.deepEqual(p.sample(), { family: 'IPv4', listeners: 1, creationFailures: 2 });
  t.is(log.records.filter((r) => r.msg === 'Failed to create localhost nodeport proxy').length, 1);
  ports.taken.clear();
  ({ desired, change } = tr.checkout());
  await p.sync(desired, change, signal);
  t.deepEqual(p.sample(), { family: 'IPv4', listeners: 2, creationFailures: 2 });
  const n = ports.applied.length;
  ({ desired, change } = tr.checkout());
  await p.sync(desired, change, signal);
  t.is(ports.applied.length, n, 'nothing changed and nothing failing: the listeners are left alone');
});
