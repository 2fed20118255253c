/**
 * The cMMAC actor (ALGORITHMS.md section 2; journal sizes): an MLP obsDim -> 256 -> 128 -> 32 (ReLU)
 * and a head over the targets q = ReLU(W h + b) + 1, masked and L1-normalised into the policy
 * (masked.ts). Parameters are shared by all eAPs; the eAP id is an input feature.
 *
 * Two implementations of the same function:
 * - `ActorNet`: tfjs variables, for the learner (gradients);
 * - `ActorF32`: the hand-written forward pass of dense-f32.ts, for acting (see there why).
 * Weights: [W1, b1, W2, b2, W3, b3, Wh, bh], kernels [in, out].
 */
import * as tf from '@tensorflow/tfjs';
import { Rng } from '../rng';
import { MlpF32 } from './dense-f32';
import { Mlp, mlpShapes, type WeightArrays } from './mlp';
import { maskedEntropy, maskedLogProb, maskedPolicy } from './masked';

export const ACTOR_HIDDEN = [256, 128, 32] as const;

export function actorDims(obsDim: number, numActions: number, hidden: readonly number[] = ACTOR_HIDDEN): number[] {
  return [obsDim, ...hidden, numActions];
}

export function actorShapes(obsDim: number, numActions: number, hidden: readonly number[] = ACTOR_HIDDEN): number[][] {
  return mlpShapes(actorDims(obsDim, numActions, hidden));
}

export class ActorNet {
  readonly mlp: Mlp;

  constructor(
    readonly obsDim: number,
    readonly numActions: number,
    rng: Rng,
    readonly hidden: readonly number[] = ACTOR_HIDDEN,
  ) {
    this.mlp = new Mlp(actorDims(obsDim, numActions, hidden), rng);
  }

  get variables(): tf.Variable[] {
    return this.mlp.variables;
  }

  /** q = ReLU(W h + b) + 1: [batch, obsDim] -> [batch, A], every entry >= 1. Call inside tf.tidy. */
  scores(obs: tf.Tensor2D): tf.Tensor2D {
    return tf.add(tf.relu(this.mlp.apply(obs)), 1) as tf.Tensor2D;
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
  ) {
    this.mlp = new MlpF32(arrays, actorDims(obsDim, numActions, hidden), 'relu1');
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
