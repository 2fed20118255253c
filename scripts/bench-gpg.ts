/**
 * GPG's decision time per frame (issue 16: at most 50 ms on `large`): the graph read from the
 * simulator's view, the embedding, the node picks and the scale picks, for the default net
 * (E 16, 2 rounds, 64-32 / 128-64-32) on `kais` and `large` at the scenario's H, and the shipped kais
 * model (greedy, at its own H: nodesPerFrame); p50 and max of 30 decisions after 5 warm-up ones, on
 * the backend the bench loaded.
 */
import { performance } from 'perf_hooks';
import { loadGpgOrchestration } from '../critic/gpg/load';
import { GpgNet } from '../critic/gpg/gnn';
import { defaultGpgModelPath } from '../shared/nets/actor-file';
import { GpgOrchestration } from '../critic/gpg/policy';
import type { OrchestrationPolicy, OrchestrationView, ServiceWindowStats } from '../shared/policy';
import { loadScenario, type Scenario } from '../shared/scenario';
import { Cluster } from '../training/sim/cluster';
import type { BenchResult } from './bench';

function window(W: number): ServiceWindowStats {
  const f = (x: number) => new Float64Array(W).fill(x);
  return {
    windowS: 25,
    arrivals: f(40),
    busyReplicaS: f(15),
    readyReplicaS: f(25),
    completedInTime: f(35),
    failed: f(5),
    workCoreS: f(20),
  };
}

export function benchGpg(): BenchResult[] {
  const out: BenchResult[] = [];
  const time = (label: string, s: Scenario, policy: OrchestrationPolicy & { dispose: () => void }, target: string): void => {
    const view = Object.create(new Cluster(s), { window: { get: () => window(s.services.length) } }) as OrchestrationView;
    policy.reset?.(1, view);
    const times: number[] = [];
    for (let i = 0; i < 35; i++) {
      const t0 = performance.now();
      policy.decide(view);
      if (i >= 5) times.push(performance.now() - t0);
    }
    policy.dispose();
    times.sort((a, b) => a - b);
    out.push({ name: `gpg.decisionMs.${label}.p50`, value: +times[Math.floor(times.length / 2)].toFixed(2), unit: 'ms' });
    out.push({ name: `gpg.decisionMs.${label}.max`, value: +times[times.length - 1].toFixed(2), unit: `ms${target}` });
  };
  for (const name of ['kais', 'large']) {
    const s = loadScenario(name);
    const net = new GpgNet(s.services.length, 1);
    const policy = new GpgOrchestration(net, { periodS: 25, nodesPerDecision: s.scaleNodesPerFrame, mode: 'sample' });
    time(name, s, Object.assign(policy, { dispose: () => net.dispose() }), name === 'large' ? ' (target <= 50 on large)' : '');
  }
  const kais = loadScenario('kais');
  const shipped = defaultGpgModelPath(kais);
  if (shipped) {
    const policy = loadGpgOrchestration(shipped, kais, 'the shipped GPG model');
    time(`kais-shipped-H${policy.nodesPerDecision}`, kais, policy, '');
  }
  return out;
}
