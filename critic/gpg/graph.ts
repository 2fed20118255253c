/**
 * GPG's input graph (ALGORITHMS.md section 3; kais-reconstruction.md 4.2-4.3, 4.7): the edge
 * cluster as three levels, nodes under their eAP, eAPs under the cluster, read from an
 * OrchestrationView (the same view the heuristic orchestration policies decide on, in the
 * simulator and live). Plain Float32Arrays, no tfjs: the net (gnn.ts) turns them into tensors.
 *
 * Node features x_n (5 + 3W), every one scale-free so that clusters of other sizes read alike:
 *   [free CPU ratio, free memory ratio, healthy (0/1), return time to its eAP (s), return time of
 *    its eAP to the cloud (s),
 *    per service w: log1p(requests of w queued at n),
 *                   share of n's memory held by w's replicas,
 *                   busy / ready replicas of w at n now (1 when replicas exist but none is ready)]
 * eAP features (3): [log1p(eAP queue), mean free CPU ratio of its nodes, mean free memory ratio]
 * Cluster features (1 + 4W), over the window since the previous decision:
 *   [log1p(cloud queue),
 *    per service w: arrivals share, log1p(arrivals per second), failed / arrivals,
 *                   busy / ready replica-seconds (1 when arrivals but no ready replica)]
 *
 * Actions of a selected node (2W + 1): 0 no-op, 1 + w add one replica of w, 1 + W + w remove one.
 * The mask \tilde{A} (reconstruction 4.7) follows the executors' rules for an order
 * (shared/orchestration/executor.ts), so a masked action is one the cluster would refuse:
 *   +w: n is healthy, can run one request of w and has w's memory free (fitsReplica), and w is
 *       under maxReplicasPerService in the edge cluster;
 *   -w: n holds a replica of w and w keeps at least one edge replica elsewhere (hpa's
 *       minReplicas = 1: a learned policy must not starve a service of the edge by accident);
 *   no-op: always.
 * A node is selectable when it has a valid action other than the no-op.
 */
import type { OrchestrationView } from '../../shared/policy';
import { fitsReplica } from '../../shared/orchestration/placement';

/** Sizes of one cluster's graph (fixed for a scenario). */
export interface GraphSpec {
  numNodes: number;
  numEaps: number;
  numServices: number;
  /** eAP of each node. */
  nodeEap: Int32Array;
}

export const nodeFeatureCount = (numServices: number): number => 5 + 3 * numServices;
export const EAP_FEATURES = 3;
export const globalFeatureCount = (numServices: number): number => 1 + 4 * numServices;
export const actionCount = (numServices: number): number => 2 * numServices + 1;
/** Per-(node, service) features at the end of x_n, and per-service ones at the end of the cluster features. */
export const NODE_SERVICE_FEATURES = 3;
export const GLOBAL_SERVICE_FEATURES = 4;

export interface GraphState {
  spec: GraphSpec;
  /** [N x nodeFeatureCount(W)] row-major. */
  x: Float32Array;
  /** [B x EAP_FEATURES]. */
  eapX: Float32Array;
  /** [globalFeatureCount(W)]. */
  globalX: Float32Array;
  /** [N x (2W + 1)]: 1 = valid. */
  actionMask: Uint8Array;
  /** [N]: 1 = the node has a valid action other than the no-op. */
  nodeMask: Uint8Array;
}

export function graphSpecOf(view: Pick<OrchestrationView, 'numNodes' | 'numEaps' | 'numServices' | 'nodeEap'>): GraphSpec {
  const nodeEap = new Int32Array(view.numNodes);
  for (let n = 0; n < view.numNodes; n++) nodeEap[n] = view.nodeEap(n);
  return { numNodes: view.numNodes, numEaps: view.numEaps, numServices: view.numServices, nodeEap };
}

