// The rtnetlink client for what kube-proxy's IPVS mode needs: the kube-ipvs0 dummy link, the
// service addresses bound to it, and the node's own addresses (for NodePorts).

import { errorMessage } from '../../base/errors.ts';
import { errnoNumber, NetlinkError } from '../core/index.ts';
import type { NetlinkTransport, OutMessage } from '../core/index.ts';
import { parseIP } from '../../base/ip.ts';
import {
  decodeAddr,
  decodeLink,
  delAddrMessage,
  delLinkMessage,
  getLinkByIndexMessage,
  getLinkMessage,
  listAddrsMessage,
  listLinksMessage,
  newAddrMessage,
  newLinkMessage,
  setLinkUpMessage,
} from './codec.ts';
import { RTM_NEWADDR, RTM_NEWLINK } from './constants.ts';
import { isNoSuchLink, isRouteExists } from './errors.ts';
import type { IPFamily } from '../../base/ip.ts';
import type { Addr, AddrOptions, Link } from './types.ts';

/** A link by name, or by index (which saves a lookup). */
export type LinkRef = string | number;

export interface RouteCallOptions {
  signal?: AbortSignal;
}

export interface AddAddrOptions extends AddrOptions, RouteCallOptions {
  /** Default: a host prefix (/32 or /128), as upstream binds service addresses. */
  prefixLen?: number;
}

/**
 * What the client talks to: a NetlinkTransport, and NetlinkConnection's pipeline() for the
 * many-address calls. Without pipeline(), those send one request at a time (same results).
 */
export interface RouteTransport extends NetlinkTransport {
  pipeline?(
    msgs: readonly OutMessage[],
    opts?: { signal?: AbortSignal; perDatagram?: number },
  ): Promise<(NetlinkError | undefined)[]>;
}

/**
 * Address requests per datagram in addAddresses()/deleteAddresses(). rtnetlink handles a
 * datagram's messages in turn before we read any answer, and each failure (EEXIST,
 * EADDRNOTAVAIL) queues an error reply echoing its request, several hundred bytes of receive
 * buffer each. The buffer is net.core.rmem_max doubled (416 KiB stock); past it the kernel
 * drops replies (ENOBUFS: the datagram's exchange fails, its per-request results are lost). 256
 * keeps even an all-failing datagram at about half of it, as conntrack's and IPVS's pipelines do.
 */
export const ADDRS_PER_DATAGRAM = 256;

/** The node's own addresses among `addrs`, as nodeAddresses() selects them. */
export function selectNodeAddresses(addrs: Iterable<Addr>, exceptIndex?: number): string[] {
  const out = new Set<string>();
  for (const a of addrs) {
    if (a.index === exceptIndex) continue;
    const ip = parseIP(a.address);
    if (!ip) continue;
    const b = ip.bytes;
    if (ip.family === 'IPv4' && b[0] === 127) continue;
    if (ip.family === 'IPv6' && (a.address === '::1' || (b[0] === 0xfe && (b[1]! & 0xc0) === 0x80))) continue;
    out.add(a.address);
  }
  return [...out].sort();
}

export class RouteClient {
  private readonly nl: RouteTransport;

  constructor(transport: RouteTransport) {
    this.nl = transport;
  }

  private req(msg: Parameters<NetlinkTransport['request']>[0], opts: RouteCallOptions & { dump?: boolean } = {}) {
    return this.nl.request(msg, {
      ...(opts.dump ? { dump: true } : {}),
      ...(opts.signal ? { signal: opts.signal } : {}),
    });
  }

  /** The link of that name, or undefined when there is none. */
  async getLink(name: string, opts: RouteCallOptions = {}): Promise<Link | undefined> {
    try {
      const [m] = await this.req(getLinkMessage(name), opts);
      return m ? decodeLink(m) : undefined;
    } catch (e) {
      if (isNoSuchLink(e)) return undefined;
      throw e;
    }
  }

  async getLinkByIndex(index: number, opts: RouteCallOptions = {}): Promise<Link | undefined> {
    try {
      const [m] = await this.req(getLinkByIndexMessage(index), opts);
      return m ? decodeLink(m) : undefined;
    } catch (e) {
      if (isNoSuchLink(e)) return undefined;
      throw e;
    }
  }

