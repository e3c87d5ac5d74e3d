// Sets and maps (NEWSET), with the metadata nft writes so that `nft list ruleset` prints
// them as it would its own:
//
//   NFTA_SET_TABLE, NAME, FLAGS, KEY_TYPE (nft datatype id; concat ids 6 bits apart), KEY_LEN,
//   [DATA_TYPE (id, or NFT_DATA_VERDICT), DATA_LEN], ID (batch-local), [DESC { [SIZE],
//   [CONCAT { ELEM { FIELD_LEN } ... }] }], [TIMEOUT be64 ms], [GC_INTERVAL be32 ms], USERDATA
//
//   USERDATA (nftnl udata TLVs): KEYBYTEORDER u32, [DATABYTEORDER], [KEY_TYPEOF nest],
//   [DATA_TYPEOF nest], [DATA_INTERVAL u32 = 0, maps only], [COMMENT string]
//
// nft sends DESC only for interval sets with concatenated keys (with NFT_SET_CONCAT), and
// for a `type a . b` key a KEY_TYPEOF holding an empty concat (etype 13, no fields).

import type { InMessage, OutMessage } from '../core/index.ts';
import { NetlinkDecodeError, NLM_F_CREATE, NLM_F_EXCL } from '../core/index.ts';
import type { Family } from './constants.ts';
import {
  NFT_DATA_VERDICT,
  NFT_SET_CONCAT,
  NFT_SET_CONSTANT,
  NFT_SET_EVAL,
  NFT_SET_INTERVAL,
  NFT_SET_MAP,
  NFT_SET_TIMEOUT,
  NFTA_LIST_ELEM,
  NFTA_SET_DATA_LEN,
  NFTA_SET_DATA_TYPE,
  NFTA_SET_DESC,
  NFTA_SET_DESC_CONCAT,
  NFTA_SET_DESC_SIZE,
  NFTA_SET_FIELD_LEN,
  NFTA_SET_FLAGS,
  NFTA_SET_GC_INTERVAL,
  NFTA_SET_HANDLE,
  NFTA_SET_ID,
  NFTA_SET_KEY_LEN,
  NFTA_SET_KEY_TYPE,
  NFTA_SET_NAME,
  NFTA_SET_TABLE,
  NFTA_SET_TIMEOUT,
  NFTA_SET_USERDATA,
  NftMsg,
} from './constants.ts';
import type { DataType } from './datatypes.ts';
import { BYTEORDER_INVALID, DATATYPES, isDataType, keyLength, typeId, typesOfId } from './datatypes.ts';
import { flushSetMessage } from './element-encode.ts';
import { MetaKey } from './expr/meta.ts';
import { cstr, ident, nftMessage, received, renderDuration } from './message.ts';
import { isConcatInterval, isInterval } from './set-shape.ts';
import type { ObjectCodec } from './object.ts';
import {
  addThenDelete,
  braces,
  commentPart,
  createFlags,
  isRemoval,
  needsDestroy,
  opLabel,
  removalCmd,
  scopeText,
  validName,
} from './object.ts';
import type { NftMap, NftSet, NftSetLike, PayloadField, Scope, SetFlag, TypeofExpr } from './types.ts';
import type { UdataTlv } from './udata.ts';
import {
  decodeUdata,
  encodeUdata,
  udGet,
  udNest,
  udReadStr,
  udReadU32,
  udStr,
  udU32,
  UD_SET_COMMENT,
  UD_SET_DATA_INTERVAL,
  UD_SET_DATA_TYPEOF,
  UD_SET_DATABYTEORDER,
  UD_SET_KEY_TYPEOF,
  UD_SET_KEYBYTEORDER,
} from './udata.ts';

// nft's expression type ids (enum expr_types) as stored in typeof userdata.
const ETYPE_VERDICT = 1;
const ETYPE_PAYLOAD = 7;
const ETYPE_META = 9;
const ETYPE_CONCAT = 13;
const ETYPE_NUMGEN = 23;

const FLAG_BITS: Record<SetFlag, number> = {
  constant: NFT_SET_CONSTANT,
  interval: NFT_SET_INTERVAL,
  timeout: NFT_SET_TIMEOUT,
  dynamic: NFT_SET_EVAL,
};

