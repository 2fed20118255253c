/**
 * Learned device-anomaly detector (Sentinel step 2): a variational GRU (VRNN, Chung et al. 2015)
 * whose latent prior is a mixture of K Gaussians with a Gumbel-softmax component choice.
 *
 * Per time step t of a window x_1..x_T ([D] each, standardised with training statistics):
 *   phi_x   = relu(x_t Wx + bx)                                    // [B, F]
 *   q(c)    = softmax([phi_x, h] Wc + bc)                           // [B, K] component posterior
 *   p(c)    = softmax(h Wpc + bpc)                                  // [B, K] component prior
 *   c       ~ GumbelSoftmax(log q(c), lambda)  (training; q(c) itself when scoring)
 *   q(z)    = N(mu_q, sigma_q), [mu_q, log sigma_q] = [phi_x, h] Wq + bq          // [B, Z]
 *   p(z|c)  = N(mu_p, sigma_p), [mu_p, log sigma_p] = [c, h] Wp + bp
 *             (c selects the component's own mean/scale rows, h shifts them: Sentinel eq. 6-7)
 *   z       = mu_q + sigma_q * eps  (training; mu_q when scoring)
 *   phi_z   = relu(z Wz + bz)
 *   p(x|z)  = N(mu_x, sigma_x), [mu_x, log sigma_x] = [phi_z, h] Wd + bd           // [B, D]
 *   h       = GRU([phi_x, phi_z], h)
 * Loss (negative ELBO, summed over t, mean over the batch):
 *   NLL_t = sum_d [ log sigma_x + 0.5 ((x - mu_x) / sigma_x)^2 + 0.5 log 2 pi ]
 *   KL_z  = sum_z [ log sigma_p - log sigma_q + (sigma_q^2 + (mu_q - mu_p)^2) / (2 sigma_p^2) - 1/2 ]
 *   KL_c  = sum_k q_k (log q_k - log p_k)
 * The temperature lambda anneals exponentially from tempStart (5.0) to tempEnd (0.1) over training.
 *
 * Anomaly score of a window (deterministic: posterior means, no sampling). With
 * nll_d = the NLL of dimension d averaged over the window's last `scoreSteps` steps:
 * - `scoreReduce: 'maxDim'` (default): each dimension's nll_d is first put on its own healthy scale,
 *   u_d = (nll_d - m_d) / (q_d - m_d), m_d / q_d = median / calibrationQuantile of nll_d over the
 *   held-out training windows, and the window score is max_d u_d. An incident that moves one or two
 *   of 30+ metrics is not averaged away, and a metric that is always hard to predict (large nll_d
 *   on healthy data) cannot dominate. On the 5 SMD dev machines this raised the learned stage's AUC
 *   on 3 of 5 machines and its F1 at the calibrated threshold from 0.36 to 0.40 (docs/detect.md).
 * - `scoreReduce: 'mean'`: sum_d nll_d / D (the NLL of the whole sample per dimension, Sentinel's
 *   -log p(s | z) scaled by 1/D; the score before 2026-11-30).
 * Normalisation of the window score: with m = median and q = the calibrationQuantile (default 0.99)
 * of the scores of the held-out training windows (the last calibrationShare of the windows given to
 * fit, never used for fitting: in-sample scores are optimistic),
 *   normalised = (score - m) / (q - m) - 1
 * so 0 is "as unusual as the 1% most unusual training windows" and eta = 0.3 (default) flags
 * windows 30% of the healthy spread beyond that. Anomalous when normalised > eta.
 *
 * Pure computation: no files, no backend choice (entry points call shared/tf-backend.ts). Every
 * forward pass and loss is in tf.tidy; `dispose()` frees the variables.
 */
import { columnMeanStd } from './standardise';
import * as tf from '@tensorflow/tfjs';
import { Rng } from '../../shared/rng';

