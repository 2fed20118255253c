/**
 * The view an orchestration policy decides on in the simulator shows what an executor can observe
 * of a cluster (shared/orchestration/executor.ts ReportView: the live emulated cluster's report, a
 * Kubernetes executor's): requests waiting at a target, not the ones still on the wire to it, which
 * the dispatch policies' view counts (ClusterView.queueLen). Until 2026-12-04 GPG's queue features
 * counted them in the simulator and not live (cloud queue 27 against 0 at the first step of a
 * `kais up` run).
 */
import { loadScenario } from '../../../../shared/scenario';
import type { OrchestrationPolicy } from '../../../../shared/policy';
import { makeDispatch } from '../../../../training/baselines/registry';
import { EdgeCloudEnv } from '../../../../training/sim/env';
import { buildRequests } from '../../../../training/workload';

describe('the simulator orchestration view', () => {
  it('counts the requests waiting at each target, not those on the wire to it', () => {
    const s = loadScenario('kais');
    const seen: { queue: number[]; serviceSum: number[]; waiting: number[]; onWire: number[] }[] = [];
    let env: EdgeCloudEnv | null = null;
    const probe: OrchestrationPolicy = {
      name: 'probe',
      periodS: 2,
      decide(view) {
        const c = env!.cluster;
        const T = view.numTargets;
        seen.push({
          queue: Array.from({ length: T }, (_, t) => view.queueLen(t)),
          serviceSum: Array.from({ length: T }, (_, t) => {
            let k = 0;
            for (let w = 0; w < view.numServices; w++) k += view.serviceQueueLen(t, w);
            return k;
          }),
          waiting: Array.from(c.waiting),
          onWire: Array.from({ length: T }, (_, t) => c.inFlight(t)),
        });
        return [];
      },
    };
    env = new EdgeCloudEnv(s, {
      requests: buildRequests({ scenario: s, workload: 'p4', seed: 3, load: 1.5, durationS: 20 }),
      frames: 1,
      orchestration: probe,
      seed: 3,
    });
    const policy = makeDispatch('round-robin', s);
    let { observations } = env.reset({ seed: 3 });
    policy.reset?.(3, env.view);
    while (!env.isDone) {
      const actions = env.possibleAgents.map((b) => (env!.agents.includes(b) ? policy.decide(observations[b], env!.viewOf(b)) : -1));
      observations = env.step(actions).observations;
    }
    expect(seen.length).toBeGreaterThanOrEqual(5);
    for (const x of seen) {
      expect(x.queue).toEqual(x.waiting);
      expect(x.serviceSum).toEqual(x.waiting);
    }
    // the distinction was exercised: requests were on the wire at some step (the cloud's WAN above all)
    const cloud = s.eaps.reduce((k, e) => k + e.nodes.length, 0);
    expect(Math.max(...seen.map((x) => x.onWire[cloud]))).toBeGreaterThan(0);
  });
});
