import { validateScenario } from '../../../../shared/scenario';
import type { Request, ScaleOp } from '../../../../shared/domain';
import type { OrchestrationPolicy } from '../../../../shared/policy';
import { EdgeCloudEnv } from '../../../../training/sim/env';
import { Timeline, EventType } from '../../../../training/sim/timeline';
import { RequestQueue } from '../../../../training/sim/queue';

/** 1 eAP with one 1-core node, one 1-core service; 10 ms links, no bandwidth cost worth counting. */
function scenario(over: Record<string, unknown> = {}) {
  return validateScenario(
    {
      name: 'unit',
      slotS: 0.25,
      slotsPerFrame: 4,
      scaleNodesPerFrame: 2,
      eaps: [{ nodes: [{ cpuCores: 1, memGB: 1 }] }],
      cloud: { vms: 1, vcpuPerVm: 1, memGBPerVm: 4 },
      network: {
        deviceToEap: { latencyMs: 10, mbps: 1e9 },
        eapToOwnNode: { latencyMs: 10, mbps: 1e9 },
        eapToOtherNode: { latencyMs: 10, mbps: 1e9 },
        edgeToCloud: { latencyMs: 100, mbps: 1e9 },
      },
      services: [{ cpuCores: 1, memGB: 0.5 }],
      replicaStartupS: 0.5,
      initialReplicasPerEap: 1,
      maxReplicasPerService: 4,
      queueCapPerReplica: 100,
      dispatchBudgetPerSlot: 10,
      workload: { ratePerS: 1, inputMB: 0, deadlineBaseS: 1, deadlineSlack: 1 },
      ...over,
    },
    'unit',
  );
}

function req(id: number, arrivalS: number, workCoreS: number, deadlineS: number): Request {
  return { id, service: 0, eap: 0, arrivalS, deadlineS, workCoreS, inputMB: 0 };
}

/** Runs an episode sending every request to `target`. */
function run(env: EdgeCloudEnv, target = 0) {
  let { observations } = env.reset({ seed: 1 });
  while (!env.isDone) {
    const acts: Record<number, number> = {};
    for (const b of env.agents) acts[b] = observations[b].mask[target] ? target : env.cluster.cloudTarget;
    observations = env.step(acts).observations;
  }
  return env;
}

