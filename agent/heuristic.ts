/**
 * The agent's dispatch rule before any actor weights arrive: `lec` (least expected completion
 * time, deadline-aware), the strongest heuristic of the simulator, written here on
 * shared/eta.ts (bestByEta), the same code as training/baselines/dispatch/lec.ts: among valid
 * targets whose expected completion time meets the slack, the smallest; if none meets it, the
 * smallest overall.
 */
import { bestByEta } from '../shared/eta';
import type { ClusterView, DispatchItem, DispatchPolicy } from '../shared/policy';

export class LecFallback implements DispatchPolicy {
  readonly name = 'lec';

  decide(item: DispatchItem, view: ClusterView): number {
    return bestByEta(item, view).target;
  }
}