export function setFlags(s: NftSetLike): number {
  let f = 0;
  for (const x of s.flags ?? []) f |= FLAG_BITS[x];
  if (s.kind === 'map') f |= NFT_SET_MAP;
  if (isConcatInterval(s)) f |= NFT_SET_CONCAT;
  if (s.timeoutMs !== undefined) f |= NFT_SET_TIMEOUT;
  return f;
}

// nft's enum proto_desc_id and each protocol's template index (payload typeof udata).
const PROTO_DESC: Record<string, number> = { udp: 6, tcp: 8, sctp: 10, th: 11, ip: 12, ip6: 13 };
const TEMPLATE: Record<string, number> = {
  'ip saddr': 11,
  'ip daddr': 12,
  'ip6 saddr': 8,
  'ip6 daddr': 9,
  sport: 1,
  dport: 2,
};
const PAYLOAD_FIELDS: readonly PayloadField[] = [
  'ip saddr',
  'ip daddr',
  'ip6 saddr',
  'ip6 daddr',
  'tcp sport',
  'tcp dport',
  'udp sport',
  'udp dport',
  'sctp sport',
  'sctp dport',
  'th sport',
  'th dport',
];
const payloadIds = (f: PayloadField): [number, number] => {
  const [proto, field] = f.split(' ') as [string, string];
  return [PROTO_DESC[proto]!, TEMPLATE[f] ?? TEMPLATE[field]!];
};

function typeofExprTlvs(e: TypeofExpr): UdataTlv[] {
  if (e.expr === 'meta') return [udU32(0, ETYPE_META), udNest(1, [udU32(0, MetaKey[e.key])])];
  if (e.expr === 'payload') {
    const [desc, tmpl] = payloadIds(e.field);
    return [udU32(0, ETYPE_PAYLOAD), udNest(1, [udU32(0, desc), udU32(1, tmpl)])];
  }
  return [
    udU32(0, ETYPE_NUMGEN),
    udNest(1, [udU32(0, e.mode === 'random' ? 1 : 0), udU32(1, e.modulus), udU32(2, e.offset ?? 0)]),
  ];
}

function keyTypeofTlv(
  type: number,
  fields: readonly DataType[],
  typeofs: readonly TypeofExpr[] | undefined,
): UdataTlv | undefined {
  if (typeofs && typeofs.length > 0) {
    if (typeofs.length === 1) return udNest(type, typeofExprTlvs(typeofs[0]!));
    return udNest(type, [
      udU32(0, ETYPE_CONCAT),
      udNest(
        1,
        typeofs.map((e, i) => udNest(i, typeofExprTlvs(e))),
      ),
    ]);
  }
  if (fields.length > 1) return udNest(type, [udU32(0, ETYPE_CONCAT), udNest(1, [])]);
  return undefined;
}

export function setUserdata(s: NftSetLike): Uint8Array {
  const byteorder = (fields: readonly DataType[]): number =>
    fields.length === 1 ? DATATYPES[fields[0]!].order : BYTEORDER_INVALID;
  const tlvs: UdataTlv[] = [udU32(UD_SET_KEYBYTEORDER, byteorder(s.key))];
  if (s.kind === 'map')
    tlvs.push(udU32(UD_SET_DATABYTEORDER, s.data === 'verdict' ? BYTEORDER_INVALID : byteorder(s.data)));
  const kt = keyTypeofTlv(UD_SET_KEY_TYPEOF, s.key, s.typeof);
  if (kt) tlvs.push(kt);
  if (s.kind === 'map') {
    if (s.data === 'verdict') {
      if (s.typeof) tlvs.push(udNest(UD_SET_DATA_TYPEOF, [udU32(0, ETYPE_VERDICT), udNest(1, [])]));
    } else {
      const dt = keyTypeofTlv(UD_SET_DATA_TYPEOF, s.data, s.dataTypeof);
      if (dt) tlvs.push(dt);
    }
    tlvs.push(udU32(UD_SET_DATA_INTERVAL, 0));
  }
  if (s.comment !== undefined) tlvs.push(udStr(UD_SET_COMMENT, s.comment));
  return encodeUdata(tlvs);
}

