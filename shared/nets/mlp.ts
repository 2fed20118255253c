/**
 * A plain MLP as tfjs variables (no layers API: the learner owns the optimiser and needs the exact
 * variable list), initialised from the project's seeded Rng so the same seed gives the same net on
 * every backend. Weights travel as a flat list [W1, b1, W2, b2, ...]: kernels [in, out] row-major,
 * biases [out] (the order `dense-f32.ts` and the `weights` frame use).
 */
import * as tf from '@tensorflow/tfjs';
import { Rng } from '../rng';

export interface WeightArrays {
  shapes: number[][];
  arrays: Float32Array[];
}

/** Glorot/Xavier-uniform kernel [fanIn, fanOut] from the Rng; biases start at 0. */
export function glorotUniform(rng: Rng, fanIn: number, fanOut: number): Float32Array {
  const limit = Math.sqrt(6 / (fanIn + fanOut));
  const w = new Float32Array(fanIn * fanOut);
  for (let i = 0; i < w.length; i++) w[i] = rng.uniform(-limit, limit);
  return w;
}

/** Shapes of [W1, b1, ...] for layer sizes dims = [in, h1, ..., out]. */
export function mlpShapes(dims: readonly number[]): number[][] {
  const s: number[][] = [];
  for (let l = 0; l + 1 < dims.length; l++) s.push([dims[l], dims[l + 1]], [dims[l + 1]]);
  return s;
}

export class Mlp {
  /** [W1, b1, W2, b2, ...] */
  readonly variables: tf.Variable[];
  readonly shapes: number[][];

  constructor(
    readonly dims: readonly number[],
    rng: Rng,
  ) {
    if (dims.length < 2 || dims.some((d) => !Number.isInteger(d) || d < 1)) {
      throw new TypeError(`Mlp: expected layer sizes of at least 2 positive integers, got [${dims.join(', ')}]`);
    }
    this.shapes = mlpShapes(dims);
    this.variables = [];
    for (let l = 0; l + 1 < dims.length; l++) {
      const w = glorotUniform(rng, dims[l], dims[l + 1]);
      // tidy frees the initial tensors (a variable keeps its own reference to the data), so
      // building and disposing nets (the online learner's reloads) leaves no tensor behind
      this.variables.push(
        ...tf.tidy(() => [tf.variable(tf.tensor2d(w, [dims[l], dims[l + 1]]), true), tf.variable(tf.zeros([dims[l + 1]]), true)]),
      );
    }
  }

  /**
   * Forward pass, hidden layers ReLU, last layer pre-activation (the caller applies the head).
   * x: [batch, dims[0]] -> [batch, dims[last]]. Call inside tf.tidy.
   */
  apply(x: tf.Tensor2D): tf.Tensor2D {
    let h: tf.Tensor2D = x;
    const L = this.variables.length / 2;
    for (let l = 0; l < L; l++) {
      const z = tf.add(tf.matMul(h, this.variables[2 * l] as tf.Tensor2D), this.variables[2 * l + 1]) as tf.Tensor2D;
      h = l < L - 1 ? tf.relu(z) : z;
    }
    return h;
  }

  /** Copies of the current values. */
  getWeights(): WeightArrays {
    return {
      shapes: this.shapes.map((s) => [...s]),
      arrays: this.variables.map((v) => Float32Array.from(v.dataSync() as Float32Array)),
    };
  }

  /** Assigns values (shapes must match this net's); throws TypeError naming the first mismatch. */
  setWeights(arrays: readonly Float32Array[]): void {
    if (arrays.length !== this.variables.length) {
      throw new TypeError(`Mlp.setWeights: expected ${this.variables.length} arrays, got ${arrays.length}`);
    }
    arrays.forEach((a, i) => {
      const shape = this.shapes[i];
      const n = shape.reduce((p, d) => p * d, 1);
      if (a.length !== n)
        throw new TypeError(`Mlp.setWeights: array ${i} needs shape [${shape.join(', ')}] (${n} values), got ${a.length}`);
    });
    tf.tidy(() => arrays.forEach((a, i) => this.variables[i].assign(tf.tensor(a, this.shapes[i]))));
  }

  dispose(): void {
    for (const v of this.variables) v.dispose();
  }
}
