/**
 * lec: least expected completion time, deadline-aware (ALGORITHMS.md section 5). For each valid
 * target t, eta_t = the expected completion time of shared/eta.ts (transfer + wait + processing
 * + return, from what the view shows).
 * Pick the smallest eta among those that meet the deadline; if none does, the smallest overall.
 * Among the targets that meet the deadline it prefers the edge (cheaper than the cloud) only through
 * eta itself: the cloud's 2 x 100 ms usually makes it the slower choice.
 */
import type { ClusterView, DispatchItem, DispatchPolicy } from '../../../shared/policy';
import { expectedCompletionS } from '../../../shared/eta';

export class LecDispatch implements DispatchPolicy {
  readonly name = 'lec';
  decide(item: DispatchItem, view: ClusterView): number {
    return bestByEta(item, view).target;
  }
}

export { expectedCompletionS };

export function bestByEta(item: DispatchItem, view: ClusterView): { target: number; eta: number } {
  const w = item.request.service;
  const slack = item.request.deadlineS - view.nowS();
  let bestOk = -1;
  let bestOkEta = Infinity;
  let best = view.cloudTarget;
  let bestEta = Infinity;
  for (let t = 0; t < view.numTargets; t++) {
    if (!item.mask[t]) continue;
    const eta = expectedCompletionS(view, item.eap, t, w, item.request.inputMB);
    if (eta < bestEta) {
      bestEta = eta;
      best = t;
    }
    if (eta <= slack && eta < bestOkEta) {
      bestOkEta = eta;
      bestOk = t;
    }
  }
  return bestOk >= 0 ? { target: bestOk, eta: bestOkEta } : { target: best, eta: bestEta };
}
