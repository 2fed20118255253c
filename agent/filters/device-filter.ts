/**
 * Rule-based device filter (Sentinel step 1, ALGORITHMS.md §6, DESIGN.md §6).
 *
 * Per node, a sliding window of T samples (default 12) of N metrics is compared with a healthy
 * baseline. Two rules:
 *
 * - Variance rule: at least `beta` (default 50%) of the dimensions have
 *       |var_w(n) - var_b(n)| > thetaV            (default thetaV = 0.4)
 *   where both variances are computed on STANDARDISED values x'(n) = x(n) / scale(n). `scale(n)` is
 *   the standard deviation of dimension n over the baseline's healthy history (not over the window),
 *   floored at `minScale` so that a metric that never moved in the history cannot blow up.
 *   Why standardised and not relative: metrics live on different scales (SMD/ASD are in [0, 1], so
 *   an absolute variance never exceeds 0.25), and a relative difference |var_w - var_b| / var_b is
 *   dominated by noise on 12 samples (the variance of a 12-sample variance is ~40% of its mean) and
 *   is undefined for flat baselines. On the standardised scale thetaV = 0.4 reads "the window's
 *   variance moved by 40% of the metric's normal overall variance".
 *   `var_b(n)` is the MEDIAN window variance over the healthy history (a robust "typical healthy
 *   window"), so one noisy baseline window does not decide.
 *
 * - Correlation rule: ||R_w - R_b||_F / sqrt(N (N - 1)) > thetaR      (default thetaR = 0.4)
 *   i.e. the root-mean-square change of the off-diagonal Pearson correlations between the window
 *   and the baseline (R_b = mean correlation matrix of the healthy history's windows). It is the
 *   matrix-norm comparison of Sentinel made scale-free: values lie in [0, 2]; 0.4 is a large change.
 *   With N = 1 there is no correlation: the rule never fires.
 *
 * Constant columns (no NaN may decide anything): a dimension whose standardised window standard
 * deviation is below `flatStd` is "flat" in that window; its correlations with every other
 * dimension are taken as 0 (never 0/0). Its variance (0) is still compared on the variance rule,
 * which is finite because the scale is floored. Non-finite samples (NaN, Infinity from a broken
 * exporter) are replaced by the previous finite value of that metric (0 before the first).
 *
 * Verdict: both rules fire -> 'faulty'; neither -> 'healthy'; exactly one -> 'ambiguous' (to be
 * decided by the learned detector, critic/detector). Until T samples have been seen: 'warming'.
 *
 * Baseline choice and refresh: the baseline comes from a healthy history of the node itself (in
 * `kais detect`, the train split; in the agent, the node's first minutes, or a similar node's
 * history as Sentinel suggests) via `baselineFromHistory`. It is refreshed only from windows the
 * filter itself judged 'healthy': each such window moves var_b and R_b towards its own values by
 * `refreshRate` (an exponential moving average; 0 freezes the baseline). Faulty or ambiguous windows
 * never touch it, so a slowly starting failure cannot teach the baseline that it is normal.
 *
 * Cost: `DeviceFilter.push` is O(T N + T N^2 / 2) multiply-adds on preallocated Float64Arrays and
 * allocates nothing per sample (about 1-3 µs for N = 4 on a laptop core; see scripts/bench-detect.ts).
 *
 * This module imports nothing outside shared/ (agent/ rule).
 */

export type Verdict = 'healthy' | 'ambiguous' | 'faulty' | 'warming';

export interface DeviceFilterOptions {
  /** Window length T in samples. Default 12 (Sentinel). */
  windowSize: number;
  /** Share of dimensions whose variance must differ for the variance rule to fire. Default 0.5. */
  beta: number;
  /** Variance-difference threshold on standardised values. Default 0.4. */
  thetaV: number;
  /** Threshold on the RMS change of off-diagonal correlations. Default 0.4. */
  thetaR: number;
  /** Standardised window std below which a dimension counts as flat (correlation 0). Default 0.05. */
  flatStd: number;
  /** Floor of the per-dimension scale, in raw units. Default 1e-6. */
  minScale: number;
  /** EMA rate at which healthy windows refresh the baseline; 0 freezes it. Default 0.001. */
  refreshRate: number;
}

