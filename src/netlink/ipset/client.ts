// The ipset client: verb-named methods over a NetlinkTransport (Protocol.NETFILTER).
//
// ipset has no nfnetlink transactions (the kernel refuses batches for this subsystem), so
// every method is one request. Bulk adds and deletes go as ADT lists, the way `ipset restore`
// sends them: thousands of entries per message, applied in order until the first failure,
// which the kernel reports with the failing entry's line number.

import { errnoNumber, NetlinkError } from '../core/index.ts';
import type { NetlinkTransport } from '../core/index.ts';
import { IPSET_FLAG_LIST_HEADER, IPSET_FLAG_LIST_SETNAME } from './constants.ts';
import {
  adtBulkMessages,
  adtMessage,
  createMessage,
  decodeList,
  destroyMessage,
  echoedLineno,
  entryProblem,
  flushMessage,
  formatEntry,
  getByNameMessage,
  listMessage,
  parseByNameReply,
  parseTypeReply,
  renameMessage,
  swapMessage,
  typeMessage,
} from './codec.ts';
import { ipsetError, isEntryExists } from './errors.ts';
import type { IpsetCreateOptions, IpsetEntry, IpsetFamily, IpsetHeader, IpsetInfo, IpsetType } from './types.ts';

export interface IpsetCallOptions {
  signal?: AbortSignal;
}

export interface IpsetAdtOptions extends IpsetCallOptions {
  /** Add: an entry already present is not an error; del: a missing one is not (`ipset -exist`). */
  exist?: boolean;
  /** The set's type, for naming type-specific errors ("IPSET_ERR_HASH_FULL"). */
  type?: string;
}

/** What a caller needs to know to validate entries: the set's type and family. */
export interface IpsetRef {
  name: string;
  type: IpsetType;
  family?: IpsetFamily;
}

export class IpsetClient {
  private readonly nl: NetlinkTransport;
  private readonly revisions = new Map<string, number>();

  constructor(transport: NetlinkTransport) {
    this.nl = transport;
  }

  private async call(
    msg: Parameters<NetlinkTransport['request']>[0],
    setType: string | undefined,
    opts: IpsetCallOptions & { dump?: boolean } = {},
  ) {
    try {
      return await this.nl.request(msg, {
        ...(opts.dump ? { dump: true } : {}),
        ...(opts.signal ? { signal: opts.signal } : {}),
      });
    } catch (e) {
      throw ipsetError(e, setType);
    }
  }

  /** The highest revision of `type` the kernel supports (cached). Fails with IPSET_ERR_FIND_TYPE when it has none. */
  async typeRevision(type: IpsetType, family?: IpsetFamily, opts: IpsetCallOptions = {}): Promise<number> {
    const key = `${type}/${family ?? 'inet'}`;
    const cached = this.revisions.get(key);
    if (cached !== undefined) return cached;
    const replies = await this.call(typeMessage(type, family), type, opts);
    const first = replies[0];
    if (!first) throw new NetlinkError(`get ipset type ${type}`, errnoNumber('EIO'), undefined, { detail: 'no reply' });
    const { revision } = parseTypeReply(first);
    this.revisions.set(key, revision);
    return revision;
  }

  /**
   * Creates a set. With `exist`, an identical existing set is not an error (a different one
   * still is: EEXIST). Type support is checked first, so a kernel without the type answers
   * IPSET_ERR_FIND_TYPE naming it.
   */
  async create(
    name: string,
    type: IpsetType,
    opts: IpsetCreateOptions & IpsetCallOptions & { exist?: boolean } = {},
  ): Promise<void> {
    const revision = opts.revision ?? (await this.typeRevision(type, opts.family, opts));
    await this.call(createMessage(name, type, revision, opts, opts.exist ?? false), type, opts);
  }

  async destroy(name: string, opts: IpsetCallOptions = {}): Promise<void> {
    await this.call(destroyMessage(name), undefined, opts);
  }

  async flush(name: string, opts: IpsetCallOptions = {}): Promise<void> {
    await this.call(flushMessage(name), undefined, opts);
  }

  async rename(from: string, to: string, opts: IpsetCallOptions = {}): Promise<void> {
    await this.call(renameMessage(from, to), undefined, opts);
  }

  /** Swaps the contents (and types) of two sets atomically; rules keep pointing at the names. */
  async swap(a: string, b: string, opts: IpsetCallOptions = {}): Promise<void> {
    await this.call(swapMessage(a, b), undefined, opts);
  }

