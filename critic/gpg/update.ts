/**
 * GPG training (ALGORITHMS.md section 3; kais-reconstruction.md 4.9): REINFORCE with a baseline,
 * gradients through both heads and every level of the embedding.
 *
 *   G_tau = sum_{tau' >= tau} gamma^(tau' - tau) R_tau'                 (gamma = 1)
 *   b_tau = mean over the rollouts of G_tau at the same frame index       (Decima's time-aligned
 *           baseline: the rollouts share one arrival sequence and frames have a fixed length, so
 *           "the same wall-clock time" is "the same frame index")
 *   L     = -mean_tau (G_tau - b_tau) log pi(a_tau | s_tau)  -  beta_e H_norm
 *   H_norm: entropy of the first node pick / log|N'|, plus the mean entropy of the scale picks /
 *           log|A~_n| (both in [0, 1])
 *   beta_e: from `entropyStart` down by `entropyDecay` per update to `entropyFloor` (1 -> 1e-4,
 *           -1e-3 per update in Decima and the demo)
 *
 * With a single rollout the time-aligned mean would equal G_tau and the advantage would be 0 (the
 * demo's bug 8): then the baseline is a moving average of G_tau per frame index over earlier
 * updates (`baselineDecay`), as the reconstruction allows. Advantages are divided by their
 * standard deviation over the batch (a documented departure: our rewards are rates in [0, 1], so
 * raw advantages are ~100x smaller than Decima's and the entropy term would drown them).
 *
 * The demo code's GPG cannot learn (baseline = return, constant log-probabilities); this one is
 * checked by a test that a fixed preferred action becomes more likely.
 */
import * as tf from '@tensorflow/tfjs';
import { Adam, type AdamState } from '../cmmac/adam';
import { ACTION_FEATURES, actionCount, actionFeatures as actionFeaturesInto, EAP_FEATURES } from './graph';
import type { GpgNet } from './gnn';
import type { GpgDecision } from './policy';

/** One rollout: its decisions in frame order and the reward of the frame after each. */
export interface GpgEpisode {
  decisions: GpgDecision[];
  rewards: number[];
}

export interface GpgUpdateOptions {
  /** Adam learning rate. @defaultValue 1e-3 */
  lr: number;
  /** Discount per frame. @defaultValue 1 */
  gamma: number;
  entropyStart: number;
  entropyDecay: number;
  entropyFloor: number;
  /** Moving-average factor of the single-rollout baseline. @defaultValue 0.9 */
  baselineDecay: number;
  /** Divide advantages by their standard deviation. @defaultValue true */
  normalise: boolean;
}

export const DEFAULT_GPG_UPDATE: Readonly<GpgUpdateOptions> = Object.freeze({
  lr: 1e-3,
  gamma: 1,
  entropyStart: 1,
  entropyDecay: 1e-3,
  entropyFloor: 1e-4,
  baselineDecay: 0.9,
  normalise: true,
});

export interface GpgUpdateStats {
  loss: number;
  /** Mean normalised entropy of the node picks. */
  nodeEntropy: number;
  /** Mean normalised entropy of the scale picks. */
  scaleEntropy: number;
  beta: number;
  meanReturn: number;
  decisions: number;
}

/** G_tau for each frame of one rollout. */
export function discountedReturns(rewards: readonly number[], gamma: number): number[] {
  const g = new Array<number>(rewards.length);
  let acc = 0;
  for (let t = rewards.length - 1; t >= 0; t--) g[t] = acc = rewards[t] + gamma * acc;
  return g;
}

/** What a checkpoint needs to continue a learner exactly (with the net's weights). */
export interface GpgLearnerState {
  updates: number;
  adam: AdamState;
  /** the single-rollout moving baseline per frame index */
  baseline: number[];
}

export class GpgLearner {
  readonly o: GpgUpdateOptions;
  updates = 0;
  private readonly adam: Adam;
  /** Moving-average baseline per frame index (single-rollout updates). */
  private readonly movingBaseline: number[] = [];

  constructor(
    readonly net: GpgNet,
    options: Partial<GpgUpdateOptions> = {},
  ) {
    this.o = { ...DEFAULT_GPG_UPDATE, ...options };
    this.adam = new Adam(net.variables, this.o.lr);
  }

  get beta(): number {
    return Math.max(this.o.entropyFloor, this.o.entropyStart - this.o.entropyDecay * this.updates);
  }

