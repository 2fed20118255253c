/**
 * Frames <-> bytes. `encode` packs an envelope with msgpackr; `decode` checks the size, unpacks
 * and validates every field, and returns `{ok: true, frame}` or `{ok: false, error}` with a
 * stable `KAIS_ERR_*` code (docs/protocol.md, "Error codes"). `decode` never throws, whatever
 * the bytes: a bad frame gets an `error` reply (`errorFrameFor`) and is dropped by the caller.
 *
 * The validator is hand-written with the few helpers below instead of a schema library: the
 * message set is small, the typed-array and cross-field rules (lengths against shapes, the mask
 * against the action) would need custom code in any library, and it adds no dependency.
 *
 * The decoded frame is rebuilt field by field from the validated values, so unknown keys are
 * dropped and nothing a peer sent beyond the schema reaches the rest of the program.
 */
import { Packr, Unpackr } from 'msgpackr';
import {
  ACTOR_HEADS,
  ACTOR_SLOTS,
  EPOCH_PATTERN,
  MESSAGE_TYPES,
  PROTOCOL_VERSION,
  ProtocolError,
  MAX_DEVICE_WINDOWS,
  MAX_GUARD_SWITCHES,
  type GuardSwitchReport,
  type AckBody,
  type ActorHeadName,
  type ActorSlot,
  type DeviceVerdict,
  type DeviceWindow,
  type BodyByType,
  type ErrorBody,
  type ExperienceBody,
  type Frame,
  type HelloBody,
  type MessageType,
  type LightActorBody,
  type LoadBody,
  type NodeSample,
  type PlacementBody,
  type ProtocolErrorCode,
  type ScaleBody,
  type TelemetryBody,
  type Transition,
  type VerdictsBody,
  type WeightsBody,
  type WelcomeBody,
} from './envelope';
import { MAX_TENSOR_RANK, verifyWeights } from './weights';

/** Default largest frame: 16 MiB, about 80 times the kais actor's weights. */
export const DEFAULT_MAX_FRAME_BYTES = 16 * 1024 * 1024;

export interface CodecOptions {
  /**
   * Largest frame accepted by `decode` (checked before unpacking) and produced by `encode`, bytes.
   * @defaultValue 16 MiB (DEFAULT_MAX_FRAME_BYTES)
   */
  maxFrameBytes?: number;
  /**
   * Recompute the CRC-32 of every inbound `weights` frame and refuse a mismatch.
   * @defaultValue true
   */
  verifyChecksums?: boolean;
  /**
   * Validate outgoing frames in `encode` (throws TypeError naming the field). Costs one pass over
   * the typed arrays; never recomputes checksums.
   * @defaultValue true
   */
  validateOutgoing?: boolean;
}

export type DecodeResult = { ok: true; frame: Frame } | { ok: false; error: ProtocolError };

export class Codec {
  readonly maxFrameBytes: number;
  readonly verifyChecksums: boolean;
  readonly validateOutgoing: boolean;

  // Typed arrays travel as plain msgpack `bin` holding their raw little-endian bytes (`toWire`),
  // and the validator turns them back into the class the schema names. Not msgpackr's
  // `moreTypes` typed-array extension: it finds typed arrays with `instanceof` against its own
  // realm's TypedArray, which misses arrays from another realm (jest's sandbox is one) and then
  // writes them as maps; without `moreTypes` msgpackr 1.12 writes a Float32Array as `bin` of the
  // wrong bytes. `bin` is also what any other msgpack library can produce and read.
  // useRecords off: records need structures shared by both ends, and a peer must not be able to
  // define any. structuredClone off: no object references or cycles on the wire.
  private readonly packr = new Packr({ useRecords: false, structuredClone: false });
  private readonly unpackr = new Unpackr({ useRecords: false, structuredClone: false, mapsAsObjects: true });

  constructor(options: CodecOptions = {}) {
    const max = options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES;
    if (!Number.isSafeInteger(max) || max <= 0) {
      throw new TypeError(`Codec: options.maxFrameBytes must be a positive integer, got ${max}`);
    }
    this.maxFrameBytes = max;
    this.verifyChecksums = options.verifyChecksums ?? true;
    this.validateOutgoing = options.validateOutgoing ?? true;
  }

  /**
   * Frame -> bytes. Throws TypeError for an invalid frame (programmer error) and ProtocolError
   * KAIS_ERR_OVERSIZED when the result is larger than `maxFrameBytes`.
   */
  encode(frame: Frame): Buffer {
    if (this.validateOutgoing) {
      const checked = validateFrame(frame, false);
      if (!checked.ok) throw new TypeError(`encode: ${checked.error.message}`);
    }
    const { v, type, seq, ts } = frame;
    const bytes = this.packr.pack({ v, type, seq, ts, body: toWire(frame) });
    if (bytes.length > this.maxFrameBytes) {
      throw new ProtocolError(
        'KAIS_ERR_OVERSIZED',
        `${type} frame of ${bytes.length} bytes exceeds the ${this.maxFrameBytes}-byte limit`,
        seq,
      );
    }
    return bytes;
  }

