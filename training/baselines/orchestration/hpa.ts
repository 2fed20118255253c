/**
 * hpa: the Kubernetes Horizontal Pod Autoscaler rule with its defaults (ALGORITHMS.md section 5).
 * Every syncPeriodS (15 s), per service w:
 *   utilisation u = busy replica-seconds / ready replica-seconds over the window (edge replicas)
 *   desired = ceil(current x u / target)                 (target CPU utilisation 0.7)
 *   no change while |u / target - 1| <= tolerance (0.1)
 *   scale-down only to the highest recommendation of the last stabilisationS (300 s)
 *   clamp to [minReplicas = 1, maxReplicasPerService]
 * A service with no ready replica but arrivals in the window counts as fully utilised. New
 * replicas go to the least-allocated feasible node (kube-scheduler default), removals come from
 * the most allocated one.
 */
import type { ScaleOp } from '../../../shared/domain';
import type { OrchestrationPolicy, OrchestrationView } from '../../../shared/policy';
import { Plan } from './placement';

export interface HpaOptions {
  /** @defaultValue 15 */
  syncPeriodS: number;
  /** @defaultValue 0.7 */
  targetUtilisation: number;
  /** @defaultValue 0.1 */
  tolerance: number;
  /** @defaultValue 300 */
  stabilisationS: number;
  /** @defaultValue 1 */
  minReplicas: number;
}

export class HpaOrchestration implements OrchestrationPolicy {
  readonly name = 'hpa';
  readonly periodS: number;
  private readonly o: HpaOptions;
  /** per service: recent recommendations [timeS, desired] */
  private history: [number, number][][] = [];

  constructor(options: Partial<HpaOptions> = {}) {
    this.o = { syncPeriodS: 15, targetUtilisation: 0.7, tolerance: 0.1, stabilisationS: 300, minReplicas: 1, ...options };
    this.periodS = this.o.syncPeriodS;
  }

  reset(_seed: number, view: OrchestrationView): void {
    this.history = Array.from({ length: view.numServices }, () => []);
  }

  decide(view: OrchestrationView): ScaleOp[] {
    const plan = new Plan(view);
    const now = view.nowS();
    const win = view.window;
    for (let w = 0; w < view.numServices; w++) {
      let current = 0;
      for (let n = 0; n < view.numNodes; n++) current += view.replicas(n, w);
      let u: number;
      if (win.readyReplicaS[w] > 0) u = win.busyReplicaS[w] / win.readyReplicaS[w];
      else u = win.arrivals[w] > 0 ? 1 : 0;
      const ratio = u / this.o.targetUtilisation;
      let desired = current;
      if (current === 0) desired = win.arrivals[w] > 0 ? this.o.minReplicas : 0;
      else if (Math.abs(ratio - 1) > this.o.tolerance) desired = Math.ceil(current * ratio);
      desired = Math.max(this.o.minReplicas, Math.min(view.maxReplicasPerService, desired));
      // scale-down stabilisation: the highest recommendation of the window
      const h = this.history[w];
      h.push([now, desired]);
      while (h.length > 0 && h[0][0] < now - this.o.stabilisationS) h.shift();
      let stable = desired;
      if (desired < current) for (const [, d] of h) stable = Math.max(stable, d);
      stable = Math.min(stable, Math.max(current, desired));
      for (let k = current; k < stable; k++) {
        const n = plan.pickNodeForNew(w);
        if (n < 0) break;
        plan.add(w, n, 1);
      }
      for (let k = stable; k < current; k++) {
        const n = plan.pickNodeToRemove(w);
        if (n < 0) break;
        plan.add(w, n, -1);
      }
    }
    return plan.ops;
  }
}
