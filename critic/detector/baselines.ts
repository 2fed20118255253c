/**
 * Simple strong baselines for device anomaly detection (the QuoVadisTAD study: Sarfraz et al.,
 * "Position: Quo Vadis, Unsupervised Time Series Anomaly Detection?", ICML 2024), scored in the
 * same harness and with the same thresholding rule as the learned detector (`kais detect`,
 * docs/detect.md "Protocol"):
 *
 * - `pca`: reconstruction error. The fit rows are standardised per column (mean, std floored at
 *   1e-3, as VgruDetector does); the principal axes are the eigenvectors of their covariance;
 *   the first k axes that explain `pcaVariance` (default 0.9) of the variance are kept; a row's
 *   score is || z - P P^T z ||^2 (the squared distance to the principal subspace).
 * - `l2`: the squared L2 norm of the standardised row, || z ||^2 (how far the row is from the
 *   fit rows' mean, every metric on its own scale).
 *
 * A window's score is the largest row score over its T rows (a window is anomalous when any of its
 * rows is: the `any` window label). Normalisation is VgruDetector's: with m, q the median and the
 * 99% quantile of the scores of the calibration windows (the train rows after the fit rows, never
 * fitted on), normalised = (score - m) / (q - m) - 1, anomalous when > eta.
 *
 * Hand-written numeric code (a cyclic Jacobi eigen-solver for a symmetric D x D matrix, D <= ~40):
 * no well-kept npm library with a symmetric eigen-decomposition fits this size and the project's
 * no-native-dependency rule, and 40 lines of Jacobi are easy to check (the test compares with a
 * known decomposition).
 */
import { columnMeanStd } from './standardise';
import { quantile } from './vgru';

export type BaselineKind = 'pca' | 'l2';

export interface BaselineOptions {
  /** Share of the variance the kept principal axes explain. @defaultValue 0.9 */
  pcaVariance: number;
  /** Calibration quantile that maps to normalised score 0 (VgruDetector's). @defaultValue 0.99 */
  calibrationQuantile: number;
}

export const DEFAULT_BASELINE_OPTIONS: Readonly<BaselineOptions> = Object.freeze({ pcaVariance: 0.9, calibrationQuantile: 0.99 });

/**
 * Eigen-decomposition of a symmetric D x D matrix `a` (row-major; not modified) by cyclic Jacobi
 * rotations. Returns eigenvalues (descending) and the matching unit eigenvectors as the columns of
 * `vectors` (row-major D x D).
 */
export function symmetricEigen(a: Float64Array, D: number): { values: Float64Array; vectors: Float64Array } {
  const m = Float64Array.from(a);
  const v = new Float64Array(D * D);
  for (let i = 0; i < D; i++) v[i * D + i] = 1;
  for (let sweep = 0; sweep < 100; sweep++) {
    let off = 0;
    for (let p = 0; p < D; p++) for (let q = p + 1; q < D; q++) off += m[p * D + q] * m[p * D + q];
    if (off < 1e-22) break;
    for (let p = 0; p < D; p++) {
      for (let q = p + 1; q < D; q++) {
        const apq = m[p * D + q];
        if (Math.abs(apq) < 1e-300) continue;
        const theta = (m[q * D + q] - m[p * D + p]) / (2 * apq);
        const t = Math.sign(theta || 1) / (Math.abs(theta) + Math.sqrt(theta * theta + 1));
        const c = 1 / Math.sqrt(t * t + 1);
        const s = t * c;
        for (let k = 0; k < D; k++) {
          // rotate columns p, q of m
          const mkp = m[k * D + p];
          const mkq = m[k * D + q];
          m[k * D + p] = c * mkp - s * mkq;
          m[k * D + q] = s * mkp + c * mkq;
        }
        for (let k = 0; k < D; k++) {
          // rotate rows p, q of m
          const mpk = m[p * D + k];
          const mqk = m[q * D + k];
          m[p * D + k] = c * mpk - s * mqk;
          m[q * D + k] = s * mpk + c * mqk;
        }
        for (let k = 0; k < D; k++) {
          const vkp = v[k * D + p];
          const vkq = v[k * D + q];
          v[k * D + p] = c * vkp - s * vkq;
          v[k * D + q] = s * vkp + c * vkq;
        }
      }
    }
  }
  const order = Array.from({ length: D }, (_, i) => i).sort((i, j) => m[j * D + j] - m[i * D + i]);
  const values = Float64Array.from(order, (i) => m[i * D + i]);
  const vectors = new Float64Array(D * D);
  order.forEach((src, dst) => {
    for (let k = 0; k < D; k++) vectors[k * D + dst] = v[k * D + src];
  });
  return { values, vectors };
}