  /** Advantages G_tau - b_tau of each rollout (see the file comment for b). */
  advantages(episodes: readonly GpgEpisode[]): number[][] {
    const returns = episodes.map((e) => discountedReturns(e.rewards, this.o.gamma));
    const len = Math.max(0, ...returns.map((r) => r.length));
    const base = new Array<number>(len).fill(0);
    if (episodes.length > 1) {
      for (let t = 0; t < len; t++) {
        let s = 0;
        let k = 0;
        for (const r of returns) {
          if (t < r.length) {
            s += r[t];
            k++;
          }
        }
        base[t] = s / k;
      }
    } else {
      for (let t = 0; t < len; t++) base[t] = this.movingBaseline[t] ?? 0;
      const r = returns[0] ?? [];
      for (let t = 0; t < r.length; t++) {
        const prev = this.movingBaseline[t];
        this.movingBaseline[t] = prev === undefined ? r[t] : this.o.baselineDecay * prev + (1 - this.o.baselineDecay) * r[t];
      }
    }
    return returns.map((r) => r.map((g, t) => g - base[t]));
  }

  /** One gradient step on these rollouts (every decision of one graph spec). */
  update(episodes: readonly GpgEpisode[]): GpgUpdateStats {
    for (const e of episodes) {
      if (e.decisions.length !== e.rewards.length)
        throw new TypeError(`GpgLearner.update: ${e.decisions.length} decisions but ${e.rewards.length} rewards`);
    }
    const adv = this.advantages(episodes);
    const flat: { d: GpgDecision; a: number }[] = [];
    episodes.forEach((e, i) => e.decisions.forEach((d, t) => flat.push({ d, a: adv[i][t] })));
    const allReturns = episodes.flatMap((e) => discountedReturns(e.rewards, this.o.gamma));
    const meanReturn = allReturns.length ? allReturns.reduce((s, x) => s + x, 0) / allReturns.length : 0;
    const beta = this.beta;
    if (flat.length === 0) return { loss: 0, nodeEntropy: 0, scaleEntropy: 0, beta, meanReturn, decisions: 0 };
    if (this.o.normalise && flat.length > 1) {
      const m = flat.reduce((s, f) => s + f.a, 0) / flat.length;
      const sd = Math.sqrt(flat.reduce((s, f) => s + (f.a - m) ** 2, 0) / flat.length);
      for (const f of flat) f.a = sd > 1e-8 ? f.a / sd : 0;
    }
    const batch = buildBatch(flat.map((f) => f.d));
    const advT = Float32Array.from(flat, (f) => f.a);
    const advK = Float32Array.from(batch.scaleDecision, (t) => advT[t]);
    let nodeEntropy = 0;
    let scaleEntropy = 0;
    const { value, grads } = tf.variableGrads(() => {
      const T = flat.length;
      const t = decisionTerms(this.net, batch, flat[0].d);
      let loss = tf.neg(tf.mean(tf.mul(t.nodeLogp, tf.tensor1d(advT))));
      let ent = tf.mean(t.nodeEntropy);
      nodeEntropy = ent.dataSync()[0];
      if (t.scaleLogp && t.scaleEntropy) {
        loss = tf.sub(loss, tf.div(tf.sum(tf.mul(t.scaleLogp, tf.tensor1d(advK))), T));
        const sEnt = tf.mean(t.scaleEntropy);
        scaleEntropy = sEnt.dataSync()[0];
        ent = tf.add(ent, sEnt);
      }
      return tf.sub(loss, tf.mul(ent, beta)) as tf.Scalar;
    }, this.net.variables);
    const loss = value.dataSync()[0];
    const vars = this.net.variables;
    this.adam.apply(vars.map((v) => grads[v.name]));
    value.dispose();
    tf.dispose(Object.values(grads));
    this.updates++;
    return { loss, nodeEntropy, scaleEntropy, beta, meanReturn, decisions: flat.length };
  }

