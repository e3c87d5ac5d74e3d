// The IPVS client: verb-named methods over plain structs (after moby/ipvs's Handle), on a
// NetlinkTransport of Protocol.GENERIC. The family id is resolved once per client through
// GenlFamilies; a kernel without IPVS fails with "get genl family IPVS: not available in this
// kernel: ENOENT". Every request has the transport's time-out and an optional AbortSignal.
//
// The kernel has no IPVS transactions: each method is one request, and applyMany() sends many
// of them pipelined (ops.ts), applied in list order, each on its own. Callers order them so
// that a VIP never points at nothing (add before remove). There is deliberately no "flush" for
// the proxier: deleteServices() removes only the services it is given; flushAll() is for tests.
//
// Errors from the kernel, as NetlinkError codes:
//   add service:   EEXIST (already there), ENOENT (no such scheduler: module ip_vs_<name> missing)
//   edit/delete/get service, any destination op on a missing service: ESRCH
//   add destination: EEXIST; edit/delete destination: ENOENT when it does not exist
//   bad values: EINVAL (weight < 0, thresholds, unknown protocol or family)

import { errorMessage } from '../../base/errors.ts';
import { errnoNumber, GenlFamilies, isNotFound, NetlinkError } from '../core/index.ts';
import type { NetlinkTransport, OutMessage } from '../core/index.ts';
import { IPVS_GENL_NAME } from './constants.ts';
import { opLabel, opMessage } from './ops.ts';
import type { IpvsOp } from './ops.ts';
import {
  delDestMessage,
  delServiceMessage,
  flushMessage,
  getConfigMessage,
  getDestsMessage,
  getInfoMessage,
  getServiceMessage,
  newDestMessage,
  newServiceMessage,
  parseConfigReply,
  parseDestReply,
  parseInfoReply,
  parseServiceReply,
  setConfigMessage,
  setDestMessage,
  setServiceMessage,
} from './messages.ts';
import type {
  IpvsDestination,
  IpvsDestinationKey,
  IpvsDestinationSpec,
  IpvsInfo,
  IpvsService,
  IpvsServiceKey,
  IpvsServiceSpec,
  IpvsTimeouts,
} from './types.ts';

export interface IpvsCallOptions {
  signal?: AbortSignal;
}

export interface ApplyManyOptions extends IpvsCallOptions {
  /** Requests per datagram (default IPVS_OPS_PER_DATAGRAM). */
  perDatagram?: number;
}

/**
 * What the client talks to: a NetlinkTransport, and NetlinkConnection's pipeline() for
 * applyMany(). Without pipeline(), applyMany() sends one request at a time (same results).
 */
export interface IpvsTransport extends NetlinkTransport {
  pipeline?(
    msgs: readonly OutMessage[],
    opts?: { signal?: AbortSignal; perDatagram?: number },
  ): Promise<(NetlinkError | undefined)[]>;
}

/**
 * Requests per datagram in applyMany(). The kernel handles a whole datagram before we read
 * any answer, and every failed request queues an error reply of its own that echoes the
 * request (an IPVS request is 60-150 bytes; the reply costs about 800 bytes of receive buffer,
 * as ctnetlink's do: see conntrack's DEFAULT_PER_DATAGRAM). The receive buffer is capped at
 * net.core.rmem_max doubled, 416 KiB with the stock 212992, so about 520 error replies fit.
 * Past that the kernel drops replies (ENOBUFS) and the datagram's exchange fails as a whole
 * (test/kernel/netlink-socket.test.ts). 256 leaves half the buffer spare even when every request of
 * a datagram fails (test/vm/scenarios/ipvs-netlink.ts sends 2,048 failing ones), and already
 * cuts a 60,000-request full sync to about 240 round trips.
 */
export const IPVS_OPS_PER_DATAGRAM = 256;

const hasCode = (e: unknown, ...codes: string[]): boolean => e instanceof NetlinkError && codes.includes(e.code);
/** The service named does not exist (edit, delete, get, and destination operations). */
export const isServiceNotFound = (e: unknown): boolean => hasCode(e, 'ESRCH');
/** The destination named does not exist (edit, delete). */
export const isDestinationNotFound = (e: unknown): boolean => hasCode(e, 'ENOENT');
/** The service or destination to add exists already. */
export const isIpvsExists = (e: unknown): boolean => hasCode(e, 'EEXIST');
/** add/edit service: the kernel has no such scheduler (and could not load ip_vs_<name>). */
export const isSchedulerMissing = (e: unknown): boolean => e instanceof IpvsSchedulerError;

/**
 * The kernel refused a scheduler (or persistence engine) name: ENOENT from NEW/SET_SERVICE,
 * which the kernel returns when request_module("ip_vs_<name>") found nothing.
 */
