// What a set's definition says about how its elements are encoded, shared by the set codec
// and the element encoders and decoder (kept apart from both so neither imports the other).

import type { NftSetLike } from './types.ts';

/** A set of ranges: elements travel as interval start and end (NFT_SET_INTERVAL). */
export const isInterval = (s: NftSetLike): boolean => s.flags?.includes('interval') ?? false;

/** Ranges of concatenated keys (NFT_SET_CONCAT): one element carries both ends (NFTA_SET_ELEM_KEY_END). */
export const isConcatInterval = (s: NftSetLike): boolean => isInterval(s) && s.key.length > 1;
