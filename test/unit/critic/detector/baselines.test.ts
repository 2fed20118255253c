import { BaselineDetector, symmetricEigen } from '../../../../critic/detector/baselines';
import { Rng } from '../../../../shared/rng';

describe('symmetricEigen (hand-written Jacobi)', () => {
  it('decomposes a symmetric matrix: A v = lambda v, eigenvalues descending, unit vectors', () => {
    const a = Float64Array.from([4, 1, 2, 1, 3, 0.5, 2, 0.5, 5]);
    const { values, vectors } = symmetricEigen(a, 3);
    expect(values[0]).toBeGreaterThanOrEqual(values[1]);
    expect(values[1]).toBeGreaterThanOrEqual(values[2]);
    expect(values[0] + values[1] + values[2]).toBeCloseTo(12, 10); // trace
    for (let c = 0; c < 3; c++) {
      let n = 0;
      for (let i = 0; i < 3; i++) {
        let av = 0;
        for (let j = 0; j < 3; j++) av += a[i * 3 + j] * vectors[j * 3 + c];
        expect(av).toBeCloseTo(values[c] * vectors[i * 3 + c], 9);
        n += vectors[i * 3 + c] ** 2;
      }
      expect(n).toBeCloseTo(1, 10);
    }
  });
});

describe('BaselineDetector', () => {
  // two correlated metrics (y = x + small noise) and one independent one
  const rows = (n: number, rng: Rng): Float64Array => {
    const out = new Float64Array(n * 3);
    for (let r = 0; r < n; r++) {
      const x = rng.normal();
      out.set([x, x + 0.05 * rng.normal(), rng.normal()], r * 3);
    }
    return out;
  };

  it('pca scores a row that breaks the correlation high, l2 a row far from the mean; both normalised on the held-out rows', () => {
    const rng = new Rng(3);
    const train = rows(2000, rng);
    const pca = new BaselineDetector('pca', train, 3, 4, 1600);
    const l2 = new BaselineDetector('l2', train, 3, 4, 1600);
    expect(pca.components).toBe(2); // x+y share one axis, z its own: 2 of 3 explain > 90%
    const test = rows(40, rng);
    test.set([1.5, -1.5, 0], 20 * 3); // small values, broken correlation
    const sp = pca.score(test);
    const sl = l2.score(test);
    // windows 17..20 hold row 20
    expect(Math.min(...Array.from(sp.subarray(17, 21)))).toBeGreaterThan(10);
    expect(Math.max(...Array.from(sp.subarray(0, 17)))).toBeLessThan(3);
    // l2 sees a row of ordinary size; an extreme level moves it
    test.set([6, 6, 0], 30 * 3);
    expect(l2.score(test)[30]).toBeGreaterThan(2);
    expect(sl.length).toBe(40 - 3);
    // normalisation: about 1% of held-out windows above 0 (the calibration q99)
    const held = l2.score(train.subarray(1600 * 3));
    const above = Array.from(held).filter((x) => x > 0).length / held.length;
    expect(above).toBeGreaterThan(0.002);
    expect(above).toBeLessThan(0.02);
  });

  it('rejects a fit share outside the data', () => {
    expect(() => new BaselineDetector('l2', new Float64Array(30), 3, 4, 20)).toThrow(/fitRows/);
  });
});
