// rtnetlink announcements (src/netlink/route/monitor.ts) from the machine's kernel, in a fresh
// namespace: links and addresses added and removed by our socket and by `ip`, decoded with the
// port id that tells them apart. What the IPVS mode's kube-ipvs0 watch relies on
// (proxier/drift/link-watch.ts, proxier/ipvs/drift.ts): IPv4 address changes carry the port
// of the socket that asked; IPv6 ones (addrconf) carry 0 whoever asked, as does the removal of
// a link's addresses with the link.
import test from 'ava';
import { netnsFor } from '../helpers/netns.ts';
import type { Announced } from './scenarios/route-monitor.ts';

const S = new URL('./scenarios/route-monitor.ts', import.meta.url).href;

test('link and address announcements, decoded, with the port id of who asked', async (t) => {
  const ns = await netnsFor(t, 'route-mon');
  const a = await ns.agent();
  const r = await a.call<Announced>(S, 'announce');
  t.deepEqual(r.errors, []);
  t.is(r.overflows, 0);
  const addr = (address: string, added: boolean) =>
    r.changes.filter((c) => c.kind === 'addr' && c.address === address && c.added === added);
  const index = r.changes.find((c) => c.kind === 'link' && c.name === 'kube-ipvs0')?.index;
  t.truthy(index, 'the new link is announced by name');

  // Ours, IPv4: our port, in both directions.
  t.like(addr('10.96.0.1', true)[0], { kind: 'addr', index, prefixLen: 32, portId: r.ourPort });
  t.like(addr('10.96.0.1', false)[0], { index, prefixLen: 32, portId: r.ourPort });
  // Ours, IPv6: port 0 (addrconf announces without the requester's port).
  t.like(addr('fd00:96::1', false)[0], { index, prefixLen: 128, portId: 0 });
  // Someone else's (`ip`): another port, not 0.
  const foreign = addr('10.96.0.2', false)[0];
  t.truthy(foreign);
  t.not(foreign!.portId, r.ourPort);
  t.not(foreign!.portId, 0);
  // The link deleted by `ip`: announced by name; its last address goes with it.
  t.like(
    r.changes.find((c) => c.kind === 'link' && !c.added),
    { name: 'kube-ipvs0', index },
  );
  t.is(addr('10.96.0.3', false).length, 1, "the link's address is announced removed with it");
  t.log(
    JSON.stringify(
      r.changes.map(
        (c) =>
          `${c.added ? '+' : '-'}${c.kind} ${'address' in c ? c.address : c.name} port ${c.portId === r.ourPort ? 'ours' : c.portId}`,
      ),
    ),
  );
});
