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

  u8(v: number): this {
    const at = this.reserve(1);
    this.buf.writeUInt8(v, at);
    return this;
  }

  u16le(v: number): this {
    const at = this.reserve(2);
    this.buf.writeUInt16LE(v, at);
    return this;
  }

  u16be(v: number): this {
    const at = this.reserve(2);
    this.buf.writeUInt16BE(v, at);
    return this;
  }

  u32le(v: number): this {
    const at = this.reserve(4);
    this.buf.writeUInt32LE(v >>> 0, at);
    return this;
  }

  u32be(v: number): this {
    const at = this.reserve(4);
    this.buf.writeUInt32BE(v >>> 0, at);
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
    this.buf.writeUInt16LE(v, at);
  }

  patchU32le(at: number, v: number): void {
    this.buf.writeUInt32LE(v >>> 0, at);
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
}

export const align4 = (n: number): number => (n + 3) & ~3;
