/**
 * The weight gate's shadow evaluation (training/jobs/gate.ts) on a replay of synthetic live
 * arrivals: a model whose act is sample is judged sampling, reproducibly, and argmax otherwise.
 */
import { shadowEvaluate, type ShadowInput } from '../../../../training/jobs/gate';
import { initActorWeights } from '../../../../shared/nets/actor';
import { scenarioActor } from '../../../../shared/nets/actor-fit';
import { loadScenario } from '../../../../shared/scenario';
import { initialPlacement } from '../../../../shared/orchestration/placement';

const scenario = loadScenario('tiny');

function input(act?: 'argmax' | 'sample'): ShadowInput {
  const { obsDim, numActions } = scenarioActor(scenario);
  // arrivals of every service at every eAP, 40 per slot over 40 slots
  const arrivals = Array.from({ length: 1600 }, (_, i) => ({ eap: i % scenario.eaps.length, service: i % 4, slot: Math.floor(i / 40) }));
  return {
    scenario,
    candidate: { version: 2, head: 'softplus1', arrays: initActorWeights(obsDim, numActions, 11) },
    current: { version: 1, head: 'softplus1', arrays: initActorWeights(obsDim, numActions, 12) },
    arrivals,
    heuristics: ['lec'],
    seed: 5,
    seconds: 10,
    ...(act ? { act } : {}),
  };
}

describe('shadowEvaluate', () => {
  it('runs candidate and current sampling when the model acts by sampling: reproducible, and not the argmax numbers', () => {
    const strip = (r: ReturnType<typeof shadowEvaluate>) => ({ ...r, ms: 0 });
    const argmax = strip(shadowEvaluate(input()));
    expect(strip(shadowEvaluate(input('argmax')))).toEqual(argmax);
    const sample = strip(shadowEvaluate(input('sample')));
    expect(strip(shadowEvaluate(input('sample')))).toEqual(sample);
    expect(sample.requests).toBe(argmax.requests); // the same replay
    expect(sample.requests).toBeGreaterThan(1000);
    expect(sample.heuristic).toEqual(argmax.heuristic); // heuristics do not read it
    expect([sample.candidate, sample.current]).not.toEqual([argmax.candidate, argmax.current]);
  });

  it('replays on the placement given (held, every replica ready), says so, and on the initial one when none is given or it cannot be held', () => {
    const strip = (r: ReturnType<typeof shadowEvaluate>) => ({ ...r, ms: 0 });
    const before = strip(shadowEvaluate(input()));
    expect(before.placement).toBe('initial');
    // the initial placement given is the same replay: a replay shorter than a frame never reaches hpa's first decision
    expect(strip(shadowEvaluate({ ...input(), placement: initialPlacement(scenario) }))).toEqual({ ...before, placement: 'live' });
    // no edge replica at all: every request goes to the cloud, and every policy makes the same
    const none = scenario.services.map(() => [0, 0, 0]);
    const cloud = shadowEvaluate({ ...input(), placement: none });
    expect(cloud.placement).toBe('live');
    expect(cloud.candidate).toBe(cloud.current);
    expect(cloud.heuristic.rate).toBe(cloud.candidate);
    expect(cloud.candidate).not.toBe(before.candidate);
    // one the scenario cannot hold: not used, and why
    const bad = strip(shadowEvaluate({ ...input(), placement: [[1, 2]] }));
    expect(bad).toEqual({
      ...before,
      placementProblem: 'd: must be 4 rows (one per service) of 3 non-negative integers (one per edge node)',
    });
  });
});
