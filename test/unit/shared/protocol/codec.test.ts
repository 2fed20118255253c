import { Packr } from 'msgpackr';
import {
  Codec,
  DEFAULT_MAX_FRAME_BYTES,
  ENVELOPE_HEAD_MAX_BYTES,
  decodeFrame,
  encodeFrame,
  validateFrame,
  type DecodeResult,
} from '../../../../shared/protocol/codec';
import {
  MESSAGE_TYPES,
  PROTOCOL_VERSION,
  ProtocolError,
  errorFrameFor,
  makeFrame,
  placementMatrix,
  type Frame,
} from '../../../../shared/protocol/envelope';
import { KaisError } from '../../../../shared/errors';
import { packWeights, weightsChecksum } from '../../../../shared/protocol/weights';
import { lightSwitchFrames, sampleFrames, sampleWeights } from './sample-frames';

/**
 * Plain msgpack without our validation, to craft frames a buggy or hostile peer would send.
 * Typed arrays become `bin` of their bytes, as the codec writes them.
 */
const rawPackr = new Packr({ useRecords: false, structuredClone: false });
function wireify(x: unknown): unknown {
  if (ArrayBuffer.isView(x)) return Buffer.from(x.buffer, x.byteOffset, x.byteLength);
  if (Array.isArray(x)) return x.map(wireify);
  if (x !== null && typeof x === 'object') {
    return Object.fromEntries(Object.entries(x).map(([k, v]) => [k, wireify(v)]));
  }
  return x;
}
const packRaw = (x: unknown): Buffer => rawPackr.pack(wireify(x));
/** One regime-guard switch as an agent reports it in telemetry. */
const GUARD_SWITCH = { ts: 1_700_000_000_000, level: 2, policy: 'round-robin', lateShare: 0.36, decision: 1234 };

function frameOf(type: string): Frame {
  const f = sampleFrames().find((s) => s.type === type);
  if (!f) throw new Error(type);
  return f;
}

/** A sample frame as a plain object whose body can be altered before raw packing. */
function rawOf(type: string, edit: (body: any) => void): Buffer {
  const f: any = frameOf(type);
  edit(f.body);
  return packRaw({ v: f.v, type: f.type, seq: f.seq, ts: f.ts, body: f.body });
}

function errorOf(r: DecodeResult): ProtocolError {
  if (r.ok) throw new Error(`expected an error, got a ${r.frame.type} frame`);
  return r.error;
}

