// hash: a hash of a register's bytes (jhash), or of the packet's skb hash (symhash), reduced
// to [offset, offset + modulus) into a register. nft: `jhash ip saddr mod M seed S`.
//   NFTA_HASH_SREG, NFTA_HASH_DREG, NFTA_HASH_LEN (bytes hashed), NFTA_HASH_MODULUS,
//   NFTA_HASH_SEED, NFTA_HASH_OFFSET, NFTA_HASH_TYPE (NFT_HASH_JENKINS, NFT_HASH_SYM); all be32.
// The kernel draws a random seed when NFTA_HASH_SEED is absent (nft_jhash_init), so a table
// meant to agree across nodes always sends one.
import type { AttrSet, AttrWriter } from '../../core/index.ts';
import type { ExprCodec } from './common.ts';
import { need, pick } from './common.ts';

const NFTA_HASH_SREG = 1,
  NFTA_HASH_DREG = 2,
  NFTA_HASH_LEN = 3,
  NFTA_HASH_MODULUS = 4,
  NFTA_HASH_SEED = 5,
  NFTA_HASH_OFFSET = 6,
  NFTA_HASH_TYPE = 7;
/** enum nft_hash_types. */
export const HashType = { jhash: 0, symhash: 1 } as const;

export interface HashExpr {
  type: 'hash';
  hash: keyof typeof HashType;
  /** jhash only: the register hashed and how many bytes of it. */
  sreg?: number;
  len?: number;
  modulus: number;
  seed?: number;
  offset?: number;
  dreg: number;
}

export const hash: ExprCodec<HashExpr> = {
  name: 'hash',
  encode(w: AttrWriter, e: HashExpr): void {
    // nft's order: sreg, dreg, len, modulus, seed, offset, type.
    if (e.hash === 'jhash') w.u32(NFTA_HASH_SREG, e.sreg ?? 1, 'net');
    w.u32(NFTA_HASH_DREG, e.dreg, 'net');
    if (e.hash === 'jhash') w.u32(NFTA_HASH_LEN, e.len ?? 4, 'net');
    w.u32(NFTA_HASH_MODULUS, e.modulus, 'net');
    if (e.seed !== undefined) w.u32(NFTA_HASH_SEED, e.seed, 'net');
    w.u32(NFTA_HASH_OFFSET, e.offset ?? 0, 'net');
    w.u32(NFTA_HASH_TYPE, HashType[e.hash], 'net');
  },
  decode(a: AttrSet): HashExpr {
    const e: HashExpr = {
      type: 'hash',
      hash: pick(a, HashType, a.u32(NFTA_HASH_TYPE, 'net') ?? HashType.jhash, 'hash type'),
      dreg: need(a, NFTA_HASH_DREG, a.u32(NFTA_HASH_DREG, 'net'), 'hash dreg'),
      modulus: need(a, NFTA_HASH_MODULUS, a.u32(NFTA_HASH_MODULUS, 'net'), 'hash modulus'),
    };
    const sreg = a.u32(NFTA_HASH_SREG, 'net');
    const len = a.u32(NFTA_HASH_LEN, 'net');
    const seed = a.u32(NFTA_HASH_SEED, 'net');
    const offset = a.u32(NFTA_HASH_OFFSET, 'net');
    if (sreg !== undefined) e.sreg = sreg;
    if (len !== undefined) e.len = len;
    if (seed !== undefined) e.seed = seed;
    if (offset !== undefined) e.offset = offset;
    return e;
  },
  // As nft --debug=netlink: "hash reg 1 = jhash(reg 1, 4, 0x00000000) % mod 1009".
  render: (e) =>
    e.hash === 'jhash'
      ? `hash reg ${e.dreg} = jhash(reg ${e.sreg ?? 1}, ${e.len ?? 4}, 0x${(e.seed ?? 0).toString(16).padStart(8, '0')}) % mod ${e.modulus}${e.offset ? ` offset ${e.offset}` : ''}`
      : `hash reg ${e.dreg} = symhash % mod ${e.modulus}${e.offset ? ` offset ${e.offset}` : ''}`,
};
