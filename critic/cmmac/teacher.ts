/**
 * `deadline-load`: the warm-start teacher of `kais train` (not a baseline of `kais eval`; it lives
 * with the learner because it only exists to be cloned).
 *
 * Per request: among the valid targets whose expected completion time still meets the deadline
 * with a safety factor (`margin x eta <= slack`, shared/eta.ts), take the least loaded one (queued
 * and busy requests of the service per ready replica, `jsq`'s measure) with a small penalty on eta;
 * when no target meets it, the cloud (a hopeless request should not take an edge queue slot from
 * one that can still make it).
 *
 * Measured on `kais` / p4 / hpa, held-out seeds 2000-2002, 5 frames (docs/cmmac.md): margin 0.7
 * (eta overestimates the wait: it assumes every request ahead looks like this one) and eta weight
 * 0.5 beat jsq by about 2% and lec by about 5%; margin 1.0 is no better than jsq.
 */
import type { ClusterView, DispatchItem, DispatchPolicy } from '../../shared/policy';
import { expectedCompletionS } from '../../shared/eta';

export interface DeadlineLoadOptions {
  /** A target counts as meeting the deadline when margin x eta <= slack. @defaultValue 0.7 */
  margin?: number;
  /** Weight of eta (s) added to the load (requests per replica). @defaultValue 0.5 */
  etaWeight?: number;
}

export class DeadlineLoadDispatch implements DispatchPolicy {
  readonly name = 'deadline-load';
  readonly margin: number;
  readonly etaWeight: number;

  constructor(o: DeadlineLoadOptions = {}) {
    this.margin = o.margin ?? 0.7;
    this.etaWeight = o.etaWeight ?? 0.5;
  }

  decide(item: DispatchItem, view: ClusterView): number {
    const w = item.request.service;
    const b = item.eap;
    const slack = item.request.deadlineS - view.nowS();
    let best = -1;
    let bestKey = Infinity;
    for (let t = 0; t < view.numTargets; t++) {
      if (!item.mask[t]) continue;
      const eta = expectedCompletionS(view, b, t, w, item.request.inputMB);
      if (this.margin * eta > slack) continue;
      const ready = Math.max(1, view.readyReplicas(t, w));
      const key = (view.serviceQueueLen(t, w) + view.busyReplicas(t, w)) / ready + this.etaWeight * eta;
      if (key < bestKey) {
        bestKey = key;
        best = t;
      }
    }
    return best >= 0 ? best : view.cloudTarget;
  }
}

export const TRAIN_TEACHERS = ['deadline-load'] as const;

/** A train-only teacher by name, or null (then the name is a `kais eval` baseline). */
export function makeTrainTeacher(name: string): DispatchPolicy | null {
  return name === 'deadline-load' ? new DeadlineLoadDispatch() : null;
}