export function setMessage(
  scope: Scope,
  cmd: number,
  flags: number,
  s: NftSetLike,
  label: string,
  full: boolean,
  id: number | undefined,
): OutMessage {
  return nftMessage(cmd, scope.family, flags, label, (w) => {
    w.bytes(NFTA_SET_TABLE, cstr(scope.table));
    if (!full && s.handle !== undefined) {
      w.u64(NFTA_SET_HANDLE, s.handle, 'net');
      return;
    }
    w.str(NFTA_SET_NAME, s.name);
    if (!full) return;
    w.u32(NFTA_SET_FLAGS, setFlags(s), 'net');
    w.u32(NFTA_SET_KEY_TYPE, typeId(s.key), 'net').u32(NFTA_SET_KEY_LEN, keyLength(s.key), 'net');
    if (s.kind === 'map') {
      if (s.data === 'verdict') w.u32(NFTA_SET_DATA_TYPE, NFT_DATA_VERDICT, 'net').u32(NFTA_SET_DATA_LEN, 0, 'net');
      else w.u32(NFTA_SET_DATA_TYPE, typeId(s.data), 'net').u32(NFTA_SET_DATA_LEN, keyLength(s.data), 'net');
    }
    if (id !== undefined) w.u32(NFTA_SET_ID, id, 'net');
    if (s.size !== undefined || isConcatInterval(s)) {
      w.nested(NFTA_SET_DESC, (d) => {
        if (s.size !== undefined) d.u32(NFTA_SET_DESC_SIZE, s.size, 'net');
        if (isConcatInterval(s)) {
          d.nested(NFTA_SET_DESC_CONCAT, (c) => {
            for (const f of s.key) c.nested(NFTA_LIST_ELEM, (e) => e.u32(NFTA_SET_FIELD_LEN, DATATYPES[f].len, 'net'));
          });
        }
      });
    }
    if (s.timeoutMs !== undefined) w.u64(NFTA_SET_TIMEOUT, BigInt(s.timeoutMs), 'net');
    if (s.gcIntervalMs !== undefined) w.u32(NFTA_SET_GC_INTERVAL, s.gcIntervalMs, 'net');
    w.bytes(NFTA_SET_USERDATA, setUserdata(s));
  });
}

export interface ListedSet {
  family: Family;
  table: string;
  set: NftSetLike;
  /** The raw metadata, for sets whose types this codec does not know (their elements decode as bytes). */
  keyType: number;
  keyLen: number;
  dataType?: number;
  dataLen?: number;
  /** False when key/data types could not be mapped to DataType names. */
  typed: boolean;
}

function parseTypeofExpr(parts: { type: number; value: Uint8Array }[], where: string): TypeofExpr | undefined {
  const etype = udGet(parts, 0);
  const data = udGet(parts, 1);
  if (!etype || !data) return undefined;
  const inner = decodeUdata(data, where);
  const u = (t: number): number | undefined => {
    const v = udGet(inner, t);
    return v ? udReadU32(v, where) : undefined;
  };
  switch (udReadU32(etype, where)) {
    case ETYPE_PAYLOAD: {
      const desc = u(0);
      const tmpl = u(1);
      const field = PAYLOAD_FIELDS.find((f) => {
        const [d, t] = payloadIds(f);
        return d === desc && t === tmpl;
      });
      return field ? { expr: 'payload', field } : undefined;
    }
    case ETYPE_META: {
      const k = u(0);
      const key = (['l4proto', 'mark', 'iifname', 'oifname', 'nfproto'] as const).find((n) => MetaKey[n] === k);
      return key ? { expr: 'meta', key } : undefined;
    }
    case ETYPE_NUMGEN: {
      const mode = u(0);
      const modulus = u(1);
      if (modulus === undefined) return undefined;
      const e: TypeofExpr = { expr: 'numgen', mode: mode === 0 ? 'inc' : 'random', modulus };
      const off = u(2);
      if (off) e.offset = off;
      return e;
    }
  }
  return undefined;
}

function parseKeyTypeof(v: Uint8Array, where: string): TypeofExpr[] | undefined {
  const parts = decodeUdata(v, where);
  const etype = udGet(parts, 0);
  if (!etype) return undefined;
  if (udReadU32(etype, where) === ETYPE_CONCAT) {
    const data = udGet(parts, 1);
    if (!data || data.length === 0) return undefined;
    const out: TypeofExpr[] = [];
    for (const f of decodeUdata(data, where)) {
      const e = parseTypeofExpr(decodeUdata(f.value, where), where);
      if (!e) return undefined;
      out.push(e);
    }
    return out;
  }
  const e = parseTypeofExpr(parts, where);
  return e ? [e] : undefined;
}

