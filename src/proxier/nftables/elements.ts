// Set and map elements several service ports may contribute (two ports of one Service share
// a cluster IP; two Services may share an endpoint IP in `hairpin`). Each element is counted
// by its contributors: it is added when the first one appears and deleted when the last one
// goes. Map elements with different data under one key are a conflict: the first owner
// keeps the key and the conflict is reported.

import type { NftElement } from '../../netlink/nftables/index.ts';

export interface Contribution {
  /** Stable text of set + key, e.g. "service-ips|10.96.0.1 . tcp . 80". */
  readonly id: string;
  readonly element: NftElement;
  /** Text of the data (verdict or values), to tell a changed value from the same one. */
  readonly value: string;
}

interface Entry {
  element: NftElement;
  value: string;
  owners: Set<string>;
}

export interface ElementDelta {
  add: NftElement[];
  /** Elements whose data changed: deleted and re-added in the same transaction. */
  replace: NftElement[];
  remove: NftElement[];
  conflicts: string[];
}

export const emptyDelta = (): ElementDelta => ({ add: [], replace: [], remove: [], conflicts: [] });

export class ElementIndex {
  private readonly entries = new Map<string, Entry>();

  get size(): number {
    return this.entries.size;
  }

  has(id: string): boolean {
    return this.entries.has(id);
  }

  /** All elements currently held, for a full comparison with the kernel. */
  *all(): Generator<[string, NftElement, string]> {
    for (const [id, e] of this.entries) yield [id, e.element, e.value];
  }

  /**
   * Moves `owner` from its old contributions to its new ones and records in `delta` what
   * the kernel must see change.
   */
  update(owner: string, before: readonly Contribution[], after: readonly Contribution[], delta: ElementDelta): void {
    const next = new Map(after.map((c) => [c.id, c]));
    for (const c of before) {
      const n = next.get(c.id);
      if (n && n.value === c.value) {
        next.delete(c.id);
        continue;
      }
      const e = this.entries.get(c.id);
      if (!e || !e.owners.delete(owner)) continue;
      if (e.owners.size === 0) {
        this.entries.delete(c.id);
        if (n) {
          // Same key, new value, no one else holds it: replace in place.
          this.entries.set(c.id, { element: n.element, value: n.value, owners: new Set([owner]) });
          delta.replace.push(n.element);
          next.delete(c.id);
        } else delta.remove.push(e.element);
      }
    }
    for (const c of next.values()) {
      const e = this.entries.get(c.id);
      if (!e) {
        this.entries.set(c.id, { element: c.element, value: c.value, owners: new Set([owner]) });
        delta.add.push(c.element);
      } else if (e.value === c.value) {
        e.owners.add(owner);
      } else {
        delta.conflicts.push(`${c.id}: wanted by ${owner} as ${c.value}, held by ${[...e.owners].join(', ')} as ${e.value}`);
      }
    }
  }
}
