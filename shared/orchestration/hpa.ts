/**
 * hpa: the Kubernetes Horizontal Pod Autoscaler rule with its defaults (ALGORITHMS.md section 5).
 * The simulator (`kais eval`) and the live orchestrator's placement loop run this same class.
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
import type { ScaleOp } from '../domain';
import type { OrchestrationPolicy, OrchestrationView } from '../policy';
import { Plan } from './placement';

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
    for (let w = 0; w < view.numServices; w++) {
      const { current, target: stable } = this.rule.onView(view, w);
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

export const DEFAULT_HPA_OPTIONS: Readonly<HpaOptions> = Object.freeze({
  syncPeriodS: 15,
  targetUtilisation: 0.7,
  tolerance: 0.1,
  stabilisationS: 300,
  minReplicas: 1,
});

export interface ServiceWindow {
  busyReplicaS: number;
  readyReplicaS: number;
  arrivals: number;
}

/** The HPA replica rule, per service, at each sync (the recommender of `HpaOrchestration`). */
export class HpaRecommender {
  readonly o: HpaOptions;
  /** per service: recent recommendations [timeS, desired] */
  private readonly history: [number, number][][];

  constructor(numServices: number, options: Partial<HpaOptions> = {}) {
    this.o = { ...DEFAULT_HPA_OPTIONS, ...options };
    this.history = Array.from({ length: numServices }, () => []);
  }

  /** Service w's current edge replicas in a view and its target count from the view's window (recommend). */
  onView(view: OrchestrationView, w: number): { current: number; target: number } {
    let current = 0;
    for (let n = 0; n < view.numNodes; n++) current += view.replicas(n, w);
    const win = view.window;
    const target = this.recommend(
      w,
      current,
      { busyReplicaS: win.busyReplicaS[w], readyReplicaS: win.readyReplicaS[w], arrivals: win.arrivals[w] },
      view.nowS(),
      view.maxReplicasPerService,
    );
    return { current, target };
  }

  /** Target replica count of service w, given its current count and the window's figures. */
  recommend(w: number, current: number, win: ServiceWindow, nowS: number, maxReplicas: number): number {
    const o = this.o;
    const u = win.readyReplicaS > 0 ? win.busyReplicaS / win.readyReplicaS : win.arrivals > 0 ? 1 : 0;
    const ratio = u / o.targetUtilisation;
    let desired = current;
    if (current === 0) desired = win.arrivals > 0 ? o.minReplicas : 0;
    else if (Math.abs(ratio - 1) > o.tolerance) desired = Math.ceil(current * ratio);
    desired = Math.max(o.minReplicas, Math.min(maxReplicas, desired));
    const h = this.history[w];
    h.push([nowS, desired]);
    while (h.length > 0 && h[0][0] < nowS - o.stabilisationS) h.shift();
    let stable = desired;
    if (desired < current) for (const [, d] of h) stable = Math.max(stable, d);
    return Math.min(stable, Math.max(current, desired));
  }
}