export const DEFAULT_DEVICE_FILTER_OPTIONS: Readonly<DeviceFilterOptions> = Object.freeze({
  windowSize: 12,
  beta: 0.5,
  thetaV: 0.4,
  thetaR: 0.4,
  flatStd: 0.05,
  minScale: 1e-6,
  refreshRate: 0.001,
});

/** Summary of healthy behaviour that windows are compared with. All arrays are owned copies. */
export interface Baseline {
  /** Number of metrics N. */
  dims: number;
  /** Per-dimension raw-unit standard deviation over the healthy history (floored). [N] */
  scale: Float64Array;
  /** Per-dimension typical (median) window variance on standardised values. [N] */
  variance: Float64Array;
  /** Mean window correlation matrix, row-major, diagonal 1. [N * N] */
  corr: Float64Array;
}

/** Both rule statistics and the verdict of one window, as numbers for inspection and tests. */
export interface WindowScore {
  verdict: Exclude<Verdict, 'warming'>;
  /** Share of dimensions whose variance differs by more than thetaV, in [0, 1]. */
  varianceShare: number;
  /** RMS change of the off-diagonal correlations, in [0, 2]. */
  corrDistance: number;
  varianceFired: boolean;
  corrFired: boolean;
}

export function resolveDeviceFilterOptions(o: Partial<DeviceFilterOptions> = {}): DeviceFilterOptions {
  const r: DeviceFilterOptions = { ...DEFAULT_DEVICE_FILTER_OPTIONS, ...o };
  const check = (name: keyof DeviceFilterOptions, ok: boolean): void => {
    if (!ok) throw new TypeError(`DeviceFilter option ${name}: invalid value ${String(r[name])}`);
  };
  check('windowSize', Number.isInteger(r.windowSize) && r.windowSize >= 3);
  check('beta', r.beta > 0 && r.beta <= 1);
  check('thetaV', Number.isFinite(r.thetaV) && r.thetaV >= 0);
  check('thetaR', Number.isFinite(r.thetaR) && r.thetaR >= 0);
  check('flatStd', Number.isFinite(r.flatStd) && r.flatStd >= 0);
  check('minScale', Number.isFinite(r.minScale) && r.minScale > 0);
  check('refreshRate', r.refreshRate >= 0 && r.refreshRate <= 1);
  return r;
}

/**
 * Work buffers for the window statistics; one per caller, reused across windows (no allocation
 * per window).
 */
export class WindowScratch {
  readonly mean: Float64Array;
  readonly std: Float64Array;
  readonly variance: Float64Array;
  constructor(readonly dims: number) {
    this.mean = new Float64Array(dims);
    this.std = new Float64Array(dims);
    this.variance = new Float64Array(dims);
  }
}

/**
 * Scores one window against a baseline. `window` is row-major [T][N] (sample t, metric n at
 * index t * N + n) read from `start` with ring-buffer wrap-around over `T` rows, so the class can
 * pass its ring without copying; pure callers pass start = 0.
 */
export function scoreWindow(
  window: ArrayLike<number>,
  baseline: Baseline,
  options: Partial<DeviceFilterOptions> = {},
  scratch?: WindowScratch,
  start = 0,
): WindowScore {
  const o = options as DeviceFilterOptions;
  const T = o.windowSize ?? DEFAULT_DEVICE_FILTER_OPTIONS.windowSize;
  return scoreRing(window, start, T, baseline, withDefaults(o), scratch ?? new WindowScratch(baseline.dims));
}

