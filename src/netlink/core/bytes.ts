// A growable byte buffer that writes little-endian (host order on every architecture
// kube-proxy-ts targets) or network order, and lets a caller patch a length field after
// the fact, as nlmsghdr and nlattr need.

const INITIAL_SIZE = 256;

// Every write reserves first and only then reads this.buf: reserve() may replace the buffer.
export class ByteWriter {
  private buf: Buffer;
  private len = 0;

  constructor(initialSize = INITIAL_SIZE) {
    this.buf = Buffer.allocUnsafe(initialSize);
  }

  get length(): number {
    return this.len;
  }

  /** Makes room for n more bytes and returns the offset where they start. */
  reserve(n: number): number {
    const at = this.len;
    const need = at + n;
    if (need > this.buf.length) {
      let size = this.buf.length * 2;
      while (size < need) size *= 2;
      const next = Buffer.allocUnsafe(size);
      this.buf.copy(next, 0, 0, at);
      this.buf = next;
    }
    this.len = need;
    return at;
  }

  /**
   * The buffer under the writer, for a caller that reserve()d bytes and fills them with
   * direct stores (the bulk encoders). Valid until the next reserve, which may replace it.
   */
  get buffer(): Buffer {
    return this.buf;
  }

  // Direct stores, not Buffer's writeUInt*: those check their arguments on every call, and a
  // full sync writes millions of these fields.
  u8(v: number): this {
    if (v > 0xff || v < 0) throw outOfRange(v, 0xff);
    const at = this.reserve(1);
    this.buf[at] = v;
    return this;
  }

  u16le(v: number): this {
    if (v > 0xffff || v < 0) throw outOfRange(v, 0xffff);
    const at = this.reserve(2);
    const b = this.buf;
    b[at] = v;
    b[at + 1] = v >>> 8;
    return this;
  }

  u16be(v: number): this {
    if (v > 0xffff || v < 0) throw outOfRange(v, 0xffff);
    const at = this.reserve(2);
    const b = this.buf;
    b[at] = v >>> 8;
    b[at + 1] = v;
    return this;
  }

  u32le(v: number): this {
    const at = this.reserve(4);
    const b = this.buf;
    b[at] = v;
    b[at + 1] = v >>> 8;
    b[at + 2] = v >>> 16;
    b[at + 3] = v >>> 24;
    return this;
  }

  u32be(v: number): this {
    const at = this.reserve(4);
    const b = this.buf;
    b[at] = v >>> 24;
    b[at + 1] = v >>> 16;
    b[at + 2] = v >>> 8;
    b[at + 3] = v;
    return this;
  }

  i32le(v: number): this {
    const at = this.reserve(4);
    this.buf.writeInt32LE(v, at);
    return this;
  }

  u64le(v: bigint): this {
    const at = this.reserve(8);
    this.buf.writeBigUInt64LE(v, at);
    return this;
  }

  u64be(v: bigint): this {
    const at = this.reserve(8);
    this.buf.writeBigUInt64BE(v, at);
    return this;
  }

  bytes(b: Uint8Array): this {
    const at = this.reserve(b.length);
    this.buf.set(b, at);
    return this;
  }

  /** Appends zero bytes up to the next multiple of 4. */
  align4(): this {
    const pad = (4 - (this.len & 3)) & 3;
    if (pad > 0) {
      const at = this.reserve(pad);
      // A loop, not Buffer.fill: at most 3 bytes, and fill's call overhead shows in bulk encoding.
      for (let i = at; i < this.len; i++) this.buf[i] = 0;
    }
    return this;
  }

  /** Drops everything written after `length` bytes. */
  truncate(length: number): void {
    if (length < this.len) this.len = Math.max(0, length);
  }

  patchU16le(at: number, v: number): void {
    if (v > 0xffff || v < 0) throw outOfRange(v, 0xffff);
    this.buf[at] = v;
    this.buf[at + 1] = v >>> 8;
  }

  patchU32le(at: number, v: number): void {
    const b = this.buf;
    b[at] = v;
    b[at + 1] = v >>> 8;
    b[at + 2] = v >>> 16;
    b[at + 3] = v >>> 24;
  }

  /**
   * What was written, without a copy: for a writer that is done (a later write may move or
   * overwrite the bytes). toBytes() is the safe default.
   */
  view(): Uint8Array {
    return this.buf.subarray(0, this.len);
  }

  /** A copy of what was written; the writer may be reused afterwards. */
  toBytes(): Uint8Array {
    return Uint8Array.prototype.slice.call(this.buf, 0, this.len);
  }

  /**
   * A copy of what was written, carved from a shared slab when small (see slabCopy): for
   * the many short-lived messages of a sync. The writer may be reused afterwards.
   */
  toSlabBytes(): Uint8Array {
    return slabCopy(this.buf, this.len);
  }
}

// Small copies share 64 KiB slabs: a full sync encodes hundreds of thousands of messages of
// 100-300 bytes, and one ArrayBuffer each (a malloc'd backing store, a GC-tracked object)
// showed as allocation and GC time and as malloc growth left in RSS. A slab lives as long as
// any copy carved from it, so this is only for copies that are dropped soon (messages sent).
const SLAB_SIZE = 64 * 1024;
const SLAB_MAX_COPY = 4096;
let slab = new Uint8Array(0);
let slabUsed = 0;

/** A copy of b[0, len) as a plain Uint8Array (not a Buffer), 8-byte aligned in a shared slab when small. */
export function slabCopy(b: Uint8Array, len: number): Uint8Array {
  if (len > SLAB_MAX_COPY) return Uint8Array.prototype.slice.call(b, 0, len);
  if (slabUsed + len > slab.length) {
    slab = new Uint8Array(SLAB_SIZE);
    slabUsed = 0;
  }
  const out = slab.subarray(slabUsed, slabUsed + len);
  out.set(b.subarray(0, len));
  slabUsed = (slabUsed + len + 7) & ~7;
  return out;
}

// As Buffer's writeUInt8/16 would have refused it (NaN and fractions are stored as they would).
const outOfRange = (v: number, max: number): RangeError =>
  new RangeError(`The value of "value" is out of range. It must be >= 0 and <= ${max}. Received ${v}`);

export const align4 = (n: number): number => (n + 3) & ~3;
