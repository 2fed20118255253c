/**
 * Where a new replica goes and which one leaves, shared by the orchestration baselines.
 * New replicas: kube-scheduler's default scoring, the feasible node with the most free resources
 * (least allocated: mean of free CPU-request and free memory ratios; CPU requests are the replicas'
 * cpuCores). Removal: the node of the service with the most allocated resources.
 *
 * A `Plan` records the orders decided so far in one step, so that several orders in the same step
 * see each other (memory taken, replicas removed) before the executor applies them.
 */
import type { ScaleOp } from '../../../shared/domain';
import type { OrchestrationView } from '../../../shared/policy';

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

  /** Node to remove a replica of w from (or -1). */
  pickNodeToRemove(w: number): number {
    let best = -1;
    let bestScore = Infinity;
    for (let n = 0; n < this.view.numNodes; n++) {
      if (this.replicas(n, w) <= 0) continue;
      const score = this.score(n);
      if (score < bestScore) {
        bestScore = score;
        best = n;
      }
    }
    return best;
  }
}
