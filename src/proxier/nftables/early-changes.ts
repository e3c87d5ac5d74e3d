// Changes a full sync let through while it read the kernel (before it writes anything, the
// kernel is what the last sync left, so they are ordinary partial syncs of the mirror). What
// they did is recorded (OpGroup.effects) and replayed, in order, onto what was read: a set
// listed before a change saw the old elements, one listed after saw the new, and replaying
// makes both the same. So the full sync compares with the kernel as it is, and never deletes
// an element twice or misses one a change added.

import type { ChangeSet } from '../../model/index.ts';
import type { NftElement } from '../../netlink/nftables/index.ts';
import type { OpEffects } from './op-group.ts';

export interface KernelRead {
  chains: Set<string>;
  sets: Set<string>;
  elements: Map<string, { element: NftElement; value: string }>;
}

export class EarlyChanges {
  /** What each change applied did, in order (a group's effects each: a change has several). */
  readonly effects: OpEffects[] = [];
  /** Changes applied (the daemon's `changesWhileReading`, with the deferred ones). */
  applied = 0;
  /** Changes taken but too large for one batch: the full sync writes them (and says so after). */
  readonly deferred: ChangeSet[] = [];

  /** Replays the recorded effects onto `read` (elements only of the sets `tracked` says are read). */
  correct(
    read: KernelRead,
    tracked: (set: string) => boolean,
    idOf: (e: NftElement) => string,
    valueOf: (e: NftElement) => string,
  ): void {
    for (const fx of this.effects) {
      for (const c of fx.chainsAdded) read.chains.add(c);
      for (const s of fx.setsAdded) read.sets.add(s);
      for (const e of fx.elementDeletes) if (tracked(e.set)) read.elements.delete(idOf(e));
      for (const e of fx.elementAdds) if (tracked(e.set)) read.elements.set(idOf(e), { element: e, value: valueOf(e) });
      for (const c of fx.chainsRemoved) read.chains.delete(c);
      for (const s of fx.setsRemoved) {
        read.sets.delete(s);
        for (const [id, k] of read.elements) if (k.element.set === s) read.elements.delete(id);
      }
    }
  }
}
