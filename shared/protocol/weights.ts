/**
 * Actor/critic weights as raw float32 tensors with a version and a checksum: the `weights` frame
 * body (`packWeights`, `unpackWeights`, `verifyWeights`) and a single-buffer form for checkpoints
 * in SQLite (`weightsToBytes`, `weightsFromBytes`). No tfjs here: callers pass
 * `tensor.dataSync()` / `tensor.shape` in and build tensors from what comes out.
 *
 * Where a published actor is checked (once where it is made, once where it crosses a trust
 * boundary, no more; the per-publish path learner -> registry -> store -> hub -> agent):
 *   made      the learner refuses an update with a non-finite value (orchestrator/learner.ts: a
 *             diverged update is discarded, not published); `packWeights` computes the checksum.
 *   passed on the store's BLOB (`weightsToBytes(body, { trusted: true })`), the hub's push
 *             (`Hub.broadcastWeights`) and the agent's disk cache check the structure only.
 *   received  the agent's codec (`validateFrame` -> `verifyWeights`) checks every value and the
 *             checksum: the wire is a trust boundary. So is the disk: `weightsFromBytes` verifies
 *             all it reads (store, cache, checkpoint files), and a process start verifies the
 *             body it is given (Hub.create, AgentRuntime).
 *
 * Byte order: float32 data is little-endian, which is what a Float32Array holds on every platform
 * Node supports (x64, arm64). A big-endian host is refused with a clear error rather than
 * silently producing unreadable checkpoints.
 */
import { ACTOR_HEADS, ProtocolError, type ActorHeadName, type LightActorBody, type WeightsBody } from './envelope';
import * as zlib from 'zlib';
import { KaisError } from '../errors';

/** One tensor: its shape and its row-major values (length = product of shape, 1 for `[]`). */
export interface WeightTensor {
  shape: number[];
  data: Float32Array;
}

/** Largest tensor rank accepted anywhere (dense layers use 1 and 2). */
export const MAX_TENSOR_RANK = 8;

const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

function assertLittleEndian(): void {
  if (!LITTLE_ENDIAN) {
    throw new KaisError('KAIS_ERR_PLATFORM', 'weights serialisation needs a little-endian host');
  }
}

// ---------------------------------------------------------------------------------------------
// CRC-32
// ---------------------------------------------------------------------------------------------

/*
 * CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320, the one zlib and PNG use). Node's native
 * `zlib.crc32` (about 5 GB/s here) is used where it exists: it only appeared in Node 20.15 / 22.2
 * and the package promises Node >= 20, so older runtimes get `crc32Portable`, a table-driven
 * slicing-by-8 version (8 bytes per step, about 1 GB/s; the byte-at-a-time loop ran at about
 * 400 MB/s, 2 ms of the budget for decoding a 800 KB weights frame). The test checks both against
 * the standard check value and against each other.
 */
