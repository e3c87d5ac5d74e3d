// Two views the proxier diffs: the desired index (every port's plan, with owners counted, since
// two ports can share an address, a set entry or, rarely, a virtual server) and the applied
// mirror (what we know the kernel holds: filled by our own successful calls, replaced by a
// kernel read on a full sync).

import type { ServicePortId } from '../../model/index.ts';
import type { IpsetEntry } from '../../netlink/ipset/index.ts';
import type { IpvsAddrKey } from '../../netlink/ipvs/index.ts';
import type { SetKey } from './names.ts';
import type { NoNodeAccess, PortPlan, VsPlan } from './plan.ts';

/** Keys touched by a change: only these are compared and written. */
export interface Touched {
  vss: Set<string>;
  addrs: Set<string>;
  entries: Map<SetKey, Set<string>>;
}

export const newTouched = (): Touched => ({ vss: new Set(), addrs: new Set(), entries: new Map() });

function touchEntry(t: Touched, set: SetKey, key: string): void {
  let s = t.entries.get(set);
  if (!s) t.entries.set(set, (s = new Set()));
  s.add(key);
}

/** A key owned by one or more service ports; the first owner's value wins. */
class Owned<V> {
  readonly map = new Map<string, Map<ServicePortId, V>>();
  add(key: string, id: ServicePortId, v: V): void {
    let m = this.map.get(key);
    if (!m) this.map.set(key, (m = new Map()));
    m.set(id, v);
  }
  remove(key: string, id: ServicePortId): void {
    const m = this.map.get(key);
    if (!m) return;
    m.delete(id);
    if (m.size === 0) this.map.delete(key);
  }
  get(key: string): V | undefined {
    const m = this.map.get(key);
    if (!m) return undefined;
    for (const v of m.values()) return v;
    return undefined;
  }
  has(key: string): boolean {
    return this.map.has(key);
  }
}

export class DesiredIndex {
  readonly ports = new Map<ServicePortId, PortPlan>();
  readonly vss = new Owned<VsPlan>();
  readonly addrs = new Owned<true>();
  readonly entries = new Map<SetKey, Owned<IpsetEntry>>();

  private set(key: SetKey): Owned<IpsetEntry> {
    let s = this.entries.get(key);
    if (!s) this.entries.set(key, (s = new Owned()));
    return s;
  }

  /** Replaces a port's plan (undefined: the port is gone), recording what it touched. */
  setPort(id: ServicePortId, plan: PortPlan | undefined, t: Touched): void {
    const old = this.ports.get(id);
    if (old) {
      for (const v of old.vss) {
        this.vss.remove(v.key, id);
        t.vss.add(v.key);
      }
      for (const a of old.binds) {
        this.addrs.remove(a, id);
        t.addrs.add(a);
      }
      for (const e of old.entries) {
        this.set(e.set).remove(e.key, id);
        touchEntry(t, e.set, e.key);
      }
      this.ports.delete(id);
    }
    if (!plan) return;
    this.ports.set(id, plan);
    for (const v of plan.vss) {
      this.vss.add(v.key, id, v);
      t.vss.add(v.key);
    }
    for (const a of plan.binds) {
      this.addrs.add(a, id, true);
      t.addrs.add(a);
    }
    for (const e of plan.entries) {
      this.set(e.set).add(e.key, id, e.entry);
      touchEntry(t, e.set, e.key);
    }
  }

  clear(): void {
    this.ports.clear();
    this.vss.map.clear();
    this.addrs.map.clear();
    this.entries.clear();
  }

  /** Non-empty sets, for the companion rules (upstream writes a set's rules only when it has entries). */
  nonEmptySets(): Set<SetKey> {
    const out = new Set<SetKey>();
    for (const [k, s] of this.entries) if (s.map.size > 0) out.add(k);
    return out;
  }

  noNodeAccess(): NoNodeAccess[] {
    const out = new Map<string, NoNodeAccess>();
    for (const p of this.ports.values()) for (const n of p.noNodeAccess) out.set(`${n.ip},${n.protocol}:${n.port}`, n);
    return [...out.values()];
  }
}

export interface AppliedDest {
  address: string;
  port: number;
  weight: number;
}

export interface AppliedVs {
  addr: IpvsAddrKey;
  scheduler: string;
  flags: number;
  timeout: number;
  dests: Map<string, AppliedDest>;
}

export class AppliedMirror {
  vss = new Map<string, AppliedVs>();
  addrs = new Set<string>();
  entries = new Map<SetKey, Map<string, IpsetEntry>>();

  set(key: SetKey): Map<string, IpsetEntry> {
    let s = this.entries.get(key);
    if (!s) this.entries.set(key, (s = new Map()));
    return s;
  }
}
