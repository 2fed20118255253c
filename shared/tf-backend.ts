/**
 * Picks the fastest tfjs backend that loads on this machine, once, for an entry point (jobs,
 * main.ts). Library code never calls this or `setBackend` (STYLE.md habit 13).
 *
 * Order: @tensorflow/tfjs-node-gpu, @tensorflow/tfjs-node (both optional and not installed by
 * default: they download libtensorflow at install time), then @tensorflow/tfjs-backend-wasm with its
 * .wasm files read from node_modules (nothing is downloaded), then the pure-JS cpu backend.
 */
import * as path from 'path';
import * as tf from '@tensorflow/tfjs';

let chosen: Promise<string> | null = null;

/** Loads and activates a backend; returns its name ('tensorflow', 'wasm' or 'cpu'). Idempotent. */
export function loadBackend(): Promise<string> {
  if (!chosen) chosen = pick();
  return chosen;
}

function tryRequire(name: string): boolean {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    require(name);
    return true;
  } catch {
    return false;
  }
}

async function pick(): Promise<string> {
  for (const native of ['@tensorflow/tfjs-node-gpu', '@tensorflow/tfjs-node']) {
    if (tryRequire(native)) {
      try {
        if (await tf.setBackend('tensorflow')) {
          await tf.ready();
          return 'tensorflow';
        }
      } catch {
        // fall through to the next candidate
      }
    }
  }
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const wasm = require('@tensorflow/tfjs-backend-wasm') as typeof import('@tensorflow/tfjs-backend-wasm');
    const dist = path.join(path.dirname(require.resolve('@tensorflow/tfjs-backend-wasm/package.json')), 'dist') + path.sep;
    wasm.setWasmPaths(dist);
    if (await tf.setBackend('wasm')) {
      await tf.ready();
      return 'wasm';
    }
  } catch {
    // fall through to cpu
  }
  await tf.setBackend('cpu');
  await tf.ready();
  return 'cpu';
}

/**
 * Makes the wasm backend's x^T y products fast: its BatchMatMul runs XNNPACK only when neither
 * input is transposed and a slow loop otherwise, and every dense layer's backward pass asks for
 * x^T dy (the kernel's gradient). Measured here (2048x612 by 612x256-sized products): 43 ms plain,
 * 453 ms with transposeA, 54 ms as an explicit transpose followed by the plain product. This
 * wraps the kernel so a transposeA input is transposed first; one learner update on 2,048
 * decisions went from 2.8 s to 1.3-1.7 s. Not done for transposeB (dy W^T, 397 ms): transposing
 * the weights first and handing the temporary to XNNPACK crashed the wasm heap ("memory access
 * out of bounds") on the third update, so that product keeps the slow loop.
 *
 * The sums run in another order, so results differ in the last bits from the unpatched kernel:
 * call it only where byte-for-byte reproduction of earlier runs does not matter (the online
 * learner; `kais train` does not use it, so the shipped model still reproduces). Returns whether
 * the kernel is wrapped (false on other backends). Idempotent.
 */
export function speedUpTransposedMatMul(): boolean {
  if (tf.getBackend() !== 'wasm' || patched) return patched;
  const mm = tf.getKernel('BatchMatMul', 'wasm');
  const tr = tf.getKernel('Transpose', 'wasm');
  if (!mm || !tr) return false;
  const inner = mm.kernelFunc;
  tf.unregisterKernel('BatchMatMul', 'wasm');
  tf.registerKernel({
    kernelName: 'BatchMatMul',
    backendName: 'wasm',
    kernelFunc: (args) => {
      const attrs = args.attrs as { transposeA: boolean; transposeB: boolean };
      if (!attrs.transposeA) return inner(args);
      const backend = args.backend as { disposeData(id: object): void };
      const swapLast = (x: tf.TensorInfo): tf.TensorInfo => {
        const r = x.shape.length;
        const perm = [...Array.from({ length: r - 2 }, (_, i) => i), r - 1, r - 2];
        return tr.kernelFunc({ inputs: { x }, backend: args.backend, attrs: { perm } }) as tf.TensorInfo;
      };
      const a = swapLast(args.inputs.a as tf.TensorInfo);
      const out = inner({ inputs: { a, b: args.inputs.b }, backend: args.backend, attrs: { ...args.attrs, transposeA: false } });
      backend.disposeData(a.dataId);
      return out;
    },
  });
  patched = true;
  return true;
}

let patched = false;
