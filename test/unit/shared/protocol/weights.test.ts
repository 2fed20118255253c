import * as zlib from 'zlib';
import { ProtocolError } from '../../../../shared/protocol/envelope';
import {
  WEIGHTS_FORMAT_VERSION,
  crc32,
  crc32Portable,
  packLightActor,
  packWeights,
  unpackWeights,
  verifyWeights,
  weightsChecksum,
  weightsFromBytes,
  weightsToBytes,
} from '../../../../shared/protocol/weights';
import { Rng } from '../../../../shared/rng';
import { sampleWeights } from './sample-frames';

function codeOf(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    if (!(e instanceof ProtocolError)) throw new Error(`expected a ProtocolError, got ${String(e)}`, { cause: e });
    return e.code;
  }
  throw new Error('expected a throw');
}

/** An actor-sized weight set: obsDim 40 -> 256 -> 128 -> 32 -> 9, kernels and biases. */
function actorLike(seed: number) {
  const rng = new Rng(seed);
  const dims = [40, 256, 128, 32, 9];
  const tensors = [];
  for (let i = 0; i + 1 < dims.length; i++) {
    tensors.push({ shape: [dims[i], dims[i + 1]], data: Float32Array.from({ length: dims[i] * dims[i + 1] }, () => rng.normal()) });
    tensors.push({ shape: [dims[i + 1]], data: Float32Array.from({ length: dims[i + 1] }, () => rng.normal()) });
  }
  return tensors;
}

describe('crc32', () => {
  it('gives the standard check value for "123456789"', () => {
    expect(crc32(Buffer.from('123456789'))).toBe(0xcbf43926);
    expect(crc32(new Uint8Array(0))).toBe(0);
  });

  it('continues over several buffers', () => {
    const all = Buffer.from('hello, edge cluster');
    expect(crc32(all.subarray(7), crc32(all.subarray(0, 7)))).toBe(crc32(all));
  });

  it('agrees with zlib.crc32 where Node has it', () => {
    const z = (zlib as unknown as { crc32?: (b: Uint8Array) => number }).crc32;
    if (!z) return;
    const bytes = Uint8Array.from({ length: 10_000 }, (_, i) => (i * 7919) & 0xff);
    expect(crc32(bytes)).toBe(z(bytes));
  });

  it('has a portable version that agrees with it for every length and offset mod 8', () => {
    expect(crc32Portable(Buffer.from('123456789'))).toBe(0xcbf43926);
    expect(crc32Portable(new Uint8Array(0))).toBe(0);
    const bytes = Uint8Array.from({ length: 4099 }, (_, i) => (i * 7919 + 13) & 0xff);
    for (let start = 0; start < 8; start++) {
      for (const end of [start, start + 1, start + 7, start + 8, start + 9, 4096, 4099]) {
        const part = bytes.subarray(start, end);
        expect(crc32Portable(part)).toBe(crc32(part));
      }
    }
    expect(crc32Portable(bytes.subarray(1000), crc32Portable(bytes.subarray(0, 1000)))).toBe(crc32(bytes));
  });
});

describe('weights body', () => {
  it('packs tensors with their shapes, version and a checksum over the raw bytes', () => {
    const body = packWeights(actorLike(1), 5);
    expect(body.version).toBe(5);
    expect(body.shapes[0]).toEqual([40, 256]);
    expect(body.checksum).toBe(weightsChecksum(body.tensors));
    expect(verifyWeights(body)).toBeNull();
    const back = unpackWeights(body);
    expect(back.map((t) => t.shape)).toEqual(body.shapes);
    expect(Buffer.from(back[3].data.buffer).equals(Buffer.from(actorLike(1)[3].data.buffer))).toBe(true);
  });

  it('copies the data so later model updates do not change a packed body', () => {
    const tensors = actorLike(2);
    const body = packWeights(tensors, 1);
    tensors[0].data[0] += 1;
    expect(verifyWeights(body)).toBeNull();
  });

  it('rejects a body whose data changed after packing with KAIS_ERR_CHECKSUM', () => {
    const body = sampleWeights();
    body.tensors[0][2] = -0.3;
    expect(verifyWeights(body)?.code).toBe('KAIS_ERR_CHECKSUM');
    expect(codeOf(() => unpackWeights(body))).toBe('KAIS_ERR_CHECKSUM');
    expect(verifyWeights(body, { checksum: false })).toBeNull();
  });

  it('checks only the structure of a verified body with checksum and values off', () => {
    const body = sampleWeights();
    body.tensors[0][2] = NaN;
    expect(verifyWeights(body, { checksum: false })?.code).toBe('KAIS_ERR_BAD_FIELD');
    expect(verifyWeights(body, { checksum: false, values: false })).toBeNull();
    body.shapes[0] = [2, 2];
    expect(verifyWeights(body, { checksum: false, values: false })?.field).toBe('body.tensors[0]');
  });

  it('rejects a tensor whose length does not match its shape with KAIS_ERR_BAD_FIELD', () => {
    const body = sampleWeights();
    body.shapes[0] = [2, 2];
    const problem = verifyWeights(body);
    expect(problem?.code).toBe('KAIS_ERR_BAD_FIELD');
    expect(problem?.field).toBe('body.tensors[0]');
  });

  it('throws a TypeError naming the tensor when packing a wrong length or shape', () => {
    expect(() => packWeights([{ shape: [2, 3], data: new Float32Array(5) }], 0)).toThrow(/tensor 0 .*needs 6/);
    expect(() => packWeights([{ shape: [-1], data: new Float32Array(0) }], 0)).toThrow(TypeError);
    expect(() => packWeights([], -1)).toThrow(/version/);
  });
});