  async listLinks(opts: RouteCallOptions = {}): Promise<Link[]> {
    const replies = await this.req(listLinksMessage(), { ...opts, dump: true });
    return replies.filter((m) => m.type === RTM_NEWLINK).map(decodeLink);
  }

  /** The index of a link; ENODEV naming the link when it does not exist. */
  private async resolve(ref: LinkRef, verb: string, opts: RouteCallOptions): Promise<{ index: number; name: string }> {
    if (typeof ref === 'number') return { index: ref, name: `#${ref}` };
    const link = await this.getLink(ref, opts);
    if (!link) throw new NetlinkError(verb, errnoNumber('ENODEV'));
    return { index: link.index, name: ref };
  }

  /**
   * Creates a link (kind "dummy" for kube-ipvs0). EEXIST when the name is taken; EOPNOTSUPP when the kernel lacks the
   * kind.
   */
  async createLink(name: string, kind = 'dummy', opts: RouteCallOptions = {}): Promise<Link> {
    await this.req(newLinkMessage(name, kind), opts);
    const link = await this.getLink(name, opts);
    if (!link)
      throw new NetlinkError(`create link ${name}`, errnoNumber('ENODEV'), undefined, {
        detail: 'gone right after creation',
      });
    return link;
  }

  /** The link, created when missing. `created` tells which; an existing link of another kind is returned as is. */
  async ensureLink(
    name: string,
    kind = 'dummy',
    opts: RouteCallOptions = {},
  ): Promise<{ link: Link; created: boolean }> {
    const existing = await this.getLink(name, opts);
    if (existing) return { link: existing, created: false };
    try {
      return { link: await this.createLink(name, kind, opts), created: true };
    } catch (e) {
      // Someone else created it in between.
      if (!isRouteExists(e)) throw e;
      const link = await this.getLink(name, opts);
      if (!link) throw e;
      return { link, created: false };
    }
  }

  async deleteLink(ref: LinkRef, opts: RouteCallOptions = {}): Promise<void> {
    const { index, name } = await this.resolve(ref, `delete link ${String(ref)}`, opts);
    await this.req(delLinkMessage(index, name), opts);
  }

  async setLinkUp(ref: LinkRef, up = true, opts: RouteCallOptions = {}): Promise<void> {
    const { index, name } = await this.resolve(ref, `set link ${String(ref)} ${up ? 'up' : 'down'}`, opts);
    await this.req(setLinkUpMessage(index, up, name), opts);
  }

  /** Binds an address (default /32 or /128, scope universe); EEXIST when it is already bound. */
  async addAddress(ref: LinkRef, address: string, opts: AddAddrOptions = {}): Promise<void> {
    const { index, name } = await this.resolve(ref, `add address ${address} to ${String(ref)}`, opts);
    await this.req(newAddrMessage(index, address, opts.prefixLen, opts, name), opts);
  }

  /** Binds an address unless already bound; true when it already was (upstream's EnsureAddressBind). */
  async ensureAddress(ref: LinkRef, address: string, opts: AddAddrOptions = {}): Promise<boolean> {
    try {
      await this.addAddress(ref, address, opts);
      return false;
    } catch (e) {
      if (isRouteExists(e)) return true;
      throw e;
    }
  }

  /** Unbinds an address; EADDRNOTAVAIL when it is not bound. */
  async deleteAddress(
    ref: LinkRef,
    address: string,
    opts: RouteCallOptions & { prefixLen?: number } = {},
  ): Promise<void> {
    const { index, name } = await this.resolve(ref, `delete address ${address} from ${String(ref)}`, opts);
    await this.req(delAddrMessage(index, address, opts.prefixLen, name), opts);
  }

  /** Addresses, optionally of one link and/or one family. */
  async listAddresses(filter: { link?: LinkRef; family?: IPFamily } & RouteCallOptions = {}): Promise<Addr[]> {
    const index =
      filter.link === undefined
        ? undefined
        : (await this.resolve(filter.link, `list addresses of ${String(filter.link)}`, filter)).index;
    const replies = await this.req(listAddrsMessage(filter.family, index), { ...filter, dump: true });
    return replies
      .filter((m) => m.type === RTM_NEWADDR)
      .map(decodeAddr)
      .filter(
        (a) =>
          (index === undefined || a.index === index) && (filter.family === undefined || a.family === filter.family),
      );
  }

