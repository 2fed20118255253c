/**
 * 10,000 malformed, truncated, oversized, mutated and random frames: every one decodes to an error
 * result (or, for a mutation that happens to stay valid, a frame that passed validation), none
 * throws, and the codec still decodes good frames afterwards.
 */
import { Packr } from 'msgpackr';
import { Codec } from '../../../../shared/protocol/codec';
import { PROTOCOL_ERROR_CODES, ProtocolError } from '../../../../shared/protocol/envelope';
import { Rng } from '../../../../shared/rng';
import { sampleFrames } from './sample-frames';

const MAX = 64 * 1024;
const codec = new Codec({ maxFrameBytes: MAX });
const templates = sampleFrames();
const good = templates.map((f) => codec.encode(f));
const rawPackr = new Packr({ useRecords: false });

/** Random msgpack-able values, including hostile shapes (deep nesting, huge ints, odd types). */
function randomValue(rng: Rng, depth: number): unknown {
  switch (rng.int(depth > 4 ? 6 : 10)) {
    case 0:
      return rng.int(2) === 0 ? null : rng.next() < 0.5;
    case 1:
      return [0, -1, 1.5, NaN, Infinity, 2 ** 53, 2 ** 64, -(2 ** 31)][rng.int(8)];
    case 2:
      return ['', 'hello', 'weights', '__proto__', 'KAIS_ERR_X', 'x'.repeat(5000)][rng.int(6)];
    case 3:
      return Buffer.from(Array.from({ length: rng.int(40) }, () => rng.int(256)));
    case 4:
      return BigInt(rng.int(1000)) * 10n ** 16n; // 64-bit ints beyond 2^53
    case 5:
      return rng.int(1000);
    case 6:
      return Array.from({ length: rng.int(5) }, () => randomValue(rng, depth + 1));
    default: {
      const keys = ['v', 'type', 'seq', 'ts', 'body', 'of', 'tensors', 'shapes', 'eap', 'transitions', 'mask', 'obs'];
      const o: Record<string, unknown> = {};
      for (let i = rng.int(6); i > 0; i--) o[keys[rng.int(keys.length)]] = randomValue(rng, depth + 1);
      return o;
    }
  }
}

function randomFrame(rng: Rng, k: number): Uint8Array {
  const base = good[rng.int(good.length)];
  switch (k % 8) {
    case 0: // random bytes
      return Buffer.from(Array.from({ length: 1 + rng.int(300) }, () => rng.int(256)));
    case 1: // truncated good frame
      return base.subarray(0, rng.int(base.length));
    case 2: {
      // a few bytes of a good frame flipped
      const b = Buffer.from(base);
      for (let i = 1 + rng.int(4); i > 0; i--) b[rng.int(b.length)] ^= 1 << rng.int(8);
      return b;
    }
    case 3: // oversized
      return Buffer.alloc(MAX + 1 + rng.int(1000), rng.int(256));
    case 4: // random structure that is valid msgpack
      return rawPackr.pack(randomValue(rng, 0));
    case 5: {
      // a real envelope with one field replaced by something random
      const f: any = { ...templates[rng.int(templates.length)] };
      const keys = ['v', 'type', 'seq', 'ts', 'body'];
      f[keys[rng.int(keys.length)]] = randomValue(rng, 1);
      return rawPackr.pack(f);
    }
    case 6: {
      // deep nesting: fixarray of 1, many times
      const depth = 1 + rng.int(20_000);
      return Buffer.concat([Buffer.alloc(depth, 0x91), Buffer.from([0x01])]);
    }
    default: {
      // a good frame with a hostile length header (str32/bin32/array32/map32) spliced in
      const b = Buffer.from(base);
      const at = rng.int(b.length);
      b[at] = [0xdb, 0xc6, 0xdd, 0xdf, 0xc9][rng.int(5)];
      if (at + 4 < b.length) b.writeUInt32BE(rng.nextU32(), at + 1);
      return b;
    }
  }
}

describe('codec fuzz', () => {
  it('turns 10,000 malformed, truncated, oversized or random frames into results without throwing', () => {
    const rng = new Rng(20240601);
    const codes = new Map<string, number>();
    let accepted = 0;
    const started = Date.now();
    for (let k = 0; k < 10_000; k++) {
      const bytes = randomFrame(rng, k);
      let r;
      try {
        r = codec.decode(bytes);
      } catch (e) {
        throw new Error(`decode threw on case ${k} (${Buffer.from(bytes).subarray(0, 32).toString('hex')}): ${String(e)}`, { cause: e });
      }
      if (r.ok) {
        accepted++;
      } else {
        // plain checks, not expect(): 10,000 expect calls cost more than the decoding
        if (!(r.error instanceof ProtocolError) || !PROTOCOL_ERROR_CODES.includes(r.error.code)) {
          throw new Error(`case ${k}: not a coded ProtocolError: ${String(r.error)}`);
        }
        codes.set(r.error.code, (codes.get(r.error.code) ?? 0) + 1);
      }
      if (k % 500 === 0) {
        // the shared msgpackr state is not left broken by a bad frame
        for (let i = 0; i < good.length; i++) expect(codec.decode(good[i]).ok).toBe(true);
      }
    }
    const elapsedMs = Date.now() - started;
    // Only a bit flip that lands in a value (seq, a float) can leave a frame valid.
    expect(accepted).toBeLessThan(400);
    for (const code of [
      'KAIS_ERR_MALFORMED',
      'KAIS_ERR_OVERSIZED',
      'KAIS_ERR_BAD_FIELD',
      'KAIS_ERR_UNKNOWN_TYPE',
      'KAIS_ERR_VERSION',
      'KAIS_ERR_CHECKSUM',
    ]) {
      expect(codes.get(code) ?? 0).toBeGreaterThan(0);
    }
    expect(elapsedMs).toBeLessThan(10_000);
  });
});
