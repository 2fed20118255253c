/**
 * The cMMAC actor (ALGORITHMS.md section 2; journal sizes): an MLP obsDim -> 256 -> 128 -> 32 (ReLU)
 * and a head over the targets q = ReLU(W h + b) + 1, masked and L1-normalised into the policy
 * (masked.ts). Parameters are shared by all eAPs; the eAP id is an input feature.
 *
 * Head variant `softplus1`: q = softplus(W h + b) + 1, same range (> 1), same policy form. Why it
 * exists: with ReLU a head unit whose pre-activation goes negative on every input has q = 1 and
 * zero gradient forever; cross-entropy and negative advantages push the non-chosen targets down,
 * so units die, and a dead unit cannot learn even when it is the right target (measured: behaviour
 * cloning at lr 1e-3 killed the cloud's unit and the actor never chose the cloud again). Softplus
 * keeps a gradient everywhere. 'relu1' stays the default of the nets (the paper's form).
 *
 * Shared target scorer (optional, `targetBlock`): the observation holds one block of F features per
 * target (agent/observation.ts). The plain MLP sees them as one long vector, so whatever it learns
 * about "a short queue is good" it must learn again for each of the T target slots, and a target
 * it rarely saw chosen keeps a poor score. With a target block, a small MLP g (F -> 16 ReLU -> 1)
 * shared by all targets adds g(x_t) to target t's pre-activation: q_t = head(z_t + g(x_t)). Its last
 * layer starts at zero, so a fresh actor starts as the plain one. Measured (docs/cmmac.md):
 * behaviour cloning reaches its teacher only with it. Weights then end with [G1, g1, G2, g2]
 * ([F, 16], [16], [16, 1], [1]) after the MLP's.
 *
 * Two implementations of the same function:
 * - `ActorNet`: tfjs variables, for the learner (gradients);
 * - `ActorF32`: the hand-written forward pass of dense-f32.ts, for acting (see there why).
 * Weights: [W1, b1, W2, b2, W3, b3, Wh, bh], kernels [in, out].
 */
import * as tf from '@tensorflow/tfjs';
import { Rng } from '../rng';
import { MlpF32, softplus, type HeadActivation } from './dense-f32';
import { glorotUniform, Mlp, mlpShapes, type WeightArrays } from './mlp';
import { maskedEntropy, maskedLogProb, maskedPolicy } from './masked';

export const ACTOR_HIDDEN = [256, 128, 32] as const;

export function actorDims(obsDim: number, numActions: number, hidden: readonly number[] = ACTOR_HIDDEN): number[] {
  return [obsDim, ...hidden, numActions];
}

export function actorShapes(obsDim: number, numActions: number, hidden: readonly number[] = ACTOR_HIDDEN): number[][] {
  return mlpShapes(actorDims(obsDim, numActions, hidden));
}

export type { HeadActivation };

/** Where the per-target feature blocks sit in an observation: offset, F = stride, T = count. */
export interface TargetBlock {
  offset: number;
  stride: number;
  count: number;
}

export const TARGET_SCORER_HIDDEN = 16;

/** Number of weight arrays of an actor (MLP + optional target scorer). */
export function actorArrayCount(hidden: readonly number[] = ACTOR_HIDDEN, targetScorer = false): number {
  return 2 * (hidden.length + 1) + (targetScorer ? 4 : 0);
}

export class ActorNet {
  readonly mlp: Mlp;
  /** [G1, g1, G2, g2] of the shared target scorer, or empty. */
  readonly scorer: tf.Variable[] = [];

  constructor(
    readonly obsDim: number,
    readonly numActions: number,
    rng: Rng,
    readonly hidden: readonly number[] = ACTOR_HIDDEN,
    readonly head: HeadActivation = 'relu1',
    readonly targetBlock: TargetBlock | null = null,
  ) {
    this.mlp = new Mlp(actorDims(obsDim, numActions, hidden), rng);
    if (targetBlock) {
      const { offset, stride, count } = targetBlock;
      if (count !== numActions || offset + stride * count > obsDim) throw new TypeError('ActorNet: target block does not fit the observation');
      const H = TARGET_SCORER_HIDDEN;
      const G1 = glorotUniform(rng, stride, H);
      // tidy frees the initial tensors (a variable keeps its own reference to the data)
      this.scorer.push(
        ...tf.tidy(() => [
          tf.variable(tf.tensor2d(G1, [stride, H]), true),
          tf.variable(tf.zeros([H]), true),
          tf.variable(tf.zeros([H, 1]), true),
          tf.variable(tf.zeros([1]), true),
        ]),
      );
    }
  }

  get variables(): tf.Variable[] {
    return this.scorer.length > 0 ? [...this.mlp.variables, ...this.scorer] : this.mlp.variables;
  }

  /** q = ReLU(W h + b) + 1 (or softplus): [batch, obsDim] -> [batch, A], every entry >= 1. Call inside tf.tidy. */
  scores(obs: tf.Tensor2D): tf.Tensor2D {
    let z = this.mlp.apply(obs);
    if (this.targetBlock) {
      const { offset, stride, count } = this.targetBlock;
      const n = obs.shape[0];
      const x = tf.reshape(tf.slice(obs, [0, offset], [n, stride * count]), [n * count, stride]) as tf.Tensor2D;
      const h = tf.relu(tf.add(tf.matMul(x, this.scorer[0] as tf.Tensor2D), this.scorer[1])) as tf.Tensor2D;
      const g = tf.add(tf.matMul(h, this.scorer[2] as tf.Tensor2D), this.scorer[3]);
      z = tf.add(z, tf.reshape(g, [n, count])) as tf.Tensor2D;
    }
    return tf.add(this.head === 'softplus1' ? tf.softplus(z) : tf.relu(z), 1) as tf.Tensor2D;
  }

