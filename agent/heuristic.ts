/**
 * The agent's dispatch rule before any actor weights arrive: `lec` (least expected completion
 * time, deadline-aware), the strongest heuristic of the simulator, written here on
 * shared/eta.ts because agent/ may import shared/ only (training/baselines/dispatch/lec.ts is the
 * simulator's copy of the same rule): among valid targets whose expected completion time meets the
 * slack, the smallest; if none meets it, the smallest overall.
 */
import { expectedCompletionS } from '../shared/eta';
import type { ClusterView, DispatchItem, DispatchPolicy } from '../shared/policy';

export class LecFallback implements DispatchPolicy {
  readonly name = 'lec';

  decide(item: DispatchItem, view: ClusterView): number {
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
    return bestOk >= 0 ? bestOk : best;
  }
}
