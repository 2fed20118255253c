import * as tf from '@tensorflow/tfjs';
import { loadBackend, speedUpTransposedMatMul } from '../../../shared/tf-backend';

describe('speedUpTransposedMatMul', () => {
  it('gives the same x^T y products (and gradients) as the plain wasm kernel, without leaking memory', async () => {
    const backend = await loadBackend();
    if (backend !== 'wasm') {
      // the patch is for the wasm backend only; elsewhere it must say it did nothing
      expect(speedUpTransposedMatMul()).toBe(false);
      return;
    }
    const x = tf.randomNormal([64, 30], 0, 1, 'float32', 1);
    const y = tf.randomNormal([64, 20], 0, 1, 'float32', 2);
    const w = tf.variable(tf.randomNormal([30, 20], 0, 1, 'float32', 3));
    const loss = () => tf.mean(tf.square(tf.sub(tf.matMul(x, w), y))) as tf.Scalar;
    const plainProduct = tf.matMul(x, y, true, false).arraySync() as number[][];
    const plainGrad = tf.variableGrads(loss).grads[w.name].arraySync() as number[][];
    expect(speedUpTransposedMatMul()).toBe(true);
    expect(speedUpTransposedMatMul()).toBe(true); // idempotent
    const product = tf.matMul(x, y, true, false).arraySync() as number[][];
    const grad = tf.variableGrads(loss).grads[w.name].arraySync() as number[][];
    const maxDiff = (p: number[][], q: number[][]) => Math.max(...p.flatMap((row, i) => row.map((v, j) => Math.abs(v - q[i][j]))));
    expect(maxDiff(product, plainProduct)).toBeLessThan(1e-4);
    expect(maxDiff(grad, plainGrad)).toBeLessThan(1e-5);
    // the transposed temporaries are freed: memory is flat over many products
    const ids = () => (tf.backend() as unknown as { numDataIds(): number }).numDataIds();
    const before = { tensors: tf.memory().numTensors, ids: ids() };
    for (let i = 0; i < 50; i++) tf.tidy(() => tf.matMul(x, y, true, false).dataSync());
    expect(tf.memory().numTensors).toBe(before.tensors);
    expect(ids()).toBe(before.ids);
  });
});
