/**
 * `agentViews` (kais eval --view agent): each eAP's policy decides on the live agent's information
 * model, and a full edge node answers 503 so the agent retries on the cloud.
 */
import { loadScenario, validateScenario } from '../../../../shared/scenario';
import type { Request } from '../../../../shared/domain';
import type { DispatchItem } from '../../../../shared/policy';
import { parallelEnvCheck, seedCheck } from '../../../../shared/testing/env-checks';
import { EdgeCloudEnv } from '../../../../training/sim/env';
import { makeDispatch, makeOrchestration } from '../../../../training/baselines/registry';
import { runEpisode } from '../../../../training/jobs/rollout';
import { buildRequests } from '../../../../training/workload';

/** 2 eAPs with one 1-core node each, one 1-core service, one replica per eAP, room for 1 queued request per replica. */
function twoEaps() {
  return validateScenario(
    {
      name: 'unit',
      slotS: 0.25,
      slotsPerFrame: 4,
      scaleNodesPerFrame: 2,
      eaps: [{ nodes: [{ cpuCores: 1, memGB: 1 }] }, { nodes: [{ cpuCores: 1, memGB: 1 }] }],
      cloud: { vms: 1, vcpuPerVm: 4, memGBPerVm: 4 },
      network: {
        deviceToEap: { latencyMs: 10, mbps: 1e9 },
        eapToOwnNode: { latencyMs: 10, mbps: 1e9 },
        eapToOtherNode: { latencyMs: 10, mbps: 1e9 },
        edgeToCloud: { latencyMs: 50, mbps: 1e9 },
      },
      services: [{ cpuCores: 1, memGB: 0.5 }],
      replicaStartupS: 0.5,
      initialReplicasPerEap: 1,
      maxReplicasPerService: 4,
      queueCapPerReplica: 1,
      workload: { ratePerS: 1, inputMB: 0, deadlineBaseS: 1, deadlineSlack: 1 },
    },
    'unit',
  );
}

function req(id: number, eap: number, arrivalS: number, workCoreS: number, deadlineS: number): Request {
  return { id, service: 0, eap, arrivalS, deadlineS, workCoreS, inputMB: 0 };
}

describe('EdgeCloudEnv with agentViews', () => {
  it("an eAP does not see another eAP's requests: it sends to a node that is full, the node answers 503 and the agent retries on the cloud", () => {
    // eAP 1 sends two long requests to node 0 (one runs, one waits: full at 1 x 1 replica); then
    // eAP 0, whose own view of node 0 is empty, sends there too
    const requests = [req(0, 1, 0, 2, 10), req(1, 1, 0.01, 2, 10), req(2, 0, 0.1, 0.1, 10)];
    const run = (agentViews: boolean) => {
      const env = new EdgeCloudEnv(twoEaps(), { requests, frames: 8, agentViews });
      let { observations } = env.reset({ seed: 1 });
      const masks: string[] = [];
      while (!env.isDone) {
        const acts: Record<number, number> = {};
        for (const b of env.agents) {
          masks.push(`${observations[b].request.id}:${Array.from(observations[b].mask).join('')}`);
          acts[b] = observations[b].mask[0] ? 0 : env.cluster.cloudTarget;
        }
        observations = env.step(acts).observations;
      }
      return { env, masks };
    };
    const local = run(true);
    expect(local.masks).toContain('1:111'); // eAP 1 counts request 0 as running, not waiting
    expect(local.masks).toContain('2:111'); // node 0 looks free to eAP 0
    expect(local.env.retriedOnCloud).toBe(1);
    expect(local.env.outcome).toEqual({ arrived: 3, completedInTime: 3, late: 0, dropped: 0, queuedAtEnd: 0 });
    // with the global view the context filter counts request 0 on its way to node 0 (a queue of 1
    // at 1 replica: full), so request 1 already goes elsewhere and node 0 never refuses
    const global = run(false);
    expect(global.masks).toContain('1:011');
    expect(global.env.retriedOnCloud).toBe(0);
  });

  it('a queue of requests that are already too late does not refuse one that can be served (the live node purges them first)', () => {
    // request 0 runs on node 0 for 2 s; request 1 (eAP 1) waits behind it with a deadline it can no
    // longer meet after about 0.58 s; request 2 (eAP 0) reaches node 0 at about 0.62 s, before the
    // slot boundary at 0.75 s sweeps the queues. The live node (orchestrator/emulated-cluster.ts)
    // has dropped request 1 by then and admits request 2; so must the simulator.
    const requests = [req(0, 1, 0, 2, 10), req(1, 1, 0.01, 0.1, 0.6), req(2, 0, 0.6, 0.1, 10)];
    const env = new EdgeCloudEnv(twoEaps(), { requests, frames: 8, agentViews: true });
    let { observations } = env.reset({ seed: 1 });
    while (!env.isDone) {
      const acts: Record<number, number> = {};
      for (const b of env.agents) acts[b] = observations[b].mask[0] ? 0 : env.cluster.cloudTarget;
      observations = env.step(acts).observations;
    }
    expect(env.retriedOnCloud).toBe(0);
    expect(env.tally.refused[0]).toBe(0);
    expect(env.tally.expired[0]).toBe(1); // request 1
    expect(env.outcome).toEqual({ arrived: 3, completedInTime: 2, late: 0, dropped: 1, queuedAtEnd: 0 });
  });

  it('keeps the parallel-env contract and the accounting on tiny with hpa and a node failure, and is deterministic', () => {
    const scenario = loadScenario('tiny');
    const frames = 3;
    const requests = buildRequests({
      scenario,
      workload: 'p4',
      seed: 4,
      load: 1.2,
      durationS: frames * scenario.slotsPerFrame * scenario.slotS,
    });
    const make = () =>
      new EdgeCloudEnv(scenario, {
        requests,
        frames,
        orchestration: makeOrchestration('hpa', scenario),
        agentViews: true,
        faults: [{ node: 1, startS: 20, durationS: 15 }],
      });
    // the last valid target (the cloud is always valid): a fixed rule that reads only the mask,
    // which the agent view builds
    const lastValid = () => (it: DispatchItem) => it.mask.lastIndexOf(1);
    parallelEnvCheck(make(), lastValid());
    seedCheck(make, lastValid);
  });

  it('runEpisode --view agent: every request accounted for, the same arrivals as the global view, the policy reads the agent view', () => {
    const scenario = loadScenario('tiny');
    const frames = 4;
    const requests = buildRequests({
      scenario,
      workload: 'p4',
      seed: 2,
      load: 1,
      durationS: frames * scenario.slotsPerFrame * scenario.slotS,
    });
    const run = (view: 'global' | 'agent') =>
      runEpisode({
        scenario,
        requests,
        frames,
        seed: 2,
        dispatch: makeDispatch('jsq', scenario),
        orchestration: makeOrchestration('hpa', scenario),
        view,
      });
    const g = run('global');
    const a = run('agent');
    expect(a.arrived).toBe(g.arrived);
    expect(a.arrived).toBe(a.completedInTime + a.late + a.dropped + a.queuedAtEnd);
    // jsq reads queue lengths: on the agent's partial view it decides differently
    expect(a.throughputRate).not.toBe(g.throughputRate);
  });
});
