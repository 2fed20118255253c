/**
 * Per-dimension mean and standard deviation of the first `rows` rows of row-major data
 * (`data[r * D + d]`), the input standardisation of the VGRU and of the simple baselines. The
 * standard deviation is floored at `minStd` so a constant metric does not divide by zero.
 */
export function columnMeanStd(
  data: ArrayLike<number>,
  rows: number,
  D: number,
  mean: Float32Array | Float64Array,
  std: Float32Array | Float64Array,
  minStd = 1e-3,
): void {
  for (let d = 0; d < D; d++) {
    let s = 0;
    let s2 = 0;
    for (let r = 0; r < rows; r++) {
      const x = data[r * D + d];
      s += x;
      s2 += x * x;
    }
    const m = s / rows;
    mean[d] = m;
    std[d] = Math.max(Math.sqrt(Math.max(0, s2 / rows - m * m)), minStd);
  }
}
