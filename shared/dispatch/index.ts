/**
 * The dispatch heuristics by name: one home for the simulator (`kais eval --policies jsq/hpa`,
 * through training/baselines/registry.ts) and the live agent (`kais agent --policy jsq`), so both
 * run the same code. `cmmac`, the learned actor, is not here: it needs weights (shared/nets,
 * agent/actor-policy.ts, training/jobs/checkpoint.ts).
 */
import { UsageError } from '../errors';
import type { ClusterView, DispatchItem, DispatchPolicy } from '../policy';
import { Rng } from '../rng';
import type { Scenario } from '../scenario';
import { LecDispatch } from './lec';
import { OnSocMaxDispatch } from './onsocmax';
import { ProbDispatch } from './prob';
import { GreedyDispatch, JsqDispatch, P2cDispatch, RandomDispatch, RoundRobinDispatch } from './simple';

export { LecDispatch, OnSocMaxDispatch, ProbDispatch, GreedyDispatch, JsqDispatch, P2cDispatch, RandomDispatch, RoundRobinDispatch };

export const DISPATCH_HEURISTICS = ['random', 'round-robin', 'jsq', 'p2c', 'greedy', 'onsocmax', 'prob', 'lec'] as const;
export type DispatchHeuristicName = (typeof DISPATCH_HEURISTICS)[number];

/** What `kais agent --policy` / `kais up --policy` accept: the learned actor or a heuristic. */
export const LIVE_POLICIES = ['cmmac', ...DISPATCH_HEURISTICS] as const;
export type LivePolicyName = (typeof LIVE_POLICIES)[number];

export function isDispatchHeuristic(name: string): name is DispatchHeuristicName {
  return (DISPATCH_HEURISTICS as readonly string[]).includes(name);
}

/** A fresh instance of a heuristic; the scenario gives onsocmax its queue cap and prob its frame length. */
export function makeHeuristicDispatch(
  name: DispatchHeuristicName,
  scenario: Pick<Scenario, 'queueCapPerReplica' | 'slotS' | 'slotsPerFrame'>,
): DispatchPolicy {
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
  }
}

/** `flag`'s value as a live policy name, or a UsageError naming the flag and the known names. */
export function checkLivePolicy(name: string, flag = '--policy'): LivePolicyName {
  if ((LIVE_POLICIES as readonly string[]).includes(name)) return name as LivePolicyName;
  throw new UsageError(`${flag}: unknown policy "${name}" (known: ${LIVE_POLICIES.join(', ')})`);
}

/**
 * The seed eAP `eap`'s agent gives its policy's reset(seed, view) for a run seed (`kais agent
 * --seed`, `kais up --seed`): each agent holds its own instance, so each gets its own stream.
 */
export function agentPolicySeed(seed: number, eap: number): number {
  return Rng.derive(seed, `agent/eap ${eap}`).nextU32();
}

/**
 * One instance of a heuristic per eAP, each reset with its agent's seed (agentPolicySeed): the
 * live deployment (one `kais agent` per eAP) inside the simulator, for `kais up`'s prediction.
 * For the stateless heuristics (jsq, lec, greedy, onsocmax) and round-robin (its cursor is per
 * eAP and service anyway) the decisions are those of one shared instance; random and p2c draw
 * from per-eAP streams; prob counts each eAP's own arrivals (see docs/runtime.md).
 */
export class PerEapDispatch implements DispatchPolicy {
  readonly name: string;
  private instances: DispatchPolicy[] = [];
  constructor(private readonly make: () => DispatchPolicy) {
    this.name = make().name;
  }
  reset(seed: number, view: ClusterView): void {
    this.instances = Array.from({ length: view.numEaps }, (_, b) => {
      const p = this.make();
      p.reset?.(agentPolicySeed(seed, b), view);
      return p;
    });
  }
  decide(item: DispatchItem, view: ClusterView): number {
    return this.instances[item.eap].decide(item, view);
  }
}
