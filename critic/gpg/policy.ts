/**
 * GPG as an orchestration policy (ALGORITHMS.md section 3; kais-reconstruction.md 4.5-4.7): every
 * period (one frame by default) it reads the cluster as a graph (graph.ts), embeds it (gnn.ts),
 * picks H distinct nodes by sampling without replacement from the masked softmax of the node
 * scores (Plackett-Luce), and for each picked node one of its 2W + 1 actions (no-op, add one
 * replica of w, remove one) from the masked softmax of the scale scores:
 *
 *   P(n_1..n_H)  = prod_h exp(s_{n_h}) / sum_{m in N' \ {n_1..n_{h-1}}} exp(s_m)
 *   pi(j | n)    = exp(r_{n,j}) / sum_{j' in A~_n} exp(r_{n,j'})
 *   log pi(a|s)  = sum_h [ log P(n_h | n_<h) + log pi(j_h | n_h) ]
 *
 * N' holds the nodes with a valid action other than the no-op; with fewer than H of them it picks
 * them all. `greedy` takes the H best nodes and each one's best action (evaluation); `sample`
 * draws from the seeded Rng (training, and exploration online). The same class runs in the
 * simulator and in the live orchestrator's placement loop (it implements the one
 * OrchestrationPolicy interface); its orders go through the executor's rules like any policy's.
 *
 * `onDecision` receives each decision (the graph, the picked nodes and actions) for the learner
 * (update.ts); the policy keeps nothing itself.
 */
import * as tf from '@tensorflow/tfjs';
import type { ScaleOp } from '../../shared/domain';
import type { OrchestrationPolicy, OrchestrationView } from '../../shared/policy';
import { Rng } from '../../shared/rng';
import {
  ACTION_FEATURES,
  actionCount,
  actionFeatures,
  actionOp,
  EAP_FEATURES,
  graphSpecOf,
  graphState,
  type GraphSpec,
  type GraphState,
} from './graph';
import type { GpgNet } from './gnn';

/** One orchestration decision: what the learner needs to recompute its log-probability. */
export interface GpgDecision {
  state: GraphState;
  /** Picked nodes, in order (at most H). */
  nodes: number[];
  /** The action picked for each node (0 = no-op). */
  actions: number[];
  /** The scale head's scores, [nodes.length x (2W + 1)] (before masking), for searches over the alternatives. */
  scaleScores?: Float32Array;
}

export interface GpgPolicyOptions {
  /** Scenario seconds between decisions (one frame). */
  periodS: number;
  /** Nodes touched per decision (the scenario's scaleNodesPerFrame, H = 2 in the paper). */
  nodesPerDecision: number;
  /**
   * greedy: the H best nodes and each one's best action (evaluation); sample: both drawn (training,
   * exploration); perturb: greedy but one picked node's action, drawn (the vine rollouts' branch in
   * training/jobs/gpg-train.ts: an alternative to one order with the rest held).
   */
  mode: 'sample' | 'greedy' | 'perturb';
  /** Mixed into the episode seed for sampling, so rollouts of one episode seed sample differently. @defaultValue 0 */
  sampleSalt?: number;
  onDecision?: (d: GpgDecision) => void;
}

export class GpgOrchestration implements OrchestrationPolicy {
  readonly name = 'gpg';
  readonly periodS: number;
  /** H: at most this many nodes per decision. */
  readonly nodesPerDecision: number;
  private rng = new Rng(1);
  private spec: GraphSpec | null = null;

  constructor(
    readonly net: GpgNet,
    private readonly o: GpgPolicyOptions,
  ) {
    if (!(o.nodesPerDecision >= 1)) throw new TypeError(`GpgOrchestration: nodesPerDecision must be >= 1, got ${o.nodesPerDecision}`);
    this.periodS = o.periodS;
    this.nodesPerDecision = o.nodesPerDecision;
  }

  reset(seed: number, view: OrchestrationView): void {
    this.rng = new Rng((seed * 2654435761 + 0x6770 + (this.o.sampleSalt ?? 0) * 40503) >>> 0);
    this.spec = graphSpecOf(view);
  }

