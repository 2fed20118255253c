/**
 * The simulator on a request source (requests read as the run goes) against the same requests in
 * an array, and the bound on what it keeps per request.
 */
import { loadScenario, topologyOf } from '../../../../shared/scenario';
import type { Scenario } from '../../../../shared/scenario';
import { makeDispatch, makeOrchestration } from '../../../../training/baselines/registry';
import { percentile, runEpisode } from '../../../../training/jobs/rollout';
import { EdgeCloudEnv } from '../../../../training/sim/env';
import { faultsFromRate } from '../../../../training/sim/faults';
import { TopValues, nearestRankIndex } from '../../../../training/sim/top-values';
import { buildRequests, openWorkload } from '../../../../training/workload';
import { Rng } from '../../../../shared/rng';

const tiny = loadScenario('tiny');
const small = loadScenario('small');
const frameS = (s: Scenario): number => s.slotsPerFrame * s.slotS;

describe('EdgeCloudEnv on a request source', () => {
  const cases: [string, Scenario, number, number, string[], boolean][] = [
    ['tiny', tiny, 6, 1.5, ['jsq/static', 'lec/hpa', 'random/static'], false],
    ['tiny with node failures', tiny, 6, 1.5, ['jsq/static', 'p2c/hpa'], true],
    ['small', small, 2, 1.2, ['jsq/static', 'lec/gsp-ss'], false],
    ['small with node failures', small, 2, 1.2, ['lec/hpa', 'greedy/hpa'], true],
  ];
  it.each(cases)('%s: every PolicyResult is the one of the array', (_, scenario, frames, load, pairs, withFaults) => {
    const durationS = frames * frameS(scenario);
    const wo = { scenario, workload: 'p4' as const, seed: 3, load, durationS };
    const array = buildRequests(wo);
    const source = openWorkload(wo);
    const faults = withFaults ? faultsFromRate(topologyOf(scenario).numNodes, durationS, 40 / 3600, 20, 3) : [];
    if (withFaults) expect(faults.length).toBeGreaterThan(0);
    let lost = 0;
    for (const p of pairs) {
      const [d, o] = p.split('/');
      const run = (requests: typeof array | typeof source) =>
        runEpisode({
          scenario,
          requests,
          frames,
          seed: 3,
          dispatch: makeDispatch(d, scenario),
          orchestration: makeOrchestration(o, scenario),
          faults,
        });
      const a = run(array);
      const b = run(source);
      expect(b).toEqual(a);
      expect(a.arrived).toBe(array.length);
      lost += a.lostToFailedNodes;
    }
    if (withFaults) expect(lost).toBeGreaterThan(0);
  });

  it('fifo and discounted node queues, device filters: same results from the source', () => {
    const frames = 4;
    const wo = { scenario: tiny, workload: 'mixed' as const, seed: 5, load: 2, durationS: frames * frameS(tiny) };
    const array = buildRequests(wo);
    const source = openWorkload(wo);
    for (const nodeDequeue of ['fifo', 'discounted'] as const) {
      const run = (requests: typeof array | typeof source) =>
        runEpisode({
          scenario: tiny,
          requests,
          frames,
          seed: 5,
          nodeDequeue,
          dispatch: makeDispatch('jsq', tiny),
          orchestration: makeOrchestration('hpa', tiny),
          deviceFilters: nodeDequeue === 'fifo',
        });
      expect(run(source)).toEqual(run(array));
    }
  });

  it('keeps per-request state for the requests in the system only: the ring stays small over a long run', () => {
    const frames = 160; // 70k+ requests
    const source = openWorkload({ scenario: tiny, workload: 'p4', seed: 1, load: 1, durationS: frames * frameS(tiny) });
    const env = new EdgeCloudEnv(tiny, { requests: source, frames, orchestration: makeOrchestration('hpa', tiny) });
    const policy = makeDispatch('jsq', tiny);
    let { observations } = env.reset({ seed: 1 });
    policy.reset?.(1, env.view);
    const acts: number[] = [-1];
    let maxLive = 0;
    let decisions = 0;
    let lastId = -1;
    let idsInOrder = true;
    while (!env.isDone) {
      for (const b of env.agents) {
        acts[b] = policy.decide(observations[b], env.view);
        // the request handed to the policy carries its index in arrival order (eAP arrival order can differ a little)
        const id = observations[b].request.id;
        if (!(id >= 0 && id < source.count)) idsInOrder = false;
        lastId = Math.max(lastId, id);
      }
      observations = env.step(acts).observations;
      if (env.liveRequestSlots > maxLive) maxLive = env.liveRequestSlots;
      decisions++;
    }
    expect(idsInOrder).toBe(true);
    expect(lastId).toBeLessThan(env.outcome.arrived);
    expect(lastId).toBeGreaterThan(env.outcome.arrived - 50); // the last few may still be uploading at the end
    expect(env.outcome.arrived).toBeGreaterThan(70_000);
    expect(decisions).toBeGreaterThan(env.outcome.arrived - 50);
    // tiny takes ~18 requests/s; a request stays a few seconds at most
    expect(maxLive).toBeLessThanOrEqual(env.requestSlotCapacity);
    expect(env.requestSlotCapacity).toBeLessThanOrEqual(2048);
    if (process.env.KAIS_DEBUG) process.stderr.write(`live slots max ${maxLive}, capacity ${env.requestSlotCapacity}\n`);
    expect(env.latencyS.length).toBe(0); // a source keeps no list of latencies
    // requestOutcome still answers for every request of the episode
    let inTime = 0;
    let resolved = 0;
    for (let i = 0; i < env.outcome.arrived; i++) {
      const o = env.requestOutcome(i);
      if (o === 1) inTime++;
      if (!Number.isNaN(o)) resolved++;
    }
    expect(inTime).toBe(env.outcome.completedInTime);
    expect(resolved).toBe(env.outcome.completedInTime + env.outcome.late + env.outcome.dropped);
  });

  it('grows the ring when many requests are in the system at once, with the same results', () => {
    const frames = 1;
    const wo = { scenario: small, workload: 'p1' as const, seed: 6, load: 6, durationS: frames * frameS(small) };
    const run = (requests: ReturnType<typeof buildRequests> | ReturnType<typeof openWorkload>) => {
      const env = new EdgeCloudEnv(small, { requests, frames, orchestration: makeOrchestration('static', small) });
      const policy = makeDispatch('round-robin', small);
      let { observations } = env.reset({ seed: 6 });
      policy.reset?.(6, env.view);
      const acts: number[] = [];
      while (!env.isDone) {
        for (const b of env.agents) acts[b] = policy.decide(observations[b], env.view);
        observations = env.step(acts).observations;
      }
      return {
        env,
        figures: { ...env.outcome, sum: env.latencySumS, p99: env.answeredP99S(), frames: env.frames, lost: env.lostToFailedNodes },
      };
    };
    const a = run(buildRequests(wo));
    const b = run(openWorkload(wo));
    expect(b.env.requestSlotCapacity).toBeGreaterThan(1024);
    expect(b.figures).toEqual(a.figures);
  });

  it('the p99 of the answered waits equals the sorted-list percentile', () => {
    const frames = 8;
    const requests = buildRequests({ scenario: tiny, workload: 'p4', seed: 2, load: 2.5, durationS: frames * frameS(tiny) });
    const env = new EdgeCloudEnv(tiny, { requests, frames, orchestration: makeOrchestration('static', tiny) });
    const policy = makeDispatch('random', tiny);
    let { observations } = env.reset({ seed: 2 });
    policy.reset?.(2, env.view);
    const acts: number[] = [-1];
    while (!env.isDone) {
      for (const b of env.agents) acts[b] = policy.decide(observations[b], env.view);
      observations = env.step(acts).observations;
    }
    expect(env.droppedCount).toBeGreaterThan(0);
    const all = new Float64Array(env.latencyCount + env.droppedCount);
    all.set(env.latencyS.subarray(0, env.latencyCount));
    all.set(env.droppedWaitS.subarray(0, env.droppedCount), env.latencyCount);
    let sum = 0;
    for (let i = 0; i < env.latencyCount; i++) sum += env.latencyS[i];
    expect(env.latencySumS).toBe(sum);
    expect(env.answeredP99S()).toBe(percentile(all, 0.99));
  });
});

describe('TopValues', () => {
  it('gives the nearest-rank quantile of any prefix up to its bound, exactly', () => {
    const rng = new Rng(11);
    for (const n of [1, 2, 99, 100, 101, 1000, 4321]) {
      const top = new TopValues(0.99, n);
      const xs: number[] = [];
      for (let i = 0; i < n; i++) {
        const x = i % 10 === 0 ? 1 : Math.exp(rng.normal()); // ties too
        xs.push(x);
        top.push(x);
        if (i % 97 === 0 || i === n - 1) expect(top.quantile()).toBe(percentile(Float64Array.from(xs), 0.99));
      }
    }
    expect(new TopValues(0.99, 10).quantile()).toBe(0);
    expect(nearestRankIndex(100, 0.99)).toBe(98);
  });

  it('refuses to answer beyond its bound rather than answer wrong', () => {
    const top = new TopValues(0.99, 100);
    for (let i = 0; i < 1000; i++) top.push(-i); // decreasing: the kept values are the first ones
    expect(() => top.quantile()).toThrow(/bound/);
  });
});