export interface VgruOptions {
  /** GRU state size H. Default 24. */
  hidden: number;
  /** Latent size Z. Default 6. */
  latent: number;
  /** Mixture components K. Default 3. */
  components: number;
  /** Feature size F of phi_x and phi_z. Default 16. */
  feature: number;
  /** Optimiser steps. Default 120. */
  steps: number;
  /** Windows per step. Default 64. */
  batchSize: number;
  /** Adam learning rate. Default 0.003. */
  learningRate: number;
  /** Gumbel-softmax temperature at the start and the end of training. Default 5.0 -> 0.1. */
  tempStart: number;
  tempEnd: number;
  /** Score = mean NLL over the last this many steps of the window. Default 3. */
  scoreSteps: number;
  /** How per-dimension NLLs become one window score: 'maxDim' (default) or 'mean' (module comment). */
  scoreReduce: 'maxDim' | 'mean';
  /** Training-score quantile that maps to normalised score 0. Default 0.99. */
  calibrationQuantile: number;
  /** Threshold on the normalised score. Default 0.3 (Sentinel eta). */
  eta: number;
  /** Share of the training windows (the LAST ones, i.e. the most recent when windows are in time
   *  order) held out from fitting and used only for the score calibration. Default 0.2. */
  calibrationShare: number;
  /** Seed of initialisation, batches, noise. Default 1. */
  seed: number;
}

export const DEFAULT_VGRU_OPTIONS: Readonly<VgruOptions> = Object.freeze({
  hidden: 24,
  latent: 6,
  components: 3,
  feature: 16,
  steps: 120,
  batchSize: 64,
  learningRate: 0.003,
  tempStart: 5.0,
  tempEnd: 0.1,
  scoreSteps: 3,
  scoreReduce: 'maxDim',
  calibrationQuantile: 0.99,
  eta: 0.3,
  calibrationShare: 0.2,
  seed: 1,
});

export { DETECT_ETA } from './defaults';

const LOG_2PI = Math.log(2 * Math.PI);
const INPUT_CLIP = 10; // standardised inputs are clipped to +-10 so one wild value cannot overflow

interface Params {
  wx: tf.Variable;
  bx: tf.Variable;
  wc: tf.Variable;
  bc: tf.Variable;
  wpc: tf.Variable;
  bpc: tf.Variable;
  wq: tf.Variable;
  bq: tf.Variable;
  wp: tf.Variable;
  bp: tf.Variable;
  wz: tf.Variable;
  bz: tf.Variable;
  wd: tf.Variable;
  bd: tf.Variable;
  gw: tf.Variable;
  gu: tf.Variable;
  gb: tf.Variable;
}
const PARAM_ORDER: (keyof Params)[] = [
  'wx',
  'bx',
  'wc',
  'bc',
  'wpc',
  'bpc',
  'wq',
  'bq',
  'wp',
  'bp',
  'wz',
  'bz',
  'wd',
  'bd',
  'gw',
  'gu',
  'gb',
];

export class VgruDetector {
  readonly options: VgruOptions;
  private readonly p: Params;
  /** Input standardisation [D] and calibration [median, quantile] of the training scores. */
  private mean: Float32Array;
  private std: Float32Array;
  private calib = new Float32Array([0, 1]);
  /** Per-dimension calibration of nll_d for 'maxDim': [m_0..m_{D-1}, q_0..q_{D-1}]. */
  private dimCalib: Float32Array;
  private disposed = false;

