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
 * Two implementations of the same function:
 * - `ActorNet`: tfjs variables, for the learner (gradients);
 * - `ActorF32`: the hand-written forward pass of dense-f32.ts, for acting (see there why).
 * Weights: [W1, b1, W2, b2, W3, b3, Wh, bh], kernels [in, out].
 */
import * as tf from '@tensorflow/tfjs';
import { Rng } from '../rng';
import { MlpF32, type HeadActivation } from './dense-f32';
import { Mlp, mlpShapes, type WeightArrays } from './mlp';
import { maskedEntropy, maskedLogProb, maskedPolicy } from './masked';

export const ACTOR_HIDDEN = [256, 128, 32] as const;

export function actorDims(obsDim: number, numActions: number, hidden: readonly number[] = ACTOR_HIDDEN): number[] {
  return [obsDim, ...hidden, numActions];
}

export function actorShapes(obsDim: number, numActions: number, hidden: readonly number[] = ACTOR_HIDDEN): number[][] {
  return mlpShapes(actorDims(obsDim, numActions, hidden));
}

export type { HeadActivation };

export class ActorNet {
  readonly mlp: Mlp;

  constructor(
    readonly obsDim: number,
    readonly numActions: number,
    rng: Rng,
    readonly hidden: readonly number[] = ACTOR_HIDDEN,
    readonly head: HeadActivation = 'relu1',
  ) {
    this.mlp = new Mlp(actorDims(obsDim, numActions, hidden), rng);
  }

  get variables(): tf.Variable[] {
    return this.mlp.variables;
  }

  /** q = ReLU(W h + b) + 1 (or softplus): [batch, obsDim] -> [batch, A], every entry >= 1. Call inside tf.tidy. */
  scores(obs: tf.Tensor2D): tf.Tensor2D {
    const z = this.mlp.apply(obs);
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
    return this.mlp.getWeights();
  }

  setWeights(arrays: readonly Float32Array[]): void {
    this.mlp.setWeights(arrays);
  }

  dispose(): void {
    this.mlp.dispose();
  }
}

/** The actor's scores q on Float32Arrays (no tfjs): same weights, same outputs as ActorNet.scores. */
export class ActorF32 {
  private readonly mlp: MlpF32;

  constructor(
    readonly obsDim: number,
    readonly numActions: number,
    arrays: readonly Float32Array[],
    hidden: readonly number[] = ACTOR_HIDDEN,
    head: HeadActivation = 'relu1',
  ) {
    this.mlp = new MlpF32(arrays, actorDims(obsDim, numActions, hidden), head);
  }

  /** q for `rows` observations ([rows, obsDim]) -> view [rows, A], valid until the next call. */
  scores(obs: Float32Array, rows: number): Float32Array {
    return this.mlp.forward(obs, rows);
  }
}

/** Fresh Glorot-initialised actor weights from a seed (without building tfjs variables). */
export function initActorWeights(obsDim: number, numActions: number, seed: number): Float32Array[] {
  const net = new ActorNet(obsDim, numActions, new Rng(seed));
  const w = net.getWeights().arrays;
  net.dispose();
  return w;
}