function withDefaults(o: Partial<DeviceFilterOptions>): DeviceFilterOptions {
  // cheap merge without validation for the hot path; the class validates once at construction
  return {
    windowSize: o.windowSize ?? DEFAULT_DEVICE_FILTER_OPTIONS.windowSize,
    beta: o.beta ?? DEFAULT_DEVICE_FILTER_OPTIONS.beta,
    thetaV: o.thetaV ?? DEFAULT_DEVICE_FILTER_OPTIONS.thetaV,
    thetaR: o.thetaR ?? DEFAULT_DEVICE_FILTER_OPTIONS.thetaR,
    flatStd: o.flatStd ?? DEFAULT_DEVICE_FILTER_OPTIONS.flatStd,
    minScale: o.minScale ?? DEFAULT_DEVICE_FILTER_OPTIONS.minScale,
    refreshRate: o.refreshRate ?? DEFAULT_DEVICE_FILTER_OPTIONS.refreshRate,
  };
}

/** The hot path: statistics in scratch, verdict out. Rows are read at ((start + t) % T). */
function scoreRing(
  ring: ArrayLike<number>,
  start: number,
  T: number,
  b: Baseline,
  o: DeviceFilterOptions,
  s: WindowScratch,
): WindowScore {
  const N = b.dims;
  const { mean, std, variance } = s;
  // per-dimension mean and variance on standardised values
  for (let n = 0; n < N; n++) {
    let sum = 0;
    for (let t = 0; t < T; t++) sum += ring[((start + t) % T) * N + n];
    const m = sum / T;
    let sq = 0;
    for (let t = 0; t < T; t++) {
      const d = ring[((start + t) % T) * N + n] - m;
      sq += d * d;
    }
    const inv = 1 / b.scale[n];
    mean[n] = m;
    variance[n] = (sq / T) * inv * inv; // population variance, standardised
    std[n] = Math.sqrt(sq / T); // raw units
  }
  let differing = 0;
  for (let n = 0; n < N; n++) if (Math.abs(variance[n] - b.variance[n]) > o.thetaV) differing++;
  const varianceShare = differing / N;
  const varianceFired = differing >= Math.ceil(o.beta * N - 1e-9);

  let corrDistance = 0;
  if (N > 1) {
    let sum2 = 0;
    for (let i = 0; i < N; i++) {
      const flatI = std[i] / b.scale[i] < o.flatStd;
      for (let j = i + 1; j < N; j++) {
        let r = 0;
        if (!flatI && !(std[j] / b.scale[j] < o.flatStd)) {
          let c = 0;
          for (let t = 0; t < T; t++) {
            const row = ((start + t) % T) * N;
            c += (ring[row + i] - mean[i]) * (ring[row + j] - mean[j]);
          }
          r = c / T / (std[i] * std[j]);
          if (r > 1) r = 1;
          else if (r < -1) r = -1;
        }
        const d = r - b.corr[i * N + j];
        sum2 += d * d;
      }
    }
    corrDistance = Math.sqrt((2 * sum2) / (N * (N - 1)));
  }
  const corrFired = corrDistance > o.thetaR;
  const verdict = varianceFired && corrFired ? 'faulty' : varianceFired || corrFired ? 'ambiguous' : 'healthy';
  return { verdict, varianceShare, corrDistance, varianceFired, corrFired };
}

