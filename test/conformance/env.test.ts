import { BUILT_IN_SCENARIOS, loadScenario } from '../../shared/scenario';
import { parallelEnvCheck, seedCheck } from '../../shared/testing/env-checks';
import { EdgeCloudEnv } from '../../training/sim/env';
import { faultsFromRate } from '../../training/sim/faults';
import { makeDispatch, makeOrchestration } from '../../training/baselines/registry';
import { buildRequests } from '../../training/workload';
import { Rng } from '../../shared/rng';
import type { DispatchItem } from '../../shared/policy';

function randomValid(seed: number) {
  const rng = new Rng(seed);
  return (it: DispatchItem): number => {
    const valid: number[] = [];
    it.mask.forEach((m, t) => m && valid.push(t));
    return valid[rng.int(valid.length)];
  };
}

describe.each(BUILT_IN_SCENARIOS)('the %s scenario', (name) => {
  const scenario = loadScenario(name);
  const frames = name === 'large' ? 1 : 2;
  const durationS = frames * scenario.slotsPerFrame * scenario.slotS;
  const requests = buildRequests({ scenario, workload: 'p4', seed: 3, load: 1.5, durationS });
  const make = (withHpa = true) =>
    new EdgeCloudEnv(scenario, {
      requests,
      frames,
      orchestration: withHpa ? makeOrchestration('hpa', scenario) : undefined,
      faults: faultsFromRate(
        scenario.eaps.reduce((s, e) => s + e.nodes.length, 0),
        durationS,
        1 / 60,
        10,
        3,
      ),
    });

  it('passes the parallel API check with random valid actions, faults and hpa', () => {
    const env = make();
    const { steps } = parallelEnvCheck(env, randomValid(1), 3);
    expect(steps).toBeGreaterThan(0);
    expect(env.outcome.arrived).toBe(requests.length);
  });

  it('gives identical trajectories for the same seed', () => {
    expect(() =>
      seedCheck(
        () => make(),
        () => randomValid(5),
        11,
      ),
    ).not.toThrow();
  });

  it('keeps the accounting invariant for every baseline dispatcher', () => {
    for (const d of ['random', 'round-robin', 'jsq', 'p2c', 'greedy', 'onsocmax', 'prob', 'lec']) {
      const env = make(false);
      const policy = makeDispatch(d, scenario);
      const { observations: first } = env.reset({ seed: 2 });
      policy.reset?.(2, env.view);
      let obs = first;
      while (!env.isDone) {
        const acts: Record<number, number> = {};
        for (const b of env.agents) acts[b] = policy.decide(obs[b], env.view);
        obs = env.step(acts).observations;
      }
      const o = env.outcome;
      expect(o.arrived).toBe(o.completedInTime + o.late + o.dropped + o.queuedAtEnd);
      expect(o.completedInTime).toBeGreaterThan(0);
    }
  });
});
