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