  /**
   * A body sent in many frames (the hub pushes the same weights to every agent) in two parts:
   * `encodeBody(type, body)` once, then `encodeHead(type, seq, ts)` per frame.
   * `Buffer.concat([head, body])` is byte for byte `encode(makeFrame(type, seq, body, ts))`, so the
   * parts can go out as two fragments of one WebSocket message and the body is never copied per
   * receiver. Validates like `encode` (TypeError naming the field) and throws ProtocolError
   * KAIS_ERR_OVERSIZED when the body alone is within ENVELOPE_HEAD_MAX_BYTES of `maxFrameBytes`.
   */
  encodeBody<T extends MessageType>(type: T, body: BodyByType[T]): Buffer {
    const frame = { v: PROTOCOL_VERSION, type, seq: 0, ts: 0, body } as Frame;
    if (this.validateOutgoing) {
      const checked = validateFrame(frame, false);
      if (!checked.ok) throw new TypeError(`encodeBody: ${checked.error.message}`);
    }
    const bytes = this.packr.pack(toWire(frame));
    if (bytes.length > this.maxFrameBytes - ENVELOPE_HEAD_MAX_BYTES) {
      throw new ProtocolError(
        'KAIS_ERR_OVERSIZED',
        `${type} body of ${bytes.length} bytes does not fit the ${this.maxFrameBytes}-byte frame limit`,
      );
    }
    return bytes;
  }

  /** The envelope before the body (see `encodeBody`): `{v, type, seq, ts, ` and the key `body`. */
  encodeHead(type: MessageType, seq: number, ts: number): Buffer {
    if (!isUint(seq)) throw new TypeError(`encodeHead: seq must be a non-negative integer, got ${seq}`);
    if (!isFiniteNumber(ts) || ts < 0) throw new TypeError(`encodeHead: ts must be a non-negative number, got ${ts}`);
    // The frame is the map {v, type, seq, ts} with a fifth key, "body", last, as `encode` writes
    // it: pack the four, then raise the map's count to 5 (msgpackr writes map16, 0xde + u16).
    const four = this.packr.pack({ v: PROTOCOL_VERSION, type, seq, ts });
    const head = Buffer.allocUnsafe(four.length + BODY_KEY.length);
    four.copy(head, 0);
    BODY_KEY.copy(head, four.length);
    if (head[0] === 0xde) head.writeUInt16BE(5, 1);
    else if (head[0] === 0x84)
      head[0] = 0x85; // fixmap, should msgpackr ever write one
    else throw new Error(`encodeHead: unexpected msgpack map header 0x${head[0].toString(16)}`);
    return head;
  }

  /** Bytes -> validated frame, or a coded error. Never throws. */
  decode(bytes: Uint8Array | ArrayBuffer): DecodeResult {
    try {
      return this.decodeUnsafe(bytes);
    } catch (e) {
      // Only reachable through a bug in this file: still no throw to the caller.
      return fail('KAIS_ERR_MALFORMED', `undecodable frame: ${e instanceof Error ? e.message : String(e)}`, null);
    }
  }

  private decodeUnsafe(input: Uint8Array | ArrayBuffer): DecodeResult {
    const bytes = input instanceof Uint8Array ? input : input instanceof ArrayBuffer ? new Uint8Array(input) : undefined;
    if (bytes === undefined) return fail('KAIS_ERR_MALFORMED', 'frame is not bytes', null);
    if (bytes.byteLength > this.maxFrameBytes) {
      return fail('KAIS_ERR_OVERSIZED', `frame of ${bytes.byteLength} bytes exceeds the ${this.maxFrameBytes}-byte limit`, null);
    }
    if (bytes.byteLength === 0) return fail('KAIS_ERR_MALFORMED', 'empty frame', null);
    const shapeProblem = scanMsgpack(bytes, MAX_NESTING);
    if (shapeProblem !== null) return fail('KAIS_ERR_MALFORMED', `undecodable bytes: ${shapeProblem}`, null);
    let raw: unknown;
    try {
      raw = this.unpackr.unpack(bytes);
    } catch (e) {
      return fail('KAIS_ERR_MALFORMED', `undecodable bytes: ${e instanceof Error ? e.message : String(e)}`, null);
    }
    return validateFrame(raw, this.verifyChecksums);
  }
}

/** Upper bound of `encodeHead`'s length: fixmap, 5 keys, the longest type, a 64-bit seq and ts. */
export const ENVELOPE_HEAD_MAX_BYTES = 64;

/** msgpack fixstr "body". */
const BODY_KEY = Buffer.from([0xa4, 0x62, 0x6f, 0x64, 0x79]);

/** Raw bytes of a typed array, without copying. */
function bin(a: Float32Array | Int32Array | Uint8Array): Buffer {
  return Buffer.from(a.buffer, a.byteOffset, a.byteLength);
}

