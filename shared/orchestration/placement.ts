/**
 * Where replicas go: the initial placement, and where a new replica goes and which one leaves
 * (one node-choice rule for every orchestration policy, in the simulator and live alike).
 *
 * Initial placement (`initialPlacement`): for each eAP, `initialReplicasPerEap` replicas of every
 * service (services in index order), each on the node of that eAP with the most free memory that
 * fits it: the CPU to run one request of it and its memory.
 *
 * New replicas: kube-scheduler's default scoring, the feasible node with the most free resources
 * (least allocated: mean of free CPU-request and free memory ratios; CPU requests are the replicas'
 * cpuCores). Removal: the node of the service with the most allocated resources.
 *
 * A `Plan` records the orders decided so far in one step, so that several orders in the same step
 * see each other (memory taken, replicas removed) before the executor applies them.
 */
import type { Placement, ScaleOp } from '../domain';
import type { OrchestrationView } from '../policy';
import type { Scenario } from '../scenario';
import { capacityArrays, topologyOf } from '../scenario';

/** d[w][n] of a view: replicas including starting ones, excluding those being deleted (what a placement frame carries). */
export function placementOf(view: OrchestrationView): Placement {
  return Array.from({ length: view.numServices }, (_, w) => Array.from({ length: view.numNodes }, (_, n) => view.replicas(n, w)));
}

/**
 * The initial placement d[w][n] of a scenario. `place(w, n)` is told of every replica in the
 * order it is placed (the simulator books its memory in that order).
 */
export function initialPlacement(scenario: Scenario, place?: (w: number, n: number) => void): Placement {
  const topo = topologyOf(scenario);
  const cap = capacityArrays(scenario);
  const used = new Float64Array(topo.numNodes);
  const d: Placement = scenario.services.map(() => new Array<number>(topo.numNodes).fill(0));
  for (let b = 0; b < topo.numEaps; b++) {
    for (let r = 0; r < scenario.initialReplicasPerEap; r++) {
      for (let w = 0; w < topo.numServices; w++) {
        let best = -1;
        let bestFree = -Infinity;
        for (let n = 0; n < topo.numNodes; n++) {
          if (topo.nodeEap[n] !== b) continue;
          const free = cap.mem[n] - used[n];
          if (fitsReplica(cap.cpu[n], free, cap.svcCpu[w], cap.svcMem[w]) && free > bestFree) {
            best = n;
            bestFree = free;
          }
        }
        if (best >= 0) {
          d[w][best]++;
          used[best] += cap.svcMem[w];
          place?.(w, best);
        }
      }
    }
  }
  return d;
}

/**
 * What is wrong with the shape of a replica table from outside (d[w][n]: `W` rows, one per service,
 * of `N` whole counts, one per edge node, at most maxReplicasPerService of a service), in a phrase
 * naming the row, or null. The emulated cluster's POST /placement and the simulator's start
 * placement both check it.
 */
export function placementShapeProblem(scenario: Scenario, d: unknown): string | null {
  const { numServices: W, numNodes: N } = topologyOf(scenario);
  if (!Array.isArray(d) || d.length !== W)
    return `d: must be ${W} rows (one per service) of ${N} non-negative integers (one per edge node)`;
  for (let w = 0; w < W; w++) {
    const row: unknown = d[w];
    if (!Array.isArray(row) || row.length !== N || !row.every((k) => Number.isInteger(k) && k >= 0))
      return `d[${w}]: must be ${N} non-negative integers (one per edge node)`;
    const total = (row as number[]).reduce((a, b) => a + b, 0);
    if (total > scenario.maxReplicasPerService)
      return `d[${w}]: ${total} replicas of service ${w}, more than maxReplicasPerService (${scenario.maxReplicasPerService})`;
  }
  return null;
}

/**
 * What keeps an empty cluster of `scenario` from starting with placement `d`, in a phrase, or
 * null: its shape (placementShapeProblem), and each node's memory for all its replicas.
 */
export function placementProblem(scenario: Scenario, d: unknown): string | null {
  const shape = placementShapeProblem(scenario, d);
  if (shape !== null) return shape;
  const table = d as Placement;
  const cap = capacityArrays(scenario);
  for (let n = 0; n < topologyOf(scenario).numNodes; n++) {
    let memGB = 0;
    for (let w = 0; w < table.length; w++) memGB += table[w][n] * cap.svcMem[w];
    if (!fitsReplica(Infinity, cap.mem[n], 0, memGB))
      return `d[*][${n}]: the replicas need ${+memGB.toFixed(3)} GB of memory, node ${n} has ${cap.mem[n]} GB`;
  }
  return null;
}