export class IpvsSchedulerError extends NetlinkError {
  readonly scheduler: string;
  readonly peName: string | undefined;
  constructor(op: string, scheduler: string, peName: string | undefined, cause: NetlinkError) {
    const what =
      peName === undefined
        ? `scheduler ${JSON.stringify(scheduler)} is not available (is module ip_vs_${scheduler} loadable?)`
        : `scheduler ${JSON.stringify(scheduler)} or persistence engine ${JSON.stringify(peName)} is not available (modules ip_vs_${scheduler}, ip_vs_pe_${peName})`;
    super(`${op}: ${what}`, cause.errno, cause.extack, { cause });
    this.scheduler = scheduler;
    this.peName = peName;
  }
}

/** ENOENT from NEW/SET_SERVICE is a missing scheduler (the family itself is resolved before). */
function schedulerError<E>(e: E, s: IpvsServiceSpec): E | IpvsSchedulerError {
  if (e instanceof NetlinkError && isNotFound(e)) return new IpvsSchedulerError(e.op, s.scheduler, s.peName, e);
  return e;
}

/** applyMany() on a transport without pipeline(): the same results, one round trip each. */
async function oneByOne(
  nl: NetlinkTransport,
  msgs: readonly OutMessage[],
  opts: IpvsCallOptions,
): Promise<(NetlinkError | undefined)[]> {
  const out: (NetlinkError | undefined)[] = [];
  for (const m of msgs) {
    try {
      await nl.request(m, opts);
      out.push(undefined);
    } catch (e) {
      // The kernel's answer to this request carries its label; anything else (a time-out, an
      // abort, lost replies) is the exchange failing, which applyMany() rejects with.
      if (!(e instanceof NetlinkError) || e.op !== m.label) throw e;
      out.push(e);
    }
  }
  return out;
}

export class IpvsClient {
  private readonly nl: IpvsTransport;
  private readonly families: GenlFamilies;

  /** `families` may be shared with other generic-netlink clients on the same transport. */
  constructor(transport: IpvsTransport, families: GenlFamilies = new GenlFamilies(transport)) {
    this.nl = transport;
    this.families = families;
  }

  /** The IPVS family id; rejects with a clear NetlinkError when the kernel has no IPVS. */
  async familyId(): Promise<number> {
    return (await this.families.resolve(IPVS_GENL_NAME)).id;
  }

  private async send(build: (family: number) => OutMessage, opts: IpvsCallOptions & { dump?: boolean } = {}) {
    const family = await this.familyId();
    return this.nl.request(build(family), {
      ...(opts.dump ? { dump: true } : {}),
      ...(opts.signal ? { signal: opts.signal } : {}),
    });
  }

  /** IPVS version and connection table size: also a cheap "is IPVS there" probe. */
  async info(opts: IpvsCallOptions = {}): Promise<IpvsInfo> {
    const [reply] = await this.send(getInfoMessage, opts);
    if (!reply) throw new NetlinkError('get ipvs info', errnoNumber('EIO'), undefined, { detail: 'no reply' });
    return parseInfoReply(reply);
  }

  async addService(s: IpvsServiceSpec, opts: IpvsCallOptions = {}): Promise<void> {
    await this.serviceCall((f) => newServiceMessage(f, s), s, opts);
  }

  /** Changes scheduler, flags, persistence timeout and netmask of an existing service. */
  async editService(s: IpvsServiceSpec, opts: IpvsCallOptions = {}): Promise<void> {
    await this.serviceCall((f) => setServiceMessage(f, s), s, opts);
  }

  private async serviceCall(
    build: (family: number) => OutMessage,
    s: IpvsServiceSpec,
    opts: IpvsCallOptions,
  ): Promise<void> {
    // Outside the try: a missing IPVS family (also ENOENT) keeps its own message.
    const family = await this.familyId();
    try {
      await this.send(() => build(family), opts);
    } catch (e) {
      throw schedulerError(e, s);
    }
  }