  constructor(
    readonly dims: number,
    readonly windowSize: number,
    options: Partial<VgruOptions> = {},
  ) {
    const o = (this.options = { ...DEFAULT_VGRU_OPTIONS, ...options });
    if (!Number.isInteger(dims) || dims < 1) throw new TypeError(`VgruDetector: dims must be a positive integer, got ${dims}`);
    if (!Number.isInteger(windowSize) || windowSize < 2)
      throw new TypeError(`VgruDetector: windowSize must be an integer >= 2, got ${windowSize}`);
    for (const k of ['hidden', 'latent', 'components', 'feature', 'batchSize', 'scoreSteps'] as const) {
      if (!Number.isInteger(o[k]) || o[k] < 1) throw new TypeError(`VgruDetector option ${k}: expected a positive integer, got ${o[k]}`);
    }
    if (o.tempStart <= 0 || o.tempEnd <= 0)
      throw new TypeError(`VgruDetector option tempEnd: temperatures must be > 0, got ${o.tempStart} -> ${o.tempEnd}`);
    const { hidden: H, latent: Z, components: K, feature: F } = o;
    const D = dims;
    const rng = Rng.derive(o.seed, 'vgru-init');
    const w = (r: number, c: number): tf.Variable => {
      const a = new Float32Array(r * c);
      const s = Math.sqrt(2 / (r + c)); // Glorot normal
      for (let i = 0; i < a.length; i++) a[i] = rng.normal() * s;
      return tf.tidy(() => tf.variable(tf.tensor2d(a, [r, c]))); // tidy frees the initial tensor
    };
    const b = (c: number, v = 0): tf.Variable => tf.tidy(() => tf.variable(tf.fill([c], v)));
    this.p = {
      wx: w(D, F),
      bx: b(F),
      wc: w(F + H, K),
      bc: b(K),
      wpc: w(H, K),
      bpc: b(K),
      wq: w(F + H, 2 * Z),
      bq: b(2 * Z),
      wp: w(K + H, 2 * Z),
      bp: b(2 * Z),
      wz: w(Z, F),
      bz: b(F),
      wd: w(F + H, 2 * D),
      bd: b(2 * D),
      gw: w(2 * F, 3 * H),
      gu: w(H, 3 * H),
      gb: b(3 * H),
    };
    this.mean = new Float32Array(D);
    this.std = new Float32Array(D).fill(1);
    this.dimCalib = new Float32Array(2 * D);
    this.dimCalib.fill(1, D);
    if (o.scoreReduce !== 'maxDim' && o.scoreReduce !== 'mean')
      throw new TypeError(`VgruDetector option scoreReduce: expected 'maxDim' or 'mean', got ${String(o.scoreReduce)}`);
  }

  /**
   * Trains on healthy windows `windows` (row-major [count][T][D], raw units) and calibrates the
   * score normalisation on them. Returns the loss per step (for progress and tests).
   */
  fit(windows: Float32Array, count: number): number[] {
    this.checkAlive();
    const o = this.options;
    const { dims: D, windowSize: T } = this;
    if (windows.length < count * T * D || count < 2) throw new TypeError(`VgruDetector.fit: need >= 2 windows of ${T}x${D}, got ${count}`);
    // input statistics per dimension over all training samples
    columnMeanStd(windows, count * T, D, this.mean, this.std);
    const calibCount = count >= 10 ? Math.floor(count * Math.min(Math.max(o.calibrationShare, 0), 0.9)) : 0;
    const fitCount = count - calibCount;
    const rng = Rng.derive(o.seed, 'vgru-train');
    const opt = tf.train.adam(o.learningRate);
    const losses: number[] = [];
    const B = Math.min(o.batchSize, fitCount);
    const batch = new Float32Array(B * T * D);
    for (let step = 0; step < o.steps; step++) {
      const frac = o.steps > 1 ? step / (o.steps - 1) : 1;
      const temp = o.tempStart * Math.pow(o.tempEnd / o.tempStart, frac);
      for (let i = 0; i < B; i++) {
        const k = rng.int(fitCount);
        batch.set(windows.subarray(k * T * D, (k + 1) * T * D), i * T * D);
      }
      const noiseSeed = rng.nextU32();
      const loss = tf.tidy(() => {
        const x = this.standardise(batch, B); // [B, T, D]
        return opt.minimize(() => this.elbo(x, temp, noiseSeed), true) as tf.Scalar;
      });
      losses.push(loss.dataSync()[0]);
      loss.dispose();
    }
    opt.dispose();
    // calibration on the held-out windows (all windows when too few to hold any out)
    const calW = calibCount > 0 ? windows.subarray(fitCount * T * D) : windows;
    const calN = calibCount > 0 ? calibCount : count;
    if (o.scoreReduce === 'maxDim') {
      const dims = this.scoreRawDims(calW, calN);
      const col = new Float32Array(calN);
      for (let d = 0; d < D; d++) {
        for (let i = 0; i < calN; i++) col[i] = dims[i * D + d];
        col.sort();
        const md = quantile(col, 0.5);
        const qd = quantile(col, o.calibrationQuantile);
        this.dimCalib[d] = md;
        this.dimCalib[D + d] = Math.max(qd, md + 1e-3);
      }
    }
    const scores = this.scoreRaw(calW, calN);
    const sorted = Float32Array.from(scores).sort();
    const m = quantile(sorted, 0.5);
    const q = quantile(sorted, o.calibrationQuantile);
    this.calib = new Float32Array([m, Math.max(q, m + 1e-6)]);
    return losses;
  }

