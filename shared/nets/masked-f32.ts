/**
 * The masked policy of masked.ts on Float32Arrays, for the actor's hot path: no tfjs import, so
 * the live agent never loads tfjs (masked.ts re-exports these).
 */
import type { Rng } from '../rng';

/**
 * One row: writes pi into `out` (length A) from scores q (row `row` of a [rows, A] array) and the
 * 0/1 mask. Returns sum q m. Throws if nothing is valid (the cloud always is).
 */
export function maskedPolicyRow(q: Float32Array, row: number, mask: ArrayLike<number>, out: Float32Array): number {
  const A = out.length;
  const o = row * A;
  let s = 0;
  for (let a = 0; a < A; a++) {
    const v = mask[a] ? q[o + a] : 0;
    out[a] = v;
    s += v;
  }
  if (!(s > 0)) throw new RangeError('maskedPolicyRow: no valid target in the mask');
  for (let a = 0; a < A; a++) out[a] /= s;
  return s;
}

/** Index drawn from the probabilities pi (sums to 1, zeros never drawn). */
export function sampleMasked(pi: Float32Array, rng: Rng): number {
  let r = rng.next();
  let last = -1;
  for (let a = 0; a < pi.length; a++) {
    if (pi[a] <= 0) continue;
    last = a;
    r -= pi[a];
    if (r < 0) return a;
  }
  return last; // rounding: the last valid one
}

/** Valid index with the largest probability (the first on ties). */
export function argmaxMasked(pi: Float32Array): number {
  let best = -1;
  let bestP = -1;
  for (let a = 0; a < pi.length; a++) {
    if (pi[a] > bestP && pi[a] > 0) {
      bestP = pi[a];
      best = a;
    }
  }
  return best;
}