/** The body as it is packed: every typed array replaced by a `bin` view of its bytes. */
function toWire(frame: Frame): unknown {
  switch (frame.type) {
    case 'weights': {
      const b = frame.body;
      return { ...b, tensors: b.tensors.map(bin), ...(b.light ? { light: { ...b.light, tensors: b.light.tensors.map(bin) } } : {}) };
    }
    case 'placement':
      return { ...frame.body, replicas: bin(frame.body.replicas) };
    case 'experience':
      return {
        ...frame.body,
        transitions: frame.body.transitions.map((t) => ({ ...t, obs: bin(t.obs), mask: bin(t.mask) })),
      };
    case 'telemetry': {
      const b = frame.body;
      if (!b.windows && !b.load) return b;
      const l = b.load;
      return {
        ...b,
        ...(b.windows ? { windows: b.windows.map((w) => ({ ...w, values: bin(w.values) })) } : {}),
        ...(l
          ? {
              load: {
                ...l,
                arrivals: bin(l.arrivals),
                workCoreS: bin(l.workCoreS),
                ...(l.completedInTime && l.failed ? { completedInTime: bin(l.completedInTime), failed: bin(l.failed) } : {}),
                targets: bin(l.targets),
                outstanding: bin(l.outstanding),
                busy: bin(l.busy),
                waiting: bin(l.waiting),
              },
            }
          : {}),
      };
    }
    default:
      return frame.body;
  }
}

const defaultCodec = new Codec();

/** `new Codec().encode(frame)` with the default options. */
export function encodeFrame(frame: Frame): Buffer {
  return defaultCodec.encode(frame);
}

/** `new Codec().decode(bytes)` with the default options. Never throws. */
export function decodeFrame(bytes: Uint8Array | ArrayBuffer): DecodeResult {
  return defaultCodec.decode(bytes);
}

// ---------------------------------------------------------------------------------------------
// Pre-scan
// ---------------------------------------------------------------------------------------------

/** Deepest nesting a frame may have; ours have at most 5 (envelope, body, list, item, shape). */
const MAX_NESTING = 16;

/** The one msgpack extension accepted: msgpackr's typed array (self-contained, type byte + bytes). */
const EXT_TYPED_ARRAY = 0x74;

/**
 * Walks the msgpack structure without building anything and returns the first problem, or null.
 * Run before msgpackr so that hostile shapes cost a linear scan instead of a deep recursion or a
 * huge allocation: nesting deeper than `maxDepth` (msgpackr would recurse until the stack
 * overflows, milliseconds per frame), a length or count that runs past the end of the frame
 * (msgpackr may allocate for it first), the reserved byte 0xc1, msgpackr's record and
 * structured-clone extensions (a peer must not define record structures), and trailing bytes.
 * Iterative: `open[i]` is the number of values still to read in the i-th open container.
 */
function scanMsgpack(b: Uint8Array, maxDepth: number): string | null {
  const n = b.length;
  const view = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const open: number[] = [1];
  let p = 0;
  const u8 = () => b[p];
  const u16 = () => view.getUint16(p);
  const u32 = () => view.getUint32(p);
  while (open.length > 0) {
    if (open[open.length - 1] === 0) {
      open.pop();
      continue;
    }
    open[open.length - 1]--;
    if (p >= n) return `frame ends inside a value at byte ${p}`;
    const t = b[p++];
    let children = 0; // values inside this one (2 per map entry)
    let skip = 0; // payload bytes after the header
    let lenBytes = 0; // size of the length field that follows the type byte
    if (t <= 0x7f || t >= 0xe0 || t === 0xc0 || t === 0xc2 || t === 0xc3) {
      // fixint, nil, bool: no payload
    } else if (t <= 0x8f) children = 2 * (t & 0x0f);
    else if (t <= 0x9f) children = t & 0x0f;
    else if (t <= 0xbf) skip = t & 0x1f;
    else if (t === 0xc1) return `reserved byte 0xc1 at ${p - 1}`;
    else if (t === 0xca || t === 0xcb) skip = t === 0xca ? 4 : 8;
    else if (t >= 0xcc && t <= 0xd3) skip = 1 << (t & 0x03);
    else if (t === 0xc4 || t === 0xd9) lenBytes = 1;
    else if (t === 0xc5 || t === 0xda || t === 0xdc || t === 0xde) lenBytes = 2;
    else if (t === 0xc6 || t === 0xdb || t === 0xdd || t === 0xdf) lenBytes = 4;
    else if (t >= 0xc7 && t <= 0xc9) {
      lenBytes = 1 << (t - 0xc7); // ext 8/16/32: length field, then the type byte, then data
    } else {
      return `msgpack extension 0x${b[p] === undefined ? '??' : b[p].toString(16)} is not part of the protocol`; // fixext
    }
    if (lenBytes > 0) {
      if (p + lenBytes > n) return `frame ends inside a length at byte ${p}`;
      const len = lenBytes === 1 ? u8() : lenBytes === 2 ? u16() : u32();
      p += lenBytes;
      if (t === 0xdc || t === 0xdd) children = len;
      else if (t === 0xde || t === 0xdf) children = 2 * len;
      else if (t >= 0xc7 && t <= 0xc9) {
        if (p >= n || b[p] !== EXT_TYPED_ARRAY) {
          return `msgpack extension 0x${p < n ? b[p].toString(16) : '??'} is not part of the protocol`;
        }
        skip = 1 + len;
      } else skip = len;
    }
    if (skip > n - p) return `a value of ${skip} bytes runs past the end of the frame at byte ${p}`;
    p += skip;
    if (children > 0) {
      if (children > n - p) return `a container of ${children} values cannot fit in the ${n - p} bytes left`;
      if (open.length > maxDepth) return `values nested deeper than ${maxDepth}`;
      open.push(children);
    }
  }
  if (p !== n) return `${n - p} bytes after the end of the envelope`;
  return null;
}

