import { Rng } from '../../../../shared/rng';
import { argmaxMasked, maskedPolicyRow, sampleMasked } from '../../../../shared/nets/masked';

describe('masked policy on Float32Arrays', () => {
  it('normalises the valid scores and zeroes the others', () => {
    const pi = new Float32Array(4);
    const s = maskedPolicyRow(Float32Array.from([9, 9, 2, 1, 3, 6, 5, 5]), 1, [1, 0, 1, 1], pi);
    expect(s).toBe(13);
    expect(Array.from(pi)).toEqual([3 / 13, 0, 5 / 13, 5 / 13].map((v) => Math.fround(v)));
  });

  it('throws when the mask leaves nothing valid', () => {
    expect(() => maskedPolicyRow(Float32Array.from([1, 1]), 0, [0, 0], new Float32Array(2))).toThrow(/no valid target/);
  });

  it('never samples a masked target and follows the probabilities', () => {
    const pi = Float32Array.from([0.25, 0, 0.75, 0]);
    const rng = new Rng(1);
    const counts = [0, 0, 0, 0];
    for (let i = 0; i < 4000; i++) counts[sampleMasked(pi, rng)]++;
    expect(counts[1] + counts[3]).toBe(0);
    expect(counts[2] / 4000).toBeCloseTo(0.75, 1);
  });

  it('takes the most probable valid target on argmax, the first one on ties', () => {
    expect(argmaxMasked(Float32Array.from([0.2, 0.4, 0.4, 0]))).toBe(1);
  });
});