  async add(set: string, entry: IpsetEntry, opts: IpsetAdtOptions = {}): Promise<void> {
    await this.call(adtMessage('add', set, entry, opts.exist ?? false), opts.type, opts);
  }

  async del(set: string, entry: IpsetEntry, opts: IpsetAdtOptions = {}): Promise<void> {
    await this.call(adtMessage('del', set, entry, opts.exist ?? false), opts.type, opts);
  }

  /** True when the entry is in the set. */
  async test(set: string, entry: IpsetEntry, opts: IpsetAdtOptions = {}): Promise<boolean> {
    try {
      await this.call(adtMessage('test', set, entry), opts.type, opts);
      return true;
    } catch (e) {
      if (isEntryExists(e)) return false;
      throw e;
    }
  }

  /**
   * Adds many entries with as few messages as possible (ADT lists, ~1,500 entries each). The
   * kernel applies a message's entries in order and stops at the first failure: entries
   * before it stay added. The error names the failing entry and its position.
   */
  addMany(set: string, entries: readonly IpsetEntry[], opts: IpsetAdtOptions = {}): Promise<void> {
    return this.bulk('add', set, entries, opts);
  }

  /** Deletes many entries (see addMany). With `exist`, entries already gone are skipped. */
  delMany(set: string, entries: readonly IpsetEntry[], opts: IpsetAdtOptions = {}): Promise<void> {
    return this.bulk('del', set, entries, opts);
  }

  private async bulk(
    cmd: 'add' | 'del',
    set: string,
    entries: readonly IpsetEntry[],
    opts: IpsetAdtOptions,
  ): Promise<void> {
    if (entries.length === 0) return;
    const { msgs } = adtBulkMessages(cmd, set, entries, opts.exist ?? false);
    for (const msg of msgs) {
      try {
        await this.nl.request(msg, opts.signal ? { signal: opts.signal } : {});
      } catch (e) {
        // The kernel echoes the request with LINENO set to the failing entry's (1-based, over all entries).
        const line = e instanceof NetlinkError && e.echo ? echoedLineno(e.echo) : undefined;
        const bad = line !== undefined ? entries[line - 1] : undefined;
        const op = bad
          ? `${cmd} ${formatEntry(bad)} ${cmd === 'add' ? 'to' : 'from'} ipset ${set} (entry ${line} of ${entries.length})`
          : undefined;
        throw ipsetError(e, opts.type, op);
      }
    }
  }

  /** Every set with its members (or one set when `name` is given). */
  async list(name?: string, opts: IpsetCallOptions = {}): Promise<IpsetInfo[]> {
    return decodeList(await this.call(listMessage(name), undefined, { ...opts, dump: true }));
  }

  /** One set with its members; ENOENT when it does not exist. */
  async get(name: string, opts: IpsetCallOptions = {}): Promise<IpsetInfo> {
    const [info] = await this.list(name, opts);
    if (!info) throw new NetlinkError(`list ipset ${name}`, errnoNumber('ENOENT'));
    return info;
  }

  /** Headers only (type, family, sizes, references, element count), no members. */
  async headers(name?: string, opts: IpsetCallOptions = {}): Promise<IpsetHeader[]> {
    const sets = decodeList(
      await this.call(listMessage(name, IPSET_FLAG_LIST_HEADER), undefined, { ...opts, dump: true }),
    );
    return sets.map(({ entries: _entries, ...h }) => h);
  }

  /** The names of all sets in this namespace. */
  async names(opts: IpsetCallOptions = {}): Promise<string[]> {
    return decodeList(
      await this.call(listMessage(undefined, IPSET_FLAG_LIST_SETNAME), undefined, { ...opts, dump: true }),
    ).map((s) => s.name);
  }

  /** The kernel index of a set, which xt_set matches refer to; ENOENT when it does not exist. */
  async getByName(
    name: string,
    opts: IpsetCallOptions = {},
  ): Promise<{ index: number; family: IpsetFamily | 'unspec' }> {
    const replies = await this.call(getByNameMessage(name), undefined, opts);
    const first = replies[0];
    if (!first)
      throw new NetlinkError(`get index of ipset ${name}`, errnoNumber('EIO'), undefined, { detail: 'no reply' });
    return parseByNameReply(first);
  }
}

/** Validates entries before they are sent; returns "entry: reason" lines for the bad ones. */
export function invalidEntries(ref: IpsetRef, entries: readonly IpsetEntry[]): string[] {
  const out: string[] = [];
  for (const e of entries) {
    const p = entryProblem(ref.type, ref.family ?? 'inet', e);
    if (p) out.push(`${formatEntry(e)}: ${p}`);
  }
  return out;
}
