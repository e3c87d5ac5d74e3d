// The normalized inputs the tracker has accepted, as two layers: applied (what the published
// state was computed from at the last checkout) and pending (what arrived since). Comparing
// each arrival with the applied layer is what makes an undone change no change at all.

import { deepEqual } from './equal.ts';
import type { ServiceKey } from './ids.ts';
import type { SliceInfo } from './slice.ts';
import type { ServicePortInfo } from './types.ts';

const NO_PORTS: readonly ServicePortInfo[] = Object.freeze([]);

export class InputStore {
  private readonly appliedServices = new Map<ServiceKey, readonly ServicePortInfo[]>();
  /** Normalized Services not yet applied; an empty list means "gone". */
  private readonly pendingServices = new Map<ServiceKey, readonly ServicePortInfo[]>();
  private readonly appliedSlices = new Map<ServiceKey, Map<string, SliceInfo>>();
  /** Per Service, per slice name: the slice not yet applied (undefined: removed). */
  private readonly pendingSlices = new Map<ServiceKey, Map<string, SliceInfo | undefined>>();
  private pendingSliceCount = 0;
  /** "ns/sliceName" -> the Service the slice was last filed under. */
  private readonly owners = new Map<string, ServiceKey>();

  get pendingServiceCount(): number {
    return this.pendingServices.size;
  }

  get pendingSlicesCount(): number {
    return this.pendingSliceCount;
  }

  servicePorts(key: ServiceKey): readonly ServicePortInfo[] {
    return this.appliedServices.get(key) ?? NO_PORTS;
  }

  slices(key: ServiceKey): ReadonlyMap<string, SliceInfo> | undefined {
    return this.appliedSlices.get(key);
  }

  setService(key: ServiceKey, ports: readonly ServicePortInfo[]): void {
    if (deepEqual(ports, this.servicePorts(key))) this.pendingServices.delete(key);
    else this.pendingServices.set(key, ports);
  }

  /**
   * Files a slice (undefined: removed) under a Service, first withdrawing it from the Service it
   * was filed under before if that differs. Returns whether this changed what is pending.
   */
  setSlice(objKey: string, name: string, key: ServiceKey, info: SliceInfo | undefined): boolean {
    const owner = this.owners.get(objKey);
    let changed = false;
    if (owner !== undefined && owner !== key) {
      this.owners.delete(objKey);
      changed = this.setPendingSlice(owner, name, undefined);
    }
    if (info === undefined) this.owners.delete(objKey);
    else this.owners.set(objKey, key);
    return this.setPendingSlice(key, name, info) || changed;
  }

  /** The Service a slice is filed under (a removal carries no trustworthy labels). */
  ownerOf(objKey: string): ServiceKey | undefined {
    return this.owners.get(objKey);
  }

  private setPendingSlice(key: ServiceKey, name: string, info: SliceInfo | undefined): boolean {
    const applied = this.appliedSlices.get(key)?.get(name);
    let pend = this.pendingSlices.get(key);
    const latest = pend?.has(name) ? pend.get(name) : applied;
    if (deepEqual(info, latest)) return false;
    if (pend?.has(name) && deepEqual(info, applied)) {
      // Back to what is applied: nothing left to do for this slice.
      pend.delete(name);
      this.pendingSliceCount--;
      if (pend.size === 0) this.pendingSlices.delete(key);
      return true;
    }
    if (!pend) this.pendingSlices.set(key, (pend = new Map()));
    if (!pend.has(name)) this.pendingSliceCount++;
    pend.set(name, info);
    return true;
  }

  /** Moves everything pending to applied; returns the Services touched. */
  apply(): Set<ServiceKey> {
    const keys = new Set<ServiceKey>(this.pendingServices.keys());
    for (const key of this.pendingSlices.keys()) keys.add(key);
    // forEach rather than for-of: no [key, value] pair per entry (a first checkout has one per Service).
    this.pendingServices.forEach((ports, key) => {
      if (ports.length === 0) this.appliedServices.delete(key);
      else this.appliedServices.set(key, ports);
    });
    this.pendingServices.clear();
    this.pendingSlices.forEach((slices, key) => {
      let applied = this.appliedSlices.get(key);
      slices.forEach((info, name) => {
        if (info === undefined) applied?.delete(name);
        else {
          if (!applied) this.appliedSlices.set(key, (applied = new Map()));
          applied.set(name, info);
        }
      });
      if (applied?.size === 0) this.appliedSlices.delete(key);
    });
    this.pendingSlices.clear();
    this.pendingSliceCount = 0;
    return keys;
  }
}
