import type { ScaleOp } from '../domain';
import type { OrchestrationPolicy } from '../policy';

/** The initial placement, never changed. */
export class StaticOrchestration implements OrchestrationPolicy {
  readonly name = 'static';
  readonly periodS = 0;
  decide(): ScaleOp[] {
    return [];
  }
}
