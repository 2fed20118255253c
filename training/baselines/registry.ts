/**
 * Policy names -> constructors. A policy pair is `dispatch/orchestration`.
 */
import type { DispatchPolicy, OrchestrationPolicy } from '../../shared/policy';
import type { Scenario } from '../../shared/scenario';
import { UsageError } from '../../shared/errors';
import { GreedyDispatch, JsqDispatch, P2cDispatch, RandomDispatch, RoundRobinDispatch } from './dispatch/simple';
import { LecDispatch } from './dispatch/lec';
import { OnSocMaxDispatch } from './dispatch/onsocmax';
import { ProbDispatch } from './dispatch/prob';
import { StaticOrchestration } from './orchestration/static';
import { HpaOrchestration } from './orchestration/hpa';
import { GspSsOrchestration } from './orchestration/gsp-ss';

export const DISPATCH_BASELINES = ['random', 'round-robin', 'jsq', 'p2c', 'greedy', 'onsocmax', 'prob', 'lec'] as const;
export const ORCHESTRATION_BASELINES = ['static', 'hpa', 'gsp-ss'] as const;

export function makeDispatch(name: string, scenario: Scenario): DispatchPolicy {
  switch (name) {
    case 'random':
      return new RandomDispatch();
    case 'round-robin':
      return new RoundRobinDispatch();
    case 'jsq':
      return new JsqDispatch();
    case 'p2c':
      return new P2cDispatch();
    case 'greedy':
      return new GreedyDispatch();
    case 'onsocmax':
      return new OnSocMaxDispatch({ queueCapPerReplica: scenario.queueCapPerReplica });
    case 'prob':
      return new ProbDispatch(scenario.slotS * scenario.slotsPerFrame);
    case 'lec':
      return new LecDispatch();
    default:
      throw new UsageError(`--policies: unknown dispatch policy "${name}" (known: ${DISPATCH_BASELINES.join(', ')}, cmmac)`);
  }
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