function fail(code: ProtocolErrorCode, message: string, seq: number | null, field: string | null = null): DecodeResult {
  return { ok: false, error: new ProtocolError(code, message, seq, field) };
}

// ---------------------------------------------------------------------------------------------
// Envelope
// ---------------------------------------------------------------------------------------------

/**
 * Validates a decoded value as a frame and rebuilds it from the checked fields. Exported for the
 * in-process path (training) that skips bytes but wants the same guarantees.
 */
export function validateFrame(raw: unknown, verifyChecksums = true): DecodeResult {
  if (!isPlainObject(raw)) return fail('KAIS_ERR_MALFORMED', `not an envelope: got ${describe(raw)}`, null);
  for (const key of ['v', 'type', 'seq', 'ts', 'body']) {
    if (!Object.hasOwn(raw, key)) return fail('KAIS_ERR_MALFORMED', `not an envelope: no "${key}"`, null);
  }
  if (raw.v !== PROTOCOL_VERSION) {
    return fail(
      'KAIS_ERR_VERSION',
      `protocol version ${describe(raw.v)} is not supported (this build speaks ${PROTOCOL_VERSION})`,
      null,
      'v',
    );
  }
  const seq = raw.seq;
  if (!isUint(seq)) return fail('KAIS_ERR_BAD_FIELD', `seq must be a non-negative integer, got ${describe(seq)}`, null, 'seq');
  const type = raw.type;
  if (typeof type !== 'string' || !(MESSAGE_TYPES as readonly string[]).includes(type)) {
    return fail('KAIS_ERR_UNKNOWN_TYPE', `unknown message type ${describe(type)}`, seq, 'type');
  }
  const ts = raw.ts;
  if (!isFiniteNumber(ts) || ts < 0) {
    return fail('KAIS_ERR_BAD_FIELD', `ts must be a non-negative number of ms, got ${describe(ts)}`, seq, 'ts');
  }
  let body: BodyByType[MessageType];
  try {
    body = BODY_READERS[type as MessageType](raw.body, 'body');
  } catch (e) {
    if (e instanceof BadField) return fail('KAIS_ERR_BAD_FIELD', `${e.field} ${e.problem}`, seq, e.field);
    throw e;
  }
  if (type === 'weights') {
    const problem = verifyWeights(body as WeightsBody, { checksum: verifyChecksums });
    if (problem) {
      const message = problem.field ? `${problem.field}: ${problem.message}` : problem.message;
      return fail(problem.code, message, seq, problem.field);
    }
  }
  return { ok: true, frame: { v: PROTOCOL_VERSION, type, seq, ts, body } as Frame };
}

// ---------------------------------------------------------------------------------------------
// Field helpers: each reads `o[key]`, checks it, and throws BadField naming the path otherwise
// ---------------------------------------------------------------------------------------------

class BadField {
  constructor(
    readonly field: string,
    readonly problem: string,
  ) {}
}

type Obj = Record<string, unknown>;

function isPlainObject(x: unknown): x is Obj {
  if (typeof x !== 'object' || x === null) return false;
  const proto = Object.getPrototypeOf(x);
  return proto === Object.prototype || proto === null;
}

function isFiniteNumber(x: unknown): x is number {
  return typeof x === 'number' && Number.isFinite(x);
}

function isUint(x: unknown): x is number {
  return typeof x === 'number' && Number.isSafeInteger(x) && x >= 0;
}

/** Short description of a received value for error messages (never the whole value). */
function describe(x: unknown): string {
  if (x === undefined) return 'nothing';
  if (x === null) return 'null';
  if (typeof x === 'string') return JSON.stringify(x.length > 40 ? `${x.slice(0, 40)}...` : x);
  if (typeof x === 'number' || typeof x === 'boolean') return String(x);
  if (typeof x === 'bigint') return `${x}n`;
  if (Array.isArray(x)) return `an array of ${x.length}`;
  if (ArrayBuffer.isView(x)) return `a ${x.constructor.name} of ${x.byteLength} bytes`;
  if (typeof x === 'object') return `a ${x.constructor?.name ?? 'null-prototype object'}`;
  return typeof x;
}

function field(o: Obj, key: string, path: string): unknown {
  if (!Object.hasOwn(o, key)) throw new BadField(`${path}.${key}`, 'is missing');
  return o[key];
}

function obj(x: unknown, path: string): Obj {
  if (!isPlainObject(x)) throw new BadField(path, `must be a map, got ${describe(x)}`);
  return x;
}

