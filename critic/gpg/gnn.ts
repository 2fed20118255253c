/**
 * GPG's networks (ALGORITHMS.md section 3; kais-reconstruction.md 4.4-4.6), to be read beside the
 * equations. Six small networks f_i, h_i (hidden 64-32, output E) make the three-level embedding,
 * a prep network h_0 starts it, and two heads (hidden 128-64-32) score nodes and scale actions:
 *
 *   e_n^(0) = h_0(x_n)
 *   e_n^(k) = e_n^(k-1) + h_1( mean_{m in xi(n)} f_1(e_m^(k-1)) ),  k = 1..K,  xi(n) = n and the
 *             other nodes of n's eAP (reconstruction 4.2's "connect nodes of the same eAP")
 *   y_b     = h_2([ mean_{n in N_b} f_2([x_n, e_n]),  u_b ])         u_b: the eAP's own features
 *   z       = h_3([ sum_b f_3(y_b),  g ])                            g: the cluster's features
 *   s_n     = g_node([x_n, e_n, y_b(n), z])                          node selection logit
 *   r_{n,j} = g_scale([e_n, y_b(n), z, phi_j])                       scale action logit (phi: graph.ts)
 *
 * Means rather than sums inside an eAP so that eAPs of 3 and of 15 nodes give inputs of one scale
 * (`large` has both); the cluster level sums, as Decima does (more eAPs is more cluster). The
 * scale head sees the action through phi_j (the node's and the cluster's figures of j's service),
 * not through a per-service output, so it has the same weights for any number of services.
 *
 * State stacking (the paper's ablation, `encoder: 'stack'`): the same heads on raw features
 * concatenated, with no message passing and no aggregation: e_n = h_0(x_n), y_b = h_2([0, u_b]),
 * z = h_3([0, g]). Nothing of another node reaches a node's score except through g.
 *
 * Every network is a shared/nets Mlp (ReLU hidden layers, linear output), initialised from the
 * seeded Rng, so a seed gives the same net everywhere. Batched over T graphs of one spec: node
 * rows are [T*N, .], eAP rows [T*B, .], cluster rows [T, .]. Call the tensor methods in tf.tidy.
 */
import * as tf from '@tensorflow/tfjs';
import { Mlp } from '../../shared/nets/mlp';
import { Rng } from '../../shared/rng';
import { ACTION_FEATURES, EAP_FEATURES, globalFeatureCount, nodeFeatureCount, type GraphSpec } from './graph';

export interface GpgNetConfig {
  encoder: 'gnn' | 'stack';
  /** Embedding width E. @defaultValue 16 */
  embed: number;
  /** Message-passing rounds K. @defaultValue 2 */
  rounds: number;
  /** Hidden layers of f_i, h_i. @defaultValue [64, 32] */
  hidden: number[];
  /** Hidden layers of the two heads. @defaultValue [128, 64, 32] */
  headHidden: number[];
}

export const DEFAULT_GPG_NET: Readonly<GpgNetConfig> = Object.freeze({
  encoder: 'gnn',
  embed: 16,
  rounds: 2,
  hidden: [64, 32],
  headHidden: [128, 64, 32],
});

export interface Embeddings {
  /** [T*N, Fn] the node features. */
  x: tf.Tensor2D;
  /** [T*N, E] e_n. */
  e: tf.Tensor2D;
  /** [T*N, E] y of each node's eAP. */
  yNode: tf.Tensor2D;
  /** [T*N, E] z repeated per node. */
  zNode: tf.Tensor2D;
}

export class GpgNet {
  readonly config: GpgNetConfig;
  readonly numServices: number;
  private readonly h0: Mlp;
  /** Message passing and aggregation (null with the stacking encoder, which has none). */
  private readonly f1: Mlp | null;
  private readonly h1: Mlp | null;
  private readonly f2: Mlp | null;
  private readonly h2: Mlp;
  private readonly f3: Mlp | null;
  private readonly h3: Mlp;
  private readonly nodeHead: Mlp;
  private readonly scaleHead: Mlp;
  private readonly nets: Mlp[];