describe('EdgeCloudEnv', () => {
  it('dispatches on arrival and completes a request after upload, transfer, processing and return', () => {
    // sent at 0.1, at the eAP (and dispatched) at 0.11, at the node at 0.12, done at 0.22, back at
    // the device at 0.24: no wait for a slot boundary (edge-cloud-v2)
    const env = run(new EdgeCloudEnv(scenario(), { requests: [req(0, 0.1, 0.1, 0.24)], frames: 1 }));
    expect(env.outcome).toEqual({ arrived: 1, completedInTime: 1, late: 0, dropped: 0, queuedAtEnd: 0 });
    expect(env.latencyS[0]).toBeCloseTo(0.14, 9);
  });

  it('counts a request that starts in time but finishes after its deadline as late', () => {
    // starts at 0.12 (0.21 was the last useful start), back at 0.24 > 0.23
    const env = run(new EdgeCloudEnv(scenario(), { requests: [req(0, 0.1, 0.1, 0.23)], frames: 1 }));
    expect(env.outcome.late).toBe(1);
    expect(env.outcome.completedInTime).toBe(0);
  });

  it('releases CPU on completion so that a waiting request starts then', () => {
    const env = run(new EdgeCloudEnv(scenario(), { requests: [req(0, 0, 0.3, 5), req(1, 0, 0.3, 5)], frames: 2 }));
    expect(env.outcome.completedInTime).toBe(2);
    const lat = Array.from(env.latencyS.subarray(0, 2)).sort();
    // both at the node at 0.02: done 0.32 and 0.62, +0.02 back
    expect(lat[0]).toBeCloseTo(0.34, 9);
    expect(lat[1]).toBeCloseTo(0.64, 9);
  });

  it('drops a queued request unserved once its result could no longer be back by the deadline', () => {
    // request 1 waits behind request 0 (0.02 .. 2.02); the 0.75 s boundary sweep finds 0.6 - 0.02 < 0.75
    const env = run(new EdgeCloudEnv(scenario(), { requests: [req(0, 0, 2, 10), req(1, 0, 0.1, 0.6)], frames: 4, nodeDequeue: 'fifo' }));
    expect(env.outcome.dropped).toBe(1);
    expect(env.outcome.completedInTime).toBe(1);
    expect(env.outcome.late).toBe(0);
  });

  it('never starts a request too late to be back in time: it is dropped when its turn comes', () => {
    // request 1 (deadline 0.43) waits behind request 0 (0.02 .. 0.42): started at 0.42 its result
    // could only be back after 0.44, so it is dropped at its turn, before any slot boundary, and
    // request 2 runs instead (0.42 .. 0.52, back at 0.54)
    const env = run(
      new EdgeCloudEnv(scenario({ slotS: 1, slotsPerFrame: 2 }), {
        requests: [req(0, 0, 0.4, 10), req(1, 0, 0.1, 0.43), req(2, 0.01, 0.1, 10)],
        frames: 1,
        nodeDequeue: 'edf',
      }),
    );
    expect(env.outcome).toEqual({ arrived: 3, completedInTime: 2, late: 0, dropped: 1, queuedAtEnd: 0 });
    expect(Array.from(env.latencyS.subarray(0, 2))).toEqual([expect.closeTo(0.44, 9), expect.closeTo(0.53, 9)]);
  });

  it('reports requests still in the system at the end as queuedAtEnd', () => {
    const env = run(new EdgeCloudEnv(scenario(), { requests: [req(0, 0, 50, 100), req(1, 0.5, 0.1, 100)], frames: 1 }));
    expect(env.outcome).toEqual({ arrived: 2, completedInTime: 0, late: 0, dropped: 0, queuedAtEnd: 2 });
  });

  it('fails the requests in service when their node fails and counts them as lost', () => {
    const env = run(
      new EdgeCloudEnv(scenario(), { requests: [req(0, 0, 0.5, 10)], frames: 2, faults: [{ node: 0, startS: 0.4, durationS: 1 }] }),
    );
    expect(env.outcome.dropped).toBe(1);
    expect(env.lostToFailedNodes).toBe(1);
  });

  it('makes a new replica serve only after its start-up delay, and deletes a busy replica only when idle', () => {
    // t=0.25: +1 (starts, ready at 0.75); t=0.5: -1 cancels the starting replica, the second -1
    // marks the busy replica draining: it leaves when its request (0.02 .. 1.02) is done
    const orders: ScaleOp[][] = [
      [{ service: 0, node: 0, delta: 1 }],
      [
        { service: 0, node: 0, delta: -1 },
        { service: 0, node: 0, delta: -1 },
      ],
    ];
    const seen: string[] = [];
    const orch: OrchestrationPolicy = {
      name: 'scripted',
      periodS: 0.25,
      decide: (v) => {
        seen.push(`${v.nowS()}:${v.readyReplicas(0, 0)}/${v.replicas(0, 0)}`);
        return orders.shift() ?? [];
      },
    };
    const s = scenario({ eaps: [{ nodes: [{ cpuCores: 2, memGB: 1 }] }] });
    const env = new EdgeCloudEnv(s, { requests: [req(0, 0, 1, 10)], frames: 2, orchestration: orch });
    env.reset({ seed: 1 });
    while (!env.isDone) {
      const acts: Record<number, number> = {};
      for (const b of env.agents) acts[b] = 0;
      env.step(acts);
    }
    expect(seen[0]).toBe('0.25:1/1');
    expect(seen[1]).toBe('0.5:1/2'); // ordered at 0.25, still starting
    expect(seen[2]).toBe('0.75:0/0'); // starting one cancelled, busy one draining
    expect(seen[5]).toBe('1.5:0/0'); // gone after its request
    expect(env.outcome.completedInTime).toBe(1);
    expect(env.scaleOps).toBe(3);
    expect(env.cluster.ready[0]).toBe(0);
    expect(env.cluster.usedMem[0]).toBeCloseTo(0, 9);
  });

  it('marks a break in the device filters of the nodes the executed orders changed, as an agent does on the new placement', () => {
    const twoNodes = scenario({
      eaps: [
        {
          nodes: [
            { cpuCores: 2, memGB: 1 },
            { cpuCores: 2, memGB: 1 },
          ],
        },
      ],
      // two services that fit on one node together
      services: [
        { cpuCores: 1, memGB: 0.25 },
        { cpuCores: 1, memGB: 0.25 },
      ],
    });
    /** 60 one-second frames; `late` orders from 50 s (the filters start after 36 s of telemetry), `early` at 0.25 s. */
    const breaksOf = (early: ScaleOp[], late: ScaleOp[][]) => {
      const orders: ScaleOp[][] = [early, ...new Array<ScaleOp[]>(198).fill([]), ...late];
      const orch: OrchestrationPolicy = { name: 'scripted', periodS: 0.25, decide: () => orders.shift() ?? [] };
      const env = new EdgeCloudEnv(twoNodes, { requests: [req(0, 0, 1, 10)], frames: 60, orchestration: orch, deviceFilters: true });
      env.reset({ seed: 1 });
      while (!env.isDone) env.step(Object.fromEntries(env.agents.map((b) => [b, env.cluster.cloudTarget])));
      return env.telemetry!.placementBreaks;
    };
    expect(breaksOf([], [[{ service: 0, node: 1, delta: 1 }]])).toBe(1);
    expect(breaksOf([], [[{ service: 0, node: 0, delta: 1 }], [], [{ service: 0, node: 0, delta: -1 }]])).toBe(2);
    // two orders on one node in one decision: one break, as the agent marks one per node of a placement
    expect(
      breaksOf(
        [],
        [
          [
            { service: 0, node: 1, delta: 1 },
            { service: 1, node: 1, delta: 1 },
          ],
        ],
      ),
    ).toBe(1);
    // before the filters have their baselines there is nothing to mark
    expect(breaksOf([{ service: 0, node: 1, delta: 1 }], [])).toBe(0);
  });

  it('throws on an action outside the mask, or sends it to the cloud when told to', () => {
    const s = scenario({ initialReplicasPerEap: 0 });
    const env = new EdgeCloudEnv(s, { requests: [req(0, 0, 0.1, 10)], frames: 1 });
    const { observations } = env.reset({ seed: 1 });
    expect(observations[0].mask[0]).toBe(0);
    expect(() => env.step({ 0: 0 })).toThrow(/mask forbids/);
    const lenient = new EdgeCloudEnv(s, { requests: [req(0, 0, 0.1, 10)], frames: 1, illegalAction: 'cloud' });
    lenient.reset({ seed: 1 });
    lenient.step({ 0: 0 });
    expect(lenient.illegalActions).toBe(1);
    expect(lenient.dispatchedToCloud).toBe(1);
  });

  it('rejects requests that are not sorted by arrival time', () => {
    expect(() => new EdgeCloudEnv(scenario(), { requests: [req(0, 1, 0.1, 10), req(1, 0, 0.1, 10)], frames: 1 })).toThrow(/sorted/);
  });
});