  /**
   * Applies the operations in list order, many per datagram (see ops.ts): a service added
   * earlier in the list exists for the operations after it, and a failed operation does not
   * stop the others. Resolves with one entry per operation: undefined when it took effect,
   * else its NetlinkError, named by the operation and object ("add ipvs destination
   * 10.0.0.1:8080 of TCP 10.96.0.1:80: ESRCH"); IpvsSchedulerError for an add/edit-service
   * the kernel has no scheduler for; EINVAL for a value the encoders refuse (never sent).
   * Rejects only when the exchange itself fails (no IPVS, time-out, abort, lost replies):
   * then which operations took effect is unknown, and the caller must read the kernel back.
   */
  async applyMany(ops: readonly IpvsOp[], opts: ApplyManyOptions = {}): Promise<(NetlinkError | undefined)[]> {
    const results = new Array<NetlinkError | undefined>(ops.length).fill(undefined);
    if (ops.length === 0) return results;
    const family = await this.familyId();
    const msgs: OutMessage[] = [];
    const index: number[] = [];
    ops.forEach((o, i) => {
      try {
        msgs.push(opMessage(family, o));
        index.push(i);
      } catch (e) {
        results[i] = new NetlinkError(opLabel(o), errnoNumber('EINVAL'), { msg: errorMessage(e) }, { cause: e });
      }
    });
    const sig = opts.signal ? { signal: opts.signal } : {};
    const sent = this.nl.pipeline
      ? await this.nl.pipeline(msgs, { ...sig, perDatagram: opts.perDatagram ?? IPVS_OPS_PER_DATAGRAM })
      : await oneByOne(this.nl, msgs, sig);
    sent.forEach((e, j) => {
      const i = index[j]!;
      const o = ops[i]!;
      results[i] = e && (o.op === 'add-service' || o.op === 'edit-service') ? schedulerError(e, o.service) : e;
    });
    return results;
  }

  /** Deletes one service and its destinations. */
  async deleteService(k: IpvsServiceKey, opts: IpvsCallOptions = {}): Promise<void> {
    await this.send((f) => delServiceMessage(f, k), opts);
  }

  /**
   * Deletes exactly the services named (those already gone are skipped); the "flush" the
   * proxier uses, since it must never touch services it does not own. Returns how many went.
   */
  async deleteServices(keys: Iterable<IpvsServiceKey>, opts: IpvsCallOptions = {}): Promise<number> {
    let n = 0;
    for (const k of keys) {
      try {
        await this.deleteService(k, opts);
        n++;
      } catch (e) {
        if (!isServiceNotFound(e)) throw e;
      }
    }
    return n;
  }

  /** One service, or undefined when the kernel has none by that key. */
  async getService(k: IpvsServiceKey, opts: IpvsCallOptions = {}): Promise<IpvsService | undefined> {
    try {
      const [reply] = await this.send((f) => getServiceMessage(f, k), opts);
      return reply ? parseServiceReply(reply) : undefined;
    } catch (e) {
      if (isServiceNotFound(e)) return undefined;
      throw e;
    }
  }

  /** Every virtual service in this network namespace (a dump). */
  async listServices(opts: IpvsCallOptions = {}): Promise<IpvsService[]> {
    const replies = await this.send((f) => getServiceMessage(f), { ...opts, dump: true });
    return replies.map(parseServiceReply);
  }

  async addDestination(k: IpvsServiceKey, d: IpvsDestinationSpec, opts: IpvsCallOptions = {}): Promise<void> {
    await this.send((f) => newDestMessage(f, k, d), opts);
  }

  /** Changes forwarding method, weight and thresholds (weight 0 drains a real server). */
  async editDestination(k: IpvsServiceKey, d: IpvsDestinationSpec, opts: IpvsCallOptions = {}): Promise<void> {
    await this.send((f) => setDestMessage(f, k, d), opts);
  }

  async deleteDestination(k: IpvsServiceKey, d: IpvsDestinationKey, opts: IpvsCallOptions = {}): Promise<void> {
    await this.send((f) => delDestMessage(f, k, d), opts);
  }

  /** The destinations of one service, with their connection counters and stats (a dump). */
  async listDestinations(k: IpvsServiceKey, opts: IpvsCallOptions = {}): Promise<IpvsDestination[]> {
    const replies = await this.send((f) => getDestsMessage(f, k), { ...opts, dump: true });
    return replies.map((m) => parseDestReply(m, k.family));
  }

  async getTimeouts(opts: IpvsCallOptions = {}): Promise<IpvsTimeouts> {
    const [reply] = await this.send(getConfigMessage, opts);
    if (!reply) throw new NetlinkError('get ipvs timeouts', errnoNumber('EIO'), undefined, { detail: 'no reply' });
    return parseConfigReply(reply);
  }

  /** Sets the time-outs given; absent or 0 leaves a value as it is (the kernel's rule). */
  async setTimeouts(t: Partial<IpvsTimeouts>, opts: IpvsCallOptions = {}): Promise<void> {
    await this.send((f) => setConfigMessage(f, t), opts);
  }

  /** Removes every service of this network namespace, ours or not. For tests only. */
  async flushAll(opts: IpvsCallOptions = {}): Promise<void> {
    await this.send(flushMessage, opts);
  }
}