/** A node of `cpuCores` with `freeMemGB` free can host a replica of a service of (svcCpu, svcMem): it can run one request and has the memory. */
export function fitsReplica(cpuCores: number, freeMemGB: number, svcCpu: number, svcMem: number): boolean {
  return cpuCores >= svcCpu - 1e-9 && freeMemGB >= svcMem - 1e-9;
}

/** The orders that turn placement `from` into `to`: deletions first (their memory is freed before the creations). */
export function opsBetween(from: Placement, to: Placement): ScaleOp[] {
  const ops: ScaleOp[] = [];
  for (let w = 0; w < to.length; w++)
    for (let n = 0; n < to[w].length; n++) for (let k = to[w][n]; k < from[w][n]; k++) ops.push({ service: w, node: n, delta: -1 });
  for (let w = 0; w < to.length; w++)
    for (let n = 0; n < to[w].length; n++) for (let k = from[w][n]; k < to[w][n]; k++) ops.push({ service: w, node: n, delta: 1 });
  return ops;
}

/** d with the orders applied (a copy). */
export function withOps(d: Placement, ops: readonly ScaleOp[]): Placement {
  const next = d.map((row) => row.slice());
  for (const op of ops) next[op.service][op.node] += op.delta;
  return next;
}

export class Plan {
  readonly ops: ScaleOp[] = [];
  private readonly memDelta = new Map<number, number>();
  private readonly cpuDelta = new Map<number, number>();
  private readonly replicaDelta = new Map<number, number>();
  constructor(private readonly view: OrchestrationView) {}

  add(service: number, node: number, delta: 1 | -1): void {
    const v = this.view;
    this.ops.push({ service, node, delta });
    this.memDelta.set(node, (this.memDelta.get(node) ?? 0) + delta * v.serviceMemGB(service));
    this.cpuDelta.set(node, (this.cpuDelta.get(node) ?? 0) + delta * v.serviceCpuCores(service));
    const k = node * v.numServices + service;
    this.replicaDelta.set(k, (this.replicaDelta.get(k) ?? 0) + delta);
  }

  replicas(node: number, service: number): number {
    return this.view.replicas(node, service) + (this.replicaDelta.get(node * this.view.numServices + service) ?? 0);
  }

  freeMemGB(node: number): number {
    return this.view.freeMemForReplicasGB(node) - (this.memDelta.get(node) ?? 0);
  }

  requestedCpu(node: number): number {
    let s = this.cpuDelta.get(node) ?? 0;
    for (let w = 0; w < this.view.numServices; w++) s += this.view.replicas(node, w) * this.view.serviceCpuCores(w);
    return s;
  }

  score(node: number, extraCpu = 0, extraMem = 0): number {
    const v = this.view;
    const cpuFree = 1 - (this.requestedCpu(node) + extraCpu) / v.cpuCores(node);
    const memFree = (this.freeMemGB(node) - extraMem) / v.memGB(node);
    return (cpuFree + memFree) / 2;
  }

  /** Best node for a new replica of w (or -1), optionally restricted to nodes of eAP `eap`. */
  pickNodeForNew(w: number, eap = -1): number {
    const v = this.view;
    let best = -1;
    let bestScore = -Infinity;
    for (let n = 0; n < v.numNodes; n++) {
      if (eap >= 0 && v.nodeEap(n) !== eap) continue;
      if (!v.healthy(n)) continue;
      if (this.freeMemGB(n) < v.serviceMemGB(w) - 1e-9) continue;
      const score = this.score(n, v.serviceCpuCores(w), v.serviceMemGB(w));
      if (score > bestScore) {
        bestScore = score;
        best = n;
      }
    }
    return best;
  }

  /** Node to remove a replica of w from (or -1): the most allocated one holding w (and passing `allowed`). */
  pickNodeToRemove(w: number, allowed?: (node: number) => boolean): number {
    let best = -1;
    let bestScore = Infinity;
    for (let n = 0; n < this.view.numNodes; n++) {
      if (this.replicas(n, w) <= 0) continue;
      if (allowed && !allowed(n)) continue;
      const score = this.score(n);
      if (score < bestScore) {
        bestScore = score;
        best = n;
      }
    }
    return best;
  }
}
