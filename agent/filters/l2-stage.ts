/**
 * The second stage of the shipped device-filter combination, streaming, for the agent (and the
 * simulator, which runs the agent's NodeHealth): the L2-norm baseline of `kais detect`
 * (critic/detector/baselines.ts `BaselineDetector('l2')`, the QuoVadisTAD simple baseline),
 * computed one sample at a time next to the rules (docs/detect.md "Live").
 *
 * - Fit (label-free, on healthy history only): per metric, mean and standard deviation (floored at
 *   `minStd`) of the fit rows.
 * - Row score: || z ||^2, z = (x - mean) / std (every metric on its own scale).
 * - Window score: the largest row score over the window's T rows (the `any` window label).
 * - Normalised: (score - m) / (q - m) - 1 with m, q the median and the `calibrationQuantile` (99%)
 *   quantile of the window scores of calibration rows the stage was not fitted on; 0 = the
 *   history's own q99, anomalous when above the combination's eta (stage-combination.ts).
 *
 * The arithmetic is BaselineDetector's (the test checks the normalised scores agree), so the
 * stage `kais detect` measures is the one that runs. `push` is O(N) per sample (N multiply-adds
 * and a max over T row scores) and allocates nothing.
 *
 * Imports nothing outside agent/ and shared/ (the agent's room).
 */

export interface L2StageOptions {
  /** Window length (the rules' T). @defaultValue 12 */
  windowSize: number;
  /** Floor of each metric's standard deviation. @defaultValue 1e-3 (BaselineDetector's) */
  minStd: number;
  /** Calibration quantile that maps to normalised score 0. @defaultValue 0.99 */
  calibrationQuantile: number;
}

export const DEFAULT_L2_STAGE_OPTIONS: Readonly<L2StageOptions> = Object.freeze({
  windowSize: 12,
  minStd: 1e-3,
  calibrationQuantile: 0.99,
});

/** Linear-interpolated quantile of an ascending array (critic/detector/vgru.ts `quantile`'s rule). */
function quantileSorted(sorted: ArrayLike<number>, q: number): number {
  if (sorted.length === 0) return NaN;
  const pos = Math.min(Math.max(q, 0), 1) * (sorted.length - 1);
  const lo = Math.floor(pos);
  const hi = Math.min(lo + 1, sorted.length - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo);
}

/** A fitted L2 stage: the standardisation and the calibration (shared by every node of a shape). */
export class L2Model {
  readonly o: L2StageOptions;
  readonly mean: Float64Array;
  readonly std: Float64Array;
  /** Median and calibration quantile of the calibration windows' raw scores. */
  readonly calib: [number, number];

  /**
   * `fit`: rows ([rows][D], row-major) the standardisation is fitted on; `calibration`: one or more
   * row blocks (each [rows][D], e.g. one per node) whose windows (wholly inside a block) set the
   * normalisation. Throws when no calibration window exists.
   */
  constructor(
    fit: ArrayLike<number>,
    calibration: ArrayLike<number>[],
    readonly D: number,
    options: Partial<L2StageOptions> = {},
  ) {
    this.o = { ...DEFAULT_L2_STAGE_OPTIONS, ...options };
    const rows = Math.floor(fit.length / D);
    if (rows < 2) throw new TypeError(`L2Model: needs at least 2 fit rows, got ${rows}`);
    this.mean = new Float64Array(D);
    this.std = new Float64Array(D);
    for (let d = 0; d < D; d++) {
      let s = 0;
      let s2 = 0;
      for (let r = 0; r < rows; r++) {
        const x = fit[r * D + d];
        s += x;
        s2 += x * x;
      }
      const m = s / rows;
      this.mean[d] = m;
      this.std[d] = Math.max(Math.sqrt(Math.max(0, s2 / rows - m * m)), this.o.minStd);
    }
    const cal: number[] = [];
    for (const block of calibration) for (const w of this.windowScoresRaw(block)) cal.push(w);
    if (cal.length === 0) throw new TypeError(`L2Model: no calibration window of ${this.o.windowSize} rows`);
    const sorted = Float64Array.from(cal).sort();
    const m = quantileSorted(sorted, 0.5);
    const q = quantileSorted(sorted, this.o.calibrationQuantile);
    this.calib = [m, Math.max(q, m + 1e-9)];
  }

  /** || (x - mean) / std ||^2 of one row. */
  rowScore(x: ArrayLike<number>, offset = 0): number {
    let n2 = 0;
    for (let d = 0; d < this.D; d++) {
      const z = (x[offset + d] - this.mean[d]) / this.std[d];
      n2 += z * z;
    }
    return n2;
  }

  /** Raw window scores of a row block: window k covers rows k .. k+T-1; its score is the largest row score. */
  windowScoresRaw(rows: ArrayLike<number>): Float64Array {
    const T = this.o.windowSize;
    const n = Math.floor(rows.length / this.D);
    const s = new Float64Array(n);
    for (let r = 0; r < n; r++) s[r] = this.rowScore(rows, r * this.D);
    const out = new Float64Array(Math.max(0, n - T + 1));
    for (let k = 0; k < out.length; k++) {
      let best = -Infinity;
      for (let r = k; r < k + T; r++) if (s[r] > best) best = s[r];
      out[k] = best;
    }
    return out;
  }

  /** Normalised score of a raw window score (0 = the calibration windows' q99). */
  normalise(raw: number): number {
    const [m, q] = this.calib;
    return (raw - m) / (q - m) - 1;
  }
}

/** One node's streaming L2 stage: its last T samples and the normalised score of the window they make. */
export class L2Stream {
  private readonly ring: Float64Array;
  private count = 0;
  constructor(
    readonly dims: number,
    readonly windowSize = DEFAULT_L2_STAGE_OPTIONS.windowSize,
  ) {
    this.ring = new Float64Array(windowSize * dims);
  }

  /**
   * Adds one sample; returns the normalised score under `model` of the window of the last T samples
   * (NaN while fewer than T samples or without a model). The samples are kept raw, so a new model
   * (a rebuilt baseline) scores the same window at once.
   */
  push(x: ArrayLike<number>, model: L2Model | null): number {
    const D = this.dims;
    const T = this.windowSize;
    const row = (this.count % T) * D;
    for (let d = 0; d < D; d++) this.ring[row + d] = x[d];
    this.count++;
    if (!model || this.count < T) return NaN;
    let best = -Infinity;
    for (let k = 0; k < T; k++) {
      const s = model.rowScore(this.ring, k * D);
      if (s > best) best = s;
    }
    return model.normalise(best);
  }
}
