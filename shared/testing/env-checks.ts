/**
 * Conformance checks any parallel environment of ours must pass (PettingZoo's parallel_api_test and
 * seed_test, as library code). They drive the environment with a policy and throw an Error that
 * says what broke. Structural types only, so shared/ does not import the simulator.
 */
import type { DispatchItem } from '../policy';

export interface CheckableEnv {
  readonly possibleAgents: number[];
  agents: number[];
  readonly isDone: boolean;
  reset(o: { seed: number }): { observations: Record<number, DispatchItem> };
  step(actions: Record<number, number> | ArrayLike<number>): {
    observations: Record<number, DispatchItem>;
    rewards: Record<number, number>;
    terminations: Record<number, boolean>;
    truncations: Record<number, boolean>;
    infos: Record<number, unknown>;
  };
  readonly outcome: { arrived: number; completedInTime: number; late: number; dropped: number; queuedAtEnd: number };
}

export type ActFn = (item: DispatchItem) => number;

/** Keys, live agents, masks (cloud always valid, actions honoured), rewards finite, invariant at the end. */
export function parallelEnvCheck(env: CheckableEnv, act: ActFn, seed = 0, maxSteps = 1e7): { steps: number } {
  let { observations } = env.reset({ seed });
  const all = new Set(env.possibleAgents);
  let steps = 0;
  while (!env.isDone) {
    if (steps++ > maxSteps) throw new Error(`parallelEnvCheck: no end after ${maxSteps} steps`);
    const live = env.agents;
    const keys = Object.keys(observations)
      .map(Number)
      .sort((a, b) => a - b);
    if (keys.join() !== [...live].sort((a, b) => a - b).join()) {
      throw new Error(`parallelEnvCheck: observation keys [${keys}] differ from live agents [${live}]`);
    }
    const actions: Record<number, number> = {};
    for (const b of live) {
      if (!all.has(b)) throw new Error(`parallelEnvCheck: live agent ${b} is not in possibleAgents`);
      const it = observations[b];
      if (it.eap !== b) throw new Error(`parallelEnvCheck: observation of agent ${b} names eAP ${it.eap}`);
      if (it.mask[it.mask.length - 1] !== 1) throw new Error(`parallelEnvCheck: the cloud is masked out for agent ${b}`);
      const a = act(it);
      if (it.mask[a] !== 1) throw new Error(`parallelEnvCheck: the policy chose masked action ${a}`);
      actions[b] = a;
    }
    const r = env.step(actions);
    for (const k of ['rewards', 'terminations', 'truncations', 'infos'] as const) {
      const got = Object.keys(r[k])
        .map(Number)
        .sort((a, b) => a - b)
        .join();
      if (got !== [...env.possibleAgents].sort((a, b) => a - b).join()) {
        throw new Error(`parallelEnvCheck: ${k} keys [${got}] are not the possible agents`);
      }
    }
    for (const b of env.possibleAgents) {
      if (!Number.isFinite(r.rewards[b])) throw new Error(`parallelEnvCheck: reward of ${b} is ${r.rewards[b]}`);
    }
    observations = r.observations;
  }
  const o = env.outcome;
  if (o.arrived !== o.completedInTime + o.late + o.dropped + o.queuedAtEnd) {
    throw new Error(`parallelEnvCheck: accounting invariant broken: ${JSON.stringify(o)}`);
  }
  return { steps };
}

/** Two environments with the same seed and policy give identical trajectories. */
export function seedCheck(makeEnv: () => CheckableEnv, makeAct: () => ActFn, seed = 42): void {
  const trace = (): string[] => {
    const env = makeEnv();
    const act = makeAct();
    const out: string[] = [];
    let { observations } = env.reset({ seed });
    while (!env.isDone) {
      const actions: Record<number, number> = {};
      for (const b of env.agents) {
        actions[b] = act(observations[b]);
        out.push(`${b}:${observations[b].request.id}>${actions[b]}`);
      }
      const r = env.step(actions);
      out.push(env.possibleAgents.map((b) => r.rewards[b].toFixed(12)).join(','));
      observations = r.observations;
    }
    out.push(JSON.stringify(env.outcome));
    return out;
  };
  const a = trace();
  const b = trace();
  if (a.length !== b.length) throw new Error(`seedCheck: trajectories differ in length (${a.length} vs ${b.length})`);
  for (let i = 0; i < a.length; i++) {
    if (a[i] !== b[i]) throw new Error(`seedCheck: trajectories differ at step ${i}: ${a[i]} vs ${b[i]}`);
  }
}