/** The graph of the cluster as the view shows it now. */
export function graphState(view: OrchestrationView, spec: GraphSpec = graphSpecOf(view)): GraphState {
  const N = spec.numNodes;
  const B = spec.numEaps;
  const W = spec.numServices;
  const fn = nodeFeatureCount(W);
  const x = new Float32Array(N * fn);
  const eapX = new Float32Array(B * EAP_FEATURES);
  const eapNodes = new Float64Array(B);
  const totalReplicas = new Float64Array(W);
  for (let n = 0; n < N; n++) for (let w = 0; w < W; w++) totalReplicas[w] += view.replicas(n, w);

  for (let n = 0; n < N; n++) {
    const b = spec.nodeEap[n];
    const row = n * fn;
    const freeCpu = view.freeCpuRatio(n);
    const freeMem = view.freeMemRatio(n);
    x[row] = freeCpu;
    x[row + 1] = freeMem;
    x[row + 2] = view.healthy(n) ? 1 : 0;
    x[row + 3] = view.returnS(b, n);
    x[row + 4] = view.returnS(b, view.cloudTarget);
    const mem = view.memGB(n);
    for (let w = 0; w < W; w++) {
      const c = row + 5 + NODE_SERVICE_FEATURES * w;
      const reps = view.replicas(n, w);
      const ready = view.readyReplicas(n, w);
      x[c] = Math.log1p(view.serviceQueueLen(n, w));
      x[c + 1] = mem > 0 ? (reps * view.serviceMemGB(w)) / mem : 0;
      x[c + 2] = ready > 0 ? view.busyReplicas(n, w) / ready : reps > 0 ? 1 : 0;
    }
    eapX[b * EAP_FEATURES + 1] += freeCpu;
    eapX[b * EAP_FEATURES + 2] += freeMem;
    eapNodes[b]++;
  }
  for (let b = 0; b < B; b++) {
    eapX[b * EAP_FEATURES] = Math.log1p(view.eapQueueLen(b));
    if (eapNodes[b] > 0) {
      eapX[b * EAP_FEATURES + 1] /= eapNodes[b];
      eapX[b * EAP_FEATURES + 2] /= eapNodes[b];
    }
  }

  const win = view.window;
  const globalX = new Float32Array(globalFeatureCount(W));
  globalX[0] = Math.log1p(view.queueLen(view.cloudTarget));
  let arrivals = 0;
  for (let w = 0; w < W; w++) arrivals += win.arrivals[w];
  const windowS = win.windowS > 0 ? win.windowS : 1;
  for (let w = 0; w < W; w++) {
    const c = 1 + GLOBAL_SERVICE_FEATURES * w;
    const a = win.arrivals[w];
    globalX[c] = arrivals > 0 ? a / arrivals : 0;
    globalX[c + 1] = Math.log1p(a / windowS);
    globalX[c + 2] = a > 0 ? Math.min(1, win.failed[w] / a) : 0;
    globalX[c + 3] = win.readyReplicaS[w] > 0 ? Math.min(1, win.busyReplicaS[w] / win.readyReplicaS[w]) : a > 0 ? 1 : 0;
  }

  const A = actionCount(W);
  const actionMask = new Uint8Array(N * A);
  const nodeMask = new Uint8Array(N);
  for (let n = 0; n < N; n++) {
    const row = n * A;
    actionMask[row] = 1;
    const healthy = view.healthy(n);
    const freeMem = view.freeMemForReplicasGB(n);
    const cores = view.cpuCores(n);
    let any = 0;
    for (let w = 0; w < W; w++) {
      const add =
        healthy &&
        totalReplicas[w] < view.maxReplicasPerService &&
        fitsReplica(cores, freeMem, view.serviceCpuCores(w), view.serviceMemGB(w))
          ? 1
          : 0;
      const reps = view.replicas(n, w);
      const remove = reps >= 1 && totalReplicas[w] - 1 >= 1 ? 1 : 0;
      actionMask[row + 1 + w] = add;
      actionMask[row + 1 + W + w] = remove;
      any |= add | remove;
    }
    nodeMask[n] = any;
  }
  return { spec, x, eapX, globalX, actionMask, nodeMask };
}

/** The ScaleOp of action a of a node (null for the no-op). */
export function actionOp(a: number, node: number, numServices: number): { service: number; node: number; delta: 1 | -1 } | null {
  if (a <= 0) return null;
  return a <= numServices ? { service: a - 1, node, delta: 1 } : { service: a - 1 - numServices, node, delta: -1 };
}

/** The action of a node that gives `op` (the inverse of actionOp): 1 + w adds a replica of w, 1 + W + w removes one. */
export function opAction(op: { service: number; delta: number }, numServices: number): number {
  return op.delta > 0 ? 1 + op.service : 1 + numServices + op.service;
}

/**
 * The action encoding phi_j of the scale head (reconstruction 4.6, Decima's "expand action on
 * state" form), independent of the number of services: for action j of node n,
 *   [no-op, add, remove (one-hot),  the node's features of j's service (NODE_SERVICE_FEATURES),
 *    the cluster's features of j's service (GLOBAL_SERVICE_FEATURES)]   (zeros for the no-op)
 */
export const ACTION_FEATURES = 3 + NODE_SERVICE_FEATURES + GLOBAL_SERVICE_FEATURES;

/** phi for every action of node n: [(2W + 1) x ACTION_FEATURES], written into out at offset. */
export function actionFeatures(g: GraphState, n: number, out: Float32Array, offset = 0): void {
  const W = g.spec.numServices;
  const fn = nodeFeatureCount(W);
  const A = actionCount(W);
  out.fill(0, offset, offset + A * ACTION_FEATURES);
  out[offset] = 1;
  for (let a = 1; a < A; a++) {
    const add = a <= W;
    const w = add ? a - 1 : a - 1 - W;
    const o = offset + a * ACTION_FEATURES;
    out[o + (add ? 1 : 2)] = 1;
    const xs = n * fn + 5 + NODE_SERVICE_FEATURES * w;
    for (let k = 0; k < NODE_SERVICE_FEATURES; k++) out[o + 3 + k] = g.x[xs + k];
    const gs = 1 + GLOBAL_SERVICE_FEATURES * w;
    for (let k = 0; k < GLOBAL_SERVICE_FEATURES; k++) out[o + 3 + NODE_SERVICE_FEATURES + k] = g.globalX[gs + k];
  }
}
