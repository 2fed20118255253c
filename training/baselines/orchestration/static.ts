import type { ScaleOp } from '../../../shared/domain';
import type { OrchestrationPolicy } from '../../../shared/policy';

/** The initial placement, never changed. */
export class StaticOrchestration implements OrchestrationPolicy {
  readonly name = 'static';
  readonly periodS = 0;
  decide(): ScaleOp[] {
    return [];
  }
}
