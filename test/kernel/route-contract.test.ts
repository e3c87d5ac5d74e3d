// The fake is held to the kernel: one script of RouteClient calls runs against the machine's
// kernel (in a fresh namespace, lo up as Netns makes it) and against FakeRouteKernel, and
// every outcome must match. The fake is told which link kinds this kernel has (ifb, no dummy).
import test from 'ava';
import { fakeRoute } from '../../src/netlink/route/fake/index.ts';
import { netnsFor } from '../helpers/netns.ts';
import { runCalls } from './scenarios/route.ts';
import type { Call, Outcome } from './scenarios/route.ts';

const S = new URL('./scenarios/route.ts', import.meta.url).href;

const SCRIPT: Call[] = [
  ['createLink', 'kube-ipvs0', 'dummy'],
  ['createLink', 'kube-ipvs0', 'ifb'],
  ['createLink', 'kube-ipvs0', 'ifb'],
  ['ensureLink', 'kube-ipvs0', 'ifb'],
  ['getLink', 'kube-ipvs0'],
  ['getLink', 'kube-nope'],
  ['setLinkUp', 'kube-ipvs0'],
  ['getLink', 'kube-ipvs0'],
  ['addAddress', 'kube-ipvs0', '10.96.0.1'],
  ['addAddress', 'kube-ipvs0', '10.96.0.1'],
  ['ensureAddress', 'kube-ipvs0', '10.96.0.1'],
  ['ensureAddress', 'kube-ipvs0', '10.96.0.10'],
  ['addAddress', 'kube-ipvs0', 'fd00::1', { noPrefixRoute: true }],
  ['addAddress', 'kube-ipvs0', 'fd00::1', { prefixLen: 64 }],
  ['addAddress', 'kube-ipvs0', '10.96.0.1', { prefixLen: 24 }],
  ['addAddress', 'kube-nope', '10.96.0.2'],
  ['listAddresses', { link: 'kube-ipvs0' }],
  ['listAddresses', { family: 'IPv4' }],
  ['nodeAddresses', 'IPv4'],
  ['nodeAddresses', 'IPv4', { exceptLink: 'kube-ipvs0' }],
  ['nodeAddresses', 'IPv6'],
  ['deleteAddress', 'kube-ipvs0', '10.96.0.10'],
  ['deleteAddress', 'kube-ipvs0', '10.96.0.10'],
  ['deleteAddress', 'kube-ipvs0', 'fd00::1'],
  ['deleteAddress', 'kube-ipvs0', '10.96.0.1', { prefixLen: 24 }],
  ['listAddresses', { link: 'kube-ipvs0' }],
  ['setLinkUp', 'kube-ipvs0', false],
  ['getLink', 'kube-ipvs0'],
  ['listLinks'],
  ['deleteLink', 'kube-ipvs0'],
  ['deleteLink', 'kube-ipvs0'],
  ['getLink', 'kube-ipvs0'],
  ['listAddresses', {}],
];

/** Drops what legitimately differs: MACs, and the IPv6 link-local addresses the kernel adds on up. */
function normalize(o: Outcome): unknown {
  if (!o.ok) return { error: o.error.code, message: o.error.message };
  const strip = (v: unknown): unknown => {
    if (Array.isArray(v))
      return v.filter((x) => !(x && typeof x === 'object' && (x as { scope?: number }).scope === 253)).map(strip);
    if (v && typeof v === 'object') {
      const { mac: _mac, ...rest } = v as Record<string, unknown>;
      // IFA_F_TENTATIVE: an IPv6 address is tentative until duplicate address detection ends,
      // a timer of the kernel's (it was still set once in a run on a loaded machine).
      if (rest['family'] === 'IPv6' && typeof rest['flags'] === 'number') rest['flags'] &= ~IFA_F_TENTATIVE;
      return Object.fromEntries(Object.entries(rest).map(([k, x]) => [k, strip(x)]));
    }
    return v;
  };
  return strip(o.value);
}

/** From linux/if_addr.h. */
const IFA_F_TENTATIVE = 0x40;

test('FakeRouteKernel answers a full script exactly as the kernel does', async (t) => {
  const ns = await netnsFor(t, 'route-contract');
  const a = await ns.agent();
  const kernel = await a.call<Outcome[]>(S, 'calls', SCRIPT);
  const { client } = fakeRoute({ kinds: ['ifb'] });
  const fake = await runCalls(client, SCRIPT);
  SCRIPT.forEach((call, i) => {
    t.deepEqual(normalize(fake[i]!), normalize(kernel[i]!), `call ${i}: ${JSON.stringify(call)}`);
  });
  if (process.env.KPTS_DEBUG)
    t.log(kernel.map((o, i) => `${i} ${JSON.stringify(normalize(o)).slice(0, 240)}`).join('\n'));
  t.true(kernel.filter((o) => !o.ok).length >= 7);
});
