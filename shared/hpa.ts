/**
 * The Kubernetes Horizontal Pod Autoscaler's replica rule with its defaults (ALGORITHMS.md
 * section 5), shared by the `hpa` baseline in the simulator and the live orchestrator's placement
 * loop, so that both scale the same way. Per service, at each sync:
 *   u       = busy replica-seconds / ready replica-seconds over the window
 *             (no ready replica but arrivals: u = 1)
 *   desired = ceil(current x u / targetUtilisation), unchanged while |u / target - 1| <= tolerance
 *   scale-down only to the highest recommendation of the last stabilisationS seconds
 *   clamped to [minReplicas, maxReplicas]
 */

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

export class HpaRecommender {
  readonly o: HpaOptions;
  /** per service: recent recommendations [timeS, desired] */
  private readonly history: [number, number][][];

  constructor(numServices: number, options: Partial<HpaOptions> = {}) {
    this.o = { ...DEFAULT_HPA_OPTIONS, ...options };
    this.history = Array.from({ length: numServices }, () => []);
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
