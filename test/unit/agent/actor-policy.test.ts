import { performance } from 'perf_hooks';
import { loadScenario, topologyOf } from '../../../shared/scenario';
import { initActorWeights } from '../../../shared/nets/actor';
import { Rng } from '../../../shared/rng';
import { CmmacDispatch, type DecisionRecorder } from '../../../agent/actor-policy';
import { observationDim } from '../../../agent/observation';
import { buildRequests } from '../../../training/workload';
import { makeOrchestration } from '../../../training/baselines/registry';
import { runEpisode, percentile } from '../../../training/jobs/rollout';
import { EdgeCloudEnv } from '../../../training/sim/env';

function setup(name: string, mode: 'sample' | 'argmax', rng?: Rng) {
  const scenario = loadScenario(name);
  const topo = topologyOf(scenario);
  const shape = { numServices: topo.numServices, numTargets: topo.numNodes + 1, numEaps: topo.numEaps };
  const weights = initActorWeights(observationDim(shape), shape.numTargets, 42);
  const policy = new CmmacDispatch({ shape, queueCapPerReplica: scenario.queueCapPerReplica, weights, mode, rng });
  return { scenario, policy, shape, weights };
}

describe('cmmac dispatch policy', () => {
  it('only chooses targets the mask allows over a whole episode, in both modes', () => {
    for (const mode of ['sample', 'argmax'] as const) {
      const { scenario, policy } = setup('small', mode);
      const requests = buildRequests({ scenario, workload: 'p4', seed: 2, load: 1, durationS: 25 });
      // rollout's env throws on an illegal action
      const r = runEpisode({ scenario, requests, frames: 1, seed: 2, dispatch: policy, orchestration: makeOrchestration('hpa', scenario) });
      expect(r.arrived).toBeGreaterThan(0);
      expect(r.policy).toBe('cmmac/hpa');
    }
  });

  it('samples the same actions from the same seed', () => {
    const run = () => {
      const { scenario, policy } = setup('small', 'sample');
      const requests = buildRequests({ scenario, workload: 'p4', seed: 5, load: 1, durationS: 25 });
      return runEpisode({ scenario, requests, frames: 1, seed: 5, dispatch: policy, orchestration: makeOrchestration('static', scenario) });
    };
    expect(run()).toEqual(run());
  });

  it('records obs, mask, action and the log-probability of every decision when a recorder is attached', () => {
    const { scenario, policy, shape } = setup('small', 'sample', new Rng(9));
    const got: { obs: Float32Array; mask: Uint8Array; action: number; logProb: number }[] = [];
    const rec: DecisionRecorder = {
      record: (obs, mask, action, logProb) => got.push({ obs: obs.slice(), mask: mask.slice(), action, logProb }),
    };
    policy.recorder = rec;
    const requests = buildRequests({ scenario, workload: 'p4', seed: 5, load: 1, durationS: 10 });
    const env = new EdgeCloudEnv(scenario, { requests, frames: 1 });
    let { observations } = env.reset({ seed: 5 });
    let decisions = 0;
    while (!env.isDone && decisions < 300) {
      const items = env.agents.map((b) => observations[b]);
      policy.decideBatch(items, env.view);
      decisions += items.length;
      const actions: number[] = [];
      for (const it of items) actions[it.eap] = it.action;
      observations = env.step(actions).observations;
    }
    expect(got.length).toBe(decisions);
    for (const g of got) {
      expect(g.obs.length).toBe(observationDim(shape));
      expect(g.mask[g.action]).toBe(1);
      expect(g.logProb).toBeLessThanOrEqual(0);
      expect(g.logProb).toBeGreaterThan(-Math.log(1e6));
    }
  });

  it('with a light actor, decides by argmax with it in the frames the orchestration names light (through either view), records which actor decided, and draws (sample mode) only where the main one decides', () => {
    const scenario = loadScenario('small');
    const topo = topologyOf(scenario);
    const shape = { numServices: topo.numServices, numTargets: topo.numNodes + 1, numEaps: topo.numEaps };
    const main = initActorWeights(observationDim(shape), shape.numTargets, 42);
    const other = initActorWeights(observationDim(shape), shape.numTargets, 7);
    const make = (w: Float32Array[], light: Float32Array[] | null, lights: boolean[] = []) => {
      const p = new CmmacDispatch({ shape, queueCapPerReplica: scenario.queueCapPerReplica, weights: w, mode: 'argmax' });
      p.setLightWeights(light);
      p.recorder = { record: (_o, _m, _a, _l, _e, light) => lights.push(light === true) };
      return p;
    };
    const frameS = scenario.slotS * scenario.slotsPerFrame;
    // a placement that never changes, naming one actor (as a placement frame's `actor`)
    const naming = (slot: 'main' | 'light' | undefined) => ({ name: 'static', periodS: frameS, decide: () => [], actorFor: () => slot });
    const requests = buildRequests({ scenario, workload: 'p4', seed: 3, load: 1, durationS: 2 * frameS });
    for (const view of ['agent', 'global'] as const) {
      const run = (dispatch: CmmacDispatch, slot: 'main' | 'light' | undefined) =>
        runEpisode({ scenario, requests, frames: 2, seed: 3, dispatch, orchestration: naming(slot), view });
      const lights: boolean[] = [];
      const asLight = run(make(main, other, lights), 'light');
      expect(asLight).toEqual(run(make(other, null), undefined));
      expect(lights.length).toBeGreaterThan(0);
      expect(lights.every((l) => l)).toBe(true);
      const mains: boolean[] = [];
      const asMain = run(make(main, other, mains), 'main');
      expect(asMain).toEqual(run(make(main, null), undefined));
      expect(mains.some((l) => l)).toBe(false);
      // the two actors decide differently here, so the switch is seen in the results
      expect(asLight.throughputRate).not.toBe(asMain.throughputRate);
      // a placement naming light to a policy without a light actor: the main one decides
      expect(run(make(main, null), 'light')).toEqual(asMain);
      // in sample mode (an agent's explored decisions) the light actor still decides by argmax; only the main actor draws
      const sampled = (w: Float32Array[], light: Float32Array[] | null, lights: boolean[] = []) => {
        const p = make(w, light, lights);
        p.mode = 'sample';
        return p;
      };
      const drawnLight: boolean[] = [];
      expect(run(sampled(main, other, drawnLight), 'light')).toEqual(asLight);
      expect(drawnLight.every((l) => l)).toBe(true);
      expect(run(sampled(main, other), 'main')).toEqual(run(sampled(main, null), undefined));
      expect(run(sampled(main, other), 'main')).not.toEqual(asMain);
    }
  });

  it('decides a batch-1 request with mask in well under 1 ms on the kais scenario (median; the p99, which depends on machine load, is measured by npm run bench)', () => {
    const { scenario, policy } = setup('kais', 'argmax');
    const requests = buildRequests({ scenario, workload: 'p4', seed: 1, load: 1, durationS: 10 });
    const env = new EdgeCloudEnv(scenario, { requests, frames: 1, orchestration: makeOrchestration('hpa', scenario) });
    let { observations } = env.reset({ seed: 1 });
    const us: number[] = [];
    while (!env.isDone && us.length < 3000) {
      const actions: number[] = [];
      for (const b of env.agents) {
        const t0 = performance.now();
        actions[b] = policy.decide(observations[b], env.view);
        us.push((performance.now() - t0) * 1000);
      }
      observations = env.step(actions).observations;
    }
    const p50 = percentile(Float64Array.from(us.slice(200)), 0.5);
    expect(p50).toBeLessThan(1000);
  });

  it('swaps in new weights with a version', () => {
    const { policy, shape, weights } = setup('tiny', 'argmax');
    expect(policy.version).toBe(0);
    policy.setWeights(
      7,
      weights.map((w) => w.map(() => 0)),
    );
    expect(policy.version).toBe(7);
    expect(() => policy.setWeights(8, weights.slice(1))).toThrow(TypeError);
    void shape;
  });
});