describe('weights bytes (checkpoints)', () => {
  it('writes a trusted body without re-verifying it; reading it back verifies it all', () => {
    const body = packWeights(actorLike(3), 4);
    body.tensors[0][0] += 1; // changed after packing: the checksum no longer matches
    expect(() => weightsToBytes(body)).toThrow(/checksum/);
    const bytes = weightsToBytes(body, { trusted: true });
    expect(codeOf(() => weightsFromBytes(bytes))).toBe('KAIS_ERR_CHECKSUM');
    body.shapes[0] = [1];
    expect(() => weightsToBytes(body, { trusted: true })).toThrow(TypeError);
  });

  it('round-trips through one buffer with magic, format version, shapes and checksums', () => {
    const body = packWeights(actorLike(3), 12);
    const bytes = weightsToBytes(body);
    expect(bytes.subarray(0, 5).toString('latin1')).toBe('KAISW');
    expect(bytes[5]).toBe(1); // no head: format 1, the bytes written before heads existed
    const back = weightsFromBytes(bytes);
    expect(back.head).toBeUndefined();
    expect([back.version, back.checksum, back.shapes]).toEqual([body.version, body.checksum, body.shapes]);
    // compare raw bytes: jest's deep equality walks 50k floats one by one
    back.tensors.forEach((t, i) => {
      expect(t.constructor).toBe(Float32Array);
      expect(Buffer.from(t.buffer, t.byteOffset, t.byteLength).equals(Buffer.from(body.tensors[i].buffer))).toBe(true);
    });
  });

  it.each(['relu1', 'softplus1'] as const)('keeps the actor head %s (format 2), and a head-less body keeps format 1 bytes', (head) => {
    const plain = weightsToBytes(packWeights(actorLike(2), 5));
    const body = packWeights(actorLike(2), 5, head);
    const bytes = weightsToBytes(body);
    expect(bytes[5]).toBe(2);
    expect(bytes.length).toBe(plain.length + 4);
    const back = weightsFromBytes(bytes);
    expect(back.head).toBe(head);
    expect([back.version, back.checksum, back.shapes]).toEqual([body.version, body.checksum, body.shapes]);
    // the same tensors: the data section is byte-identical to the format-1 one
    expect(
      bytes
        .subarray(bytes.length - 4 - 4 * body.tensors.reduce((a, t) => a + t.length, 0), bytes.length - 4)
        .equals(plain.subarray(plain.length - 4 - 4 * body.tensors.reduce((a, t) => a + t.length, 0), plain.length - 4)),
    ).toBe(true);
    // every truncation and bit flip of a format-2 buffer is refused with a coded error
    for (let n = 0; n < bytes.length; n += 7) {
      expect(['KAIS_ERR_MALFORMED', 'KAIS_ERR_CHECKSUM']).toContain(codeOf(() => weightsFromBytes(bytes.subarray(0, n))));
    }
    for (let i = 0; i < 40; i++) {
      const bad = Buffer.from(bytes);
      bad[i] ^= 4;
      expect(['KAIS_ERR_MALFORMED', 'KAIS_ERR_CHECKSUM', 'KAIS_ERR_VERSION']).toContain(codeOf(() => weightsFromBytes(bad)));
    }
  });

  it('refuses an unknown head when packing, verifying or reading', () => {
    expect(() => packWeights(actorLike(1), 1, 'tanh' as never)).toThrow(/head must be one of relu1, softplus1/);
    const body = packWeights(actorLike(1), 1, 'relu1');
    expect(verifyWeights({ ...body, head: 'tanh' as never })?.field).toBe('body.head');
    const bytes = weightsToBytes(body);
    bytes[20] = 9; // head code 9, with a recomputed trailing checksum: only the code is wrong
    bytes.writeUInt32LE(crc32(bytes.subarray(0, bytes.length - 4)), bytes.length - 4);
    expect(codeOf(() => weightsFromBytes(bytes))).toBe('KAIS_ERR_MALFORMED');
  });

  it('writes a body with a light actor as format 3 (the two actors as two buffers) and reads it back; a pair cut or flipped anywhere is refused', () => {
    const body = { ...packWeights(actorLike(2), 6, 'relu1'), light: packLightActor(actorLike(3), 'softplus1') };
    const bytes = weightsToBytes(body);
    expect(bytes[5]).toBe(3);
    expect(WEIGHTS_FORMAT_VERSION).toBe(3);
    const back = weightsFromBytes(bytes);
    expect([back.version, back.checksum, back.head, back.light!.checksum, back.light!.head]).toEqual([
      6,
      body.checksum,
      'relu1',
      body.light.checksum,
      'softplus1',
    ]);
    expect(Buffer.from(back.light!.tensors[0].buffer).equals(Buffer.from(body.light.tensors[0].buffer))).toBe(true);
    expect(verifyWeights(back)).toBeNull();
    // a body without a light actor keeps its format (2 with a head)
    expect(weightsToBytes(packWeights(actorLike(2), 6, 'relu1'))[5]).toBe(2);
    const small = weightsToBytes({ ...sampleWeights(), light: packLightActor([{ shape: [2], data: new Float32Array([1, 2]) }]) });
    for (let n = 0; n < small.length; n++)
      expect(['KAIS_ERR_MALFORMED', 'KAIS_ERR_CHECKSUM']).toContain(codeOf(() => weightsFromBytes(small.subarray(0, n))));
    for (let i = 0; i < small.length; i++) {
      const bad = Buffer.from(small);
      bad[i] ^= 0x10;
      expect(['KAIS_ERR_MALFORMED', 'KAIS_ERR_CHECKSUM', 'KAIS_ERR_VERSION']).toContain(codeOf(() => weightsFromBytes(bad)));
    }
  });

  it('refuses a pair whose part is itself a pair, before reading the part', () => {
    const pair = weightsToBytes({ ...sampleWeights(), light: packLightActor([{ shape: [2], data: new Float32Array([1, 2]) }]) });
    const inner = weightsToBytes(sampleWeights());
    // a format-3 buffer whose first part is the pair above
    const out = Buffer.alloc(12 + pair.length + inner.length + 4);
    out.write('KAISW', 0, 'latin1');
    out[5] = 3;
    out.writeUInt32LE(pair.length, 8);
    pair.copy(out, 12);
    inner.copy(out, 12 + pair.length);
    out.writeUInt32LE(crc32(out.subarray(0, out.length - 4)), out.length - 4);
    expect(() => weightsFromBytes(out)).toThrow(/its parts are not one-actor buffers/);
    expect(codeOf(() => weightsFromBytes(out))).toBe('KAIS_ERR_MALFORMED');
  });

  it('reads a buffer at an unaligned offset and does not share its memory', () => {
    const bytes = weightsToBytes(sampleWeights(9));
    const big = Buffer.alloc(bytes.length + 1);
    bytes.copy(big, 1);
    const back = weightsFromBytes(big.subarray(1));
    big.fill(0);
    expect(back).toEqual(sampleWeights(9));
  });

  it('round-trips an empty weight set', () => {
    const body = packWeights([], 0);
    expect(weightsFromBytes(weightsToBytes(body))).toEqual(body);
  });

  it('refuses every truncation with KAIS_ERR_MALFORMED or KAIS_ERR_CHECKSUM', () => {
    const bytes = weightsToBytes(sampleWeights());
    for (let n = 0; n < bytes.length; n++) {
      expect(['KAIS_ERR_MALFORMED', 'KAIS_ERR_CHECKSUM']).toContain(codeOf(() => weightsFromBytes(bytes.subarray(0, n))));
    }
  });

  it('refuses every single-bit flip with a coded error', () => {
    const bytes = weightsToBytes(sampleWeights());
    for (let i = 0; i < bytes.length; i++) {
      for (let bit = 0; bit < 8; bit++) {
        const bad = Buffer.from(bytes);
        bad[i] ^= 1 << bit;
        expect(['KAIS_ERR_MALFORMED', 'KAIS_ERR_CHECKSUM', 'KAIS_ERR_VERSION']).toContain(codeOf(() => weightsFromBytes(bad)));
      }
    }
  });

  it('says clearly when the buffer is not a weights buffer at all', () => {
    expect(() => weightsFromBytes(Buffer.from('SQLite format 3\0 and so on'))).toThrow(/not a KAIS weights buffer/);
  });

  it('refuses an unknown format version with KAIS_ERR_VERSION', () => {
    const bytes = weightsToBytes(sampleWeights());
    bytes[5] = 99;
    expect(codeOf(() => weightsFromBytes(bytes))).toBe('KAIS_ERR_VERSION');
  });

  it('never throws anything but a ProtocolError on random buffers', () => {
    const rng = new Rng(7);
    const good = weightsToBytes(sampleWeights());
    for (let k = 0; k < 2000; k++) {
      const n = rng.int(200);
      const bytes = k % 2 === 0 ? Buffer.from(good.subarray(0, Math.min(n, good.length))) : Buffer.alloc(n);
      for (let i = 0; i < bytes.length; i++) if (k % 2 === 1 || rng.next() < 0.05) bytes[i] = rng.int(256);
      if (bytes.length >= 5 && k % 4 === 1) bytes.write('KAISW\u0001', 0, 'latin1');
      try {
        weightsFromBytes(bytes);
      } catch (e) {
        expect(e).toBeInstanceOf(ProtocolError);
      }
    }
  });
});