function uint(o: Obj, key: string, path: string, max = Number.MAX_SAFE_INTEGER): number {
  const x = field(o, key, path);
  if (!isUint(x) || x > max) {
    throw new BadField(`${path}.${key}`, `must be an integer in [0, ${max}], got ${describe(x)}`);
  }
  return x;
}

function uintOrNull(o: Obj, key: string, path: string): number | null {
  const x = field(o, key, path);
  if (x === null) return null;
  if (!isUint(x)) throw new BadField(`${path}.${key}`, `must be a non-negative integer or null, got ${describe(x)}`);
  return x;
}

function num(o: Obj, key: string, path: string, min = -Infinity, max = Infinity): number {
  const x = field(o, key, path);
  if (!isFiniteNumber(x) || x < min || x > max) {
    throw new BadField(`${path}.${key}`, `must be a finite number in [${min}, ${max}], got ${describe(x)}`);
  }
  return x;
}

function numOrNull(o: Obj, key: string, path: string, min = -Infinity): number | null {
  const x = field(o, key, path);
  if (x === null) return null;
  if (!isFiniteNumber(x) || x < min) {
    throw new BadField(`${path}.${key}`, `must be a finite number >= ${min} or null, got ${describe(x)}`);
  }
  return x;
}

function bool(o: Obj, key: string, path: string): boolean {
  const x = field(o, key, path);
  if (typeof x !== 'boolean') throw new BadField(`${path}.${key}`, `must be a boolean, got ${describe(x)}`);
  return x;
}

function str(o: Obj, key: string, path: string, minLen: number, maxLen: number): string {
  const x = field(o, key, path);
  if (typeof x !== 'string' || x.length < minLen || x.length > maxLen) {
    throw new BadField(`${path}.${key}`, `must be a string of ${minLen}..${maxLen} characters, got ${describe(x)}`);
  }
  return x;
}

function list(o: Obj, key: string, path: string): unknown[] {
  const x = field(o, key, path);
  if (!Array.isArray(x)) throw new BadField(`${path}.${key}`, `must be an array, got ${describe(x)}`);
  return x;
}

/**
 * A typed array field. On the wire it is `bin` (raw little-endian elements, decoded by msgpackr
 * as a Buffer); it is copied into a fresh, aligned array of the schema's class, so the frame never
 * keeps the receive buffer alive. An array that already has the right class (in-process
 * `validateFrame`, or msgpackr's typed-array extension from another sender) is kept as is.
 */
function typed<T extends Float32Array | Int32Array | Uint8Array>(
  ctor: { new (buffer: ArrayBuffer): T; readonly BYTES_PER_ELEMENT: number; readonly name: string },
  x: unknown,
  path: string,
): T {
  if (ArrayBuffer.isView(x) && x.constructor === ctor) return x as T;
  if (x instanceof Uint8Array) {
    if (x.byteLength % ctor.BYTES_PER_ELEMENT !== 0) {
      throw new BadField(path, `must be ${ctor.name} bytes, got ${x.byteLength} bytes`);
    }
    // ArrayBuffer.prototype.slice copies into a fresh buffer at offset 0 (so aligned) in one
    // memcpy. Not x.slice(): on a Buffer that is a view of the same memory. Not
    // `new Uint8Array(n).set(x)`: measured 15-40x slower for a 800 KB weights tensor (Node 20).
    return new ctor(x.buffer.slice(x.byteOffset, x.byteOffset + x.byteLength) as ArrayBuffer);
  }
  throw new BadField(path, `must be a ${ctor.name}, got ${describe(x)}`);
}

function allFinite(a: Float32Array, path: string): Float32Array {
  for (let i = 0; i < a.length; i++) {
    if (!Number.isFinite(a[i])) throw new BadField(path, `has a non-finite value at index ${i}`);
  }
  return a;
}

// ---------------------------------------------------------------------------------------------
// Bodies
// ---------------------------------------------------------------------------------------------

const MAX_U32 = 0xffffffff;

/** An optional epoch or instance id: absent stays absent; otherwise 1..64 of [0-9A-Za-z._-] (or null where allowed). */
function optId(o: Obj, key: string, path: string, nullable: boolean): string | null | undefined {
  const x = o[key];
  if (x === undefined) return undefined;
  if (x === null && nullable) return null;
  if (typeof x !== 'string' || !EPOCH_PATTERN.test(x)) {
    throw new BadField(`${path}.${key}`, `must be 1..64 characters of [0-9A-Za-z._-]${nullable ? ' or null' : ''}, got ${describe(x)}`);
  }
  return x;
}

function readHello(x: unknown, p: string): HelloBody {
  const o = obj(x, p);
  const body: HelloBody = {
    eapId: uint(o, 'eapId', p),
    token: str(o, 'token', p, 0, 4096),
    agentVersion: str(o, 'agentVersion', p, 0, 128),
    weightVersion: uintOrNull(o, 'weightVersion', p),
    placementVersion: uintOrNull(o, 'placementVersion', p),
  };
  const epoch = optId(o, 'epoch', p, true);
  if (epoch !== undefined) body.epoch = epoch;
  const instance = optId(o, 'instance', p, false);
  if (instance !== undefined && instance !== null) body.instance = instance;
  if (o.features !== undefined) {
    const f = o.features;
    if (!Array.isArray(f) || f.length > 16 || !f.every((x) => typeof x === 'string' && /^[a-z0-9-]{1,32}$/.test(x)))
      throw new BadField(`${p}.features`, `must be a list of at most 16 names of [a-z0-9-] (1..32 characters), got ${describe(f)}`);
    body.features = [...(f as string[])];
  }
  return body;
}

