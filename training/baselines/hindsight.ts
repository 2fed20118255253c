/**
 * Hindsight orchestration (issue 16 item 3): how much can orchestration move at all? A placement
 * rule that knows each next frame's arrivals: at every frame boundary it runs gsp-ss's rebuild
 * (shared/orchestration/gsp-ss.ts: replicas from CPU demand, spread on the freest nodes) on the
 * true demand of the frame about to start instead of the last frame's, at a utilisation target.
 * `kais eval` runs it at HINDSIGHT_TARGETS and reports the best run as `<dispatch>/hindsight`.
 *
 * It is not a proof of optimality (no policy search over placements per frame can run inside a
 * simulator that cannot be forked): it is the best of a family of placement rules that see the
 * future, which is what "the room above hpa and static" is measured against. Its cost is the
 * rebuild's: many scale operations, as gsp-ss.
 */
import type { ScaleOp } from '../../shared/domain';
import type { OrchestrationPolicy, OrchestrationView, ServiceWindowStats } from '../../shared/policy';
import { GspSsOrchestration } from '../../shared/orchestration/gsp-ss';
import type { RequestSource } from '../workload/source';

/** Utilisation targets tried; the best run is reported. */
export const HINDSIGHT_TARGETS: readonly number[] = [0.5, 0.65, 0.8];

/** Per frame: arrivals and CPU work per service (one pass over the requests). */
export interface FrameDemand {
  arrivals: Float64Array[];
  workCoreS: Float64Array[];
}

export function frameDemand(source: RequestSource, numServices: number, frameS: number, frames: number): FrameDemand {
  const arrivals = Array.from({ length: frames }, () => new Float64Array(numServices));
  const workCoreS = Array.from({ length: frames }, () => new Float64Array(numServices));
  const r = source.open();
  for (let q = r.next(); q !== null; q = r.next()) {
    const k = Math.floor(q.arrivalS / frameS);
    if (k < 0 || k >= frames) continue;
    arrivals[k][q.service]++;
    workCoreS[k][q.service] += q.workCoreS;
  }
  return { arrivals, workCoreS };
}

export class HindsightOrchestration implements OrchestrationPolicy {
  readonly name = 'hindsight';
  private readonly rule: GspSsOrchestration;

  constructor(
    private readonly demand: FrameDemand,
    readonly periodS: number,
    targetUtilisation: number,
  ) {
    this.rule = new GspSsOrchestration(periodS, targetUtilisation);
  }

  decide(view: OrchestrationView): ScaleOp[] {
    const k = Math.round(view.nowS() / this.periodS); // the frame about to start
    if (k >= this.demand.arrivals.length) return [];
    const W = view.numServices;
    const next: ServiceWindowStats = {
      windowS: this.periodS,
      arrivals: this.demand.arrivals[k],
      workCoreS: this.demand.workCoreS[k],
      busyReplicaS: new Float64Array(W),
      readyReplicaS: new Float64Array(W),
      completedInTime: new Float64Array(W),
      failed: new Float64Array(W),
    };
    return this.rule.decide(Object.create(view, { window: { get: () => next } }) as OrchestrationView);
  }
}