export function decodeSet(msg: Pick<InMessage, 'payload'>): ListedSet {
  const { family, attrs: a } = received(msg, 'set');
  const name = a.require(NFTA_SET_NAME, a.str(NFTA_SET_NAME));
  const table = a.require(NFTA_SET_TABLE, a.str(NFTA_SET_TABLE));
  const flags = a.u32(NFTA_SET_FLAGS, 'net') ?? 0;
  const keyType = a.require(NFTA_SET_KEY_TYPE, a.u32(NFTA_SET_KEY_TYPE, 'net'));
  const keyLen = a.require(NFTA_SET_KEY_LEN, a.u32(NFTA_SET_KEY_LEN, 'net'));
  const key = typesOfId(keyType, keyLen);
  let typed = key !== undefined;
  const common = { name, key: key ?? ([] as DataType[]) };
  let set: NftSetLike;
  const dataType = a.u32(NFTA_SET_DATA_TYPE, 'net');
  const dataLen = a.u32(NFTA_SET_DATA_LEN, 'net');
  if (flags & NFT_SET_MAP) {
    if (dataType === undefined) throw new NetlinkDecodeError(a.where, 0, `map ${name} without NFTA_SET_DATA_TYPE`);
    let data: NftMap['data'] = 'verdict';
    if (dataType !== NFT_DATA_VERDICT) {
      const d = typesOfId(dataType, dataLen ?? 0);
      if (!d) typed = false;
      data = d ?? [];
    }
    set = { kind: 'map', ...common, data };
  } else {
    set = { kind: 'set', ...common } satisfies NftSet;
  }
  const fl: SetFlag[] = [];
  if (flags & NFT_SET_CONSTANT) fl.push('constant');
  if (flags & NFT_SET_INTERVAL) fl.push('interval');
  if (flags & NFT_SET_TIMEOUT) fl.push('timeout');
  if (flags & NFT_SET_EVAL) fl.push('dynamic');
  if (fl.length > 0) set.flags = fl;
  const handle = a.u64(NFTA_SET_HANDLE, 'net');
  if (handle !== undefined) set.handle = handle;
  const timeout = a.u64(NFTA_SET_TIMEOUT, 'net');
  if (timeout !== undefined) set.timeoutMs = Number(timeout);
  const size = a.nested(NFTA_SET_DESC)?.u32(NFTA_SET_DESC_SIZE, 'net');
  if (size !== undefined) set.size = size;
  const ud = a.bytes(NFTA_SET_USERDATA);
  if (ud) {
    const tlvs = decodeUdata(ud, 'set userdata');
    const c = udGet(tlvs, UD_SET_COMMENT);
    if (c) set.comment = udReadStr(c);
    const kt = udGet(tlvs, UD_SET_KEY_TYPEOF);
    if (kt) {
      const t = parseKeyTypeof(kt, 'set key typeof');
      if (t) set.typeof = t;
    }
    const dt = udGet(tlvs, UD_SET_DATA_TYPEOF);
    if (dt && set.kind === 'map' && set.data !== 'verdict') {
      const t = parseKeyTypeof(dt, 'set data typeof');
      if (t) set.dataTypeof = t;
    }
  }
  const out: ListedSet = { family, table, set, keyType, keyLen, typed };
  if (dataType !== undefined) out.dataType = dataType;
  if (dataLen !== undefined) out.dataLen = dataLen;
  return out;
}

/** nft's rendering of a set's type line: `type a . b : verdict` or `typeof numgen random mod 2 : verdict`. */
const renderTypeof = (e: TypeofExpr): string =>
  e.expr === 'meta'
    ? `meta ${e.key}`
    : e.expr === 'payload'
      ? e.field
      : `numgen ${e.mode} mod ${e.modulus}${e.offset ? ` offset ${e.offset}` : ''}`;