describe('Timeline', () => {
  it('pops events in time order and breaks ties by insertion order', () => {
    const tl = new Timeline();
    tl.push(2, EventType.Finish, 1, 0);
    tl.push(1, EventType.Finish, 2, 0);
    tl.push(1, EventType.Finish, 3, 0);
    for (let i = 0; i < 3000; i++) tl.push(5 + (i % 7), EventType.Finish, 100 + i, 0);
    const order: number[] = [];
    let last = -Infinity;
    while (tl.size > 0) {
      tl.pop();
      expect(tl.popTime).toBeGreaterThanOrEqual(last);
      last = tl.popTime;
      order.push(tl.popA);
    }
    expect(order.slice(0, 3)).toEqual([2, 3, 1]);
    expect(order.length).toBe(3003);
  });
});

describe('RequestQueue', () => {
  it('pops by key then by request index, and filter keeps heap order', () => {
    const q = new RequestQueue();
    [5, 3, 9, 1, 7].forEach((k, i) => q.push(i, k));
    q.push(10, 3);
    expect(q.filter((i) => i !== 2)).toBe(1);
    const out: number[] = [];
    while (q.size > 0) out.push(q.pop());
    expect(out).toEqual([3, 1, 10, 0, 4]);
  });
});

describe('EdgeCloudEnv options', () => {
  it('keeps the default queue order (edf) when an option is passed as undefined', () => {
    // request 0 holds the node 0.02 .. 0.52; 1 (long, deadline 10) and 2 (short, deadline 1) wait
    const reqs = () => [req(0, 0, 0.5, 10), req(1, 0.05, 2, 10), req(2, 0.06, 0.1, 1)];
    const a = run(new EdgeCloudEnv(scenario(), { requests: reqs(), frames: 4, nodeDequeue: undefined }));
    const b = run(new EdgeCloudEnv(scenario(), { requests: reqs(), frames: 4, nodeDequeue: 'edf' }));
    const f = run(new EdgeCloudEnv(scenario(), { requests: reqs(), frames: 4, nodeDequeue: 'fifo' }));
    expect(a.outcome).toEqual(b.outcome);
    expect(a.outcome.completedInTime).toBe(3); // edf serves the urgent request first
    expect(f.outcome).toEqual({ arrived: 3, completedInTime: 2, late: 0, dropped: 1, queuedAtEnd: 0 });
  });
});
