// The nfacct client: verb-named methods over a NetlinkTransport (Protocol.NETFILTER). One
// request per call; nfnetlink_acct has no batches.

import { isBusy, isExists, isNotFound, NetlinkError, errnoNumber } from '../core/index.ts';
import type { NetlinkTransport } from '../core/index.ts';
import { decodeCounter, delMessage, dumpMessage, getMessage, newMessage } from './object.ts';
import type { NfacctCounter } from './object.ts';

export interface NfacctCallOptions {
  signal?: AbortSignal;
}

export class NfacctClient {
  private readonly nl: NetlinkTransport;

  constructor(transport: NetlinkTransport) {
    this.nl = transport;
  }

  private call(msg: Parameters<NetlinkTransport['request']>[0], opts: NfacctCallOptions, dump = false) {
    return this.nl.request(msg, { ...(dump ? { dump: true } : {}), ...(opts.signal ? { signal: opts.signal } : {}) });
  }

  /** Creates the object with zero counters. An existing one is an error (EBUSY, as `nfacct add`). */
  async add(name: string, opts: NfacctCallOptions = {}): Promise<void> {
    await this.call(newMessage(name), opts);
  }

  /**
   * Creates the object unless it exists; an existing one keeps its counters (upstream's
   * nfacct Ensure: a restarted proxy keeps counting where it stopped).
   */
  async ensure(name: string, opts: NfacctCallOptions = {}): Promise<void> {
    try {
      await this.add(name, opts);
    } catch (e) {
      if (!isBusy(e) && !isExists(e)) throw e;
    }
  }

  /** The object's counters; ENOENT when it does not exist. */
  async get(name: string, opts: NfacctCallOptions = {}): Promise<NfacctCounter> {
    const [reply] = await this.call(getMessage(name), opts);
    if (!reply) throw new NetlinkError(`get nfacct ${name}`, errnoNumber('EIO'), undefined, { detail: 'no reply' });
    return decodeCounter(reply, `get nfacct ${name} reply`);
  }

  /** Every object of this namespace. */
  async list(opts: NfacctCallOptions = {}): Promise<NfacctCounter[]> {
    const replies = await this.call(dumpMessage(), opts, true);
    return replies.map((m, i) => decodeCounter(m, `list nfacct reply ${i}`));
  }

  /** Deletes the object; EBUSY while a rule refers to it. With `missingOk`, a missing one is no error. */
  async del(name: string, opts: NfacctCallOptions & { missingOk?: boolean } = {}): Promise<void> {
    try {
      await this.call(delMessage(name), opts);
    } catch (e) {
      if (!(opts.missingOk && isNotFound(e))) throw e;
    }
  }
}