/** Window correlation matrix into `out` (row-major [N*N], diagonal 1, flat dims correlate 0). */
function windowCorr(rows: ArrayLike<number>, rowStart: number, T: number, N: number, scale: Float64Array, flatStd: number, out: Float64Array): void {
  const mean = new Float64Array(N);
  const std = new Float64Array(N);
  for (let n = 0; n < N; n++) {
    let sum = 0;
    for (let t = 0; t < T; t++) sum += rows[(rowStart + t) * N + n];
    mean[n] = sum / T;
    let sq = 0;
    for (let t = 0; t < T; t++) sq += (rows[(rowStart + t) * N + n] - mean[n]) ** 2;
    std[n] = Math.sqrt(sq / T);
  }
  for (let i = 0; i < N; i++) {
    out[i * N + i] = 1;
    for (let j = i + 1; j < N; j++) {
      let r = 0;
      if (std[i] / scale[i] >= flatStd && std[j] / scale[j] >= flatStd) {
        let c = 0;
        for (let t = 0; t < T; t++) c += (rows[(rowStart + t) * N + i] - mean[i]) * (rows[(rowStart + t) * N + j] - mean[j]);
        r = Math.max(-1, Math.min(1, c / T / (std[i] * std[j])));
      }
      out[i * N + j] = r;
      out[j * N + i] = r;
    }
  }
}

/**
 * Baseline from a healthy history: rows row-major [rows][N] (a Float64Array or number[][] flattened
 * by the caller). scale = per-dim std of the whole history (floored at minScale); variance = median
 * standardised variance of the T-row windows taken every `stride` rows; corr = their mean
 * correlation matrix. Non-finite values are treated as 0 rather than propagated.
 */
export function baselineFromHistory(
  rows: ArrayLike<number>,
  dims: number,
  options: Partial<DeviceFilterOptions> = {},
  stride = 3,
): Baseline {
  const o = resolveDeviceFilterOptions(options);
  const T = o.windowSize;
  const count = Math.floor(rows.length / dims);
  if (!Number.isInteger(dims) || dims < 1) throw new TypeError(`baselineFromHistory: dims must be a positive integer, got ${dims}`);
  if (count < T) throw new TypeError(`baselineFromHistory: need at least ${T} rows of history, got ${count}`);
  const x = new Float64Array(count * dims);
  for (let i = 0; i < x.length; i++) x[i] = Number.isFinite(rows[i]) ? rows[i] : 0;
  const scale = new Float64Array(dims);
  for (let n = 0; n < dims; n++) {
    let sum = 0;
    for (let r = 0; r < count; r++) sum += x[r * dims + n];
    const m = sum / count;
    let sq = 0;
    for (let r = 0; r < count; r++) sq += (x[r * dims + n] - m) ** 2;
    scale[n] = Math.max(Math.sqrt(sq / count), o.minScale);
  }
  const starts: number[] = [];
  for (let s = 0; s + T <= count; s += Math.max(1, stride)) starts.push(s);
  const vars: Float64Array[] = Array.from({ length: dims }, () => new Float64Array(starts.length));
  const corr = new Float64Array(dims * dims);
  const c = new Float64Array(dims * dims);
  starts.forEach((s, k) => {
    for (let n = 0; n < dims; n++) {
      let sum = 0;
      for (let t = 0; t < T; t++) sum += x[(s + t) * dims + n];
      const m = sum / T;
      let sq = 0;
      for (let t = 0; t < T; t++) sq += (x[(s + t) * dims + n] - m) ** 2;
      vars[n][k] = sq / T / (scale[n] * scale[n]);
    }
    windowCorr(x, s, T, dims, scale, o.flatStd, c);
    for (let i = 0; i < c.length; i++) corr[i] += c[i] / starts.length;
  });
  const variance = new Float64Array(dims);
  for (let n = 0; n < dims; n++) variance[n] = median(vars[n]);
  return { dims, scale, variance, corr };
}

/** Baseline from exactly one healthy window [T][N] (Sentinel's literal "baseline window"). */
export function baselineFromWindow(window: ArrayLike<number>, dims: number, options: Partial<DeviceFilterOptions> = {}): Baseline {
  return baselineFromHistory(window, dims, options, 1);
}

function median(a: Float64Array): number {
  const s = Float64Array.from(a).sort();
  const h = s.length >> 1;
  return s.length % 2 ? s[h] : (s[h - 1] + s[h]) / 2;
}