  /** Raw anomaly scores, one per window (before the window-level normalisation; module comment). */
  scoreRaw(windows: Float32Array, count: number): Float32Array {
    this.checkAlive();
    if (this.options.scoreReduce === 'maxDim') {
      const D = this.dims;
      const dims = this.scoreRawDims(windows, count);
      const out = new Float32Array(count);
      const c = this.dimCalib;
      for (let i = 0; i < count; i++) {
        let best = -Infinity;
        for (let d = 0; d < D; d++) {
          const u = (dims[i * D + d] - c[d]) / (c[D + d] - c[d]);
          if (u > best) best = u;
        }
        out[i] = best;
      }
      return out;
    }
    const { dims: D, windowSize: T } = this;
    const out = new Float32Array(count);
    const chunk = 1024;
    for (let s = 0; s < count; s += chunk) {
      const n = Math.min(chunk, count - s);
      const part = windows.subarray(s * T * D, (s + n) * T * D);
      const r = tf.tidy(() => this.nllPerWindow(this.standardise(part, n)));
      out.set(r.dataSync(), s);
      r.dispose();
    }
    return out;
  }

  /**
   * Per-dimension raw scores: the NLL of dimension d averaged over the last scoreSteps steps,
   * row-major [count][D].
   */
  scoreRawDims(windows: Float32Array, count: number): Float32Array {
    this.checkAlive();
    const { dims: D, windowSize: T } = this;
    const out = new Float32Array(count * D);
    const chunk = 1024;
    for (let s = 0; s < count; s += chunk) {
      const n = Math.min(chunk, count - s);
      const part = windows.subarray(s * T * D, (s + n) * T * D);
      const r = tf.tidy(() => this.nllPerDim(this.standardise(part, n)));
      out.set(r.dataSync(), s * D);
      r.dispose();
    }
    return out;
  }

  /** Normalised scores (see the module comment); > eta means anomalous. */
  score(windows: Float32Array, count: number): Float32Array {
    const raw = this.scoreRaw(windows, count);
    const [m, q] = this.calib;
    for (let i = 0; i < raw.length; i++) raw[i] = (raw[i] - m) / (q - m) - 1;
    return raw;
  }

  /** Verdict per window: normalised score > eta. */
  isAnomalous(windows: Float32Array, count: number): boolean[] {
    return Array.from(this.score(windows, count), (s) => s > this.options.eta);
  }

  /**
   * All weights as Float32Arrays, in a fixed order: the 17 parameter tensors (PARAM_ORDER), then
   * input mean [D], input std [D], calibration [median, quantile], per-dimension calibration
   * [m_0..m_{D-1}, q_0..q_{D-1}]. `setWeights` takes the same list.
   */
  getWeights(): Float32Array[] {
    this.checkAlive();
    const ws = PARAM_ORDER.map((k) => Float32Array.from(this.p[k].dataSync() as Float32Array));
    return [
      ...ws,
      Float32Array.from(this.mean),
      Float32Array.from(this.std),
      Float32Array.from(this.calib),
      Float32Array.from(this.dimCalib),
    ];
  }