describe('codec', () => {
  describe('round trip', () => {
    it('covers every message type', () => {
      expect(
        sampleFrames()
          .map((f) => f.type)
          .sort(),
      ).toEqual([...MESSAGE_TYPES].sort());
    });

    it.each(sampleFrames().map((f) => [f.type, f] as const))('round-trips a %s frame', (_type, frame) => {
      const r = decodeFrame(encodeFrame(frame));
      expect(r.ok).toBe(true);
      if (r.ok) expect(r.frame).toEqual(frame);
    });

    it.each(lightSwitchFrames().map((f) => [f.type, f.seq, f] as const))(
      'round-trips the light actor switch: a %s frame (seq %d)',
      (_type, _seq, frame) => {
        const r = decodeFrame(encodeFrame(frame));
        expect(r.ok).toBe(true);
        if (r.ok) expect(r.frame).toEqual(frame);
      },
    );

    it('reads a placement naming an actor this build does not know as naming none (main): its replicas still apply', () => {
      const f = lightSwitchFrames()[1];
      if (f.type !== 'placement') throw new Error();
      const r = decodeFrame(new Codec({ validateOutgoing: false }).encode({ ...f, body: { ...f.body, actor: 'heavy' as never } }));
      if (!r.ok || r.frame.type !== 'placement') throw new Error('placement');
      expect(r.frame.body.actor).toBeUndefined();
      expect(r.frame.body.replicas).toEqual(f.body.replicas);
    });

    it("checks a weights frame's light actor as its own: its checksum and its values", () => {
      const f = lightSwitchFrames()[0];
      if (f.type !== 'weights') throw new Error();
      f.body.light!.tensors[0][1] = 0.5; // changed after packing
      const e = errorOf(decodeFrame(encodeFrame(f)));
      expect(e.code).toBe('KAIS_ERR_CHECKSUM');
      expect(e.message).toMatch(/light actor: checksum/);
      const nan = lightSwitchFrames()[0];
      if (nan.type !== 'weights') throw new Error();
      nan.body.light!.tensors[1] = new Float32Array([NaN, 1]);
      nan.body.light!.checksum = weightsChecksum(nan.body.light!.tensors);
      const e2 = errorOf(decodeFrame(new Codec({ validateOutgoing: false }).encode(nan)));
      expect([e2.code, e2.field]).toEqual(['KAIS_ERR_BAD_FIELD', 'body.light.tensors[1]']);
    });

    it('carries the optional actor head of a weights frame, and leaves it out when absent', () => {
      const f = frameOf('weights');
      if (f.type !== 'weights') throw new Error();
      const withHead = { ...f, body: { ...f.body, head: 'relu1' as const } };
      const r = decodeFrame(encodeFrame(withHead));
      if (!r.ok || r.frame.type !== 'weights') throw new Error('weights');
      expect(r.frame.body.head).toBe('relu1');
      const plain = decodeFrame(encodeFrame(f));
      if (!plain.ok || plain.frame.type !== 'weights') throw new Error('weights');
      expect('head' in plain.frame.body).toBe(false);
    });

    it('brings typed arrays back as the same classes, not as Buffers', () => {
      const w = decodeFrame(encodeFrame(frameOf('weights')));
      const e = decodeFrame(encodeFrame(frameOf('experience')));
      const p = decodeFrame(encodeFrame(frameOf('placement')));
      if (!w.ok || w.frame.type !== 'weights') throw new Error('weights');
      if (!e.ok || e.frame.type !== 'experience') throw new Error('experience');
      if (!p.ok || p.frame.type !== 'placement') throw new Error('placement');
      for (const t of w.frame.body.tensors) expect(t.constructor).toBe(Float32Array);
      expect(e.frame.body.transitions[0].obs.constructor).toBe(Float32Array);
      expect(e.frame.body.transitions[0].mask.constructor).toBe(Uint8Array);
      expect(p.frame.body.replicas.constructor).toBe(Int32Array);
      expect(Array.from(w.frame.body.tensors[0])).toEqual(Array.from(new Float32Array([0.1, -0.2, 0.3, 1e-3, 5, -7.25])));
      expect(placementMatrix(p.frame.body)).toEqual([
        [1, 0, 2],
        [0, 3, 0],
      ]);
    });

    it('writes typed arrays as plain msgpack bin holding their little-endian bytes', () => {
      const w = encodeFrame(frameOf('weights'));
      // tensor [2] = [0.5, -0.5] as bin 8: c4 08 then 00 00 00 3f 00 00 00 bf
      expect(w.includes(Buffer.from('c408000000' + '3f000000bf', 'hex'))).toBe(true);
    });

    it('keeps typed arrays msgpackr sent with its typed-array extension', () => {
      // What a peer using new Packr({moreTypes: true}) in plain Node sends for Int32Array [1,0,2,0,3,0]:
      // ext 8 (c7), 25 bytes, ext type 0x74 "t", array code 5 (Int32Array), then the raw bytes.
      const raw = '010000000000000002000000000000000300000000000000';
      const ext = Buffer.from('c7197405' + raw, 'hex');
      const asBin = packRaw(frameOf('placement'));
      const at = asBin.indexOf(Buffer.from('c418' + raw, 'hex'));
      expect(at).toBeGreaterThan(0);
      const bytes = Buffer.concat([asBin.subarray(0, at), ext, asBin.subarray(at + 26)]);
      const r = decodeFrame(bytes);
      if (!r.ok || r.frame.type !== 'placement') throw new Error(r.ok ? r.frame.type : r.error.message);
      expect(placementMatrix(r.frame.body)).toEqual([
        [1, 0, 2],
        [0, 3, 0],
      ]);
    });

    it('round-trips a weights frame of the shipped model size (200k floats) and still checks every byte', () => {
      // [612, 256] + [256] + [256, 128] + [128] + [128, 41] + [41]: 195,753 floats, about 780 KB
      const shapes = [[612, 256], [256], [256, 128], [128], [128, 41], [41]];
      const tensors = shapes.map((shape, k) => {
        const data = new Float32Array(shape.reduce((a, b) => a * b, 1));
        for (let i = 0; i < data.length; i++) data[i] = Math.sin(i * 0.37 + k) * 0.1;
        return { shape, data };
      });
      const frame = makeFrame('weights', 9, packWeights(tensors, 12));
      const bytes = encodeFrame(frame);
      expect(bytes.length).toBeGreaterThan(780_000);
      const r = decodeFrame(bytes);
      if (!r.ok || r.frame.type !== 'weights') throw new Error(r.ok ? r.frame.type : r.error.message);
      expect(r.frame.body.version).toBe(12);
      expect(r.frame.body.shapes).toEqual(shapes);
      r.frame.body.tensors.forEach((t, k) => expect(t).toEqual(tensors[k].data));
      // the decoded tensors own their memory: reusing the receive buffer changes nothing
      const before = r.frame.body.tensors[0][0];
      bytes.fill(0);
      expect(r.frame.body.tensors[0][0]).toBe(before);

      const fresh = () => encodeFrame(frame);
      const dataAt = fresh().indexOf(Buffer.from(tensors[2].data.buffer, 0, 64)); // inside tensor 2
      expect(dataAt).toBeGreaterThan(0);
      // one flipped bit deep inside the data
      const flipped = fresh();
      flipped[dataAt + 1001] ^= 0x10;
      expect(errorOf(decodeFrame(flipped)).code).toBe('KAIS_ERR_CHECKSUM');
      // a NaN with a checksum that matches it
      const nan = frame.body.tensors.map((t) => Float32Array.from(t));
      nan[4][77] = NaN;
      const withNaN = packRaw({ ...frame, body: { ...frame.body, tensors: nan, checksum: weightsChecksum(nan) } });
      const eNaN = errorOf(decodeFrame(withNaN));
      expect(eNaN.code).toBe('KAIS_ERR_BAD_FIELD');
      expect(eNaN.field).toBe('body.tensors[4]');
      // a shape that does not match its tensor
      const wrongShape = packRaw({ ...frame, body: { ...frame.body, shapes: [[612, 255], ...shapes.slice(1)] } });
      expect(errorOf(decodeFrame(wrongShape)).code).toBe('KAIS_ERR_BAD_FIELD');
      // a tensor that is not whole float32s
      const odd = frame.body.tensors.map((t) => Buffer.from(t.buffer, t.byteOffset, t.byteLength));
      odd[5] = odd[5].subarray(0, odd[5].length - 1);
      expect(errorOf(decodeFrame(packRaw({ ...frame, body: { ...frame.body, tensors: odd } }))).code).toBe('KAIS_ERR_BAD_FIELD');
      // a tensor of the wrong type
      const str = packRaw({ ...frame, body: { ...frame.body, tensors: ['not floats', ...frame.body.tensors.slice(1)] } });
      expect(errorOf(decodeFrame(str)).code).toBe('KAIS_ERR_BAD_FIELD');
      // truncated anywhere
      for (const cut of [1, 100, dataAt + 5, fresh().length - 1]) {
        expect(errorOf(decodeFrame(fresh().subarray(0, cut))).code).toBe('KAIS_ERR_MALFORMED');
      }
    });

    it('decodes from an ArrayBuffer and from a Uint8Array at an odd offset', () => {
      const bytes = encodeFrame(frameOf('weights'));
      const ab = Uint8Array.prototype.slice.call(bytes).buffer;
      expect(decodeFrame(ab).ok).toBe(true);
      const shifted = new Uint8Array(bytes.length + 3);
      shifted.set(bytes, 3);
      expect(decodeFrame(shifted.subarray(3)).ok).toBe(true);
    });

    it('strips body and envelope keys it does not know', () => {
      const r = decodeFrame(rawOf('ack', (b) => (b.extra = 'x')));
      if (!r.ok) throw r.error;
      expect(r.frame.body).toEqual({ of: 2 });
      const withTop = packRaw({ ...frameOf('ack'), trace: 1 });
      const r2 = decodeFrame(withTop);
      if (!r2.ok) throw r2.error;
      expect(Object.keys(r2.frame).sort()).toEqual(['body', 'seq', 'ts', 'type', 'v']);
    });

    it('does not let a __proto__ key reach an object prototype', () => {
      // {"v":1,"type":"ack","seq":1,"ts":0,"body":{"__proto__":{"of":9}}}, written byte by byte
      const bytes = Buffer.from('85a17601a474797065a361636ba373657101a2747300a4626f647981a95f5f70726f746f5f5f81a26f6609', 'hex');
      const e = errorOf(decodeFrame(bytes));
      expect(e.code).toBe('KAIS_ERR_BAD_FIELD');
      expect(e.field).toBe('body.of');
      expect(({} as any).of).toBeUndefined();
    });
  });

  describe('error codes', () => {
    it('refuses bytes that are not msgpack with KAIS_ERR_MALFORMED', () => {
      const e = errorOf(decodeFrame(Buffer.from([0xc1, 0x00, 0x01])));
      expect(e.code).toBe('KAIS_ERR_MALFORMED');
      expect(e.seq).toBeNull();
    });

    it('refuses a truncated frame with KAIS_ERR_MALFORMED', () => {
      const bytes = encodeFrame(frameOf('weights'));
      expect(errorOf(decodeFrame(bytes.subarray(0, bytes.length - 5))).code).toBe('KAIS_ERR_MALFORMED');
    });

    it('refuses trailing bytes after the envelope with KAIS_ERR_MALFORMED', () => {
      const bytes = Buffer.concat([encodeFrame(frameOf('ack')), Buffer.from([0x01])]);
      expect(errorOf(decodeFrame(bytes)).code).toBe('KAIS_ERR_MALFORMED');
    });

    it('refuses an empty frame and non-bytes input with KAIS_ERR_MALFORMED', () => {
      expect(errorOf(decodeFrame(new Uint8Array(0))).code).toBe('KAIS_ERR_MALFORMED');
      expect(errorOf(decodeFrame('hello' as unknown as Uint8Array)).code).toBe('KAIS_ERR_MALFORMED');
    });

    it('refuses deep nesting with KAIS_ERR_MALFORMED before msgpackr recurses into it', () => {
      const deep = Buffer.concat([Buffer.alloc(100_000, 0x91), Buffer.from([0x01])]);
      const started = Date.now();
      const e = errorOf(decodeFrame(deep));
      expect(e.code).toBe('KAIS_ERR_MALFORMED');
      expect(e.message).toMatch(/nested deeper than 16/);
      expect(Date.now() - started).toBeLessThan(100);
    });

    it('refuses a count or length that runs past the end of the frame with KAIS_ERR_MALFORMED', () => {
      expect(errorOf(decodeFrame(Buffer.from('ddffffffff01', 'hex'))).message).toMatch(/cannot fit/);
      expect(errorOf(decodeFrame(Buffer.from('dbffffffff41', 'hex'))).message).toMatch(/runs past the end/);
    });

    it('refuses msgpackr records and other extensions with KAIS_ERR_MALFORMED', () => {
      const records = new Packr({ useRecords: true }).pack(frameOf('ack'));
      expect(errorOf(decodeFrame(records)).message).toMatch(/extension 0x72/);
      const date = new Packr({ useRecords: false }).pack({ ...frameOf('ack'), ts: new Date(0) });
      expect(errorOf(decodeFrame(date)).message).toMatch(/extension 0xff/);
    });

    it.each([
      ['a number', 42],
      ['an array', [1, 'ack', 0, 0, {}]],
      ['a map without body', { v: 1, type: 'ack', seq: 0, ts: 0 }],
      ['a map without v', { type: 'ack', seq: 0, ts: 0, body: { of: 1 } }],
    ])('refuses %s as not an envelope with KAIS_ERR_MALFORMED', (_what, value) => {
      expect(errorOf(decodeFrame(packRaw(value))).code).toBe('KAIS_ERR_MALFORMED');
    });

    it('refuses a frame over maxFrameBytes with KAIS_ERR_OVERSIZED before decoding it', () => {
      const codec = new Codec({ maxFrameBytes: 64 });
      // Valid msgpack would decode fine; garbage would be MALFORMED if it were decoded at all.
      const garbage = Buffer.alloc(65, 0xc1);
      const e = errorOf(codec.decode(garbage));
      expect(e.code).toBe('KAIS_ERR_OVERSIZED');
      expect(e.message).toMatch(/65 bytes exceeds the 64-byte limit/);
      expect(codec.decode(encodeFrame(frameOf('ack'))).ok).toBe(true);
    });

    it('uses a 16 MiB frame limit by default', () => {
      expect(DEFAULT_MAX_FRAME_BYTES).toBe(16 * 1024 * 1024);
      expect(errorOf(decodeFrame(new Uint8Array(DEFAULT_MAX_FRAME_BYTES + 1))).code).toBe('KAIS_ERR_OVERSIZED');
    });

    it('refuses to encode a frame larger than maxFrameBytes', () => {
      const codec = new Codec({ maxFrameBytes: 100 });
      expect(() => codec.encode(frameOf('weights'))).toThrow(ProtocolError);
      try {
        codec.encode(frameOf('weights'));
      } catch (e) {
        expect((e as ProtocolError).code).toBe('KAIS_ERR_OVERSIZED');
      }
    });

    it('refuses an unknown protocol version with KAIS_ERR_VERSION', () => {
      const e = errorOf(decodeFrame(packRaw({ ...frameOf('ack'), v: 2 })));
      expect(e.code).toBe('KAIS_ERR_VERSION');
      expect(e.message).toMatch(/version 2/);
      expect(errorOf(decodeFrame(packRaw({ ...frameOf('ack'), v: '1' }))).code).toBe('KAIS_ERR_VERSION');
    });

    it('refuses an unknown message type with KAIS_ERR_UNKNOWN_TYPE and keeps its seq', () => {
      const e = errorOf(decodeFrame(packRaw({ ...frameOf('ack'), type: 'launch', seq: 17 })));
      expect(e.code).toBe('KAIS_ERR_UNKNOWN_TYPE');
      expect(e.seq).toBe(17);
      expect(errorOf(decodeFrame(packRaw({ ...frameOf('ack'), type: 3 }))).code).toBe('KAIS_ERR_UNKNOWN_TYPE');
    });

    it('rejects a weights frame whose checksum does not match', () => {
      const f = frameOf('weights');
      if (f.type !== 'weights') throw new Error();
      f.body.tensors[1][0] = 0.75; // data changed after packing
      const e = errorOf(decodeFrame(new Codec({ validateOutgoing: true }).encode(f)));
      expect(e.code).toBe('KAIS_ERR_CHECKSUM');
      expect(e.seq).toBe(2);
      expect(new Codec({ verifyChecksums: false }).decode(encodeFrame(f)).ok).toBe(true);
    });

    it('makes ProtocolError a KaisError with a stable code', () => {
      const e = errorOf(decodeFrame(Buffer.from([0xc1])));
      expect(e).toBeInstanceOf(KaisError);
      expect(e).toBeInstanceOf(ProtocolError);
      expect(e.name).toBe('ProtocolError');
    });
  });

  describe('KAIS_ERR_BAD_FIELD names the field', () => {
    const cases: [string, string, (b: any) => void, string][] = [
      ['a negative seq', 'ack', () => undefined, 'seq'],
      ['a missing eapId', 'hello', (b) => delete b.eapId, 'body.eapId'],
      ['a fractional eapId', 'hello', (b) => (b.eapId = 1.5), 'body.eapId'],
      ['a token that is not a string', 'hello', (b) => (b.token = 7), 'body.token'],
      ['a zero heartbeat', 'welcome', (b) => (b.heartbeatMs = 0), 'body.heartbeatMs'],
      ['an empty session id', 'welcome', (b) => (b.sessionId = ''), 'body.sessionId'],
      ['features that are not a list', 'hello', (b) => (b.features = 'actor-switch'), 'body.features'],
      ['a feature name with a space', 'hello', (b) => (b.features = ['actor switch']), 'body.features'],
      ['an unknown act', 'welcome', (b) => (b.act = 'softmax'), 'body.act'],
      ['a weights body with more shapes than tensors', 'weights', (b) => b.shapes.push([1]), 'body.tensors'],
      ['a tensor that does not match its shape', 'weights', (b) => (b.shapes[0] = [2, 2]), 'body.tensors[0]'],
      ['a tensor holding NaN', 'weights', (b) => (b.tensors[1] = new Float32Array([NaN, 1])), 'body.tensors[1]'],
      ['a tensor whose byte length is not a multiple of 4', 'weights', (b) => (b.tensors[1] = Buffer.alloc(6)), 'body.tensors[1]'],
      ['a tensor that is not bytes', 'weights', (b) => (b.tensors[1] = [1, 2]), 'body.tensors[1]'],
      ['a negative dimension', 'weights', (b) => (b.shapes[1] = [-2]), 'body.shapes[1][0]'],
      ['a checksum above 32 bits', 'weights', (b) => (b.checksum = 2 ** 32), 'body.checksum'],
      ['an unknown actor head', 'weights', (b) => (b.head = 'tanh'), 'body.head'],
      ['a light actor that is not a map', 'weights', (b) => (b.light = 3), 'body.light'],
      ['a light actor without tensors', 'weights', (b) => (b.light = { checksum: 0, shapes: [] }), 'body.light.tensors'],
      ['an actor of a placement that is not a string', 'placement', (b) => (b.actor = 1), 'body.actor'],
      ['an unknown actor of a transition', 'experience', (b) => (b.transitions[0].actor = 'main'), 'body.transitions[0].actor'],
      ['replicas not matching numServices x numNodes', 'placement', (b) => (b.numNodes = 4), 'body.replicas'],
      ['a negative replica count', 'placement', (b) => (b.replicas = new Int32Array([1, 0, -2, 0, 3, 0])), 'body.replicas'],
      ['replicas as a list of numbers', 'placement', (b) => (b.replicas = [1, 0, 2, 0, 3, 0]), 'body.replicas'],
      ['an action outside the mask', 'experience', (b) => (b.transitions[0].action = 4), 'body.transitions[0].action'],
      ['an action the mask excludes', 'experience', (b) => (b.transitions[0].action = 1), 'body.transitions[0].action'],
      [
        'a mask value other than 0 or 1',
        'experience',
        (b) => (b.transitions[1].mask = new Uint8Array([0, 2, 0, 1])),
        'body.transitions[1].mask',
      ],
      [
        'an observation holding Infinity',
        'experience',
        (b) => (b.transitions[0].obs = new Float32Array([1, Infinity, 0])),
        'body.transitions[0].obs',
      ],
      ['a positive log-probability', 'experience', (b) => (b.transitions[0].logProb = 0.5), 'body.transitions[0].logProb'],
      ['a transition from another eAP', 'experience', (b) => (b.transitions[1].eap = 0), 'body.transitions[1].eap'],
      ['a done flag that is not a boolean', 'experience', (b) => (b.transitions[0].done = 1), 'body.transitions[0].done'],
      ['a negative latency', 'experience', (b) => (b.transitions[0].latencyMs = -1), 'body.transitions[0].latencyMs'],
      ['a NaN cpu reading', 'telemetry', (b) => (b.samples[0].cpu = NaN), 'body.samples[0].cpu'],
      ['more in-deadline than succeeded', 'telemetry', (b) => (b.samples[0].inDeadline = 10), 'body.samples[0].inDeadline'],
      ['samples that are not an array', 'telemetry', (b) => (b.samples = {}), 'body.samples'],
      ['a window of an unknown kind', 'telemetry', (b) => (b.windows[0].kind = 'odd'), 'body.windows[0].kind'],
      ['window values not matching steps x dims', 'telemetry', (b) => (b.windows[0].dims = 2), 'body.windows[0].values'],
      [
        'a window value that is NaN',
        'telemetry',
        (b) => (b.windows[0].values = new Float32Array([0, 0, 0, NaN, 0, 0])),
        'body.windows[0].values',
      ],
      [
        'a one-step window',
        'telemetry',
        (b) => ((b.windows[0].steps = 1), (b.windows[0].values = new Float32Array(3))),
        'body.windows[0].steps',
      ],
      ['an empty shape key', 'telemetry', (b) => (b.windows[0].shape = ''), 'body.windows[0].shape'],
      ['too many windows', 'telemetry', (b) => (b.windows = Array.from({ length: 513 }, () => b.windows[0])), 'body.windows'],
      ['a guard switch to level 3', 'telemetry', (b) => (b.guard = [{ ...GUARD_SWITCH, level: 3 }]), 'body.guard[0].level'],
      ['a guard late share above 1', 'telemetry', (b) => (b.guard = [{ ...GUARD_SWITCH, lateShare: 1.5 }]), 'body.guard[0].lateShare'],
      ['a guard switch without a policy', 'telemetry', (b) => (b.guard = [{ ...GUARD_SWITCH, policy: '' }]), 'body.guard[0].policy'],
      ['too many guard switches', 'telemetry', (b) => (b.guard = Array.from({ length: 65 }, () => GUARD_SWITCH)), 'body.guard'],
      ['a verdict that is not a boolean', 'verdicts', (b) => (b.verdicts[0].anomalous = 1), 'body.verdicts[0].anomalous'],
      ['a NaN score', 'verdicts', (b) => (b.verdicts[0].score = NaN), 'body.verdicts[0].score'],
      ['a negative replica target', 'scale', (b) => (b.replicas = -1), 'body.replicas'],
      ['an ack of a bigint seq', 'ack', (b) => (b.of = 2n ** 60n), 'body.of'],
      ['an error code that is not KAIS_ERR_*', 'error', (b) => (b.code = 'oops'), 'body.code'],
      ['a body that is not a map', 'scale', () => undefined, 'body'],
    ];

    it.each(cases)('rejects %s', (_what, type, edit, fieldPath) => {
      let bytes = rawOf(type, edit);
      if (fieldPath === 'seq') bytes = packRaw({ ...frameOf(type), seq: -1 });
      if (fieldPath === 'body') bytes = packRaw({ ...frameOf(type), body: [1, 2] });
      const e = errorOf(decodeFrame(bytes));
      expect(e.code).toBe('KAIS_ERR_BAD_FIELD');
      expect(e.field).toBe(fieldPath);
      expect(e.message).toContain(fieldPath);
    });

    it("carries an agent's regime-guard switches in telemetry, and leaves them out when absent", () => {
      const f = frameOf('telemetry') as Frame & { type: 'telemetry' };
      const withGuard = { ...f, body: { ...f.body, guard: [GUARD_SWITCH, { ...GUARD_SWITCH, level: 0, policy: 'cmmac' }] } };
      const r = decodeFrame(new Codec().encode(withGuard));
      expect(r.ok && r.frame.type === 'telemetry' && r.frame.body.guard).toEqual(withGuard.body.guard);
      const plain = decodeFrame(new Codec().encode(f));
      expect(plain.ok && plain.frame.type === 'telemetry' && 'guard' in plain.frame.body).toBe(false);
    });

    it('rejects a non-finite ts', () => {
      const e = errorOf(decodeFrame(packRaw({ ...frameOf('ack'), ts: Infinity })));
      expect([e.code, e.field]).toEqual(['KAIS_ERR_BAD_FIELD', 'ts']);
    });

    it('throws a TypeError naming the field when encoding an invalid frame', () => {
      const f = frameOf('scale') as any;
      f.body.node = -1;
      expect(() => encodeFrame(f)).toThrow(TypeError);
      expect(() => encodeFrame(f)).toThrow(/body\.node/);
    });
  });

  describe('helpers', () => {
    it('builds an error reply that carries the offending seq', () => {
      const e = errorOf(decodeFrame(packRaw({ ...frameOf('ack'), type: 'nope', seq: 9 })));
      const reply = errorFrameFor(e, 0, 123);
      expect(reply).toEqual({
        v: PROTOCOL_VERSION,
        type: 'error',
        seq: 0,
        ts: 123,
        body: { code: 'KAIS_ERR_UNKNOWN_TYPE', message: e.message, of: 9 },
      });
      expect(decodeFrame(encodeFrame(reply)).ok).toBe(true);
    });

    it('validates in-process frames with the same rules', () => {
      expect(validateFrame(makeFrame('weights', 0, sampleWeights())).ok).toBe(true);
      expect(validateFrame({ v: 1 }).ok).toBe(false);
    });

    it.each(sampleFrames().map((f) => [f.type, f] as const))(
      'encodes a %s frame as a head and a shared body whose concatenation is encode(frame)',
      (_type, frame) => {
        const codec = new Codec();
        const body = codec.encodeBody(frame.type, frame.body as never);
        for (const [seq, ts] of [
          [frame.seq, frame.ts],
          [0, 0],
          [2 ** 40, Date.now()],
          [Number.MAX_SAFE_INTEGER, 1.5],
        ]) {
          const head = codec.encodeHead(frame.type, seq, ts);
          expect(head.length).toBeLessThanOrEqual(ENVELOPE_HEAD_MAX_BYTES);
          const whole = Buffer.concat([head, body]);
          expect(whole).toEqual(codec.encode({ ...frame, seq, ts } as Frame));
          const r = codec.decode(whole);
          expect(r.ok && r.frame.seq === seq && r.frame.ts === ts).toBe(true);
        }
      },
    );

    it('refuses to split an invalid or oversized frame, and a bad seq or ts, with clear errors', () => {
      const scale = frameOf('scale') as any;
      expect(() => new Codec().encodeBody('scale', { ...scale.body, node: -1 })).toThrow(/body\.node/);
      const w = frameOf('weights');
      const full = encodeFrame(w).length;
      const tight = new Codec({ maxFrameBytes: full - 1 });
      expect(() => tight.encodeBody('weights', w.body as never)).toThrow(expect.objectContaining({ code: 'KAIS_ERR_OVERSIZED' }));
      expect(() => new Codec().encodeHead('ack', -1, 0)).toThrow(/seq/);
      expect(() => new Codec().encodeHead('ack', 0, NaN)).toThrow(/ts/);
    });

    it('refuses a non-positive maxFrameBytes option with a TypeError naming it', () => {
      expect(() => new Codec({ maxFrameBytes: 0 })).toThrow(/maxFrameBytes/);
    });
  });
});
