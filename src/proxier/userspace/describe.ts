// `kube-proxy-ts explain` for the userspace mode: the port's proxy socket, and its rules in
// KUBE-PORTALS-* / KUBE-NODEPORT-* (those whose comment is the port's "ns/name:port"), read
// back from the kernel and printed as iptables-save does, beside what the last sync wrote.
// Our chains are listed once per explain query (kept in the describe session).

import type { IPFamily } from '../../base/ip.ts';
import type { ServicePortInfo } from '../../model/index.ts';
import { isNotFound } from '../../netlink/core/index.ts';
import { decodeIptRule } from '../../netlink/nftables/iptables/decode.ts';
import type { IptRule, IptTable } from '../../netlink/nftables/iptables/rule.ts';
import { ruleLine } from '../../netlink/nftables/iptables/save.ts';
import type { DescribeOptions, PortDescription, ProgrammedEntry } from '../types.ts';
import type { TableClient } from '../iptables-nft/index.ts';
import { CHAINS, portalComment } from './rules.ts';

export interface DescribeInput {
  readonly clients: ReadonlyMap<IptTable, TableClient>;
  readonly family: IPFamily;
  readonly listenIP: string;
  readonly written?: { readonly proxyPort: number; readonly rules: readonly IptRule[] };
}

const SESSION_KEY = 'userspace-rules';

const commentOf = (r: IptRule): string | undefined => {
  for (const m of r.matches) if (m.m === 'comment') return m.text;
  return undefined;
};

/** Every decodable rule of our chains, by table. */
async function listOurs(clients: ReadonlyMap<IptTable, TableClient>, family: IPFamily): Promise<IptRule[]> {
  const out: IptRule[] = [];
  for (const c of CHAINS) {
    const client = clients.get(c.table);
    if (!client) continue;
    try {
      for (const listed of await client.listRules(c.name)) {
        if (listed.chain !== c.name) continue;
        const rule = decodeIptRule(listed, c.table, family);
        if (rule) out.push(rule);
      }
    } catch (e) {
      if (!isNotFound(e)) throw e;
    }
  }
  return out;
}

const entry = (r: IptRule, family: IPFamily): ProgrammedEntry => ({
  where: `${r.table} ${r.chain}`,
  key: ruleLine(r, family),
  value: '',
});

export async function describeUserspacePort(
  info: ServicePortInfo,
  inp: DescribeInput,
  opts?: DescribeOptions,
): Promise<PortDescription> {
  const session = opts?.session;
  let all = session?.get(SESSION_KEY) as IptRule[] | undefined;
  if (!all) {
    all = await listOurs(inp.clients, inp.family);
    session?.set(SESSION_KEY, all);
  }
  const comment = portalComment(info);
  const kernel = all.filter((r) => commentOf(r) === comment).map((r) => entry(r, inp.family));
  const expected: ProgrammedEntry[] = [];
  if (inp.written) {
    const addr = inp.listenIP.includes(':') ? `[${inp.listenIP}]` : inp.listenIP;
    // The socket is this process's own: what it listens on is what the last sync opened.
    const socket = { where: 'proxy socket', key: `${info.protocol} ${addr}:${inp.written.proxyPort}`, value: '' };
    kernel.unshift(socket);
    expected.push(socket, ...inp.written.rules.map((r) => entry(r, inp.family)));
  }
  return { mode: 'userspace', kernel, expected };
}
