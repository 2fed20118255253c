/**
 * Hand-written forward pass of a stack of dense layers on plain Float32Arrays, mirroring the tfjs
 * networks of this folder weight for weight (same [in, out] row-major kernels, same biases).
 *
 * Why hand-written: a dispatch decision runs the actor on 1-5 rows. A tfjs call costs about
 * 100 µs+ of per-op overhead (tensor creation, kernel dispatch, dataSync) before any arithmetic,
 * several times the arithmetic itself at this size; this loop has no allocation and skips zero
 * inputs (the one-hot blocks), so a batch-1 decision stays well under 1 ms on one core. Training
 * still uses tfjs (gradients); a test checks both give the same outputs. No tfjs import here, so
 * the live agent's hot path does not need a backend.
 */

/** Positive actor head: q = ReLU(z) + 1 (cA2C/KaiS) or softplus(z) + 1 (never-dead variant). */
export type HeadActivation = 'relu1' | 'softplus1';

/** log(1 + e^z), without overflow. */
export function softplus(z: number): number {
  return z > 20 ? z : z < -20 ? Math.exp(z) : Math.log1p(Math.exp(z));
}

/** One dense layer: y = act(x W + b). W is [inDim, outDim] row-major (tfjs layout). */
export interface DenseF32 {
  inDim: number;
  outDim: number;
  kernel: Float32Array;
  bias: Float32Array;
}

/**
 * Layers from the flat weight list [W1, b1, W2, b2, ...] (kernels [in, out], biases [out]).
 * Shares the arrays (no copy).
 */
export function denseLayersFrom(arrays: readonly Float32Array[], dims: readonly number[]): DenseF32[] {
  if (arrays.length !== 2 * (dims.length - 1)) {
    throw new TypeError(`denseLayersFrom: expected ${2 * (dims.length - 1)} arrays for dims [${dims.join(', ')}], got ${arrays.length}`);
  }
  const layers: DenseF32[] = [];
  for (let l = 0; l + 1 < dims.length; l++) {
    const inDim = dims[l];
    const outDim = dims[l + 1];
    const kernel = arrays[2 * l];
    const bias = arrays[2 * l + 1];
    if (kernel.length !== inDim * outDim || bias.length !== outDim) {
      throw new TypeError(
        `denseLayersFrom: layer ${l} needs a [${inDim}, ${outDim}] kernel and a [${outDim}] bias, got ${kernel.length} and ${bias.length} values`,
      );
    }
    layers.push({ inDim, outDim, kernel, bias });
  }
  return layers;
}

/** Scratch of denseForward: offsets (i * outDim) and values of a row's nonzero inputs. */
let nzIndex = new Int32Array(0);
let nzValue = new Float64Array(0);

/**
 * out[r, :] = act(x[r, :] W + b) for `rows` rows. x is [rows, inDim], out is [rows, outDim]
 * (both row-major, `out` preallocated). act: 'relu', 'linear', or an actor head: 'relu1'
 * (ReLU(z) + 1) or 'softplus1' (softplus(z) + 1).
 */
export function denseForward(
  layer: DenseF32,
  x: Float32Array,
  rows: number,
  out: Float32Array,
  act: 'relu' | 'linear' | HeadActivation,
): void {
  const { inDim, outDim, kernel, bias } = layer;
  const fr = Math.fround;
  const blocked = outDim - (outDim % 8);
  if (nzIndex.length < inDim) {
    nzIndex = new Int32Array(inDim);
    nzValue = new Float64Array(inDim);
  }
  const idx = nzIndex;
  const val = nzValue;
  for (let r = 0; r < rows; r++) {
    const xo = r * inDim;
    const yo = r * outDim;
    // the nonzero inputs of this row, ascending (about 45% of a kais observation, fewer after a
    // ReLU): listed once instead of tested once per block of outputs
    let nnz = 0;
    for (let i = 0; i < inDim; i++) {
      const xi = x[xo + i];
      if (xi !== 0) {
        idx[nnz] = i * outDim;
        val[nnz++] = xi;
      }
    }
    // out[yo + j] = bias[j] + sum over the nonzero x[i] (i ascending) of x[i] * W[i, j], rounded
    // to float32 after every step as a Float32Array element would be. Eight outputs at a time in
    // locals (the kernel row read once per input for them, no store/load per step): about twice
    // as fast as updating `out` per input, and bit-identical to it (same operations, same order).
    for (let j = 0; j < blocked; j += 8) {
      let a0 = bias[j],
        a1 = bias[j + 1],
        a2 = bias[j + 2],
        a3 = bias[j + 3];
      let a4 = bias[j + 4],
        a5 = bias[j + 5],
        a6 = bias[j + 6],
        a7 = bias[j + 7];
      for (let n = 0; n < nnz; n++) {
        const xi = val[n];
        const w = idx[n] + j;
        a0 = fr(a0 + xi * kernel[w]);
        a1 = fr(a1 + xi * kernel[w + 1]);
        a2 = fr(a2 + xi * kernel[w + 2]);
        a3 = fr(a3 + xi * kernel[w + 3]);
        a4 = fr(a4 + xi * kernel[w + 4]);
        a5 = fr(a5 + xi * kernel[w + 5]);
        a6 = fr(a6 + xi * kernel[w + 6]);
        a7 = fr(a7 + xi * kernel[w + 7]);
      }
      out[yo + j] = a0;
      out[yo + j + 1] = a1;
      out[yo + j + 2] = a2;
      out[yo + j + 3] = a3;
      out[yo + j + 4] = a4;
      out[yo + j + 5] = a5;
      out[yo + j + 6] = a6;
      out[yo + j + 7] = a7;
    }
    for (let j = blocked; j < outDim; j++) {
      let a = bias[j];
      for (let n = 0; n < nnz; n++) a = fr(a + val[n] * kernel[idx[n] + j]);
      out[yo + j] = a;
    }
    if (act === 'relu') {
      for (let j = 0; j < outDim; j++) if (out[yo + j] < 0) out[yo + j] = 0;
    } else if (act === 'relu1') {
      for (let j = 0; j < outDim; j++) out[yo + j] = (out[yo + j] > 0 ? out[yo + j] : 0) + 1;
    } else if (act === 'softplus1') {
      for (let j = 0; j < outDim; j++) out[yo + j] = softplus(out[yo + j]) + 1;
    }
  }
}

/**
 * A whole MLP: hidden layers ReLU, last layer `lastAct`. Scratch buffers grow with the batch and
 * are reused, so a steady stream of decisions allocates nothing.
 */
export class MlpF32 {
  readonly layers: DenseF32[];
  private scratch: Float32Array[] = [];
  private capacity = 0;

  constructor(
    arrays: readonly Float32Array[],
    readonly dims: readonly number[],
    private readonly lastAct: 'linear' | HeadActivation,
  ) {
    this.layers = denseLayersFrom(arrays, dims);
  }

  /** Forward `rows` rows of x ([rows, dims[0]]); returns a view [rows, dims[last]] valid until the next call. */
  forward(x: Float32Array, rows: number): Float32Array {
    if (rows > this.capacity) {
      this.capacity = Math.max(rows, 2 * this.capacity, 8);
      this.scratch = this.layers.map((l) => new Float32Array(this.capacity * l.outDim));
    }
    let input = x;
    for (let l = 0; l < this.layers.length; l++) {
      const last = l === this.layers.length - 1;
      denseForward(this.layers[l], input, rows, this.scratch[l], last ? this.lastAct : 'relu');
      input = this.scratch[l];
    }
    return input.subarray(0, rows * this.dims[this.dims.length - 1]);
  }
}
