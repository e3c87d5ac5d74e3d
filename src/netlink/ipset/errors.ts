// ipset's own errno range (4096 and up) named, and the predicates callers branch on.

import { errnoName, NetlinkError } from '../core/index.ts';
import {
  IPSET_BITMAP_ERRORS,
  IPSET_ERR_PRIVATE,
  IPSET_ERR_TYPE_SPECIFIC,
  IPSET_ERRORS,
  IPSET_HASH_ERRORS,
  IPSET_LIST_ERRORS,
} from './constants.ts';

/**
 * The name of an errno an ipset request came back with: a system errno ("ENOENT"), a generic
 * ipset one ("IPSET_ERR_EXIST"), or a type-specific one, which depends on the set's type
 * ("IPSET_ERR_HASH_FULL" for hash:*, "IPSET_ERR_BITMAP_RANGE" for bitmap:*).
 */
export function ipsetErrorName(errno: number, setType?: string): string {
  if (errno < IPSET_ERR_PRIVATE) return errnoName(errno);
  if (errno < IPSET_ERR_TYPE_SPECIFIC) return IPSET_ERRORS[errno - IPSET_ERR_PRIVATE] ?? `IPSET_ERR ${errno}`;
  const table = setType?.startsWith('bitmap:')
    ? IPSET_BITMAP_ERRORS
    : setType?.startsWith('list:')
      ? IPSET_LIST_ERRORS
      : setType?.startsWith('hash:')
        ? IPSET_HASH_ERRORS
        : undefined;
  return table?.[errno - IPSET_ERR_TYPE_SPECIFIC] ?? `IPSET_ERR_TYPE_SPECIFIC+${errno - IPSET_ERR_TYPE_SPECIFIC}`;
}

/** Re-labels a NetlinkError from the transport with ipset's errno names (and, optionally, a new op). */
export function ipsetError(e: unknown, setType?: string, op?: string): unknown {
  if (!(e instanceof NetlinkError)) return e;
  const code = ipsetErrorName(e.errno, setType);
  if (code === e.code && op === undefined) return e;
  const kept = {
    ...(e.echo ? { echo: e.echo } : {}),
    ...(e.detail !== undefined ? { detail: e.detail } : {}),
    ...(e.seq !== undefined ? { seq: e.seq } : {}),
  };
  return new NetlinkError(op ?? e.op, e.errno, e.extack, { cause: e, code, ...kept });
}

const hasCode = (e: unknown, ...codes: string[]): boolean => e instanceof NetlinkError && codes.includes(e.code);

/** add: the entry is already in the set; del: it is not; test: it is not. */
export const isEntryExists = (e: unknown): boolean => hasCode(e, 'IPSET_ERR_EXIST');
/** create: a set of that name exists (and differs, or the create was exclusive). */
export const isSetExists = (e: unknown): boolean => hasCode(e, 'EEXIST');
/** rename: the new name is taken; swap: the second set does not exist (one errno, two meanings). */
export const isSecondSetError = (e: unknown): boolean => hasCode(e, 'IPSET_ERR_EXIST_SETNAME2');
/** The set named does not exist (destroy, flush, add, list, ...). */
export const isSetNotFound = (e: unknown): boolean => hasCode(e, 'ENOENT');
/** The set is referenced by a rule (destroy) or being listed: try again later. */
export const isSetBusy = (e: unknown): boolean => hasCode(e, 'IPSET_ERR_BUSY', 'IPSET_ERR_REFERENCED');