  /**
   * One step of behaviour cloning on a teacher's decisions (critic/gpg/imitate.ts): maximise their
   * log-likelihood, the node picks' (Plackett-Luce, in the teacher's order) and the scale picks':
   *
   *   L = -(1/T) sum_t [ nodeWeight x log P(n_1..n_H | s_t) + sum_h log pi(j_h | n_h, s_t) ]
   *
   * nodeWeight = 0 leaves the node head to the embeddings' drift; the scale term alone is what the
   * search's labels say. Returns the loss and the share of scale
   * picks whose argmax is the teacher's (before the step).
   */
  imitate(decisions: readonly GpgDecision[], nodeWeight = 1): { loss: number; agreement: number } {
    if (decisions.length === 0) return { loss: 0, agreement: 1 };
    const batch = buildBatch(decisions);
    const T = decisions.length;
    let agreement = 1;
    const { value, grads } = tf.variableGrads(() => {
      const t = decisionTerms(this.net, batch, decisions[0]);
      let loss = tf.mul(tf.neg(tf.mean(t.nodeLogp)), nodeWeight);
      if (t.scaleLogp) {
        loss = tf.sub(loss, tf.div(tf.sum(t.scaleLogp), T));
      }
      if (t.scaleArgmax) {
        const am = Array.from(t.scaleArgmax.dataSync());
        agreement = am.reduce((s, a, k) => s + (a === batch.scaleAction[k] ? 1 : 0), 0) / am.length;
      }
      return loss as tf.Scalar;
    }, this.net.variables);
    const loss = value.dataSync()[0];
    this.adam.apply(this.net.variables.map((v) => grads[v.name]));
    value.dispose();
    tf.dispose(Object.values(grads));
    return { loss, agreement };
  }

  getState(): GpgLearnerState {
    return { updates: this.updates, adam: this.adam.getState(), baseline: [...this.movingBaseline] };
  }

  setState(s: GpgLearnerState): void {
    this.adam.setState(s.adam);
    this.updates = s.updates;
    this.movingBaseline.length = 0;
    this.movingBaseline.push(...s.baseline);
  }

  dispose(): void {
    this.adam.dispose();
  }
}

/**
 * log pi(a_tau | s_tau) of each decision under the net as it is now (the node picks' and the
 * scale picks' terms summed). For checks and for the KL between the acting and the current policy.
 */
export function decisionLogProbs(net: GpgNet, decisions: readonly GpgDecision[]): Float64Array {
  if (decisions.length === 0) return new Float64Array(0);
  const batch = buildBatch(decisions);
  tf.engine().startScope();
  try {
    const t = decisionTerms(net, batch, decisions[0]);
    const out = Float64Array.from(t.nodeLogp.dataSync());
    if (t.scaleLogp) {
      const k = t.scaleLogp.dataSync();
      batch.scaleDecision.forEach((d, i) => (out[d] += k[i]));
    }
    return out;
  } finally {
    tf.engine().endScope();
  }
}

/** The tensors of the loss for a batch: per-decision node log-prob, per scale pick log-prob, entropies. Call in a tidy. */
function decisionTerms(
  net: GpgNet,
  batch: Batch,
  first: GpgDecision,
): {
  nodeLogp: tf.Tensor1D;
  nodeEntropy: tf.Tensor1D;
  scaleLogp: tf.Tensor1D | null;
  scaleEntropy: tf.Tensor1D | null;
  /** The masked argmax action of each scale pick. */
  scaleArgmax?: tf.Tensor1D;
} {
  const { spec } = first.state;
  const T = batch.T;
  const N = spec.numNodes;
  const A = actionCount(spec.numServices);
  const emb = net.embed(
    spec,
    T,
    tf.tensor2d(batch.x, [T * N, batch.fn]),
    tf.tensor2d(batch.eapX, [T * spec.numEaps, EAP_FEATURES]),
    tf.tensor2d(batch.g, [T, batch.fg]),
  );
  const logits = net.nodeLogits(emb, T, N);
  // Plackett-Luce: pick h among the nodes still available
  let nodeLogp: tf.Tensor1D = tf.zeros([T]);
  for (let h = 0; h < batch.H; h++) {
    const avail = tf.tensor2d(batch.avail[h], [T, N]);
    const chosen = tf.tensor2d(batch.chosen[h], [T, N]);
    const lse = tf.logSumExp(tf.where(tf.greater(avail, 0), logits, tf.fill([T, N], -1e9)), 1);
    const lp = tf.sub(tf.sum(tf.mul(logits, chosen), 1), lse);
    nodeLogp = tf.add(nodeLogp, tf.mul(lp, tf.tensor1d(batch.pickedAt[h]))) as tf.Tensor1D;
  }
  const nodeEntropy = maskedEntropyNorm(logits, tf.tensor2d(batch.avail[0], [T, N]));
  const K = batch.scaleDecision.length;
  if (K === 0) return { nodeLogp, nodeEntropy, scaleLogp: null, scaleEntropy: null };
  const scale = net.scaleLogits(emb, tf.tensor1d(batch.scaleRow, 'int32'), tf.tensor2d(batch.phi, [K * A, ACTION_FEATURES]), A);
  const amask = tf.tensor2d(batch.scaleMask, [K, A]);
  const logp = tf.logSoftmax(tf.where(tf.greater(amask, 0), scale, tf.fill([K, A], -1e9)));
  const chosen = tf.oneHot(tf.tensor1d(batch.scaleAction, 'int32'), A).toFloat();
  return {
    nodeLogp,
    nodeEntropy,
    scaleLogp: tf.sum(tf.mul(logp, chosen), 1) as tf.Tensor1D,
    scaleEntropy: maskedEntropyNorm(scale, amask),
    scaleArgmax: tf.argMax(logp, 1) as tf.Tensor1D,
  };
}