/** A fitted baseline: row scores, window scores and the calibrated normalisation. */
export class BaselineDetector {
  readonly o: BaselineOptions;
  private readonly mean: Float64Array;
  private readonly std: Float64Array;
  /** Kept principal axes, row-major [k][D] (pca only). */
  private axes = new Float64Array(0);
  /** Number of kept axes (pca). */
  components = 0;
  private calib: [number, number] = [0, 1];

  /**
   * Fits on rows `data` ([rows][D], row-major): the first `fitRows` rows fit the model, the windows
   * of T rows lying wholly in the rest calibrate the normalisation (all rows when fewer than
   * 2T remain).
   */
  constructor(
    readonly kind: BaselineKind,
    data: Float64Array,
    readonly D: number,
    readonly T: number,
    fitRows: number,
    options: Partial<BaselineOptions> = {},
  ) {
    this.o = { ...DEFAULT_BASELINE_OPTIONS, ...options };
    const rows = data.length / D;
    if (fitRows < 2 || fitRows > rows) throw new TypeError(`BaselineDetector: fitRows ${fitRows} outside 2..${rows}`);
    this.mean = new Float64Array(D);
    this.std = new Float64Array(D);
    columnMeanStd(data, fitRows, D, this.mean, this.std);
    if (kind === 'pca') {
      const cov = new Float64Array(D * D);
      const z = new Float64Array(D);
      for (let r = 0; r < fitRows; r++) {
        for (let d = 0; d < D; d++) z[d] = (data[r * D + d] - this.mean[d]) / this.std[d];
        for (let i = 0; i < D; i++) for (let j = i; j < D; j++) cov[i * D + j] += z[i] * z[j];
      }
      for (let i = 0; i < D; i++) for (let j = i; j < D; j++) cov[j * D + i] = cov[i * D + j] /= fitRows - 1;
      const { values, vectors } = symmetricEigen(cov, D);
      const total = values.reduce((a, b) => a + Math.max(0, b), 0);
      let acc = 0;
      let k = 0;
      while (k < D && (total <= 0 || acc / total < this.o.pcaVariance)) acc += Math.max(0, values[k++]);
      this.components = Math.max(1, Math.min(k, D));
      this.axes = new Float64Array(this.components * D);
      for (let c = 0; c < this.components; c++) for (let d = 0; d < D; d++) this.axes[c * D + d] = vectors[d * D + c];
    }
    const calRows = rows - fitRows >= 2 * T ? data.subarray(fitRows * D) : data;
    const cal = Float64Array.from(this.windowScoresRaw(calRows)).sort();
    const m = quantile(cal, 0.5);
    const q = quantile(cal, this.o.calibrationQuantile);
    this.calib = [m, Math.max(q, m + 1e-9)];
  }

  /** One score per row of `data` ([rows][D]). */
  rowScores(data: Float64Array): Float64Array {
    const { D } = this;
    const rows = data.length / D;
    const out = new Float64Array(rows);
    const z = new Float64Array(D);
    for (let r = 0; r < rows; r++) {
      let n2 = 0;
      for (let d = 0; d < D; d++) {
        z[d] = (data[r * D + d] - this.mean[d]) / this.std[d];
        n2 += z[d] * z[d];
      }
      if (this.kind === 'pca') {
        // ||z - P P^T z||^2 = ||z||^2 - ||P^T z||^2 (orthonormal axes)
        let proj = 0;
        for (let c = 0; c < this.components; c++) {
          let p = 0;
          for (let d = 0; d < D; d++) p += this.axes[c * D + d] * z[d];
          proj += p * p;
        }
        n2 = Math.max(0, n2 - proj);
      }
      out[r] = n2;
    }
    return out;
  }

  /** Raw window scores: window k covers rows k .. k+T-1; its score is the largest row score. */
  windowScoresRaw(data: Float64Array): Float64Array {
    const s = this.rowScores(data);
    const T = this.T;
    const count = Math.max(0, s.length - T + 1);
    const out = new Float64Array(count);
    for (let k = 0; k < count; k++) {
      let best = -Infinity;
      for (let r = k; r < k + T; r++) if (s[r] > best) best = s[r];
      out[k] = best;
    }
    return out;
  }

  /** Normalised window scores (module comment); > eta means anomalous. */
  score(data: Float64Array): Float32Array {
    const raw = this.windowScoresRaw(data);
    const [m, q] = this.calib;
    return Float32Array.from(raw, (x) => (x - m) / (q - m) - 1);
  }
}
