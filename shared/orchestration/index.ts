/**
 * The orchestration policies by name: one implementation of each, which the simulator (`kais
 * eval`, `kais train`) and the live orchestrator's placement loop both construct here.
 * GPG (learned) comes later (issue 16).
 */
import type { OrchestrationPolicy } from '../policy';
import type { Scenario } from '../scenario';
import { GspSsOrchestration } from './gsp-ss';
import { HpaOrchestration } from './hpa';
import { StaticOrchestration } from './static';

export const ORCHESTRATION_POLICIES = ['static', 'hpa', 'gsp-ss'] as const;
export type OrchestrationPolicyName = (typeof ORCHESTRATION_POLICIES)[number];

export function isOrchestrationPolicy(name: string): name is OrchestrationPolicyName {
  return (ORCHESTRATION_POLICIES as readonly string[]).includes(name);
}

/** A fresh policy object of that name (its period is in scenario seconds). */
export function makeOrchestrationPolicy(name: OrchestrationPolicyName, scenario: Scenario): OrchestrationPolicy {
  switch (name) {
    case 'static':
      return new StaticOrchestration();
    case 'hpa':
      return new HpaOrchestration();
    case 'gsp-ss':
      return new GspSsOrchestration(scenario.slotS * scenario.slotsPerFrame);
  }
}