const CRC_TABLES = (() => {
  // t[k * 256 + n] = CRC of byte n followed by k zero bytes
  const t = new Uint32Array(8 * 256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  for (let k = 1; k < 8; k++) {
    for (let n = 0; n < 256; n++) {
      const prev = t[(k - 1) * 256 + n];
      t[k * 256 + n] = (prev >>> 8) ^ t[prev & 0xff];
    }
  }
  return t;
})();

/** CRC-32 in plain JavaScript (slicing-by-8); same contract as `crc32`. */
export function crc32Portable(bytes: Uint8Array, crc = 0): number {
  const t = CRC_TABLES;
  const b = bytes;
  const n = b.length;
  const end = n - (n & 7);
  let c = ~crc >>> 0;
  let i = 0;
  for (; i < end; i += 8) {
    const a = (c ^ (b[i] | (b[i + 1] << 8) | (b[i + 2] << 16) | (b[i + 3] << 24))) >>> 0;
    c =
      t[1792 + (a & 0xff)] ^
      t[1536 + ((a >>> 8) & 0xff)] ^
      t[1280 + ((a >>> 16) & 0xff)] ^
      t[1024 + (a >>> 24)] ^
      t[768 + b[i + 4]] ^
      t[512 + b[i + 5]] ^
      t[256 + b[i + 6]] ^
      t[b[i + 7]];
  }
  for (; i < n; i++) c = t[(c ^ b[i]) & 0xff] ^ (c >>> 8);
  return ~c >>> 0;
}

const nativeCrc32 = (zlib as unknown as { crc32?: (data: Uint8Array, value?: number) => number }).crc32;

/**
 * CRC-32 of `bytes`. Pass the previous result as `crc` to continue over several buffers:
 * `crc32(b, crc32(a)) === crc32(a ++ b)`.
 */
export const crc32: (bytes: Uint8Array, crc?: number) => number =
  typeof nativeCrc32 === 'function' ? (bytes, crc = 0) => nativeCrc32(bytes, crc) >>> 0 : crc32Portable;

function bytesOf(a: Float32Array): Uint8Array {
  return new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
}

/** CRC-32 over the raw bytes of all tensors in order: the `checksum` of a weights body. */
export function weightsChecksum(tensors: readonly Float32Array[]): number {
  assertLittleEndian();
  let c = 0;
  for (const t of tensors) c = crc32(bytesOf(t), c);
  return c;
}

/** Number of elements of a shape (1 for a scalar `[]`). */
export function shapeSize(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

// ---------------------------------------------------------------------------------------------
// Wire body
// ---------------------------------------------------------------------------------------------

/**
 * Tensors -> `weights` body. The data is copied, so later updates of the model cannot change a
 * frame being sent. Throws TypeError on a bad version, shape or length (programmer error).
 */
export function packWeights(tensors: readonly WeightTensor[], version: number, head?: ActorHeadName): WeightsBody {
  if (!Number.isSafeInteger(version) || version < 0) {
    throw new TypeError(`packWeights: version must be a non-negative integer, got ${version}`);
  }
  if (head !== undefined && !ACTOR_HEADS.includes(head))
    throw new TypeError(`packWeights: head must be one of ${ACTOR_HEADS.join(', ')}, got ${String(head)}`);
  const shapes: number[][] = [];
  const data: Float32Array[] = [];
  tensors.forEach((t, i) => {
    const bad = t.shape.length > MAX_TENSOR_RANK || t.shape.some((d) => !Number.isSafeInteger(d) || d < 0);
    if (bad) throw new TypeError(`packWeights: tensor ${i} has an invalid shape [${t.shape.join(', ')}]`);
    if (!(t.data instanceof Float32Array) || t.data.length !== shapeSize(t.shape)) {
      throw new TypeError(
        `packWeights: tensor ${i} of shape [${t.shape.join(', ')}] needs ${shapeSize(t.shape)} float32 values, got ${t.data?.length}`,
      );
    }
    shapes.push([...t.shape]);
    data.push(Float32Array.from(t.data));
  });
  const body: WeightsBody = { version, checksum: weightsChecksum(data), shapes, tensors: data };
  if (head !== undefined) body.head = head;
  return body;
}

/** Tensors -> the `light` actor of a weights body (packWeights' checks and copy). */
export function packLightActor(tensors: readonly WeightTensor[], head?: ActorHeadName): LightActorBody {
  const { checksum, shapes, tensors: data, head: h } = packWeights(tensors, 0, head);
  return h === undefined ? { checksum, shapes, tensors: data } : { checksum, shapes, tensors: data, head: h };
}

/**
 * Checks a weights body: shapes consistent with the data lengths, (unless `values: false`) every
 * value finite, and (unless `checksum: false`) the checksum matching. Returns the first problem
 * (KAIS_ERR_BAD_FIELD or KAIS_ERR_CHECKSUM), or null. With both off it is the structure check of
 * a body already verified (module comment: where weights are checked).
 */
export function verifyWeights(body: WeightsBody, options: { checksum?: boolean; values?: boolean } = {}): ProtocolError | null {
  return (
    verifyActor(body, 'body', `weights version ${body.version}`, options) ??
    (body.light === undefined ? null : verifyActor(body.light, 'body.light', `weights version ${body.version}'s light actor`, options))
  );
}

/** verifyWeights for one actor of a body (its own tensors or its `light` ones), fields named under `p`. */
function verifyActor(
  body: LightActorBody,
  p: string,
  what: string,
  options: { checksum?: boolean; values?: boolean },
): ProtocolError | null {
  const w = p === 'body' ? 'weights' : 'light actor';
  if (body.head !== undefined && !ACTOR_HEADS.includes(body.head)) {
    return new ProtocolError(
      'KAIS_ERR_BAD_FIELD',
      `${w} head must be one of ${ACTOR_HEADS.join(', ')}, got ${String(body.head)}`,
      null,
      `${p}.head`,
    );
  }
  if (body.shapes.length !== body.tensors.length) {
    return new ProtocolError(
      'KAIS_ERR_BAD_FIELD',
      `${w} have ${body.shapes.length} shapes but ${body.tensors.length} tensors`,
      null,
      `${p}.tensors`,
    );
  }
  for (let i = 0; i < body.tensors.length; i++) {
    const t = body.tensors[i];
    const want = shapeSize(body.shapes[i]);
    if (t.length !== want) {
      return new ProtocolError(
        'KAIS_ERR_BAD_FIELD',
        `${w} tensor ${i} has ${t.length} values, its shape [${body.shapes[i].join(', ')}] needs ${want}`,
        null,
        `${p}.tensors[${i}]`,
      );
    }
    if (options.values === false) continue;
    for (let j = 0; j < t.length; j++) {
      if (!Number.isFinite(t[j])) {
        return new ProtocolError('KAIS_ERR_BAD_FIELD', `${w} tensor ${i} has a non-finite value at ${j}`, null, `${p}.tensors[${i}]`);
      }
    }
  }
  if (options.checksum === false) return null;
  const actual = weightsChecksum(body.tensors);
  if (actual !== body.checksum) {
    return new ProtocolError('KAIS_ERR_CHECKSUM', `${what}: checksum ${hex(actual)} does not match the declared ${hex(body.checksum)}`);
  }
  return null;
}

/** `weights` body -> tensors, after `verifyWeights`; throws its ProtocolError. Shares the data. */
export function unpackWeights(body: WeightsBody): WeightTensor[] {
  const problem = verifyWeights(body);
  if (problem) throw problem;
  return body.tensors.map((data, i) => ({ shape: [...body.shapes[i]], data }));
}

function hex(n: number): string {
  return `0x${(n >>> 0).toString(16).padStart(8, '0')}`;
}

// ---------------------------------------------------------------------------------------------
// Checkpoint bytes
// ---------------------------------------------------------------------------------------------

/*
 * One buffer per weight set, for SQLite BLOBs. All integers little-endian.
 *
 *   offset  size        field
 *   0       5           magic "KAISW"
 *   5       1           format version (WEIGHTS_FORMAT_VERSION)
 *   6       2           tensor count (u16)
 *   8       8           weight version (f64, a non-negative safe integer)
 *   16      4           data checksum (u32) = CRC-32 of the data section = WeightsBody.checksum
 *   (format 2 only)
 *   20      1           actor head: 1 relu1, 2 softplus1
 *   21      3           zero
 *   20|24   ...         per tensor: rank (u8), then rank dims (u32 each)
 *   ...     0..3        zero padding to a multiple of 4
 *   ...     4 * total   data: float32 values of all tensors, in order
 *   end-4   4           buffer checksum (u32) = CRC-32 of every byte before it
 *
 * Format 3 (a body with a `light` actor) holds two such buffers, the body's own actor then its
 * light one (same version), behind a 12-byte header and before a trailing CRC-32 of all before it:
 *
 *   0       5           magic "KAISW"
 *   5       1           format version 3
 *   6       2           zero
 *   8       4           length of the first buffer (u32)
 *   12      ...         the first buffer (format 1 or 2), then the second (format 1 or 2)
 *   end-4   4           buffer checksum (u32) = CRC-32 of every byte before it
 *
 * The trailing checksum catches corruption anywhere (header, shapes, data); the data checksum is
 * kept so a checkpoint turns back into a wire body without recomputing anything. A body with a
 * `head` is written as format 2, one without as format 1 (so files written before heads existed,
 * like models/kais-cmmac.bin, keep their bytes); both are read.
 */
const MAGIC = [0x4b, 0x41, 0x49, 0x53, 0x57]; // "KAISW"
/**
 * Newest format written (3: a body with a light actor; 2: with the actor head); formats 1 and 2 are
 * still written for bodies without a light actor (format 1: without a head), and all are read.
 */
export const WEIGHTS_FORMAT_VERSION = 3;
/** Format 3's header: magic, format, 2 zero bytes, the first buffer's length (u32). */
const PAIR_HEADER_BYTES = 12;
const HEADER_BYTES = 20;
const HEAD_CODES: readonly ActorHeadName[] = ['relu1', 'softplus1']; // code = index + 1
const headerBytesOf = (format: number) => (format >= 2 ? HEADER_BYTES + 4 : HEADER_BYTES);

/**
 * Weights body -> one Buffer (format above). Throws TypeError on an inconsistent body, and (unless
 * `trusted`) on a non-finite value or a checksum that does not match. `trusted`: the body was made
 * by `packWeights` from checked values or came through `verifyWeights` (a decoded frame), so only
 * its structure is checked; whatever reads the buffer back verifies it all (`weightsFromBytes`).
 */
export function weightsToBytes(body: WeightsBody, options: { trusted?: boolean } = {}): Buffer {
  assertLittleEndian();
  const problem = options.trusted ? verifyWeights(body, { checksum: false, values: false }) : verifyWeights(body);
  if (problem) throw new TypeError(`weightsToBytes: ${problem.message}`);
  if (body.light !== undefined) {
    // format 3: the two actors as two buffers of format 1 or 2 (PAIR_HEADER_BYTES above)
    const { light, epoch: _epoch, ...own } = body;
    const first = weightsToBytes(own, { trusted: true });
    const second = weightsToBytes({ version: body.version, ...light }, { trusted: true });
    const out = Buffer.alloc(PAIR_HEADER_BYTES + first.length + second.length + 4);
    MAGIC.forEach((b, i) => (out[i] = b));
    out.writeUInt8(3, 5);
    out.writeUInt32LE(first.length, 8);
    out.set(first, PAIR_HEADER_BYTES);
    out.set(second, PAIR_HEADER_BYTES + first.length);
    const end = out.length - 4;
    out.writeUInt32LE(crc32(out.subarray(0, end)), end);
    return out;
  }
  if (body.tensors.length > 0xffff) throw new TypeError(`weightsToBytes: too many tensors (${body.tensors.length})`);
  let shapeBytes = 0;
  let dataBytes = 0;
  body.shapes.forEach((s, i) => {
    if (s.some((d) => d > 0xffffffff)) throw new TypeError(`weightsToBytes: tensor ${i} dimension too large`);
    shapeBytes += 1 + 4 * s.length;
    dataBytes += body.tensors[i].byteLength;
  });
  const format = body.head === undefined ? 1 : 2;
  const dataStart = align4(headerBytesOf(format) + shapeBytes);
  const out = Buffer.alloc(dataStart + dataBytes + 4);
  MAGIC.forEach((b, i) => (out[i] = b));
  out.writeUInt8(format, 5);
  out.writeUInt16LE(body.tensors.length, 6);
  out.writeDoubleLE(body.version, 8);
  out.writeUInt32LE(body.checksum >>> 0, 16);
  if (body.head !== undefined) out.writeUInt8(HEAD_CODES.indexOf(body.head) + 1, HEADER_BYTES);
  let p = headerBytesOf(format);
  for (const s of body.shapes) {
    out.writeUInt8(s.length, p++);
    for (const d of s) {
      out.writeUInt32LE(d, p);
      p += 4;
    }
  }
  p = dataStart;
  for (const t of body.tensors) {
    out.set(bytesOf(t), p);
    p += t.byteLength;
  }
  out.writeUInt32LE(crc32(out.subarray(0, p)), p);
  return out;
}

/**
 * One buffer -> weights body (data copied out, so the input may be reused). A truncated or
 * corrupt buffer throws ProtocolError KAIS_ERR_MALFORMED or KAIS_ERR_CHECKSUM (unknown format
 * version: KAIS_ERR_VERSION) with one clear line; never anything else.
 */
export function weightsFromBytes(bytes: Uint8Array): WeightsBody {
  assertLittleEndian();
  if (!(bytes instanceof Uint8Array)) {
    throw new ProtocolError('KAIS_ERR_MALFORMED', 'weights buffer: expected bytes');
  }
  const n = bytes.length;
  if (n < HEADER_BYTES + 4 || MAGIC.some((b, i) => bytes[i] !== b)) {
    throw new ProtocolError('KAIS_ERR_MALFORMED', `not a KAIS weights buffer (${n} bytes, no "KAISW" header)`);
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const format = view.getUint8(5);
  if (format !== 1 && format !== 2 && format !== 3) {
    throw new ProtocolError(
      'KAIS_ERR_VERSION',
      `weights buffer format ${format} is not supported (this build reads 1 to ${WEIGHTS_FORMAT_VERSION})`,
    );
  }
  const truncated = (what: string) => new ProtocolError('KAIS_ERR_MALFORMED', `weights buffer truncated or corrupt: ${what} (${n} bytes)`);
  if (format === 3) {
    if (n < PAIR_HEADER_BYTES + 4) throw truncated('header is cut off');
    const stored = view.getUint32(n - 4, true);
    const actual = crc32(bytes.subarray(0, n - 4));
    if (stored !== actual)
      throw new ProtocolError(
        'KAIS_ERR_CHECKSUM',
        `weights buffer corrupt: checksum ${hex(actual)} does not match the stored ${hex(stored)}`,
      );
    const firstLength = view.getUint32(8, true);
    if (PAIR_HEADER_BYTES + firstLength > n - 4) throw truncated(`its first actor's ${firstLength} bytes do not fit`);
    // each part is a one-actor buffer (format 1 or 2): checked before reading it, so no pair nests in a pair
    const formatAt = (at: number) => (at + 6 <= n - 4 ? view.getUint8(at + 5) : 0);
    if (
      view.getUint16(6, true) !== 0 ||
      ![1, 2].includes(formatAt(PAIR_HEADER_BYTES)) ||
      ![1, 2].includes(formatAt(PAIR_HEADER_BYTES + firstLength))
    )
      throw truncated('its parts are not one-actor buffers');
    const own = weightsFromBytes(bytes.subarray(PAIR_HEADER_BYTES, PAIR_HEADER_BYTES + firstLength));
    const second = weightsFromBytes(bytes.subarray(PAIR_HEADER_BYTES + firstLength, n - 4));
    if (second.version !== own.version) throw truncated(`its actors have versions ${own.version} and ${second.version}`);
    const { version: _v, ...light } = second;
    return { ...own, light };
  }
  const count = view.getUint16(6, true);
  const version = view.getFloat64(8, true);
  const checksum = view.getUint32(16, true);

  let head: ActorHeadName | undefined;
  if (format >= 2) {
    if (n < headerBytesOf(format) + 4) throw truncated('header is cut off');
    head = HEAD_CODES[view.getUint8(HEADER_BYTES) - 1];
  }
  const shapes: number[][] = [];
  let p = headerBytesOf(format);
  let dataBytes = 0;
  for (let i = 0; i < count; i++) {
    if (p + 1 > n - 4) throw truncated(`shape of tensor ${i} is cut off`);
    const rank = view.getUint8(p++);
    if (rank > MAX_TENSOR_RANK) throw truncated(`tensor ${i} has rank ${rank}`);
    if (p + 4 * rank > n - 4) throw truncated(`shape of tensor ${i} is cut off`);
    const shape: number[] = [];
    for (let k = 0; k < rank; k++, p += 4) shape.push(view.getUint32(p, true));
    dataBytes += 4 * shapeSize(shape);
    if (dataBytes > n) throw truncated(`tensor ${i} of shape [${shape.join(', ')}] does not fit`);
    shapes.push(shape);
  }
  const dataStart = align4(p);
  const end = dataStart + dataBytes;
  if (end + 4 !== n) {
    throw truncated(`expected ${end + 4} bytes from the header`);
  }
  const stored = view.getUint32(end, true);
  const actual = crc32(bytes.subarray(0, end));
  if (stored !== actual) {
    throw new ProtocolError(
      'KAIS_ERR_CHECKSUM',
      `weights buffer corrupt: checksum ${hex(actual)} does not match the stored ${hex(stored)}`,
    );
  }
  if (!Number.isSafeInteger(version) || version < 0) throw truncated(`weight version ${version}`);
  if (format >= 2 && head === undefined) throw truncated(`actor head code ${view.getUint8(HEADER_BYTES)}`);

  const tensors: Float32Array[] = [];
  let q = dataStart;
  for (const s of shapes) {
    const len = shapeSize(s);
    // Copied into a fresh, aligned ArrayBuffer: the input's byteOffset need not be a multiple of
    // 4, and the caller may reuse its buffer. (Not `bytes.slice`: on a Buffer that is a view.)
    const copy = new Uint8Array(4 * len);
    copy.set(bytes.subarray(q, q + 4 * len));
    tensors.push(new Float32Array(copy.buffer));
    q += 4 * len;
  }
  const body: WeightsBody = { version, checksum, shapes, tensors };
  if (head !== undefined) body.head = head;
  const problem = verifyWeights(body);
  if (problem) {
    throw new ProtocolError(problem.code, `weights buffer corrupt: ${problem.message}`);
  }
  return body;
}

function align4(x: number): number {
  return (x + 3) & ~3;
}
