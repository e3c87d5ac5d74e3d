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
}

/**
 * A request the kernel (or the transport, for time-outs) refused. `op` names the operation
 * and its object ("add chain ip kube-proxy services"), `code` the errno name, `detail` what
 * else is known ("no reply within 5000 ms"), `seq` the refused request's sequence number.
 * Callers branch on isNotFound/isExists (the errno), never on the text.
 */
export class NetlinkError extends Error {
  override readonly name = 'NetlinkError';
  readonly op: string;
  readonly errno: number;
  readonly code: string;
  readonly extack: ExtAck | undefined;
  readonly echo: Uint8Array | undefined;
  readonly detail: string | undefined;
  readonly seq: number | undefined;

  constructor(op: string, errno: number, extack?: ExtAck, options?: NetlinkErrorOptions) {
    const code = options?.code ?? errnoName(errno);
    const detail = options?.detail;
    super(
      `${op}${detail !== undefined ? `: ${detail}` : ''}: ${code}${extack?.msg ? ` (${extack.msg})` : ''}`,
      options,
    );
    this.op = op;
    this.errno = errno;
    this.code = code;
    this.extack = extack;
    this.echo = options?.echo;
    this.detail = detail;
    this.seq = options?.seq;
  }
}

/**
 * Bytes from the kernel (or a fixture) that do not parse. `where` names the structure being
 * decoded, `offset` the byte position within the buffer handed to the decoder.
 */
export class NetlinkDecodeError extends Error {
  override readonly name = 'NetlinkDecodeError';
  readonly where: string;
  readonly offset: number;

  constructor(where: string, offset: number, reason: string) {
    super(`${where} at offset ${offset}: ${reason}`);
    this.where = where;
    this.offset = offset;
  }
}

const hasCode = (e: unknown, code: string): boolean => e instanceof NetlinkError && e.code === code;
export const isNotFound = (e: unknown): boolean => hasCode(e, 'ENOENT');
export const isExists = (e: unknown): boolean => hasCode(e, 'EEXIST');
export const isBusy = (e: unknown): boolean => hasCode(e, 'EBUSY');
export const isTimeout = (e: unknown): boolean => hasCode(e, 'ETIMEDOUT');