export function renderSetType(s: NftSetLike): string {
  const key = s.typeof ? `typeof ${s.typeof.map(renderTypeof).join(' . ')}` : `type ${s.key.join(' . ')}`;
  if (s.kind === 'set') return key;
  if (s.data === 'verdict') return `${key} : verdict`;
  return `${key} : ${s.typeof && s.dataTypeof ? s.dataTypeof.map(renderTypeof).join(' . ') : s.data.join(' . ')}`;
}

/** The body nft prints for a set or map: type, flags, timeout, size, comment. */
export function renderSetBody(o: NftSetLike): string[] {
  const parts = [renderSetType(o)];
  const flags = [...(o.flags ?? [])];
  if (o.timeoutMs !== undefined && !flags.includes('timeout')) flags.push('timeout');
  if (flags.length > 0) parts.push(`flags ${flags.join(',')}`);
  if (o.timeoutMs !== undefined) parts.push(`timeout ${renderDuration(o.timeoutMs)}`);
  if (o.size !== undefined) parts.push(`size ${o.size}`);
  return [...parts, ...commentPart(o.comment)];
}

/** Why a set or map definition cannot be added, or undefined. */
function invalidDefinition(o: NftSetLike): string | undefined {
  if (!Array.isArray(o.key) || o.key.length === 0) return `${o.kind} ${o.name} needs a key type`;
  const unknown = o.key.find((t) => !isDataType(t));
  if (unknown !== undefined) return `${o.kind} ${o.name}: unknown key type ${String(unknown)}`;
  if (o.typeof && o.typeof.length !== o.key.length)
    return `${o.kind} ${o.name}: typeof has ${o.typeof.length} fields, key has ${o.key.length}`;
  if (o.kind === 'map' && o.data !== 'verdict') {
    if (!Array.isArray(o.data) || o.data.length === 0) return `map ${o.name} needs a data type`;
    const bad = o.data.find((t) => !isDataType(t));
    if (bad !== undefined) return `map ${o.name}: unknown data type ${String(bad)}`;
  }
  return undefined;
}

/** Same kind and types: what the kernel compares when a set is added again. */
export const sameType = (a: NftSetLike, b: NftSetLike): boolean =>
  a.kind === b.kind &&
  JSON.stringify(a.key) === JSON.stringify(b.key) &&
  (a.kind !== 'map' || b.kind !== 'map' || JSON.stringify(a.data) === JSON.stringify(b.data));

/** Sets and maps: NEWSET/DELSET; flush removes the elements (DELSETELEM without elements). */
export const setCodec: ObjectCodec<NftSetLike, ListedSet> = {
  validate(verb, o) {
    if (verb === 'insert' || verb === 'replace') return `cannot ${verb} a ${o.kind}`;
    if (isRemoval(verb) && o.handle !== undefined) return undefined;
    const bad = validName(o.kind, o.name);
    if (bad) return bad;
    return verb === 'add' || verb === 'create' ? invalidDefinition(o) : undefined;
  },

  encode(st, verb, o) {
    const label = opLabel(st, verb, o);
    if (verb === 'flush') st.out.push(flushSetMessage(st.scope, NftMsg.DELSETELEM, o.name, label));
    else if (isRemoval(verb)) {
      st.out.push(
        setMessage(st.scope, removalCmd(verb, NftMsg.DELSET, NftMsg.DESTROYSET), 0, o, label, false, undefined),
      );
      st.defs.delete(o.name);
    } else {
      st.out.push(
        setMessage(
          st.scope,
          NftMsg.NEWSET,
          createFlags(verb, NLM_F_CREATE, NLM_F_EXCL),
          o,
          label,
          true,
          st.ctx.setId(o.name),
        ),
      );
      st.defs.set(o.name, o);
      if (isInterval(o) && !isConcatInterval(o)) st.fresh.add(o.name);
    }
  },

  render(scope, verb, o) {
    const del = isRemoval(verb);
    if (del && o.handle !== undefined) return `${verb} ${o.kind} ${scopeText(scope)} handle ${o.handle}`;
    return `${verb} ${o.kind} ${scopeText(scope)} ${ident(o.name)}${del || verb === 'flush' ? '' : braces(renderSetBody(o))}`;
  },

  decode: decodeSet,

  emulateDestroy(o) {
    if (o.name === undefined) needsDestroy(`${o.kind} by handle`);
    return addThenDelete(o, o);
  },
};