function readWelcome(x: unknown, p: string): WelcomeBody {
  const o = obj(x, p);
  const heartbeatMs = uint(o, 'heartbeatMs', p);
  if (heartbeatMs === 0) throw new BadField(`${p}.heartbeatMs`, 'must be > 0, got 0');
  const body: WelcomeBody = {
    sessionId: str(o, 'sessionId', p, 1, 128),
    heartbeatMs,
    weightVersion: uintOrNull(o, 'weightVersion', p),
    placementVersion: uintOrNull(o, 'placementVersion', p),
  };
  const epoch = optId(o, 'epoch', p, false);
  if (typeof epoch === 'string') body.epoch = epoch;
  if (o.act !== undefined) {
    if (o.act !== 'sample') throw new BadField(`${p}.act`, `must be sample when present, got ${describe(o.act)}`);
    body.act = 'sample';
  }
  return body;
}

/** Structure only; lengths against shapes, finiteness and the checksum are `verifyWeights`. */
function readWeights(x: unknown, p: string): WeightsBody {
  const o = obj(x, p);
  const version = uint(o, 'version', p);
  const body: WeightsBody = { version, ...readActor(o, p) };
  const epoch = optId(o, 'epoch', p, false);
  if (typeof epoch === 'string') body.epoch = epoch;
  if (o.light !== undefined) body.light = readActor(obj(o.light, `${p}.light`), `${p}.light`);
  return body;
}

/** The actor part of a weights body (its own or its `light` one): checksum, shapes, tensors, head. */
function readActor(o: Record<string, unknown>, p: string): LightActorBody {
  const checksum = uint(o, 'checksum', p, MAX_U32);
  const shapes = list(o, 'shapes', p).map((s, i) => {
    const sp = `${p}.shapes[${i}]`;
    if (!Array.isArray(s) || s.length > MAX_TENSOR_RANK) {
      throw new BadField(sp, `must be an array of at most ${MAX_TENSOR_RANK} dimensions, got ${describe(s)}`);
    }
    return s.map((d, k) => {
      if (!isUint(d) || d > MAX_U32) throw new BadField(`${sp}[${k}]`, `must be a dimension >= 0, got ${describe(d)}`);
      return d;
    });
  });
  const tensors = list(o, 'tensors', p).map((t, i) => typed(Float32Array, t, `${p}.tensors[${i}]`));
  if (tensors.length !== shapes.length) {
    throw new BadField(`${p}.tensors`, `has ${tensors.length} tensors but shapes has ${shapes.length}`);
  }
  const body: LightActorBody = { checksum, shapes, tensors };
  if (o.head !== undefined) {
    if (!(ACTOR_HEADS as readonly unknown[]).includes(o.head)) {
      throw new BadField(`${p}.head`, `must be one of ${ACTOR_HEADS.join(', ')}, got ${describe(o.head)}`);
    }
    body.head = o.head as ActorHeadName;
  }
  return body;
}

function readPlacement(x: unknown, p: string): PlacementBody {
  const o = obj(x, p);
  const version = uint(o, 'version', p);
  const frame = uint(o, 'frame', p);
  const numServices = uint(o, 'numServices', p, MAX_U32);
  const numNodes = uint(o, 'numNodes', p, MAX_U32);
  const replicas = typed(Int32Array, field(o, 'replicas', p), `${p}.replicas`);
  if (replicas.length !== numServices * numNodes) {
    throw new BadField(
      `${p}.replicas`,
      `has ${replicas.length} counts, numServices x numNodes = ${numServices} x ${numNodes} needs ${numServices * numNodes}`,
    );
  }
  for (let i = 0; i < replicas.length; i++) {
    if (replicas[i] < 0) throw new BadField(`${p}.replicas`, `has a negative count ${replicas[i]} at index ${i}`);
  }
  const body: PlacementBody = { version, frame, numServices, numNodes, replicas };
  const epoch = optId(o, 'epoch', p, false);
  if (typeof epoch === 'string') body.epoch = epoch;
  if (o.actor !== undefined) {
    if (typeof o.actor !== 'string' || o.actor.length > 32)
      throw new BadField(`${p}.actor`, `must be one of ${ACTOR_SLOTS.join(', ')}, got ${describe(o.actor)}`);
    // an actor this build does not know (a later orchestrator's): read as none, main; the replicas still apply
    if ((ACTOR_SLOTS as readonly string[]).includes(o.actor)) body.actor = o.actor as ActorSlot;
  }
  return body;
}

