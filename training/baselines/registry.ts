/**
 * Policy names -> constructors. A policy pair is `dispatch/orchestration`. The dispatch heuristics
 * live in shared/dispatch/ (the live agent runs them too: `kais agent --policy`), the orchestration
 * policies in shared/orchestration/ (the live orchestrator runs them too).
 */
import type { DispatchPolicy, OrchestrationPolicy } from '../../shared/policy';
import type { Scenario } from '../../shared/scenario';
import { UsageError } from '../../shared/errors';
import { DISPATCH_HEURISTICS, isDispatchHeuristic, makeHeuristicDispatch } from '../../shared/dispatch';
import { isOrchestrationPolicy, makeOrchestrationPolicy, ORCHESTRATION_POLICIES } from '../../shared/orchestration';

export const DISPATCH_BASELINES = DISPATCH_HEURISTICS;
export const ORCHESTRATION_BASELINES = ORCHESTRATION_POLICIES;

export function makeDispatch(name: string, scenario: Scenario): DispatchPolicy {
  if (!isDispatchHeuristic(name)) {
    throw new UsageError(`--policies: unknown dispatch policy "${name}" (known: ${DISPATCH_BASELINES.join(', ')}, cmmac)`);
  }
  return makeHeuristicDispatch(name, scenario);
}

export function makeOrchestration(name: string, scenario: Scenario): OrchestrationPolicy {
  if (!isOrchestrationPolicy(name))
    throw new UsageError(
      `--policies: unknown orchestration policy "${name}" (known: ${ORCHESTRATION_BASELINES.join(', ')}, gpg, hindsight)`,
    );
  return makeOrchestrationPolicy(name, scenario);
}

/** Splits "a/b" and checks both halves are known. */
export function parsePolicyPair(pair: string): { dispatch: string; orchestration: string } {
  const parts = pair.split('/');
  if (parts.length !== 2 || !parts[0] || !parts[1]) {
    throw new UsageError(`--policies: "${pair}" is not dispatch/orchestration (e.g. jsq/hpa)`);
  }
  return { dispatch: parts[0], orchestration: parts[1] };
}