  setWeights(ws: Float32Array[]): void {
    this.checkAlive();
    if (ws.length !== PARAM_ORDER.length + 4)
      throw new TypeError(`VgruDetector.setWeights: expected ${PARAM_ORDER.length + 4} arrays, got ${ws.length}`);
    PARAM_ORDER.forEach((k, i) => {
      const v = this.p[k];
      if (ws[i].length !== v.size) throw new TypeError(`VgruDetector.setWeights: ${k} expects ${v.size} values, got ${ws[i].length}`);
      tf.tidy(() => v.assign(tf.tensor(ws[i], v.shape)));
    });
    const n = PARAM_ORDER.length;
    if (ws[n].length !== this.dims || ws[n + 1].length !== this.dims || ws[n + 2].length !== 2 || ws[n + 3].length !== 2 * this.dims) {
      throw new TypeError('VgruDetector.setWeights: normaliser arrays have the wrong size');
    }
    this.mean = Float32Array.from(ws[n]);
    this.std = Float32Array.from(ws[n + 1]);
    this.calib = Float32Array.from(ws[n + 2]);
    this.dimCalib = Float32Array.from(ws[n + 3]);
  }

  dispose(): void {
    if (this.disposed) return;
    for (const k of PARAM_ORDER) this.p[k].dispose();
    this.disposed = true;
  }

  private checkAlive(): void {
    if (this.disposed) throw new Error('VgruDetector: used after dispose()');
  }

  /** [n, T, D] standardised and clipped. Call inside tf.tidy. */
  private standardise(raw: Float32Array, n: number): tf.Tensor3D {
    const { dims: D, windowSize: T } = this;
    const x = tf.tensor3d(raw.subarray(0, n * T * D), [n, T, D]);
    return x.sub(tf.tensor1d(this.mean)).div(tf.tensor1d(this.std)).clipByValue(-INPUT_CLIP, INPUT_CLIP) as tf.Tensor3D;
  }