/** H(softmax over mask) / log(count of valid), 0 when fewer than two are valid. [R, C] -> [R]. */
function maskedEntropyNorm(logits: tf.Tensor2D, mask: tf.Tensor2D): tf.Tensor1D {
  const valid = tf.greater(mask, 0);
  const logp = tf.logSoftmax(tf.where(valid, logits, tf.fill(logits.shape, -1e9)));
  const p = tf.mul(tf.exp(logp), mask);
  const h = tf.neg(tf.sum(tf.mul(p, tf.where(valid, logp, tf.zerosLike(logp))), 1));
  const count = tf.sum(mask, 1);
  return tf.where(tf.greater(count, 1), tf.div(h, tf.log(tf.maximum(count, 2))), tf.zerosLike(h)) as tf.Tensor1D;
}

interface Batch {
  T: number;
  fn: number;
  fg: number;
  x: Float32Array;
  eapX: Float32Array;
  g: Float32Array;
  H: number;
  /** [h] -> [T*N] nodes available at pick h (pick 0: the node mask). */
  avail: Float32Array[];
  /** [h] -> [T*N] one-hot of the node picked at h. */
  chosen: Float32Array[];
  /** [h] -> [T] 1 when decision t picked a node at h. */
  pickedAt: Float32Array[];
  /** Per scale pick k: its decision, its node row in [T*N], its action, its mask and phi. */
  scaleDecision: Int32Array;
  scaleRow: Int32Array;
  scaleAction: Int32Array;
  scaleMask: Float32Array;
  phi: Float32Array;
}

function buildBatch(ds: readonly GpgDecision[]): Batch {
  const spec = ds[0].state.spec;
  const N = spec.numNodes;
  const W = spec.numServices;
  const A = actionCount(W);
  const fn = ds[0].state.x.length / N;
  const fg = ds[0].state.globalX.length;
  const T = ds.length;
  const H = Math.max(1, ...ds.map((d) => d.nodes.length));
  const x = new Float32Array(T * N * fn);
  const eapX = new Float32Array(T * spec.numEaps * EAP_FEATURES);
  const g = new Float32Array(T * fg);
  const avail = Array.from({ length: H }, () => new Float32Array(T * N));
  const chosen = Array.from({ length: H }, () => new Float32Array(T * N));
  const pickedAt = Array.from({ length: H }, () => new Float32Array(T));
  const K = ds.reduce((s, d) => s + d.nodes.length, 0);
  const scaleDecision = new Int32Array(K);
  const scaleRow = new Int32Array(K);
  const scaleAction = new Int32Array(K);
  const scaleMask = new Float32Array(K * A);
  const phi = new Float32Array(K * A * ACTION_FEATURES);
  let k = 0;
  ds.forEach((d, t) => {
    const s = d.state;
    if (s.spec.numNodes !== N || s.spec.numServices !== W || s.spec.numEaps !== spec.numEaps)
      throw new TypeError('GpgLearner.update: every decision must be on graphs of one cluster');
    x.set(s.x, t * N * fn);
    eapX.set(s.eapX, t * spec.numEaps * EAP_FEATURES);
    g.set(s.globalX, t * fg);
    const left = Float32Array.from(s.nodeMask);
    for (let h = 0; h < H; h++) {
      avail[h].set(left, t * N);
      const n = d.nodes[h];
      if (n === undefined) continue;
      chosen[h][t * N + n] = 1;
      pickedAt[h][t] = 1;
      left[n] = 0;
      scaleDecision[k] = t;
      scaleRow[k] = t * N + n;
      scaleAction[k] = d.actions[h];
      for (let a = 0; a < A; a++) scaleMask[k * A + a] = s.actionMask[n * A + a];
      actionFeaturesInto(s, n, phi, k * A * ACTION_FEATURES);
      k++;
    }
  });
  return { T, fn, fg, x, eapX, g, H, avail, chosen, pickedAt, scaleDecision, scaleRow, scaleAction, scaleMask, phi };
}