/**
 * One node's streaming filter. `push` costs microseconds and allocates nothing: the ring buffer,
 * the scratch statistics and the last score live in preallocated Float64Arrays.
 *
 *   const f = new DeviceFilter(baselineFromHistory(history, 4));
 *   const v = f.push([cpu, mem, disk, upMbps]); // 'warming' | 'healthy' | 'ambiguous' | 'faulty'
 */
export class DeviceFilter {
  readonly options: DeviceFilterOptions;
  readonly dims: number;
  private readonly ring: Float64Array; // [T * N], row (count % T) is the next to write
  private readonly last: Float64Array; // last finite value per dim
  private readonly scratch: WindowScratch;
  private readonly base: Baseline;
  private count = 0;
  /** Rule statistics of the latest full window (valid once push returned something but 'warming'). */
  varianceShare = 0;
  corrDistance = 0;

  constructor(baseline: Baseline, options: Partial<DeviceFilterOptions> = {}) {
    this.options = resolveDeviceFilterOptions(options);
    const N = baseline.dims;
    if (baseline.scale.length !== N || baseline.variance.length !== N || baseline.corr.length !== N * N) {
      throw new TypeError(`DeviceFilter baseline: arrays do not match dims=${N}`);
    }
    this.dims = N;
    this.base = {
      dims: N,
      scale: Float64Array.from(baseline.scale),
      variance: Float64Array.from(baseline.variance),
      corr: Float64Array.from(baseline.corr),
    };
    this.ring = new Float64Array(this.options.windowSize * N);
    this.last = new Float64Array(N);
    this.scratch = new WindowScratch(N);
  }

  /** A read-only view of the current (possibly refreshed) baseline. */
  get baseline(): Readonly<Baseline> {
    return this.base;
  }

  /** Forget the window (e.g. after a node restart); the baseline stays. */
  reset(): void {
    this.count = 0;
    this.last.fill(0);
  }

  /** Add one sample of N metrics; returns the verdict for the window ending at it. */
  push(sample: ArrayLike<number>): Verdict {
    const N = this.dims;
    const T = this.options.windowSize;
    if (sample.length !== N) throw new TypeError(`DeviceFilter.push: expected ${N} metrics, got ${sample.length}`);
    const row = (this.count % T) * N;
    for (let n = 0; n < N; n++) {
      const v = sample[n];
      if (Number.isFinite(v)) this.last[n] = v;
      this.ring[row + n] = this.last[n];
    }
    this.count++;
    if (this.count < T) return 'warming';
    const start = this.count % T; // oldest row
    const s = scoreRing(this.ring, start, T, this.base, this.options, this.scratch);
    this.varianceShare = s.varianceShare;
    this.corrDistance = s.corrDistance;
    if (s.verdict === 'healthy' && this.options.refreshRate > 0) this.refresh(start);
    return s.verdict;
  }

  /** EMA of the baseline towards the current (healthy) window. */
  private refresh(start: number): void {
    const a = this.options.refreshRate;
    const N = this.dims;
    const { variance, mean, std } = this.scratch;
    const b = this.base;
    for (let n = 0; n < N; n++) b.variance[n] += a * (variance[n] - b.variance[n]);
    const T = this.options.windowSize;
    const flat = this.options.flatStd;
    for (let i = 0; i < N; i++) {
      for (let j = i + 1; j < N; j++) {
        let r = 0;
        if (std[i] / b.scale[i] >= flat && std[j] / b.scale[j] >= flat) {
          let c = 0;
          for (let t = 0; t < T; t++) {
            const row = ((start + t) % T) * N;
            c += (this.ring[row + i] - mean[i]) * (this.ring[row + j] - mean[j]);
          }
          r = Math.max(-1, Math.min(1, c / T / (std[i] * std[j])));
        }
        const k = i * N + j;
        b.corr[k] += a * (r - b.corr[k]);
        b.corr[j * N + i] = b.corr[k];
      }
    }
  }
}
