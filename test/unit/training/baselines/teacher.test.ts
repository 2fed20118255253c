import { DeadlineLoadDispatch, makeTrainTeacher } from '../../../../training/baselines/teacher';
import { loadScenario } from '../../../../shared/scenario';
import { buildRequests } from '../../../../training/workload';
import { EdgeCloudEnv } from '../../../../training/sim/env';
import { makeOrchestration, makeDispatch } from '../../../../training/baselines/registry';
import { RolloutBuffer } from '../../../../critic/cmmac/buffer';
import { requestOutcomes } from '../../../../training/jobs/train-learn';
import type { ClusterView, DispatchItem } from '../../../../shared/policy';

/** A view with two edge nodes and the cloud, just what the teacher and shared/eta.ts read. */
function view(o: { queue: number[]; latency: number[] }): ClusterView {
  return {
    numTargets: 3,
    cloudTarget: 2,
    nowS: () => 0,
    meanServiceS: () => 0.1,
    readyReplicas: () => 1,
    serviceQueueLen: (t: number) => o.queue[t],
    busyReplicas: () => 0,
    queueLen: (t: number) => o.queue[t],
    serviceCpuCores: () => 1,
    cpuCores: () => 4,
    transferS: (_b: number, t: number) => o.latency[t],
    returnS: () => 0,
  } as unknown as ClusterView;
}

function item(deadlineS: number): DispatchItem {
  return {
    request: { id: 0, service: 0, eap: 0, arrivalS: 0, deadlineS, workCoreS: 0.1, inputMB: 0 },
    eap: 0,
    mask: Uint8Array.from([1, 1, 1]),
    action: -1,
  };
}

describe('deadline-load teacher', () => {
  it('takes the least loaded target that meets the deadline', () => {
    const t = new DeadlineLoadDispatch();
    // node 0 is closer but loaded, node 1 is empty, the cloud is far
    expect(t.decide(item(2), view({ queue: [3, 0, 0], latency: [0, 0.01, 0.5] }))).toBe(1);
    // the empty node is too far for this deadline, the loaded one still makes it
    expect(t.decide(item(0.7), view({ queue: [3, 0, 0], latency: [0, 1, 1] }))).toBe(0);
  });

  it('sends a request no target can serve in time to the cloud', () => {
    expect(new DeadlineLoadDispatch().decide(item(0.05), view({ queue: [0, 0, 0], latency: [0, 0, 0.01] }))).toBe(2);
  });

  it("deadline-load-eta: with no target in time, the smallest eta (lec's fallback) instead of the cloud", () => {
    // nothing meets 0.75 x eta <= 0.05; node 1 has the smallest eta, the cloud is slower
    const v = view({ queue: [2, 0, 0], latency: [0, 0, 0.3] });
    expect(new DeadlineLoadDispatch().decide(item(0.05), v)).toBe(2);
    expect(makeTrainTeacher('deadline-load-eta')!.decide(item(0.05), v)).toBe(1);
    expect(makeTrainTeacher('deadline-load-eta')).toMatchObject({ margin: 0.75, etaWeight: 0.5, fallback: 'min-eta' });
  });

  it('is known by name to kais train only', () => {
    expect(makeTrainTeacher('deadline-load')?.name).toBe('deadline-load');
    expect(makeTrainTeacher('deadline-load-eta')?.name).toBe('deadline-load-eta');
    expect(makeTrainTeacher('jsq')).toBeNull();
  });
});

describe('requestOutcomes', () => {
  it('counts exactly the in-time completions the simulator counts', () => {
    const scenario = loadScenario('tiny');
    const requests = buildRequests({
      scenario,
      workload: 'p4',
      tracePath: null,
      seed: 5,
      load: 1,
      durationS: 2 * scenario.slotsPerFrame * scenario.slotS,
    });
    const env = new EdgeCloudEnv(scenario, {
      requests,
      frames: 2,
      orchestration: makeOrchestration('hpa', scenario),
      illegalAction: 'throw',
    });
    let { observations } = env.reset({ seed: 5 });
    const dispatch = makeDispatch('round-robin', scenario);
    const buf = new RolloutBuffer(1, env.view.numTargets, 1, 64);
    const actions = new Array(env.possibleAgents.length).fill(-1);
    let slot = -1;
    while (!env.isDone) {
      if (env.slotIndex !== slot) {
        buf.beginSlot(new Float32Array(1));
        slot = env.slotIndex;
      }
      const live = env.agents;
      for (const b of live) {
        actions[b] = dispatch.decide(observations[b], env.view);
        buf.record(new Float32Array(1), observations[b].mask, actions[b], 0, b);
      }
      buf.tagRequests(live.map((b) => observations[b].request.id));
      observations = env.step(actions).observations;
    }
    const out = requestOutcomes(env, buf);
    let ones = 0;
    let zeros = 0;
    for (const x of out) {
      if (x === 1) ones++;
      else if (x === 0) zeros++;
    }
    expect(env.outcome.completedInTime).toBeGreaterThan(0);
    expect(ones).toBe(env.outcome.completedInTime);
    expect(zeros).toBeLessThanOrEqual(env.outcome.late + env.outcome.dropped);
  });
});
