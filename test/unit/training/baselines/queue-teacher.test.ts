import { QueueLookaheadDispatch } from '../../../../training/baselines/queue-teacher';
import { DeadlineLoadDispatch, makeTrainTeacher } from '../../../../training/baselines/teacher';
import { loadScenario } from '../../../../shared/scenario';
import { buildRequests } from '../../../../training/workload';
import { makeOrchestration } from '../../../../training/baselines/registry';
import { runEpisode } from '../../../../training/jobs/rollout';
import type { ClusterView, DispatchItem } from '../../../../shared/policy';
import { simulatorInsight } from '../../../../training/sim/cluster';

/** Two edge nodes and the cloud, one service, with the simulator's queues (ids and deadline keys). */
function simView(queues: { ids: number[]; keys: number[] }[], o: { latency?: number[]; failed?: number[] } = {}): ClusterView {
  const latency = o.latency ?? [0, 0, 0.5];
  return {
    numTargets: 3,
    cloudTarget: 2,
    numServices: 1,
    // the simulator's public insight (training/sim/cluster.ts SimulatorInsight)
    queuedRequests: (t: number) => ({
      items: Int32Array.from(queues[t].ids),
      keys: Float64Array.from(queues[t].keys),
      size: queues[t].ids.length,
    }),
    isDown: (t: number) => (o.failed ?? [0, 0, 0])[t] === 1,
    nowS: () => 0,
    meanServiceS: () => 0.1,
    readyReplicas: () => 1,
    serviceQueueLen: (t: number) => queues[t].ids.length,
    busyReplicas: () => 0,
    queueLen: (t: number) => queues[t].ids.length,
    serviceCpuCores: () => 1,
    cpuCores: () => 1,
    transferS: (_b: number, t: number) => latency[t],
    returnS: () => 0,
  } as unknown as ClusterView;
}

function item(id: number, deadlineS: number, workCoreS = 0.1, mask = [1, 1, 1]): DispatchItem {
  return {
    request: { id, service: 0, eap: 0, arrivalS: 0, deadlineS, workCoreS, inputMB: 0 },
    eap: 0,
    mask: Uint8Array.from(mask),
    action: -1,
  };
}

const sim = (v: ClusterView) => simulatorInsight(v)!;

