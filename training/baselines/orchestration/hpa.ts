/**
 * hpa: the Kubernetes Horizontal Pod Autoscaler rule with its defaults (ALGORITHMS.md section 5;
 * the replica rule itself is shared/hpa.ts, also used by the live orchestrator).
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
import { HpaRecommender, type HpaOptions } from '../../../shared/hpa';
import type { OrchestrationPolicy, OrchestrationView } from '../../../shared/policy';
import { Plan } from './placement';

export type { HpaOptions };

export class HpaOrchestration implements OrchestrationPolicy {
  readonly name = 'hpa';
  readonly periodS: number;
  private rule: HpaRecommender;

  constructor(private readonly options: Partial<HpaOptions> = {}) {
    this.rule = new HpaRecommender(0, options);
    this.periodS = this.rule.o.syncPeriodS;
  }

  reset(_seed: number, view: OrchestrationView): void {
    this.rule = new HpaRecommender(view.numServices, this.options);
  }

  decide(view: OrchestrationView): ScaleOp[] {
    const plan = new Plan(view);
    const now = view.nowS();
    const win = view.window;
    for (let w = 0; w < view.numServices; w++) {
      let current = 0;
      for (let n = 0; n < view.numNodes; n++) current += view.replicas(n, w);
      const stable = this.rule.recommend(
        w,
        current,
        { busyReplicaS: win.busyReplicaS[w], readyReplicaS: win.readyReplicaS[w], arrivals: win.arrivals[w] },
        now,
        view.maxReplicasPerService,
      );
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