  /**
   * The node's local addresses of one family, as upstream's GetAllLocalAddresses(Except)
   * selects them for NodePorts: loopback excluded, IPv6 link-local excluded, each address
   * once, sorted. `exceptLink` leaves out the addresses of one link (kube-ipvs0), unless
   * another link has them too.
   */
  async nodeAddresses(family: IPFamily, opts: { exceptLink?: string } & RouteCallOptions = {}): Promise<string[]> {
    const except = opts.exceptLink === undefined ? undefined : await this.getLink(opts.exceptLink, opts);
    const addrs = await this.listAddresses({ family, ...(opts.signal ? { signal: opts.signal } : {}) });
    return selectNodeAddresses(addrs, except?.index);
  }

  /**
   * One dump of a family's addresses, split: those bound to `link` (kube-ipvs0), and the
   * node's own elsewhere (nodeAddresses() with exceptLink). Both are wanted on a full IPVS
   * sync, and each dump walks every address of the node, the link's many VIPs included.
   */
  async linkAndNodeAddresses(
    link: LinkRef,
    family: IPFamily,
    opts: RouteCallOptions = {},
  ): Promise<{ link: string[]; node: string[] }> {
    const { index } = await this.resolve(link, `list addresses of ${String(link)}`, opts);
    const addrs = await this.listAddresses({ family, ...(opts.signal ? { signal: opts.signal } : {}) });
    return {
      link: addrs.filter((a) => a.index === index).map((a) => a.address),
      node: selectNodeAddresses(addrs, index),
    };
  }

  /**
   * Binds many addresses to one link, pipelined (ADDRS_PER_DATAGRAM per datagram; the kernel
   * handles each on its own, in order). One result per address: undefined when bound, else
   * its NetlinkError naming address and link (EEXIST when it already was; EINVAL for text
   * that is no address, never sent). Rejects only when the exchange itself fails.
   */
  async addAddresses(
    ref: LinkRef,
    addresses: readonly string[],
    opts: AddAddrOptions = {},
  ): Promise<(NetlinkError | undefined)[]> {
    if (addresses.length === 0) return [];
    const { index, name } = await this.resolve(ref, `add addresses to ${String(ref)}`, opts);
    return this.many(
      addresses,
      (a) => newAddrMessage(index, a, opts.prefixLen, opts, name),
      (a) => `add address ${a} to ${name}`,
      opts,
    );
  }

  /** Unbinds many addresses from one link, pipelined; as addAddresses() (EADDRNOTAVAIL when one is not bound). */
  async deleteAddresses(
    ref: LinkRef,
    addresses: readonly string[],
    opts: RouteCallOptions & { prefixLen?: number } = {},
  ): Promise<(NetlinkError | undefined)[]> {
    if (addresses.length === 0) return [];
    const { index, name } = await this.resolve(ref, `delete addresses from ${String(ref)}`, opts);
    return this.many(
      addresses,
      (a) => delAddrMessage(index, a, opts.prefixLen, name),
      (a) => `delete address ${a} from ${name}`,
      opts,
    );
  }

  private async many(
    addresses: readonly string[],
    build: (address: string) => OutMessage,
    label: (address: string) => string,
    opts: RouteCallOptions,
  ): Promise<(NetlinkError | undefined)[]> {
    const results = new Array<NetlinkError | undefined>(addresses.length).fill(undefined);
    const msgs: OutMessage[] = [];
    const at: number[] = [];
    addresses.forEach((a, i) => {
      try {
        msgs.push(build(a));
        at.push(i);
      } catch (e) {
        results[i] = new NetlinkError(label(a), errnoNumber('EINVAL'), { msg: errorMessage(e) }, { cause: e });
      }
    });
    const sig = opts.signal ? { signal: opts.signal } : {};
    let sent: (NetlinkError | undefined)[];
    if (this.nl.pipeline) sent = await this.nl.pipeline(msgs, { ...sig, perDatagram: ADDRS_PER_DATAGRAM });
    else {
      sent = [];
      for (const m of msgs) {
        try {
          await this.nl.request(m, sig);
          sent.push(undefined);
        } catch (e) {
          // The kernel's answer carries the request's label; anything else is the exchange failing.
          if (!(e instanceof NetlinkError) || e.op !== m.label) throw e;
          sent.push(e);
        }
      }
    }
    sent.forEach((e, j) => (results[at[j]!] = e));
    return results;
  }
}