  constructor(numServices: number, seed: number, config: Partial<GpgNetConfig> = {}) {
    this.config = { ...DEFAULT_GPG_NET, ...config };
    this.numServices = numServices;
    const { embed: E, hidden, headHidden } = this.config;
    const fn = nodeFeatureCount(numServices);
    const fg = globalFeatureCount(numServices);
    const rng = new Rng(seed);
    const mlp = (inDim: number, hid: number[], out: number): Mlp => new Mlp([inDim, ...hid, out], rng);
    const gnn = this.config.encoder === 'gnn';
    this.h0 = mlp(fn, hidden, E);
    this.f1 = gnn ? mlp(E, hidden, E) : null;
    this.h1 = gnn ? mlp(E, hidden, E) : null;
    this.f2 = gnn ? mlp(fn + E, hidden, E) : null;
    this.h2 = mlp(E + EAP_FEATURES, hidden, E);
    this.f3 = gnn ? mlp(E, hidden, E) : null;
    this.h3 = mlp(E + fg, hidden, E);
    this.nodeHead = mlp(fn + 3 * E, headHidden, 1);
    this.scaleHead = mlp(3 * E + ACTION_FEATURES, headHidden, 1);
    this.nets = [this.h0, this.f1, this.h1, this.f2, this.h2, this.f3, this.h3, this.nodeHead, this.scaleHead].filter(
      (m): m is Mlp => m !== null,
    );
  }

  get variables(): tf.Variable[] {
    return this.nets.flatMap((m) => m.variables);
  }

  /** Every weight, in variable order (kernels [in, out] row-major, then biases). */
  getWeights(): Float32Array[] {
    return this.nets.flatMap((m) => m.getWeights().arrays);
  }

  get shapes(): number[][] {
    return this.nets.flatMap((m) => m.shapes);
  }

  setWeights(arrays: readonly Float32Array[]): void {
    const count = this.nets.reduce((s, m) => s + m.variables.length, 0);
    if (arrays.length !== count) throw new TypeError(`GpgNet.setWeights: expected ${count} arrays, got ${arrays.length}`);
    let i = 0;
    for (const m of this.nets) {
      m.setWeights(arrays.slice(i, i + m.variables.length));
      i += m.variables.length;
    }
  }

  dispose(): void {
    for (const m of this.nets) m.dispose();
  }

  /**
   * The three-level embedding of T graphs of one spec. x: [T*N, Fn], eapX: [T*B, 3], g: [T, Fg].
   */
  embed(spec: GraphSpec, T: number, x: tf.Tensor2D, eapX: tf.Tensor2D, g: tf.Tensor2D): Embeddings {
    const { numNodes: N, numEaps: B } = spec;
    const E = this.config.embed;
    let e = this.h0.apply(x);
    let y: tf.Tensor2D;
    let z: tf.Tensor2D;
    if (this.f1 && this.h1 && this.f2 && this.f3) {
      const f1 = this.f1;
      const h1 = this.h1;
      const same = sameEapMean(spec);
      const pool = eapMean(spec);
      for (let k = 0; k < this.config.rounds; k++) e = tf.add(e, h1.apply(perGraph(f1.apply(e), same, T))) as tf.Tensor2D;
      const pooled = perGraph(this.f2.apply(tf.concat([x, e], 1)), pool, T); // [T*B, E]
      y = this.h2.apply(tf.concat([pooled, eapX], 1));
      const clusterSum = tf.sum(tf.reshape(this.f3.apply(y), [T, B, E]), 1) as tf.Tensor2D; // [T, E]
      z = this.h3.apply(tf.concat([clusterSum, g], 1));
    } else {
      y = this.h2.apply(tf.concat([tf.zeros([T * B, E]), eapX], 1));
      z = this.h3.apply(tf.concat([tf.zeros([T, E]), g], 1));
    }
    // gathers are written as one-hot matMuls: tf.gather's gradient needs UnsortedSegmentSum, which the wasm backend lacks
    const yNode = perGraph(y, nodeToEap(spec), T);
    const zNode = tf.reshape(tf.tile(tf.reshape(z, [T, 1, E]), [1, N, 1]), [T * N, E]) as tf.Tensor2D;
    return { x, e, yNode, zNode };
  }