describe('queue-lookahead teacher', () => {
  it('waits only for the queued requests with an earlier deadline, and counts the ones it makes late', () => {
    const t = new QueueLookaheadDispatch();
    // node 0: two later-deadline requests (0.28); node 1: one earlier (0.05)
    const v = simView([
      { ids: [10, 11], keys: [0.28, 0.28] },
      { ids: [12], keys: [0.05] },
      { ids: [], keys: [] },
    ]);
    const it = item(1, 0.25);
    // node 0: first in line, done after its own 0.1 s; the second request behind it goes from 0.2 to 0.3 > 0.28
    expect(t.lookahead(sim(v), v, it, 0)).toEqual({ done: expect.closeTo(0.1, 9), harm: 1 });
    // node 1: behind the 0.1 s of the earlier request
    expect(t.lookahead(sim(v), v, it, 1)).toEqual({ done: expect.closeTo(0.2, 9), harm: 0 });
    // a failed node never completes
    const f = simView(
      [
        { ids: [], keys: [] },
        { ids: [], keys: [] },
        { ids: [], keys: [] },
      ],
      { failed: [1, 0, 0] },
    );
    expect(t.lookahead(sim(f), f, it, 0).done).toBe(Infinity);
  });

  it('finds an edge node in time where the FIFO eta (deadline-load) sees none', () => {
    // three queued requests with later deadlines at node 0, node 1 masked out, the cloud too far
    const v = simView([
      { ids: [10, 11, 12], keys: [10, 10, 10] },
      { ids: [], keys: [] },
      { ids: [], keys: [] },
    ]);
    expect(new DeadlineLoadDispatch().decide(item(1, 0.15, 0.1, [1, 0, 1]), v)).toBe(2);
    expect(new QueueLookaheadDispatch({ margin: 1 }).decide(item(1, 0.15, 0.1, [1, 0, 1]), v)).toBe(0);
  });

  it('counts the requests it sent in the same slot as queued (in flight)', () => {
    const t = new QueueLookaheadDispatch({ margin: 1 });
    const v = simView([
      { ids: [], keys: [] },
      { ids: [], keys: [] },
      { ids: [], keys: [] },
    ]);
    expect(t.decide(item(1, 0.15, 0.1, [1, 0, 1]), v)).toBe(0);
    // request 1 (deadline 0.15) is on its way to node 0: a later request waits behind it, an earlier one makes it late
    expect(t.lookahead(sim(v), v, item(2, 0.5), 0)).toEqual({ done: expect.closeTo(0.2, 9), harm: 0 });
    expect(t.lookahead(sim(v), v, item(3, 0.12), 0)).toEqual({ done: expect.closeTo(0.1, 9), harm: 1 });
    t.reset();
    expect(t.lookahead(sim(v), v, item(2, 0.5), 0).done).toBeCloseTo(0.1, 9);
  });

  it('uses the true work, the relative deadline or the mean for its own processing time', () => {
    const v = simView([
      { ids: [], keys: [] },
      { ids: [], keys: [] },
      { ids: [], keys: [] },
    ]);
    const it = item(1, 0.4 + 4 * 0.3, 0.05); // relative deadline of a 0.3 s request, true work 0.05 core-s
    expect(new QueueLookaheadDispatch().lookahead(sim(v), v, it, 0).done).toBeCloseTo(0.05, 9);
    expect(new QueueLookaheadDispatch({ ownWork: 'deadline' }).lookahead(sim(v), v, it, 0).done).toBeCloseTo(0.3, 9);
    expect(new QueueLookaheadDispatch({ ownWork: 'mean' }).lookahead(sim(v), v, it, 0).done).toBeCloseTo(0.1, 9);
  });

  it("queueWork deadline: the queued requests' work from their relative deadlines; useQueues false: eta with its own processing time", () => {
    const t = new QueueLookaheadDispatch({ queueWork: 'deadline' });
    const v = simView([
      { ids: [], keys: [] },
      { ids: [], keys: [] },
      { ids: [], keys: [] },
    ]);
    // request 1 (relative deadline of a 0.2 s request, true work 0.05) is sent to node 0 and in flight
    expect(t.decide(item(1, 0.4 + 4 * 0.2, 0.05, [1, 0, 1]), v)).toBe(0);
    // a later-deadline request waits 0.2 s for it (true work would say 0.05 s), then its own 0.1 s
    expect(t.lookahead(sim(v), v, item(2, 5), 0).done).toBeCloseTo(0.3, 9);
    expect(new QueueLookaheadDispatch().lookahead(sim(v), v, item(2, 5), 0).done).toBeCloseTo(0.1, 9);
    // without the queues: FIFO eta of shared/eta.ts (3 ahead x 0.1 + 0.1) with 0.1 replaced by the true 0.02
    const q = simView(
      [
        { ids: [10, 11, 12], keys: [10, 10, 10] },
        { ids: [], keys: [] },
        { ids: [], keys: [] },
      ],
      { latency: [0, 0, 2] },
    );
    // in time only with the own work (0.3 + 0.02 <= 0.35), not with the mean (0.4)
    expect(new QueueLookaheadDispatch({ useQueues: false, margin: 1 }).decide(item(3, 0.35, 0.02, [1, 0, 1]), q)).toBe(0);
    expect(new QueueLookaheadDispatch({ useQueues: false, margin: 1, ownWork: 'mean' }).decide(item(3, 0.35, 0.02, [1, 0, 1]), q)).toBe(2);
  });

  it('is a named train teacher, valid and reproducible on the simulator', () => {
    expect(makeTrainTeacher('queue-lookahead')).toMatchObject({
      name: 'queue-lookahead',
      o: { margin: 1, busyFrac: 0.25, ownWork: 'true' },
    });
    expect(makeTrainTeacher('queue-lookahead-deadline')).toMatchObject({ o: { ownWork: 'deadline' } });
    const scenario = loadScenario('tiny');
    const frames = 2;
    const requests = buildRequests({
      scenario,
      workload: 'p4',
      tracePath: null,
      seed: 7,
      load: 1,
      durationS: frames * scenario.slotsPerFrame * scenario.slotS,
    });
    // illegalAction 'throw' inside runEpisode: every choice is in the mask
    const run = () =>
      runEpisode({
        scenario,
        requests,
        frames,
        seed: 7,
        dispatch: makeTrainTeacher('queue-lookahead')!,
        orchestration: makeOrchestration('hpa', scenario),
        nodeDequeue: 'discounted',
      });
    const a = run();
    expect(a.arrived).toBeGreaterThan(0);
    expect(run()).toEqual(a);
  });
});