function readTransition(x: unknown, p: string, eap: number): Transition {
  const o = obj(x, p);
  const t: Transition = {
    eap: uint(o, 'eap', p),
    slot: uint(o, 'slot', p),
    service: uint(o, 'service', p),
    obs: allFinite(typed(Float32Array, field(o, 'obs', p), `${p}.obs`), `${p}.obs`),
    mask: typed(Uint8Array, field(o, 'mask', p), `${p}.mask`),
    action: uint(o, 'action', p),
    // <= 1e-4 rather than <= 0: log(p) of a float32 probability of 1 can round to a tiny positive
    logProb: num(o, 'logProb', p, -Infinity, 1e-4),
    reward: num(o, 'reward', p),
    latencyMs: numOrNull(o, 'latencyMs', p, 0),
    metDeadline: bool(o, 'metDeadline', p),
    done: bool(o, 'done', p),
    weightVersion: uintOrNull(o, 'weightVersion', p),
  };
  if (o.actor !== undefined) {
    if (o.actor !== 'light') throw new BadField(`${p}.actor`, `must be light when present, got ${describe(o.actor)}`);
    t.actor = 'light';
  }
  if (t.eap !== eap) throw new BadField(`${p}.eap`, `is ${t.eap} in a batch from eAP ${eap}`);
  if (t.obs.length === 0) throw new BadField(`${p}.obs`, 'is empty');
  if (t.mask.length === 0) throw new BadField(`${p}.mask`, 'is empty');
  for (let i = 0; i < t.mask.length; i++) {
    if (t.mask[i] > 1) throw new BadField(`${p}.mask`, `must hold 0 or 1, got ${t.mask[i]} at index ${i}`);
  }
  if (t.action >= t.mask.length) {
    throw new BadField(`${p}.action`, `is ${t.action}, outside the ${t.mask.length} targets of the mask`);
  }
  if (t.mask[t.action] !== 1) throw new BadField(`${p}.action`, `is ${t.action}, a target the mask excludes`);
  return t;
}

function readExperience(x: unknown, p: string): ExperienceBody {
  const o = obj(x, p);
  const eap = uint(o, 'eap', p);
  const transitions = list(o, 'transitions', p).map((t, i) => readTransition(t, `${p}.transitions[${i}]`, eap));
  return { eap, transitions };
}

function readSample(x: unknown, p: string): NodeSample {
  const o = obj(x, p);
  const s: NodeSample = {
    node: uint(o, 'node', p),
    ts: num(o, 'ts', p, 0),
    cpu: num(o, 'cpu', p, 0),
    mem: num(o, 'mem', p, 0),
    disk: num(o, 'disk', p, 0),
    upBwMbps: num(o, 'upBwMbps', p, 0),
    requests: uint(o, 'requests', p),
    succeeded: uint(o, 'succeeded', p),
    inDeadline: uint(o, 'inDeadline', p),
    latencyMsSum: num(o, 'latencyMsSum', p, 0),
  };
  if (s.inDeadline > s.succeeded) {
    throw new BadField(`${p}.inDeadline`, `is ${s.inDeadline}, more than the ${s.succeeded} succeeded`);
  }
  return s;
}

function readWindow(x: unknown, p: string): DeviceWindow {
  const o = obj(x, p);
  const kind = field(o, 'kind', p);
  if (kind !== 'ambiguous' && kind !== 'train') throw new BadField(`${p}.kind`, `must be 'ambiguous' or 'train', got ${describe(kind)}`);
  const steps = uint(o, 'steps', p, 256);
  const dims = uint(o, 'dims', p, 64);
  if (steps < 2) throw new BadField(`${p}.steps`, `must be 2..256, got ${steps}`);
  if (dims < 1) throw new BadField(`${p}.dims`, `must be 1..64, got ${dims}`);
  const values = allFinite(typed(Float32Array, field(o, 'values', p), `${p}.values`), `${p}.values`);
  if (values.length !== steps * dims)
    throw new BadField(`${p}.values`, `has ${values.length} values, expected steps x dims = ${steps * dims}`);
  return { node: uint(o, 'node', p), id: uint(o, 'id', p), kind, shape: str(o, 'shape', p, 1, 64), steps, dims, values };
}

/** Most targets and services a load report may describe (a cluster larger than `large` many times over). */
const MAX_LOAD_TARGETS = 4096;
const MAX_LOAD_SERVICES = 4096;

