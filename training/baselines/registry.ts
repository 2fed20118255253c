/**
 * Policy names -> constructors. A policy pair is `dispatch/orchestration`. The dispatch heuristics
 * live in shared/dispatch/ (the live agent runs them too: `kais agent --policy`).
 */
import type { DispatchPolicy, OrchestrationPolicy } from '../../shared/policy';
import type { Scenario } from '../../shared/scenario';
import { UsageError } from '../../shared/errors';
import { DISPATCH_HEURISTICS, isDispatchHeuristic, makeHeuristicDispatch } from '../../shared/dispatch';
import { StaticOrchestration } from './orchestration/static';
import { HpaOrchestration } from './orchestration/hpa';
import { GspSsOrchestration } from './orchestration/gsp-ss';

export const DISPATCH_BASELINES = DISPATCH_HEURISTICS;
export const ORCHESTRATION_BASELINES = ['static', 'hpa', 'gsp-ss'] as const;

export function makeDispatch(name: string, scenario: Scenario): DispatchPolicy {
  if (!isDispatchHeuristic(name)) {
    throw new UsageError(`--policies: unknown dispatch policy "${name}" (known: ${DISPATCH_BASELINES.join(', ')}, cmmac)`);
  }
  return makeHeuristicDispatch(name, scenario);
}

export function makeOrchestration(name: string, scenario: Scenario): OrchestrationPolicy {
  switch (name) {
    case 'static':
      return new StaticOrchestration();
    case 'hpa':
      return new HpaOrchestration();
    case 'gsp-ss':
      return new GspSsOrchestration(scenario.slotS * scenario.slotsPerFrame);
    default:
      throw new UsageError(`--policies: unknown orchestration policy "${name}" (known: ${ORCHESTRATION_BASELINES.join(', ')}, gpg)`);
  }
}

/** Splits "a/b" and checks both halves are known. */
export function parsePolicyPair(pair: string): { dispatch: string; orchestration: string } {
  const parts = pair.split('/');
  if (parts.length !== 2 || !parts[0] || !parts[1]) {
    throw new UsageError(`--policies: "${pair}" is not dispatch/orchestration (e.g. jsq/hpa)`);
  }
  return { dispatch: parts[0], orchestration: parts[1] };
}
