import { constants as osConstants } from 'node:os';

const errnoNames = new Map<number, string>();
for (const [name, num] of Object.entries(osConstants.errno)) {
  // Several names share a number (EAGAIN/EWOULDBLOCK): keep the first, the canonical one.
  if (!errnoNames.has(num)) errnoNames.set(num, name);
}

/** The symbolic name of an errno number ("ENOENT"), or "errno N" when unknown. */
export function errnoName(errno: number): string {
  return errnoNames.get(errno) ?? `errno ${errno}`;
}

/** The system's errno numbers by name (os.constants.errno): fakes and clients name an errno, never its number. */
export const ERRNO = osConstants.errno;

export function errnoNumber(code: string): number {
  const n = (osConstants.errno as Record<string, number>)[code];
  if (n === undefined) throw new Error(`unknown errno name ${code}`);
  return n;
}

/** The kernel's extended ACK: a human message and the offset of the offending attribute. */
export interface ExtAck {
  msg?: string;
  offset?: number;
  missingType?: number;
}

/** Extra details a NetlinkError may carry. */
export interface NetlinkErrorOptions extends ErrorOptions {
  /** A name for an errno outside the system's table (ipset's private range, 4096 and up). */
  code?: string;
  /**
   * The refused request as the kernel echoed it in NLMSG_ERROR (the payload after nlmsghdr),
   * when the reply was not capped. ipset patches the failing line number into it.
   */
  echo?: Uint8Array;
  /** What went wrong beyond the errno ("no reply within 5000 ms"), kept out of the op label. */
  detail?: string;
  /** The sequence number of the request the kernel refused, when one was sent. */
  seq?: number;
  /** How many times a dump was tried before the error (NLM_F_DUMP_INTR each time). */
  attempts?: number;
  /**
   * The error is a whole send's (a time-out of a batch) and `op` names its first message: how
   * many messages were sent together.
   */
  messages?: number;
  /** How many set elements the refused message carried (nf_tables packs many per message). */
  elements?: number;
}

/**
 * A request the kernel (or the transport, for time-outs) refused. `op` is the operation's bare
 * label ("add chain ip kube-proxy services"), `verb` and `kind` its first two words ("add",
 * "chain": every label names the verb, then the kind of object, then the object), `code` the
 * errno name, `detail` what else is known ("no reply within 5000 ms"), `seq` the refused
 * request's sequence number; counts (`attempts`, `messages`, `elements`) have fields of their
 * own and never enter `op`. Callers branch on isNotFound/isExists (the errno), never on the text.
 */
export class NetlinkError extends Error {
  override readonly name = 'NetlinkError';
  readonly op: string;
  readonly verb: string;
  readonly kind: string;
  readonly errno: number;
  readonly code: string;
  readonly extack: ExtAck | undefined;
  readonly echo: Uint8Array | undefined;
  readonly detail: string | undefined;
  readonly seq: number | undefined;
  readonly attempts: number | undefined;
  readonly messages: number | undefined;
  readonly elements: number | undefined;

  constructor(op: string, errno: number, extack?: ExtAck, options?: NetlinkErrorOptions) {
    const code = options?.code ?? errnoName(errno);
    const detail = options?.detail;
    super(
      `${op}${countsText(options)}${detail !== undefined ? `: ${detail}` : ''}: ${code}${extackText(extack)}`,
      options,
    );
    this.op = op;
    [this.verb = '', this.kind = ''] = op.split(' ', 2);
    this.errno = errno;
    this.code = code;
    this.extack = extack;
    this.echo = options?.echo;
    this.detail = detail;
    this.seq = options?.seq;
    this.attempts = options?.attempts;
    this.messages = options?.messages;
    this.elements = options?.elements;
  }
}

/** The counts as the message shows them after the label: " (300 elements)". */
function countsText(o: NetlinkErrorOptions | undefined): string {
  if (o?.elements !== undefined) return ` (${o.elements} elements)`;
  if (o?.messages !== undefined && o.messages > 1) return ` (first of ${o.messages} messages sent together)`;
  return '';
}

const extackText = (extack: ExtAck | undefined): string => (extack?.msg ? ` (${extack.msg})` : '');

/**
 * Bytes from the kernel (or a fixture) that do not parse. `where` names the structure being
 * decoded, `offset` the byte position within the buffer handed to the decoder, `reason` what
 * is wrong there ("attribute length 9 runs past the end").
 */
export class NetlinkDecodeError extends Error {
  override readonly name = 'NetlinkDecodeError';
  readonly where: string;
  readonly offset: number;
  readonly reason: string;

  constructor(where: string, offset: number, reason: string) {
    super(`${where} at offset ${offset}: ${reason}`);
    this.where = where;
    this.offset = offset;
    this.reason = reason;
  }
}

const hasCode = (e: unknown, code: string): boolean => e instanceof NetlinkError && e.code === code;
export const isNotFound = (e: unknown): boolean => hasCode(e, 'ENOENT');
export const isExists = (e: unknown): boolean => hasCode(e, 'EEXIST');
export const isBusy = (e: unknown): boolean => hasCode(e, 'EBUSY');
export const isTimeout = (e: unknown): boolean => hasCode(e, 'ETIMEDOUT');