function readLoad(x: unknown, p: string): LoadBody {
  const o = obj(x, p);
  const numServices = uint(o, 'numServices', p, MAX_LOAD_SERVICES);
  const perService = (key: string): Float32Array => {
    const a = allFinite(typed(Float32Array, field(o, key, p), `${p}.${key}`), `${p}.${key}`);
    if (a.length !== numServices) throw new BadField(`${p}.${key}`, `has ${a.length} values, numServices is ${numServices}`);
    for (let i = 0; i < a.length; i++) if (a[i] < 0) throw new BadField(`${p}.${key}`, `has a negative value at index ${i}`);
    return a;
  };
  const targets = typed(Int32Array, field(o, 'targets', p), `${p}.targets`);
  if (targets.length > MAX_LOAD_TARGETS) throw new BadField(`${p}.targets`, `has ${targets.length} targets, at most ${MAX_LOAD_TARGETS}`);
  for (let k = 0; k < targets.length; k++) {
    if (targets[k] < 0 || (k > 0 && targets[k] <= targets[k - 1]))
      throw new BadField(`${p}.targets`, `must be ascending non-negative ids, each once (index ${k})`);
  }
  const perTarget = (key: string): Float32Array => {
    const a = allFinite(typed(Float32Array, field(o, key, p), `${p}.${key}`), `${p}.${key}`);
    if (a.length !== targets.length * numServices)
      throw new BadField(`${p}.${key}`, `has ${a.length} values, targets x numServices = ${targets.length * numServices}`);
    for (let i = 0; i < a.length; i++) if (a[i] < 0) throw new BadField(`${p}.${key}`, `has a negative value at index ${i}`);
    return a;
  };
  const intervalMs = num(o, 'intervalMs', p, 0);
  if (intervalMs <= 0) throw new BadField(`${p}.intervalMs`, `must be > 0, got ${intervalMs}`);
  if ((o.completedInTime === undefined) !== (o.failed === undefined))
    throw new BadField(
      `${p}.${o.completedInTime === undefined ? 'completedInTime' : 'failed'}`,
      'is missing: completedInTime and failed come together',
    );
  return {
    endTs: num(o, 'endTs', p, 0),
    intervalMs,
    numServices,
    arrivals: perService('arrivals'),
    workCoreS: perService('workCoreS'),
    ...(o.completedInTime !== undefined ? { completedInTime: perService('completedInTime'), failed: perService('failed') } : {}),
    targets,
    outstanding: perTarget('outstanding'),
    busy: perTarget('busy'),
    waiting: perTarget('waiting'),
  };
}

function readTelemetry(x: unknown, p: string): TelemetryBody {
  const o = obj(x, p);
  const body: TelemetryBody = {
    eap: uint(o, 'eap', p),
    samples: list(o, 'samples', p).map((s, i) => readSample(s, `${p}.samples[${i}]`)),
  };
  if (o.windows !== undefined) {
    const ws = list(o, 'windows', p);
    if (ws.length > MAX_DEVICE_WINDOWS) throw new BadField(`${p}.windows`, `has ${ws.length} windows, at most ${MAX_DEVICE_WINDOWS}`);
    body.windows = ws.map((w, i) => readWindow(w, `${p}.windows[${i}]`));
  }
  if (o.load !== undefined) body.load = readLoad(o.load, `${p}.load`);
  if (o.guard !== undefined) {
    const gs = list(o, 'guard', p);
    if (gs.length > MAX_GUARD_SWITCHES) throw new BadField(`${p}.guard`, `has ${gs.length} switches, at most ${MAX_GUARD_SWITCHES}`);
    body.guard = gs.map((g, i) => readGuardSwitch(g, `${p}.guard[${i}]`));
  }
  return body;
}

function readGuardSwitch(x: unknown, p: string): GuardSwitchReport {
  const o = obj(x, p);
  const level = uint(o, 'level', p, 2);
  return {
    ts: num(o, 'ts', p, 0),
    level,
    policy: str(o, 'policy', p, 1, 32),
    lateShare: num(o, 'lateShare', p, 0, 1),
    decision: num(o, 'decision', p, 0),
  };
}

function readVerdict(x: unknown, p: string): DeviceVerdict {
  const o = obj(x, p);
  return { node: uint(o, 'node', p), id: uint(o, 'id', p), anomalous: bool(o, 'anomalous', p), score: num(o, 'score', p) };
}

function readVerdicts(x: unknown, p: string): VerdictsBody {
  const o = obj(x, p);
  const vs = list(o, 'verdicts', p);
  if (vs.length > MAX_DEVICE_WINDOWS) throw new BadField(`${p}.verdicts`, `has ${vs.length} verdicts, at most ${MAX_DEVICE_WINDOWS}`);
  return { verdicts: vs.map((v, i) => readVerdict(v, `${p}.verdicts[${i}]`)) };
}

function readScale(x: unknown, p: string): ScaleBody {
  const o = obj(x, p);
  return { service: uint(o, 'service', p), node: uint(o, 'node', p), replicas: uint(o, 'replicas', p, 0x7fffffff) };
}

function readAck(x: unknown, p: string): AckBody {
  return { of: uint(obj(x, p), 'of', p) };
}

const ERROR_CODE = /^KAIS_ERR_[A-Z0-9_]{1,64}$/;

function readError(x: unknown, p: string): ErrorBody {
  const o = obj(x, p);
  const code = str(o, 'code', p, 1, 80);
  if (!ERROR_CODE.test(code)) throw new BadField(`${p}.code`, `must look like KAIS_ERR_*, got ${describe(code)}`);
  return { code, message: str(o, 'message', p, 0, 1024), of: uintOrNull(o, 'of', p) };
}

const BODY_READERS: { [T in MessageType]: (x: unknown, path: string) => BodyByType[T] } = {
  hello: readHello,
  welcome: readWelcome,
  weights: readWeights,
  placement: readPlacement,
  experience: readExperience,
  telemetry: readTelemetry,
  scale: readScale,
  ack: readAck,
  error: readError,
  verdicts: readVerdicts,
};
