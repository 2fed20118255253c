/**
 * The centralised critic (ALGORITHMS.md section 2; journal sizes): V(s) = MLP stateDim -> 256 ->
 * 128 -> 64 -> 32 (ReLU) -> 1, linear output (no ReLU on V: demo bug 6 of
 * kais-reconstruction.md section 8). Used only in training.
 */
import * as tf from '@tensorflow/tfjs';
import type { Rng } from '../rng';
import { Mlp, mlpShapes, type WeightArrays } from './mlp';

export const CRITIC_HIDDEN = [256, 128, 64, 32] as const;

export function criticShapes(stateDim: number, hidden: readonly number[] = CRITIC_HIDDEN): number[][] {
  return mlpShapes([stateDim, ...hidden, 1]);
}

export class ValueNet {
  readonly mlp: Mlp;

  constructor(
    readonly stateDim: number,
    rng: Rng,
    readonly hidden: readonly number[] = CRITIC_HIDDEN,
  ) {
    this.mlp = new Mlp([stateDim, ...hidden, 1], rng);
  }

  get variables(): tf.Variable[] {
    return this.mlp.variables;
  }

  /** V(s): [batch, stateDim] -> [batch]. Call inside tf.tidy. */
  value(states: tf.Tensor2D): tf.Tensor1D {
    return tf.reshape(this.mlp.apply(states), [-1]) as tf.Tensor1D;
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
