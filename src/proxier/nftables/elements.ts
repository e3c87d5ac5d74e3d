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

/**
 * What the index keeps per element: its data and who contributes it. Not the element itself:
 * a contribution is rebuilt by planning the port again when it changes, which keeps the
 * index small (a daemon holds one entry per element of a large cluster).
 */
interface Entry {
  value: string;
  /** One owner (the common case) or several. */
  owners: string | string[];
}

const hasOwner = (e: Entry, owner: string): boolean => (typeof e.owners === 'string' ? e.owners === owner : e.owners.includes(owner));
const ownerList = (e: Entry): string[] => (typeof e.owners === 'string' ? [e.owners] : e.owners);

/** Removes `owner`; true when nobody is left. */
function dropOwner(e: Entry, owner: string): boolean {
  if (typeof e.owners === 'string') return true;
  e.owners = e.owners.filter((o) => o !== owner);
  if (e.owners.length === 1) e.owners = e.owners[0]!;
  return false;
}

function addOwner(e: Entry, owner: string): void {
  e.owners = typeof e.owners === 'string' ? [e.owners, owner] : [...e.owners, owner];
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

  /** The data held under `id`, if any element is. */
  valueOf(id: string): string | undefined {
    return this.entries.get(id)?.value;
  }

  /**
   * Moves `owner` from its old contributions to its new ones and records in `delta` what
   * the kernel must see change.
   */
  update(owner: string, before: readonly Contribution[], after: readonly Contribution[], delta: ElementDelta): void {
    if (before.length === 0) {
      // A new owner (every port of a full sync): no per-call map, which costs more than the
      // work itself at a hundred thousand elements.
      for (const c of after) this.take(owner, c, delta);
      return;
    }
    const next = new Map(after.map((c) => [c.id, c]));
    for (const c of before) {
      const n = next.get(c.id);
      if (n && n.value === c.value) {
        next.delete(c.id);
        continue;
      }
      const e = this.entries.get(c.id);
      if (!e || !hasOwner(e, owner) || e.value !== c.value) continue;
      if (!dropOwner(e, owner)) continue;
      this.entries.delete(c.id);
      if (n) {
        // Same key, new value, no one else holds it: replace in place.
        this.entries.set(c.id, { value: n.value, owners: owner });
        delta.replace.push(n.element);
        next.delete(c.id);
      } else delta.remove.push(c.element);
    }
    for (const c of next.values()) this.take(owner, c, delta);
  }

  /** `owner` contributes `c`: a new element, one more owner of the same one, or a conflict. */
  private take(owner: string, c: Contribution, delta: ElementDelta): void {
    const e = this.entries.get(c.id);
    if (!e) {
      this.entries.set(c.id, { value: c.value, owners: owner });
      delta.add.push(c.element);
    } else if (e.value === c.value) {
      if (!hasOwner(e, owner)) addOwner(e, owner);
    } else if (!hasOwner(e, owner)) {
      delta.conflicts.push(`${c.id}: wanted by ${owner} as ${c.value}, held by ${ownerList(e).join(', ')} as ${e.value}`);
    }
  }
}