  /** One pass over the window. Returns per-step NLL [B, T] and the KL terms summed [B]. */
  private run(
    x: tf.Tensor3D,
    train: boolean,
    temp: number,
    noiseSeed: number,
    perDim = false,
  ): { nll: tf.Tensor2D; kl: tf.Tensor1D; nllDims?: tf.Tensor3D } {
    const p = this.p;
    const { hidden: H, latent: Z, components: K } = this.options;
    const [B, T, D] = x.shape;
    let h: tf.Tensor2D = tf.zeros([B, H]);
    const nlls: tf.Tensor1D[] = [];
    const nllDims: tf.Tensor2D[] = [];
    let kl: tf.Tensor1D = tf.zeros([B]);
    const steps = tf.unstack(x, 1) as tf.Tensor2D[]; // T x [B, D]
    for (let t = 0; t < T; t++) {
      const xt = steps[t];
      const phiX = tf.relu(xt.matMul(p.wx).add(p.bx)); // [B, F]
      const enc = tf.concat([phiX, h], 1); // [B, F + H]
      const qLogits = tf.logSoftmax(enc.matMul(p.wc).add(p.bc)); // [B, K]
      const pLogits = tf.logSoftmax(h.matMul(p.wpc).add(p.bpc)); // [B, K]
      let c: tf.Tensor2D;
      if (train) {
        const u = tf.randomUniform([B, K], 1e-6, 1 - 1e-6, 'float32', noiseSeed + 2 * t);
        const g = tf.neg(tf.log(tf.neg(tf.log(u))));
        c = tf.softmax(qLogits.add(g).div(temp)) as tf.Tensor2D;
      } else c = tf.exp(qLogits) as tf.Tensor2D;
      const qz = enc.matMul(p.wq).add(p.bq); // [B, 2Z]
      const muQ = qz.slice([0, 0], [B, Z]);
      const lsQ = qz.slice([0, Z], [B, Z]).clipByValue(-6, 3);
      const pz = tf.concat([c, h], 1).matMul(p.wp).add(p.bp);
      const muP = pz.slice([0, 0], [B, Z]);
      const lsP = pz.slice([0, Z], [B, Z]).clipByValue(-6, 3);
      const z = train ? muQ.add(tf.exp(lsQ).mul(tf.randomNormal([B, Z], 0, 1, 'float32', noiseSeed + 2 * t + 1))) : muQ;
      const phiZ = tf.relu(z.matMul(p.wz).add(p.bz)); // [B, F]
      const dec = tf.concat([phiZ, h], 1).matMul(p.wd).add(p.bd); // [B, 2D]
      const muX = dec.slice([0, 0], [B, D]);
      const lsX = dec.slice([0, D], [B, D]).clipByValue(-4, 3);
      const zx = xt.sub(muX).div(tf.exp(lsX));
      const nllD = lsX.add(zx.square().mul(0.5)).add(0.5 * LOG_2PI) as tf.Tensor2D; // [B, D]
      if (perDim) nllDims.push(nllD);
      nlls.push(nllD.sum(1) as tf.Tensor1D);
      const klZ = lsP
        .sub(lsQ)
        .add(
          tf
            .exp(lsQ.mul(2))
            .add(muQ.sub(muP).square())
            .div(tf.exp(lsP.mul(2)).mul(2)),
        )
        .sub(0.5)
        .sum(1);
      const qProb = tf.exp(qLogits);
      const klC = qProb.mul(qLogits.sub(pLogits)).sum(1);
      kl = kl.add(klZ).add(klC) as tf.Tensor1D;
      // GRU on [phi_x, phi_z]
      const inp = tf.concat([phiX, phiZ], 1);
      const gi = inp.matMul(p.gw).add(p.gb); // [B, 3H]
      const gh = h.matMul(p.gu);
      const zGate = tf.sigmoid(gi.slice([0, 0], [B, H]).add(gh.slice([0, 0], [B, H])));
      const rGate = tf.sigmoid(gi.slice([0, H], [B, H]).add(gh.slice([0, H], [B, H])));
      const cand = tf.tanh(gi.slice([0, 2 * H], [B, H]).add(rGate.mul(gh.slice([0, 2 * H], [B, H]))));
      h = tf.add(tf.sub(1, zGate).mul(h), zGate.mul(cand)) as tf.Tensor2D;
    }
    return { nll: tf.stack(nlls, 1) as tf.Tensor2D, kl, nllDims: perDim ? (tf.stack(nllDims, 1) as tf.Tensor3D) : undefined };
  }

  /** Negative ELBO, mean over the batch: sum_t NLL_t + KL. */
  private elbo(x: tf.Tensor3D, temp: number, noiseSeed: number): tf.Scalar {
    const { nll, kl } = this.run(x, true, temp, noiseSeed);
    return nll.sum(1).add(kl).mean() as tf.Scalar;
  }

  /** [n, D] NLL of each dimension, mean over the last scoreSteps steps. */
  private nllPerDim(x: tf.Tensor3D): tf.Tensor2D {
    const { nllDims } = this.run(x, false, 1, 0, true);
    const T = this.windowSize;
    const L = Math.min(this.options.scoreSteps, T);
    return nllDims!.slice([0, T - L, 0], [-1, L, -1]).mean(1) as tf.Tensor2D;
  }

  /** [n] mean NLL per dimension over the last scoreSteps steps. */
  private nllPerWindow(x: tf.Tensor3D): tf.Tensor1D {
    const { nll } = this.run(x, false, 1, 0);
    const T = this.windowSize;
    const L = Math.min(this.options.scoreSteps, T);
    return nll
      .slice([0, T - L], [-1, L])
      .mean(1)
      .div(this.dims) as tf.Tensor1D;
  }
}

/** q-quantile of an ascending array (linear interpolation). */
export function quantile(sorted: ArrayLike<number>, q: number): number {
  if (sorted.length === 0) return NaN;
  const pos = Math.min(Math.max(q, 0), 1) * (sorted.length - 1);
  const lo = Math.floor(pos);
  const hi = Math.min(lo + 1, sorted.length - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo);
}
