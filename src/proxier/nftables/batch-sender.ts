// Packs a full sync's groups into batches under a byte budget, and finds which service port
// a refused batch was refused for.
//
// A batch is all or nothing, so one object the kernel will not take (a name it cuts, a limit
// it enforces) would stop every batch it travels in, on every full sync, for ever. When the
// kernel refuses a batch, its groups are sent again in order, halving the refused range:
// the first half is sent; if it is taken (and committed: everything before a group is in the
// kernel, so a group never fails for want of a picker an earlier group brings), the refusal
// lies in the second half, otherwise in the first. At most ceil(log2(groups)) + 1 more
// sends find the first group the kernel refuses on its own. The proxier then starts the
// full sync again without that service port.

import { errorMessage } from '../../base/errors.ts';
import type { ServicePortId } from '../../model/index.ts';
import { NetlinkError } from '../../netlink/core/index.ts';
import { NftValidationError } from '../../netlink/nftables/index.ts';
import type { OpGroup } from './op-group.ts';

/** The kernel refused one service port's objects on their own (the cause says why). */
export class ServicePortRefusedError extends Error {
  override readonly name = 'ServicePortRefusedError';
  readonly id: ServicePortId;

  constructor(id: ServicePortId, cause: unknown) {
    super(`service port ${JSON.stringify(id)} refused: ${errorMessage(cause)}`, {
      cause,
    });
    this.id = id;
  }
}

/** Failures that say nothing about the batch's content: the transport's, not the kernel's verdict. */
const TRANSIENT = new Set(['ETIMEDOUT', 'EMSGSIZE', 'ENOBUFS', 'EINTR', 'EAGAIN', 'ECANCELED']);

/**
 * The kernel looked at the batch and said no (an errno about its content), or the encoder
 * refused it before sending (a name the kernel would cut or refuse).
 */
export const isRefusal = (e: unknown): boolean =>
  e instanceof NftValidationError || (e instanceof NetlinkError && !TRANSIENT.has(e.code));

interface Entry {
  readonly group: OpGroup;
  /** The service port the group programs; undefined for the skeleton and the deletions. */
  readonly owner: ServicePortId | undefined;
}

/**
 * Sends each batch as soon as the next group would not fit, in order. Adds up the runs'
 * times (encoding and the kernel's round trip), as `send` reports them.
 */
export class BatchSender {
  private pending: Entry[] = [];
  private bytes = 0;
  count = 0;
  kernelMs = 0;
  longestMs = 0;

  private readonly budget: number;
  /** Sends the groups as one batch; returns the run's duration, undefined when there was nothing to send. */
  private readonly send: (groups: readonly OpGroup[]) => Promise<number | undefined>;
  private readonly signal: AbortSignal;

  constructor(budget: number, send: (groups: readonly OpGroup[]) => Promise<number | undefined>, signal: AbortSignal) {
    this.budget = budget;
    this.send = send;
    this.signal = signal;
  }

  /** Whether `g` still fits in the pending batch (a first group always does). */
  fits(g: OpGroup): boolean {
    return this.bytes === 0 || this.bytes + g.bytes <= this.budget;
  }

  /** Adds `g` to the pending batch; the caller flushes first when it does not fit. */
  add(g: OpGroup, owner?: ServicePortId): void {
    this.pending.push({ group: g, owner });
    this.bytes += g.bytes;
  }

  async push(g: OpGroup): Promise<void> {
    if (!this.fits(g)) await this.flush();
    this.add(g);
  }

  /**
   * Sends the pending batch. A refusal is narrowed down to one service port and thrown as
   * ServicePortRefusedError; one that is not a service port's (the skeleton, the deletions)
   * is thrown as the kernel said it.
   */
  async flush(): Promise<void> {
    if (this.pending.length === 0) return;
    const entries = this.pending;
    this.pending = [];
    this.bytes = 0;
    try {
      await this.timed(entries);
    } catch (e) {
      if (!isRefusal(e) || this.signal.aborted || !entries.some((x) => x.owner !== undefined)) throw e;
      const found = entries.length === 1 ? { entry: entries[0]!, cause: e } : await this.firstRefused(entries, e);
      if (found === undefined) return; // taken in parts (the refusal did not repeat)
      if (found.entry.owner === undefined) throw found.cause;
      throw new ServicePortRefusedError(found.entry.owner, found.cause);
    }
  }

  private async timed(entries: readonly Entry[]): Promise<void> {
    const ms = await this.send(entries.map((x) => x.group));
    if (ms === undefined) return;
    this.count++;
    this.kernelMs += ms;
    this.longestMs = Math.max(this.longestMs, ms);
  }

  /**
   * `entries` (more than one) were refused together with `cause`: the first one refused
   * alone, or undefined when, sent in parts, all were taken after all.
   */
  private async firstRefused(
    entries: readonly Entry[],
    cause: unknown,
  ): Promise<{ entry: Entry; cause: unknown } | undefined> {
    let range = entries;
    let why = cause;
    let seenAlone = false;
    // Each pass halves the range: bounded by log2 of the batch's groups, plus one send to
    // see the last candidate refused on its own.
    while (range.length > 1 || !seenAlone) {
      const mid = Math.ceil(range.length / 2);
      const first = range.slice(0, mid);
      try {
        await this.timed(first);
        range = range.slice(mid); // taken and committed: the refusal is in the rest
        if (range.length === 0) return undefined;
      } catch (e) {
        if (!isRefusal(e) || this.signal.aborted) throw e;
        range = first;
        why = e;
        seenAlone = first.length === 1;
      }
    }
    return { entry: range[0]!, cause: why };
  }
}
