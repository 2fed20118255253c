/**
 * lec: least expected completion time, deadline-aware (ALGORITHMS.md section 5). For each valid
 * target t, eta_t = the expected completion time of shared/eta.ts (transfer + wait + processing
 * + return, from what the view shows).
 * Pick the smallest eta among those that meet the deadline; if none does, the smallest overall.
 * Among the targets that meet the deadline it prefers the edge (cheaper than the cloud) only through
 * eta itself: the cloud's 2 x 100 ms usually makes it the slower choice.
 */
import type { ClusterView, DispatchItem, DispatchPolicy } from '../policy';
import { expectedCompletionS, LEC_RULE, pickByEta } from '../eta';

export class LecDispatch implements DispatchPolicy {
  readonly name = 'lec';
  decide(item: DispatchItem, view: ClusterView): number {
    return pickByEta(item, view, LEC_RULE);
  }
}

export { expectedCompletionS };
