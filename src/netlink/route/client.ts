// The rtnetlink client for what kube-proxy's IPVS mode needs: the kube-ipvs0 dummy link, the
// service addresses bound to it, and the node's own addresses (for NodePorts).

import { errnoNumber, NetlinkError } from '../core/index.ts';
import type { NetlinkTransport } from '../core/index.ts';
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
import type { Addr, AddrFamily, AddrOptions, Link } from './types.ts';

/** A link by name, or by index (which saves a lookup). */
export type LinkRef = string | number;

export interface RouteCallOptions {
  signal?: AbortSignal;
}

export interface AddAddrOptions extends AddrOptions, RouteCallOptions {
  /** Default: a host prefix (/32 or /128), as upstream binds service addresses. */
  prefixLen?: number;
}

export class RouteClient {
  private readonly nl: NetlinkTransport;

  constructor(transport: NetlinkTransport) {
    this.nl = transport;
  }

  private req(msg: Parameters<NetlinkTransport['request']>[0], opts: RouteCallOptions & { dump?: boolean } = {}) {
    return this.nl.request(msg, { ...(opts.dump ? { dump: true } : {}), ...(opts.signal ? { signal: opts.signal } : {}) });
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

  /** Creates a link (kind "dummy" for kube-ipvs0). EEXIST when the name is taken; EOPNOTSUPP when the kernel lacks the kind. */
  async createLink(name: string, kind = 'dummy', opts: RouteCallOptions = {}): Promise<Link> {
    await this.req(newLinkMessage(name, kind), opts);
    const link = await this.getLink(name, opts);
    if (!link) throw new NetlinkError(`create link ${name}: gone right after creation`, errnoNumber('ENODEV'));
    return link;
  }

  /** The link, created when missing. `created` tells which; an existing link of another kind is returned as is. */
  async ensureLink(name: string, kind = 'dummy', opts: RouteCallOptions = {}): Promise<{ link: Link; created: boolean }> {
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
  async deleteAddress(ref: LinkRef, address: string, opts: RouteCallOptions & { prefixLen?: number } = {}): Promise<void> {
    const { index, name } = await this.resolve(ref, `delete address ${address} from ${String(ref)}`, opts);
    await this.req(delAddrMessage(index, address, opts.prefixLen, name), opts);
  }

  /** Addresses, optionally of one link and/or one family. */
  async listAddresses(filter: { link?: LinkRef; family?: AddrFamily } & RouteCallOptions = {}): Promise<Addr[]> {
    const index = filter.link === undefined ? undefined : (await this.resolve(filter.link, `list addresses of ${String(filter.link)}`, filter)).index;
    const replies = await this.req(listAddrsMessage(filter.family, index), { ...filter, dump: true });
    return replies
      .filter((m) => m.type === RTM_NEWADDR)
      .map(decodeAddr)
      .filter((a) => (index === undefined || a.index === index) && (filter.family === undefined || a.family === filter.family));
  }

  /**
   * The node's local addresses of one family, as upstream's GetAllLocalAddresses(Except)
   * selects them for NodePorts: loopback excluded, IPv6 link-local excluded, each address
   * once, sorted. `exceptLink` leaves out the addresses of one link (kube-ipvs0), unless
   * another link has them too.
   */
  async nodeAddresses(family: AddrFamily, opts: { exceptLink?: string } & RouteCallOptions = {}): Promise<string[]> {
    const except = opts.exceptLink === undefined ? undefined : await this.getLink(opts.exceptLink, opts);
    const addrs = await this.listAddresses({ family, ...(opts.signal ? { signal: opts.signal } : {}) });
    const out = new Set<string>();
    for (const a of addrs) {
      if (except && a.index === except.index) continue;
      const ip = parseIP(a.address);
      if (!ip) continue;
      const b = ip.bytes;
      if (ip.family === 'IPv4' && b[0] === 127) continue;
      if (ip.family === 'IPv6' && (a.address === '::1' || (b[0] === 0xfe && (b[1]! & 0xc0) === 0x80))) continue;
      out.add(a.address);
    }
    return [...out].sort();
  }
}