  decide(view: OrchestrationView): ScaleOp[] {
    const spec = this.spec ?? (this.spec = graphSpecOf(view));
    const g = graphState(view, spec);
    const d = this.act(g);
    this.o.onDecision?.(d);
    const ops: ScaleOp[] = [];
    d.nodes.forEach((n, h) => {
      const op = actionOp(d.actions[h], n, spec.numServices);
      if (op) ops.push(op);
    });
    return ops;
  }

  /** Picks nodes and actions on one graph. */
  act(g: GraphState): GpgDecision {
    const { numNodes: N, numEaps: B, numServices: W } = g.spec;
    const A = actionCount(W);
    const net = this.net;
    // a scope, not tf.tidy: the result holds no tensors (tidy's return type wants only tensors)
    tf.engine().startScope();
    try {
      const emb = net.embed(
        g.spec,
        1,
        tf.tensor2d(g.x, [N, g.x.length / N]),
        tf.tensor2d(g.eapX, [B, EAP_FEATURES]),
        tf.tensor2d(g.globalX, [1, g.globalX.length]),
      );
      const logits = net.nodeLogits(emb, 1, N).dataSync() as Float32Array;
      const avail = Uint8Array.from(g.nodeMask);
      const nodes: number[] = [];
      for (let h = 0; h < this.o.nodesPerDecision; h++) {
        const n = this.o.mode === 'sample' ? sampleLogit(logits, avail, 0, N, this.rng) : argmaxLogit(logits, avail, 0, N);
        if (n < 0) break;
        nodes.push(n);
        avail[n] = 0;
      }
      if (nodes.length === 0) return { state: g, nodes, actions: [] };
      const phi = new Float32Array(nodes.length * A * ACTION_FEATURES);
      nodes.forEach((n, k) => actionFeatures(g, n, phi, k * A * ACTION_FEATURES));
      const scale = net
        .scaleLogits(emb, tf.tensor1d(nodes, 'int32'), tf.tensor2d(phi, [nodes.length * A, ACTION_FEATURES]), A)
        .dataSync() as Float32Array;
      const drawn = this.o.mode === 'perturb' ? Math.floor(this.rng.next() * nodes.length) : -1;
      const actions = nodes.map((n, k) => {
        const maskRow = g.actionMask.subarray(n * A, n * A + A);
        const draw = this.o.mode === 'sample' || k === drawn;
        const pick = draw ? sampleLogit(scale, maskRow, k * A, A, this.rng) : argmaxLogit(scale, maskRow, k * A, A);
        return pick < 0 ? 0 : pick;
      });
      return { state: g, nodes, actions, scaleScores: Float32Array.from(scale) };
    } finally {
      tf.engine().endScope();
    }
  }
}

/** Index (0..len-1) of the largest logits[off + i] with mask[i] = 1; -1 when none is valid. */
export function argmaxLogit(logits: ArrayLike<number>, mask: ArrayLike<number>, off: number, len: number): number {
  let best = -1;
  for (let i = 0; i < len; i++) if (mask[i] && (best < 0 || logits[off + i] > logits[off + best])) best = i;
  return best;
}

/** A draw from softmax(logits[off..off+len)) over mask[i] = 1; -1 when none is valid. */
export function sampleLogit(logits: ArrayLike<number>, mask: ArrayLike<number>, off: number, len: number, rng: Rng): number {
  let max = -Infinity;
  for (let i = 0; i < len; i++) if (mask[i] && logits[off + i] > max) max = logits[off + i];
  if (max === -Infinity) return -1;
  let sum = 0;
  for (let i = 0; i < len; i++) if (mask[i]) sum += Math.exp(logits[off + i] - max);
  let u = rng.next() * sum;
  let last = -1;
  for (let i = 0; i < len; i++) {
    if (!mask[i]) continue;
    last = i;
    u -= Math.exp(logits[off + i] - max);
    if (u <= 0) return i;
  }
  return last;
}
