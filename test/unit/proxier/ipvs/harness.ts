// An IPVS proxier over the in-memory fakes (IPVS genl, ipset nfnetlink, rtnetlink), fed by a
// real ChangeTracker, so tests speak Kubernetes objects and read back kernel state.
import { FakeClock } from '../../../../src/base/clock.ts';
import { memoryLogger } from '../../../../src/base/logger.ts';
import type { LogRecord } from '../../../../src/base/logger.ts';
import type { ModelOptions } from '../../../../src/model/index.ts';
import { NetlinkConnection } from '../../../../src/netlink/core/index.ts';
import { IpsetCmd } from '../../../../src/netlink/ipset/index.ts';
import { fakeIpset } from '../../../../src/netlink/ipset/fake/index.ts';
import { IpvsClient, IpvsCmd } from '../../../../src/netlink/ipvs/index.ts';
import { fakeRoute } from '../../../../src/netlink/route/fake/index.ts';
import { IpvsProxier, RecordingSysctl } from '../../../../src/proxier/ipvs/index.ts';
import type { IpvsProxierOptions } from '../../../../src/proxier/ipvs/index.ts';
import type { SyncReport } from '../../../../src/proxier/types.ts';
import { FakeIpvs } from '../../netlink/ipvs/fake-ipvs.ts';
import { NODE, newTracker, node } from '../../model/helpers.ts';

export { ep, slice, svc } from '../../model/helpers.ts';
export const NODE_IP = '192.168.1.10';

export function harness(o: Partial<IpvsProxierOptions> = {}, model: Partial<ModelOptions> = {}) {
  const ipvsFake = new FakeIpvs();
  for (const s of ['wlc', 'mh', 'dh', 'sed', 'nq']) ipvsFake.schedulers.add(s);
  const ipvs = new IpvsClient(new NetlinkConnection(ipvsFake.kernel, { timeoutMs: 2000 }));
  const { client: ipset, kernel: ipsetK } = fakeIpset();
  const { client: route, kernel: routeK } = fakeRoute();
  routeK.addLink('eth0', undefined);
  routeK.addAddr('eth0', NODE_IP, 24);
  const sysctl = new RecordingSysctl();
  const clock = new FakeClock();
  const records: LogRecord[] = [];
  const proxier = new IpvsProxier(
    { family: 'IPv4', gracefulCheckIntervalMs: 1000, gracefulTerminationMs: 60_000, ...o },
    { ipvs, ipset, route, sysctl, clock, logger: memoryLogger(records) },
  );
  const { t: tracker } = newTracker(model);
  tracker.onNode(node(NODE, { internal: [NODE_IP] }));

  const sync = (): Promise<SyncReport> => {
    const { desired, change } = tracker.checkout();
    return proxier.sync(desired, change, new AbortController().signal);
  };
  const full = (): Promise<SyncReport> => {
    tracker.requestFullSync();
    return sync();
  };

  /** ipvsadm -Ln, sorted: "TCP 10.96.0.10:80 rr" and "TCP 10.96.0.10:80 -> 10.0.0.1:8080 1". */
  const vs = (): string[] => {
    const out: string[] = [];
    for (const { svc: s, dests } of ipvsFake.services.values()) {
      if ('fwmark' in s) continue;
      const head = `${s.protocol.toUpperCase()} ${s.family === 'IPv6' ? `[${s.address}]` : s.address}:${s.port}`;
      out.push(
        `${head} ${s.scheduler}${s.timeout ? ` persistent ${s.timeout}` : ''}${s.flags & ~1 ? ` flags ${s.flags & ~1}` : ''}`,
      );
      for (const d of dests.values()) out.push(`${head} -> ${d.address}:${d.port} ${d.weight}`);
    }
    return out.sort();
  };
  const dest = (vsKey: string, dk: string) => {
    for (const { svc: s, dests } of ipvsFake.services.values()) {
      if ('fwmark' in s) continue;
      if (`${s.protocol.toUpperCase()} ${s.address}:${s.port}` === vsKey) return dests.get(dk);
    }
    return undefined;
  };
  const set = (name: string): string[] => ipsetK.dump(name)?.entries ?? [];
  const addrs = (): string[] => {
    const link = [...routeK.links.values()].find((l) => l.name === 'kube-ipvs0');
    if (!link) return [];
    return routeK.addrs
      .filter((a) => a.index === link.index)
      .map((a) => [...a.bytes].join('.'))
      .sort();
  };
  /** Counts of IPVS and ipset writes since the last call. */
  let ipvsSeen = 0;
  let ipsetSeen = 0;
  const writes = () => {
    const ipvsReqs = ipvsFake.requests.slice(ipvsSeen);
    const ipsetReqs = ipsetK.requests.slice(ipsetSeen);
    ipvsSeen = ipvsFake.requests.length;
    ipsetSeen = ipsetK.requests.length;
    const count = (reqs: typeof ipvsReqs, cmd: number, pick: (r: (typeof ipvsReqs)[number]) => number) =>
      reqs.filter((r) => pick(r) === cmd).length;
    const c = (r: (typeof ipvsReqs)[number]) => (r.type === ipvsFake.familyId ? r.payload[0]! : -1);
    const s = (r: (typeof ipvsReqs)[number]) => r.type & 0xff;
    return {
      newService: count(ipvsReqs, IpvsCmd.NEW_SERVICE, c),
      setService: count(ipvsReqs, IpvsCmd.SET_SERVICE, c),
      delService: count(ipvsReqs, IpvsCmd.DEL_SERVICE, c),
      newDest: count(ipvsReqs, IpvsCmd.NEW_DEST, c),
      setDest: count(ipvsReqs, IpvsCmd.SET_DEST, c),
      delDest: count(ipvsReqs, IpvsCmd.DEL_DEST, c),
      getService: count(ipvsReqs, IpvsCmd.GET_SERVICE, c),
      getDest: count(ipvsReqs, IpvsCmd.GET_DEST, c),
      ipsetAdd: count(ipsetReqs, IpsetCmd.ADD, s),
      ipsetDel: count(ipsetReqs, IpsetCmd.DEL, s),
      ipsetList: count(ipsetReqs, IpsetCmd.LIST, s),
      ipsetCreate: count(ipsetReqs, IpsetCmd.CREATE, s),
      ipvsOrder: ipvsReqs
        .filter((r) => r.type === ipvsFake.familyId)
        .map((r) => Object.entries(IpvsCmd).find(([, v]) => v === r.payload[0])?.[0] ?? '?'),
    };
  };
  const deps = { ipvs, ipset, route, sysctl, clock, logger: memoryLogger(records) };
  return {
    deps,
    ipvs,
    ipset,
    route,
    proxier,
    tracker,
    ipvsFake,
    ipsetK,
    routeK,
    sysctl,
    clock,
    records,
    sync,
    full,
    vs,
    dest,
    set,
    addrs,
    writes,
  };
}
