/**
 * gsp-ss: greedy service placement with service scaling, every frame (the KaiS paper's costly
 * baseline, after joint service placement and request scheduling with known request rates).
 * Each frame, from the last frame's demand:
 *   1. replicas needed r_w = ceil(demand_w / (cpuCores_w x targetUtilisation)), demand_w = arrived
 *      CPU work of w per second; at least 1 for a service that saw arrivals; at most the max;
 *   2. a placement is built from scratch: services by decreasing demand, each replica on the node
 *      with the most free resources in the new placement (memory-feasible);
 *   3. the orders are the difference between the current and the new placement.
 * Because it re-places from scratch every frame it moves many replicas: high scheduling cost.
 */
import type { ScaleOp } from '../domain';
import type { OrchestrationPolicy, OrchestrationView } from '../policy';

export class GspSsOrchestration implements OrchestrationPolicy {
  readonly name = 'gsp-ss';
  constructor(
    readonly periodS = 25,
    private readonly targetUtilisation = 0.8,
  ) {}

  decide(view: OrchestrationView): ScaleOp[] {
    const W = view.numServices;
    const N = view.numNodes;
    const win = view.window;
    const windowS = Math.max(1e-9, win.windowS);
    const need = new Int32Array(W);
    const demand = new Float64Array(W);
    for (let w = 0; w < W; w++) {
      demand[w] = win.workCoreS[w] / windowS;
      const r = Math.ceil(demand[w] / (view.serviceCpuCores(w) * this.targetUtilisation));
      need[w] = Math.min(view.maxReplicasPerService, Math.max(win.arrivals[w] > 0 ? 1 : 0, r));
    }
    const order = Array.from({ length: W }, (_, w) => w).sort((a, b) => demand[b] - demand[a] || a - b);
    const freeMem = Float64Array.from({ length: N }, (_, n) => (view.healthy(n) ? view.memGB(n) : 0));
    const freeCpu = Float64Array.from({ length: N }, (_, n) => view.cpuCores(n));
    const target = new Int32Array(W * N);
    // round-robin over services so that scarce memory is shared, one replica per pass
    for (let pass = 0; ; pass++) {
      let placedAny = false;
      for (const w of order) {
        if (pass >= need[w]) continue;
        let best = -1;
        let bestScore = -Infinity;
        for (let n = 0; n < N; n++) {
          if (freeMem[n] < view.serviceMemGB(w) - 1e-9) continue;
          const score = (freeMem[n] - view.serviceMemGB(w)) / view.memGB(n) + (freeCpu[n] - view.serviceCpuCores(w)) / view.cpuCores(n);
          if (score > bestScore) {
            bestScore = score;
            best = n;
          }
        }
        if (best < 0) continue;
        target[w * N + best]++;
        freeMem[best] -= view.serviceMemGB(w);
        freeCpu[best] -= view.serviceCpuCores(w);
        placedAny = true;
      }
      if (!placedAny) break;
    }
    const ops: ScaleOp[] = [];
    // deletions first so that their memory is released (when idle) before the creations
    for (let w = 0; w < W; w++) {
      for (let n = 0; n < N; n++) {
        for (let d = view.replicas(n, w) - target[w * N + n]; d > 0; d--) ops.push({ service: w, node: n, delta: -1 });
      }
    }
    for (let w = 0; w < W; w++) {
      for (let n = 0; n < N; n++) {
        for (let d = target[w * N + n] - view.replicas(n, w); d > 0; d--) ops.push({ service: w, node: n, delta: 1 });
      }
    }
    return ops;
  }
}
