// What every nf_tables object kind (table, chain, set and map, element, rule) implements, as
// each expression implements ExprCodec (expr/common.ts) and each google/nftables type its
// own marshal/unmarshal: checking an operation, encoding it as messages, rendering it as nft
// syntax and decoding the kernel's reply. objects.ts holds the table keyed by kind that
// NftTransaction dispatches through (FakeNft's rules per kind live apart, in fake/).

import type { InMessage, OutMessage } from '../core/index.ts';
import type { EncodeContext } from './expr/index.ts';
import { ident, quote } from './message.ts';
import type { NftElement, NftObject, NftSetLike, Scope } from './types.ts';

export type Verb = 'add' | 'create' | 'insert' | 'replace' | 'flush' | 'delete' | 'destroy';

export interface Operation {
  verb: Verb;
  obj: NftObject;
}

/** Raised by run() for a transaction whose operations are invalid (nothing was sent). */
export class NftValidationError extends Error {
  override readonly name = 'NftValidationError';
}

/** Where run() finds the definition of a set the transaction does not create itself. */
export type SetSchema = (name: string) => NftSetLike | undefined;

/** What the operations of one transaction share while they are encoded, in order. */
export interface EncodeState {
  readonly scope: Scope;
  /** "family table" as nft writes it, for labels. */
  readonly fam: string;
  readonly ctx: EncodeContext;
  readonly schema: SetSchema;
  readonly ops: readonly Operation[];
  /** The messages so far; NftTransaction packs pending elements before each other operation. */
  readonly out: OutMessage[];
  /** Sets defined by the operations encoded so far (their elements are encoded against them). */
  readonly defs: Map<string, NftSetLike>;
  /** Single-field interval sets created here and still empty (nft sends them a leading end element). */
  readonly fresh: Set<string>;
  /** Elements encoded but not packed into messages yet: a run of one verb on one set. */
  pending: PendingElements | undefined;
}

/** A run of element operations of one verb on one set, being encoded (element.ts's ElementRun). */
export interface PendingElements {
  readonly verb: Verb;
  readonly set: NftSetLike;
  /** Appends an element to the run. */
  add(o: NftElement, fam: string): void;
  /** Ends the run: its elements become messages in `st`. */
  flush(st: EncodeState): void;
}

export interface ObjectCodec<O extends NftObject, Listed = unknown> {
  /** Why `verb` cannot apply to `o` (an NftValidationError's text), or undefined when it can. */
  validate(verb: Verb, o: O): string | undefined;
  /** Encodes operation `at` of `st.ops` (verb and o) into `st`. */
  encode(st: EncodeState, verb: Verb, o: O, at: number): void;
  /** The operation in nft syntax (NftTransaction.toString(), FakeNft.dump()). */
  render(scope: Scope, verb: Verb, o: O): string;
  /** One object from the kernel's reply to a GET or dump of this kind. */
  decode(msg: Pick<InMessage, 'payload'>): Listed;
  /**
   * destroy for kernels before 6.3 (no DESTROY messages): the operations that stand in for it
   * (add, then delete), or an NftValidationError when the kind cannot be emulated.
   */
  emulateDestroy(o: O): Operation[];
}

export const isRemoval = (verb: Verb): boolean => verb === 'delete' || verb === 'destroy';

/** The cmd of a removal: the DEL* message, or DESTROY* (kernel 6.3+) for destroy. */
export const removalCmd = (verb: Verb, del: number, destroy: number): number => (verb === 'destroy' ? destroy : del);

/** NLM_F_* for an add or create: create also refuses an existing object. */
export const createFlags = (verb: Verb, create: number, excl: number): number =>
  create | (verb === 'create' ? excl : 0);

/** The label of an operation in errors and logs: "add chain ip kube-proxy services". */
export function opLabel(st: EncodeState, verb: Verb, o: NftObject): string {
  const what = 'name' in o ? ` ${ident(o.name)}` : o.kind === 'rule' ? ` ${ident(o.chain)}` : '';
  return `${verb} ${o.kind} ${st.fam}${what}`;
}

/** "family table" as nft writes it. */
export const scopeText = (scope: Scope): string => `${scope.family} ${ident(scope.table)}`;

/** An nft object body: ` { a ; b ; }`, or nothing without parts. */
export function braces(parts: readonly string[]): string {
  return parts.length > 0 ? ` { ${parts.map((p) => `${p} ;`).join(' ')} }` : '';
}

export const commentPart = (comment: string | undefined): string[] =>
  comment !== undefined ? [`comment ${quote(comment)}`] : [];

/** The check every named kind makes: a name the kernel takes (non-empty, below NFT_NAME_MAXLEN). */
export function validName(what: string, n: unknown): string | undefined {
  if (typeof n !== 'string' || n.length === 0) return `${what} needs a name`;
  // The kernel keeps a name up to its first NUL: it would hold an object we did not name.
  if (n.includes('\0')) return `${what} name ${JSON.stringify(n.slice(0, 40))} holds a NUL byte`;
  if (Buffer.byteLength(n) >= NAME_MAX) return `${what} name ${n.slice(0, 40)}... is longer than ${NAME_MAX - 1} bytes`;
  return undefined;
}

const NAME_MAX = 256;

/** How most kinds emulate destroy: add the object (as `bare`), then delete it. */
export const addThenDelete = <O extends NftObject>(bare: NftObject, o: O): Operation[] => [
  { verb: 'add', obj: bare },
  { verb: 'delete', obj: o },
];

/** Kinds that cannot be destroyed before kernel 6.3. */
export function needsDestroy(what: string): never {
  throw new NftValidationError(`destroy ${what}: needs kernel 6.3+ (use delete)`);
}
