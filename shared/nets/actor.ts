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
 * - `ActorF32` (actor-f32.ts, no tfjs): the hand-written forward pass of dense-f32.ts, for acting.
 * Weights: [W1, b1, W2, b2, W3, b3, Wh, bh], kernels [in, out].
 */
import * as tf from '@tensorflow/tfjs';
import { Rng } from '../rng';
import { glorotUniform, Mlp, type WeightArrays } from './mlp';
import { maskedEntropy, maskedLogProb, maskedPolicy } from './masked';
import { ACTOR_HIDDEN, actorDims, TARGET_SCORER_HIDDEN, type HeadActivation, type TargetBlock } from './actor-f32';

// the acting half (no tfjs), re-exported so learners and tests import one module
export {
  ACTOR_HIDDEN,
  actorArrayCount,
  actorDims,
  actorShapes,
  ActorF32,
  TARGET_SCORER_HIDDEN,
  type HeadActivation,
  type TargetBlock,
} from './actor-f32';

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
      if (count !== numActions || offset + stride * count > obsDim)
        throw new TypeError('ActorNet: target block does not fit the observation');
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
      if (arrays[m + i].length !== v.size)
        throw new TypeError(`ActorNet.setWeights: target scorer array ${i} needs ${v.size} values, got ${arrays[m + i].length}`);
    });
    tf.tidy(() => this.scorer.forEach((v, i) => v.assign(tf.tensor(arrays[m + i], v.shape))));
  }

  dispose(): void {
    this.mlp.dispose();
    for (const v of this.scorer) v.dispose();
  }
}

/** Fresh Glorot-initialised actor weights from a seed (without building tfjs variables). */
export function initActorWeights(obsDim: number, numActions: number, seed: number): Float32Array[] {
  const net = new ActorNet(obsDim, numActions, new Rng(seed));
  const w = net.getWeights().arrays;
  net.dispose();
  return w;
}