  /** pi(.|o) under the mask: [batch, A]. Call inside tf.tidy. */
  policy(obs: tf.Tensor2D, mask: tf.Tensor2D): tf.Tensor2D {
    return maskedPolicy(this.scores(obs), mask);
  }

  /** log pi(a|o) and H(pi(.|o)), both [batch]. Call inside tf.tidy. */
  logProbAndEntropy(obs: tf.Tensor2D, mask: tf.Tensor2D, actions: tf.Tensor1D): { logProb: tf.Tensor1D; entropy: tf.Tensor1D } {
    const q = this.scores(obs);
    return { logProb: maskedLogProb(q, mask, actions), entropy: maskedEntropy(q, mask) };
  }

  getWeights(): WeightArrays {
    const w = this.mlp.getWeights();
    for (const v of this.scorer) {
      w.shapes.push([...v.shape]);
      w.arrays.push(Float32Array.from(v.dataSync() as Float32Array));
    }
    return w;
  }

  setWeights(arrays: readonly Float32Array[]): void {
    const m = this.mlp.variables.length;
    if (arrays.length !== m + this.scorer.length) {
      throw new TypeError(`ActorNet.setWeights: expected ${m + this.scorer.length} arrays, got ${arrays.length}`);
    }
    this.mlp.setWeights(arrays.slice(0, m));
    this.scorer.forEach((v, i) => {
      if (arrays[m + i].length !== v.size) throw new TypeError(`ActorNet.setWeights: target scorer array ${i} needs ${v.size} values, got ${arrays[m + i].length}`);
    });
    tf.tidy(() => this.scorer.forEach((v, i) => v.assign(tf.tensor(arrays[m + i], v.shape))));
  }

  dispose(): void {
    this.mlp.dispose();
    for (const v of this.scorer) v.dispose();
  }
}

/** The actor's scores q on Float32Arrays (no tfjs): same weights, same outputs as ActorNet.scores. */
export class ActorF32 {
  private readonly mlp: MlpF32;
  private readonly scorer: Float32Array[] | null;
  private readonly hbuf = new Float32Array(TARGET_SCORER_HIDDEN);

  /**
   * With `targetBlock`, arrays may hold the target scorer's 4 arrays after the MLP's (they are
   * used when present); without it they must be the MLP's only.
   */
  constructor(
    readonly obsDim: number,
    readonly numActions: number,
    arrays: readonly Float32Array[],
    hidden: readonly number[] = ACTOR_HIDDEN,
    private readonly head: HeadActivation = 'relu1',
    private readonly targetBlock: TargetBlock | null = null,
  ) {
    const m = actorArrayCount(hidden);
    const withScorer = targetBlock !== null && arrays.length === m + 4;
    this.scorer = withScorer ? arrays.slice(m) as Float32Array[] : null;
    if (withScorer && this.scorer![0].length !== targetBlock!.stride * TARGET_SCORER_HIDDEN) {
      throw new TypeError(`ActorF32: target scorer expects ${targetBlock!.stride} features per target`);
    }
    this.mlp = new MlpF32(withScorer ? arrays.slice(0, m) : arrays, actorDims(obsDim, numActions, hidden), withScorer ? 'linear' : head);
  }

  /** Whether the weights include the shared target scorer. */
  get hasTargetScorer(): boolean {
    return this.scorer !== null;
  }

  /** q for `rows` observations ([rows, obsDim]) -> view [rows, A], valid until the next call. */
  scores(obs: Float32Array, rows: number): Float32Array {
    const z = this.mlp.forward(obs, rows);
    if (!this.scorer) return z;
    const { offset, stride, count } = this.targetBlock!;
    const [G1, g1, G2, g2] = this.scorer;
    const H = TARGET_SCORER_HIDDEN;
    const h = this.hbuf;
    const A = this.numActions;
    for (let r = 0; r < rows; r++) {
      for (let t = 0; t < count; t++) {
        const xo = r * this.obsDim + offset + t * stride;
        for (let j = 0; j < H; j++) h[j] = g1[j];
        for (let i = 0; i < stride; i++) {
          const xi = obs[xo + i];
          if (xi === 0) continue;
          for (let j = 0; j < H; j++) h[j] += xi * G1[i * H + j];
        }
        let g = g2[0];
        for (let j = 0; j < H; j++) if (h[j] > 0) g += h[j] * G2[j];
        const v = z[r * A + t] + g;
        z[r * A + t] = this.head === 'softplus1' ? softplus(v) + 1 : (v > 0 ? v : 0) + 1;
      }
    }
    return z;
  }
}

/** Fresh Glorot-initialised actor weights from a seed (without building tfjs variables). */
export function initActorWeights(obsDim: number, numActions: number, seed: number): Float32Array[] {
  const net = new ActorNet(obsDim, numActions, new Rng(seed));
  const w = net.getWeights().arrays;
  net.dispose();
  return w;
}
