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
 * Level evidence (an addition to Sentinel's variance rule, off by default: thetaM = Infinity):
 *   Most SMD incidents are level shifts (a metric jumps to a new plateau) that leave a 12-sample
 *   variance unchanged, so the variance rule alone calls them healthy. With a finite `thetaM`, a
 *   dimension also counts as "differing" on the variance rule when its window mean is far from the
 *   history's level:
 *       z(n) = |mean_w(n) - level(n)| / scale(n) / levelTol(n) > thetaM
 *   level(n) = median of the history, levelTol(n) = the 99.9% quantile of the same statistic over
 *   the history's own windows (floored at 1), so z = 1 means "as far from the level as the most
 *   extreme healthy window of this node" and the threshold is per node without labels. The rule
 *   structure is unchanged: rule 1 = "at least beta of the dimensions differ (in variance or level)",
 *   rule 2 = correlation; both -> faulty, one -> ambiguous, neither -> healthy.
 *
 * Faulty margin (`faultyMargin`, default 1 = plain Sentinel): 'faulty' additionally requires that
 *   rule 1 still fires with both of its thresholds multiplied by faultyMargin. A window where both
 *   rules fire but rule 1 only weakly is 'ambiguous' (the learned stage decides), so what the rules
 *   mask on their own is high-precision evidence.
 *
 * Single-metric routing (`thetaS`, default Infinity = off; `kais detect` and the simulator use 4):
 *   rule 1 needs beta of the dimensions to differ, so with ~30 metrics a short incident that moves
 *   one or two metrics a lot (a spike on one disk or swap metric) is 'healthy' and never reaches
 *   the learned stage. With a finite thetaS, a window the rules would call 'healthy' is
 *   'ambiguous' when some dimension's variance difference is beyond thetaS x that dimension's own
 *   most extreme healthy excursion:
 *       |var_w(n) - var_b(n)| / varTol(n) > thetaS
 *   varTol(n) = the 99.9% quantile of |var - var_b| over the history's own windows (floored at 1,
 *   like levelTol), so the threshold is per node and label-free. Variance only, not the level: a
 *   slow drift also leaves the history's level range but is not a short incident (level evidence
 *   already enters rule 1). It never makes a window 'faulty' (the rules' flags are unchanged), and
 *   with few dimensions (N = 4 at beta 0.1 / 0.2: one metric is enough for rule 1) it adds nothing.
 *
 * Constant columns (no NaN may decide anything): a dimension whose standardised window standard
 * deviation is below `flatStd` is "flat" in that window; its correlations with every other
 * dimension are taken as 0 (never 0/0). Its variance (0) is still compared on the variance rule,
 * which is finite because the scale is floored. Non-finite samples (NaN, Infinity from a broken
 * exporter) are replaced by the previous finite value of that metric (0 before the first).
 *
 * Marked breaks (`markBreak`; NodeHealth marks one at every placement change of the node): a known
 * step in the node's levels (a replica added or removed moves its memory, and its load with it).
 * While the step is in the window, each side of it is centred on its own mean (the split placed at
 * the step, up to BREAK_LAG_SAMPLES after the mark), and the level evidence compares the level
 * before it; afterwards the level less the step. Without this, healthy nodes were excluded right
 * after placement changes (docs/runtime.md "Placement changes as marked breaks").
 *
 * Verdict: both rules fire -> 'faulty'; neither -> 'healthy'; exactly one -> 'ambiguous' (to be
 * decided by the learned detector, critic/detector). Until T samples have been seen: 'warming'.
 *
 * Baseline choice and refresh (level and levelTol are fixed from the history: a refresh that moved
 * the level would teach the filter a slow level shift): the baseline comes from a healthy history of the node itself (in
 * `kais detect`, the train split; in the agent, the node's first minutes, or a similar node's
 * history as Sentinel suggests) via `baselineFromHistory`. It is refreshed only from windows the
 * filter itself judged 'healthy', at `refreshRate` (0 freezes the baseline): R_b by an exponential
 * moving average, var_b by a median tracker (x (1 + rate) when the window's variance is above it,
 * x (1 - rate) when below), because var_b is a median and an EMA would drift to the mean window
 * variance, which for a spiky metric is many times the median (on SMD the EMA left 30% of
 * machine-2-2's windows ambiguous instead of 8-10%). Faulty or ambiguous windows never touch it, so
 * a slowly starting failure cannot teach the baseline that it is normal.
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
  /** Rate at which healthy windows refresh the baseline (module comment); 0 freezes it. Default 0.001. */
  refreshRate: number;
  /** Level-shift threshold in units of the history's own extreme (see module comment). Default
   *  Infinity (off: Sentinel's variance rule only). `kais detect` uses 2. */
  thetaM: number;
  /** Rule 1 must also fire at faultyMargin x (thetaV, thetaM) for 'faulty'. Default 1. */
  faultyMargin: number;
  /** Single-metric routing (module comment): a window the rules would call 'healthy' is
   *  'ambiguous' when one metric's variance difference is beyond thetaS x its own history extreme.
   *  Default Infinity (off). */
  thetaS: number;
}

export const DEFAULT_DEVICE_FILTER_OPTIONS: Readonly<DeviceFilterOptions> = Object.freeze({
  windowSize: 12,
  beta: 0.5,
  thetaV: 0.4,
  thetaR: 0.4,
  flatStd: 0.05,
  minScale: 1e-6,
  refreshRate: 0.001,
  thetaM: Infinity,
  faultyMargin: 1,
  thetaS: Infinity,
});

/**
 * The rule settings measured on labelled server data by `kais detect` (docs/detect.md): the variance
 * threshold and share for ~30 live SMD metrics, Sentinel's thetaR, level evidence at 2 history
 * extremes, 'faulty' only at 2x rule 1's thresholds, and single-metric routing at 4 history
 * extremes (chosen in every leave-one-machine-out fold from off / 2 / 4). `kais detect` (training/jobs/detect.ts) and
 * the simulator's telemetry loop (training/sim/telemetry.ts) both use these, so the simulator runs
 * the rules whose precision is measured. DEFAULT_DEVICE_FILTER_OPTIONS stay Sentinel's literal ones.
 * The whole set is what `kais detect --lomo`'s selection (lomoObjective over LOMO_GRID) picks with
 * all 5 dev SMD machines as tuning machines, the procedure whose held-out result docs/detect.md
 * reports. thetaV was 1.0 until session 5 (no fold picked it: machine-2-2's rules were 68% precise),
 * then 2, the largest value of the grid then; with the grid extended to 3 and 4 the selection
 * picks 4 (docs/detect.md "Defaults = the selection on all five machines").
 */
export const DETECT_DEVICE_FILTER_OPTIONS: Readonly<Partial<DeviceFilterOptions>> = Object.freeze({
  thetaV: 4,
  beta: 0.2,
  thetaR: 0.4,
  thetaM: 2,
  faultyMargin: 2,
  thetaS: 4,
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
  /** Per-dimension level (median of the history, raw units). [N] Absent: level evidence off. */
  level?: Float64Array;
  /** Per-dimension level tolerance: 99.9% quantile of |window mean - level| / scale over the
   *  history's windows, floored at 1. [N] */
  levelTol?: Float64Array;
  /** Per-dimension variance tolerance: 99.9% quantile of |window variance - variance| over the
   *  history's windows (standardised), floored at 1. [N] Absent: single-metric routing off. */
  varTol?: Float64Array;
}

/** Both rule statistics and the verdict of one window, as numbers for inspection and tests. */
export interface WindowScore {
  verdict: Exclude<Verdict, 'warming'>;
  /** Share of dimensions whose variance differs by more than thetaV, in [0, 1]. */
  varianceShare: number;
  /** RMS change of the off-diagonal correlations, in [0, 2]. */
  corrDistance: number;
  /** Largest level statistic z(n) over the dimensions (0 when level evidence is off). */
  levelMax: number;
  varianceFired: boolean;
  /** Rule 1 also fires at faultyMargin x its thresholds. */
  strongFired: boolean;
  corrFired: boolean;
  /** Largest single-metric statistic |var_w - var_b| / varTol over the dimensions (0 when thetaS is off). */
  singleMax: number;
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
  check('thetaM', r.thetaM >= 0); // Infinity allowed (off)
  check('faultyMargin', Number.isFinite(r.faultyMargin) && r.faultyMargin >= 1);
  check('thetaS', r.thetaS > 0); // Infinity allowed (off)
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
  /** Centred window values divided by their own norm, [N][T] (0 for flat dims). */
  readonly unit: Float64Array;
  readonly flat: Uint8Array;
  /** The window's off-diagonal correlations, upper triangle row by row. */
  readonly corr: Float64Array;
  constructor(
    readonly dims: number,
    readonly windowSize = 12,
  ) {
    this.corr = new Float64Array((dims * (dims - 1)) / 2);
    this.mean = new Float64Array(dims);
    this.std = new Float64Array(dims);
    this.variance = new Float64Array(dims);
    this.unit = new Float64Array(dims * windowSize);
    this.flat = new Uint8Array(dims);
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
  return scoreRing(
    window,
    start,
    T,
    baseline,
    withDefaults(o),
    scratch && scratch.windowSize === T ? scratch : new WindowScratch(baseline.dims, T),
  );
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
    thetaM: o.thetaM ?? DEFAULT_DEVICE_FILTER_OPTIONS.thetaM,
    faultyMargin: o.faultyMargin ?? DEFAULT_DEVICE_FILTER_OPTIONS.faultyMargin,
    thetaS: o.thetaS ?? DEFAULT_DEVICE_FILTER_OPTIONS.thetaS,
  };
}

/**
 * Samples after a marked break (`DeviceFilter.markBreak`) in which the step itself may land: the
 * sample read right after a placement change can predate it (the agent reads the node's latest
 * sample), and a removed replica frees its memory only once its requests are done.
 */
export const BREAK_LAG_SAMPLES = 3;

/**
 * Where a window with a break in it is split: the position in [from, to] (window order, each in
 * 1..T-1) that leaves the least standardised squared deviation around the two segments' own means,
 * i.e. where the step is.
 */
function bestSplit(ring: ArrayLike<number>, start: number, T: number, b: Baseline, from: number, to: number, dims: Uint8Array): number {
  const N = b.dims;
  let best = from;
  let bestSse = Infinity;
  for (let c = from; c <= to; c++) {
    let sse = 0;
    for (let n = 0; n < N; n++) {
      if (dims[n] === 0) continue;
      let s1 = 0;
      let s2 = 0;
      for (let t = 0; t < T; t++) {
        const v = ring[((start + t) % T) * N + n];
        if (t < c) s1 += v;
        else s2 += v;
      }
      const m1 = s1 / c;
      const m2 = s2 / (T - c);
      let sq = 0;
      for (let t = 0; t < T; t++) {
        const d = ring[((start + t) % T) * N + n] - (t < c ? m1 : m2);
        sq += d * d;
      }
      sse += sq / (b.scale[n] * b.scale[n]);
    }
    if (sse < bestSse) {
      bestSse = sse;
      best = c;
    }
  }
  return best;
}

/**
 * The hot path: statistics in scratch, verdict out. Rows are read at ((start + t) % T). `split` > 0
 * (window order, 1..T-1): a known break (a placement change) before that sample; each segment of
 * the dimensions in `splitDims` (all without it) is centred on its own mean, so the step between
 * them adds neither variance nor correlation.
 * `levelOf(n, mean)`: the level the level evidence compares for dimension n (default: the window's
 * mean; DeviceFilter takes the steps of marked breaks out of it).
 */
function scoreRing(
  ring: ArrayLike<number>,
  start: number,
  T: number,
  b: Baseline,
  o: DeviceFilterOptions,
  s: WindowScratch,
  split = 0,
  levelOf?: (n: number, mean: number) => number,
  splitDims?: Uint8Array,
): WindowScore {
  const N = b.dims;
  const { mean, std, variance, unit, flat, corr } = s;
  const useLevel = o.thetaM !== Infinity && b.level !== undefined && b.levelTol !== undefined;
  const useSingle = o.thetaS !== Infinity && b.varTol !== undefined;
  let singleMax = 0;
  const k = o.faultyMargin;
  let differing = 0;
  let strong = 0;
  let levelMax = 0;
  // per-dimension mean, variance (standardised), level statistic; centred values into `unit`
  for (let n = 0; n < N; n++) {
    let sum = 0;
    const u = n * T;
    // row (start + t) % T without a division per read
    for (let t = 0, r = start % T; t < T; t++, r = r + 1 === T ? 0 : r + 1) {
      const v = ring[r * N + n];
      unit[u + t] = v;
      sum += v;
    }
    const m = sum / T;
    let sq = 0;
    if (split > 0 && (!splitDims || splitDims[n] === 1)) {
      let s1 = 0;
      for (let t = 0; t < split; t++) s1 += unit[u + t];
      const m1 = s1 / split;
      const m2 = (sum - s1) / (T - split);
      for (let t = 0; t < T; t++) {
        const d = unit[u + t] - (t < split ? m1 : m2);
        unit[u + t] = d;
        sq += d * d;
      }
    } else {
      for (let t = 0; t < T; t++) {
        const d = unit[u + t] - m;
        unit[u + t] = d;
        sq += d * d;
      }
    }
    const inv = 1 / b.scale[n];
    mean[n] = m;
    const vr = (sq / T) * inv * inv; // population variance, standardised
    variance[n] = vr;
    const sd = Math.sqrt(sq / T); // raw units
    std[n] = sd;
    const isFlat = sd * inv < o.flatStd;
    flat[n] = isFlat ? 1 : 0;
    const invNorm = isFlat ? 0 : 1 / Math.sqrt(sq);
    for (let t = 0; t < T; t++) unit[u + t] *= invNorm;
    const dv = Math.abs(vr - b.variance[n]);
    let z = 0;
    if (useLevel) {
      z = (Math.abs((levelOf ? levelOf(n, m) : m) - b.level![n]) * inv) / b.levelTol![n];
      if (z > levelMax) levelMax = z;
    }
    if (useSingle) {
      const zv = dv / b.varTol![n];
      if (zv > singleMax) singleMax = zv;
    }
    if (dv > o.thetaV || z > o.thetaM) differing++;
    if (dv > k * o.thetaV || z > k * o.thetaM) strong++;
  }
  const need = Math.ceil(o.beta * N - 1e-9);
  const varianceShare = differing / N;
  const varianceFired = differing >= need;
  const strongFired = strong >= need;

  let corrDistance = 0;
  if (N > 1) {
    let sum2 = 0;
    let p = 0;
    const bc = b.corr;
    for (let i = 0; i < N; i++) {
      const fi = flat[i];
      const ui = i * T;
      const ci = i * N;
      const twelve = T === 12 && !fi;
      const a0 = twelve ? unit[ui] : 0;
      const a1 = twelve ? unit[ui + 1] : 0;
      const a2 = twelve ? unit[ui + 2] : 0;
      const a3 = twelve ? unit[ui + 3] : 0;
      const a4 = twelve ? unit[ui + 4] : 0;
      const a5 = twelve ? unit[ui + 5] : 0;
      const a6 = twelve ? unit[ui + 6] : 0;
      const a7 = twelve ? unit[ui + 7] : 0;
      const a8 = twelve ? unit[ui + 8] : 0;
      const a9 = twelve ? unit[ui + 9] : 0;
      const a10 = twelve ? unit[ui + 10] : 0;
      const a11 = twelve ? unit[ui + 11] : 0;
      for (let j = i + 1; j < N; j++) {
        let r = 0;
        if (fi || flat[j]) {
          // flat: correlation 0
        } else if (T === 12) {
          // the same sums in the same order as the general loop below, with row i held in locals
          // (the default window: about half the loads, no loop overhead)
          const uj = j * 12;
          r =
            a0 * unit[uj] +
            a4 * unit[uj + 4] +
            a8 * unit[uj + 8] +
            (a1 * unit[uj + 1] + a5 * unit[uj + 5] + a9 * unit[uj + 9]) +
            (a2 * unit[uj + 2] + a6 * unit[uj + 6] + a10 * unit[uj + 10] + (a3 * unit[uj + 3] + a7 * unit[uj + 7] + a11 * unit[uj + 11]));
          if (r > 1) r = 1;
          else if (r < -1) r = -1;
        } else {
          // the whole cost of the rules, O(T N^2 / 2) multiply-adds per window: 4 accumulators
          const uj = j * T;
          let r0 = 0;
          let r1 = 0;
          let r2 = 0;
          let r3 = 0;
          let t = 0;
          for (; t + 3 < T; t += 4) {
            r0 += unit[ui + t] * unit[uj + t];
            r1 += unit[ui + t + 1] * unit[uj + t + 1];
            r2 += unit[ui + t + 2] * unit[uj + t + 2];
            r3 += unit[ui + t + 3] * unit[uj + t + 3];
          }
          for (; t < T; t++) r0 += unit[ui + t] * unit[uj + t];
          r = r0 + r1 + (r2 + r3);
          if (r > 1) r = 1;
          else if (r < -1) r = -1;
        }
        corr[p++] = r;
        const d = r - bc[ci + j];
        sum2 += d * d;
      }
    }
    corrDistance = Math.sqrt((2 * sum2) / (N * (N - 1)));
  }
  const corrFired = corrDistance > o.thetaR;
  const verdict =
    varianceFired && corrFired && strongFired
      ? 'faulty'
      : varianceFired || corrFired || (useSingle && singleMax > o.thetaS)
        ? 'ambiguous'
        : 'healthy';
  return { verdict, varianceShare, corrDistance, levelMax, varianceFired, corrFired, strongFired, singleMax };
}

/** Window correlation matrix into `out` (row-major [N*N], diagonal 1, flat dims correlate 0). */
function windowCorr(
  rows: ArrayLike<number>,
  rowStart: number,
  T: number,
  N: number,
  scale: Float64Array,
  flatStd: number,
  out: Float64Array,
): void {
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
  const means: Float64Array[] = Array.from({ length: dims }, () => new Float64Array(starts.length));
  const corr = new Float64Array(dims * dims);
  const c = new Float64Array(dims * dims);
  starts.forEach((s, k) => {
    for (let n = 0; n < dims; n++) {
      let sum = 0;
      for (let t = 0; t < T; t++) sum += x[(s + t) * dims + n];
      const m = sum / T;
      means[n][k] = m;
      let sq = 0;
      for (let t = 0; t < T; t++) sq += (x[(s + t) * dims + n] - m) ** 2;
      vars[n][k] = sq / T / (scale[n] * scale[n]);
    }
    windowCorr(x, s, T, dims, scale, o.flatStd, c);
    for (let i = 0; i < c.length; i++) corr[i] += c[i] / starts.length;
  });
  const variance = new Float64Array(dims);
  for (let n = 0; n < dims; n++) variance[n] = median(vars[n]);
  // varTol = 99.9% quantile of the windows' |variance - typical variance| (floored at 1): the
  // node's own most extreme healthy variance excursion, per metric (single-metric routing)
  const varTol = new Float64Array(dims);
  for (let n = 0; n < dims; n++) {
    const dv = Float64Array.from(vars[n], (v) => Math.abs(v - variance[n])).sort();
    varTol[n] = Math.max(1, dv[Math.min(dv.length - 1, Math.floor(0.999 * (dv.length - 1)))]);
  }
  // level = median of the history; levelTol = 99.9% quantile of the windows' standardised distance
  // from it (floored at 1): the node's own most extreme healthy level excursion
  const level = new Float64Array(dims);
  const levelTol = new Float64Array(dims);
  const col = new Float64Array(count);
  for (let n = 0; n < dims; n++) {
    for (let r = 0; r < count; r++) col[r] = x[r * dims + n];
    level[n] = median(col);
    const z = Float64Array.from(means[n], (m) => Math.abs(m - level[n]) / scale[n]).sort();
    levelTol[n] = Math.max(1, z[Math.min(z.length - 1, Math.floor(0.999 * (z.length - 1)))]);
  }
  return { dims, scale, variance, corr, level, levelTol, varTol };
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
/** An owned copy of `b` (the filter's refresh writes into its arrays); throws if its arrays do not match its dims. */
function copyBaseline(b: Baseline): Baseline {
  const N = b.dims;
  if (
    b.scale.length !== N ||
    b.variance.length !== N ||
    b.corr.length !== N * N ||
    (b.level !== undefined && b.level.length !== N) ||
    (b.levelTol !== undefined && b.levelTol.length !== N) ||
    (b.varTol !== undefined && b.varTol.length !== N)
  ) {
    throw new TypeError(`DeviceFilter baseline: arrays do not match dims=${N}`);
  }
  return {
    dims: b.dims,
    scale: Float64Array.from(b.scale),
    variance: Float64Array.from(b.variance),
    corr: Float64Array.from(b.corr),
    level: b.level ? Float64Array.from(b.level) : undefined,
    levelTol: b.levelTol ? Float64Array.from(b.levelTol) : undefined,
    varTol: b.varTol ? Float64Array.from(b.varTol) : undefined,
  };
}

export class DeviceFilter {
  readonly options: DeviceFilterOptions;
  readonly dims: number;
  private readonly ring: Float64Array; // [T * N], row (count % T) is the next to write
  private readonly last: Float64Array; // last finite value per dim
  private readonly scratch: WindowScratch;
  private base: Baseline;
  private count = 0;
  /** Index of the first sample after the latest marked break (-1: none). */
  private breakAt = -1;
  /** Per dimension: the sum of the level steps at marked breaks, taken out of the level evidence. */
  private readonly shift: Float64Array;
  /** The latest break's step is not in `shift` yet; `preLevel`: the window's mean before it (raw units). */
  private pending = false;
  private readonly preLevel: Float64Array;
  /** The dimensions the latest break steps (1) or leaves alone (0). */
  private readonly breakDims: Uint8Array;
  private readonly levelOf = (n: number, mean: number): number =>
    this.inBreak && this.breakDims[n] === 1 ? this.preLevel[n] : mean - this.shift[n];
  private inBreak = false;
  /** Rule statistics of the latest full window (valid once push returned something but 'warming'). */
  varianceShare = 0;
  corrDistance = 0;
  levelMax = 0;
  singleMax = 0;

  constructor(baseline: Baseline, options: Partial<DeviceFilterOptions> = {}) {
    this.options = resolveDeviceFilterOptions(options);
    const N = baseline.dims;
    this.dims = N;
    this.base = copyBaseline(baseline);
    this.ring = new Float64Array(this.options.windowSize * N);
    this.last = new Float64Array(N);
    this.scratch = new WindowScratch(N, this.options.windowSize);
    this.shift = new Float64Array(N);
    this.preLevel = new Float64Array(N);
    this.breakDims = new Uint8Array(N);
  }

  /** A read-only view of the current (possibly refreshed) baseline. */
  get baseline(): Readonly<Baseline> {
    return this.base;
  }

  /** Replaces the baseline (a copy of `baseline`, same dims); the window and its samples stay. */
  setBaseline(baseline: Baseline): void {
    if (baseline.dims !== this.dims) throw new TypeError(`DeviceFilter.setBaseline: expected ${this.dims} dims, got ${baseline.dims}`);
    this.base = copyBaseline(baseline);
  }

  /** Forget the window (e.g. after a node restart); the baseline stays. */
  reset(): void {
    this.count = 0;
    this.breakAt = -1;
    this.pending = false;
    this.inBreak = false;
    this.shift.fill(0);
    this.last.fill(0);
  }

  /**
   * A known change of the node's level starts with the next sample (a placement change: a replica
   * added or removed moves its memory by a step, and its load with it). While the step is inside
   * the window, each side of it is centred on its own mean (the split placed where the step is,
   * within BREAK_LAG_SAMPLES after the mark), so a step alone reads as neither variance nor a
   * correlation change; the level evidence compares the level before the break meanwhile, and
   * afterwards the level less the step (the window's mean after the break minus the one before it,
   * summed over the breaks: a node whose placement moved its memory is judged at its new level).
   * A node that breaks swings within the segments too, and is judged as before; what a marked break
   * hides is a level shift of the node's own that starts with a placement change.
   */
  markBreak(dims?: readonly number[]): void {
    if (this.pending) this.commitStep();
    this.breakAt = this.count;
    this.pending = false;
    this.breakDims.fill(dims ? 0 : 1);
    for (const n of dims ?? []) {
      if (!Number.isInteger(n) || n < 0 || n >= this.dims)
        throw new TypeError(`DeviceFilter.markBreak: no dimension ${n} (of ${this.dims})`);
      this.breakDims[n] = 1;
    }
  }

  /** Mean of dimension n over the samples numbered [from, to) (all still in the ring: to - from <= T, to <= count). */
  private ringMean(n: number, from: number, to: number): number {
    const N = this.dims;
    const T = this.options.windowSize;
    let sum = 0;
    for (let k = from; k < to; k++) sum += this.ring[(k % T) * N + n];
    return sum / (to - from);
  }

  /** The latest break's step into `shift`: the mean of the samples since it (at most a window) minus the level before it. */
  private commitStep(): void {
    const since = Math.min(this.options.windowSize, this.count - this.breakAt);
    if (since < 1) return;
    for (let n = 0; n < this.dims; n++) {
      // preLevel has the earlier shift taken out: the new shift is the earlier one plus this step
      if (this.breakDims[n] === 1) this.shift[n] = this.ringMean(n, this.count - since, this.count) - this.preLevel[n];
    }
    this.pending = false;
  }

  /**
   * Copies the current window (T samples of N metrics, oldest first, row-major; non-finite
   * readings replaced by the dimension's last finite value as the rules saw them) into `out`.
   * False while warming (fewer than T samples).
   */
  windowInto(out: Float32Array | Float64Array): boolean {
    const N = this.dims;
    const T = this.options.windowSize;
    if (out.length < T * N) throw new TypeError(`DeviceFilter.windowInto: need ${T * N} values, got ${out.length}`);
    if (this.count < T) return false;
    const start = this.count % T;
    for (let k = 0; k < T; k++) {
      const src = ((start + k) % T) * N;
      for (let n = 0; n < N; n++) out[k * N + n] = this.ring[src + n];
    }
    return true;
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
    // the marked break's position in this window (window order), up to BREAK_LAG_SAMPLES later
    let split = 0;
    if (this.breakAt >= 0) {
      const at = this.breakAt - (this.count - T);
      const lo = Math.max(1, at);
      const hi = Math.min(T - 1, at + BREAK_LAG_SAMPLES);
      if (lo <= hi) split = bestSplit(this.ring, start, T, this.base, lo, hi, this.breakDims);
      if (at === T - 1 && !this.pending) {
        // the first window with the break in it: the level before it (the window's samples before the mark, shift taken out)
        for (let n = 0; n < N; n++) this.preLevel[n] = this.ringMean(n, this.breakAt - (T - 1), this.breakAt) - this.shift[n];
        this.pending = true;
      } else if (split === 0 && this.pending) this.commitStep(); // the break has left the window
    }
    this.inBreak = split > 0 && this.pending;
    const s = scoreRing(this.ring, start, T, this.base, this.options, this.scratch, split, this.levelOf, this.breakDims);
    this.varianceShare = s.varianceShare;
    this.corrDistance = s.corrDistance;
    this.levelMax = s.levelMax;
    this.singleMax = s.singleMax;
    if (s.verdict === 'healthy' && this.options.refreshRate > 0) this.refresh();
    return s.verdict;
  }

  /**
   * Moves the baseline towards the current (healthy) window (its statistics are in scratch): the
   * typical variance by a median tracker (var_b x (1 + a) when the window's variance is above it,
   * x (1 - a) when below), the correlations by an EMA of rate a.
   */
  private refresh(): void {
    const a = this.options.refreshRate;
    const N = this.dims;
    const { variance, corr } = this.scratch;
    const b = this.base;
    for (let n = 0; n < N; n++) {
      // var_b is a MEDIAN window variance; an EMA would drift to the MEAN, which for a spiky metric
      // is many times the median (then every quiet window differs by more than thetaV). A
      // multiplicative step up or down tracks the median of the healthy windows instead.
      if (variance[n] > b.variance[n]) b.variance[n] *= 1 + a;
      else if (variance[n] < b.variance[n]) b.variance[n] *= 1 - a;
    }
    let p = 0;
    for (let i = 0; i < N; i++) {
      for (let j = i + 1; j < N; j++) {
        const r = corr[p++];
        const k = i * N + j;
        b.corr[k] += a * (r - b.corr[k]);
        b.corr[j * N + i] = b.corr[k];
      }
    }
  }
}