  /** Node selection logits s_n: [T, N]. */
  nodeLogits(emb: Embeddings, T: number, N: number): tf.Tensor2D {
    return tf.reshape(this.nodeHead.apply(tf.concat([emb.x, emb.e, emb.yNode, emb.zNode], 1)), [T, N]) as tf.Tensor2D;
  }

  /**
   * Scale logits r_{n,j} of K chosen nodes: rows [K] into the [T*N] node rows, phi [K*A, ACTION_FEATURES]
   * -> [K, A].
   */
  scaleLogits(emb: Embeddings, rows: tf.Tensor1D, phi: tf.Tensor2D, A: number): tf.Tensor2D {
    const K = rows.shape[0];
    const E = this.config.embed;
    const pick = tf.oneHot(rows, emb.e.shape[0]).toFloat() as tf.Tensor2D; // [K, T*N]
    const ctx = tf.concat([tf.matMul(pick, emb.e), tf.matMul(pick, emb.yNode), tf.matMul(pick, emb.zNode)], 1); // [K, 3E]
    const rep = tf.reshape(tf.tile(tf.reshape(ctx, [K, 1, 3 * E]), [1, A, 1]), [K * A, 3 * E]);
    return tf.reshape(this.scaleHead.apply(tf.concat([rep, phi], 1) as tf.Tensor2D), [K, A]) as tf.Tensor2D;
  }
}

/**
 * M applied to each graph of a batch: rows [T*N, E] (graph t's rows t*N..t*N+N-1), M [R, N]
 * -> [T*R, E], i.e. M x_t for every t, as one 2-D matMul (N: rows per graph of the input, nodes or eAPs).
 */
function perGraph(rows: tf.Tensor2D, m: tf.Tensor2D, T: number): tf.Tensor2D {
  const [R, N] = m.shape;
  const E = rows.shape[1];
  const byNode = tf.reshape(tf.transpose(tf.reshape(rows, [T, N, E]), [1, 0, 2]), [N, T * E]);
  return tf.reshape(tf.transpose(tf.reshape(tf.matMul(m, byNode), [R, T, E]), [1, 0, 2]), [T * R, E]) as tf.Tensor2D;
}

/** [N, N]: row n averages n and the other nodes of its eAP. */
function sameEapMean(spec: GraphSpec): tf.Tensor2D {
  const N = spec.numNodes;
  const m = new Float32Array(N * N);
  const size = new Float64Array(spec.numEaps);
  for (let n = 0; n < N; n++) size[spec.nodeEap[n]]++;
  for (let n = 0; n < N; n++) for (let k = 0; k < N; k++) if (spec.nodeEap[n] === spec.nodeEap[k]) m[n * N + k] = 1 / size[spec.nodeEap[n]];
  return tf.tensor2d(m, [N, N]);
}

/** [N, B]: row n picks n's eAP. */
function nodeToEap(spec: GraphSpec): tf.Tensor2D {
  const m = new Float32Array(spec.numNodes * spec.numEaps);
  for (let n = 0; n < spec.numNodes; n++) m[n * spec.numEaps + spec.nodeEap[n]] = 1;
  return tf.tensor2d(m, [spec.numNodes, spec.numEaps]);
}

/** [B, N]: row b averages the nodes of eAP b. */
function eapMean(spec: GraphSpec): tf.Tensor2D {
  const N = spec.numNodes;
  const B = spec.numEaps;
  const m = new Float32Array(B * N);
  const size = new Float64Array(B);
  for (let n = 0; n < N; n++) size[spec.nodeEap[n]]++;
  for (let n = 0; n < N; n++) m[spec.nodeEap[n] * N + n] = 1 / size[spec.nodeEap[n]];
  return tf.tensor2d(m, [B, N]);
}
