/**
 * Decision latency of the learned actor next to `lec`, measured in the same run on the same
 * decisions: a kais episode is driven by jsq, and at every decision both policies decide the same
 * item on the same cluster state (batch 1, with the mask), each timed on its own.
 * The actor is the shipped model (models/kais-cmmac.bin: 256-128-32 with the shared target scorer,
 * loadDefaultCmmac), as `kais eval` and `kais agent` run it; without that file, a plain 256-128-32
 * MLP with random weights (latency does not depend on the weight values, only on the layers).
 *
 *   actor.decisionUs.p50|p99   cmmac: observation build + masked forward pass + arg-max
 *   lec.decisionUs.p99         lec on the same decisions
 */
import { performance } from 'perf_hooks';
import { CmmacDispatch } from '../agent/actor-policy';
import { observationDim } from '../agent/observation';
import { actorDims } from '../shared/nets/actor';
import type { ClusterView, DispatchItem, DispatchPolicy } from '../shared/policy';
import { Rng } from '../shared/rng';
import { loadScenario, topologyOf, type Scenario } from '../shared/scenario';
import { makeDispatch, makeOrchestration } from '../training/baselines/registry';
import { loadDefaultCmmac } from '../training/jobs/checkpoint';
import { percentile, runEpisode } from '../training/jobs/rollout';
import { buildRequests } from '../training/workload';

export interface BenchResult {
  name: string;
  value: number;
  unit: string;
}

/** A plain 256-128-32 actor with random weights (when no shipped model is there to time). */
function randomActor(scenario: Scenario): CmmacDispatch {
  const topo = topologyOf(scenario);
  const shape = { numServices: topo.numServices, numTargets: topo.numNodes + 1, numEaps: topo.numEaps };
  const dims = actorDims(observationDim(shape), shape.numTargets);
  const rng = new Rng(1);
  const weights: Float32Array[] = [];
  for (let l = 0; l + 1 < dims.length; l++) {
    weights.push(Float32Array.from({ length: dims[l] * dims[l + 1] }, () => (rng.next() - 0.5) * 0.1));
    weights.push(new Float32Array(dims[l + 1]));
  }
  return new CmmacDispatch({ shape, queueCapPerReplica: scenario.queueCapPerReplica, weights });
}

export function benchActor(): BenchResult[] {
  const scenario = loadScenario('kais');
  const shipped = loadDefaultCmmac(scenario);
  const actor = shipped ?? randomActor(scenario);
  const lec = makeDispatch('lec', scenario);
  const jsq = makeDispatch('jsq', scenario);
  const actorUs: number[] = [];
  const lecUs: number[] = [];
  const probe: DispatchPolicy = {
    name: 'probe',
    reset: (seed, view) => {
      actor.reset(seed);
      jsq.reset?.(seed, view);
    },
    decide(item: DispatchItem, view: ClusterView): number {
      let t0 = performance.now();
      actor.decide(item, view);
      actorUs.push((performance.now() - t0) * 1000);
      t0 = performance.now();
      lec.decide(item, view);
      lecUs.push((performance.now() - t0) * 1000);
      return jsq.decide(item, view);
    },
  };
  const frames = 4;
  const requests = buildRequests({
    scenario,
    workload: 'p4',
    seed: 1,
    load: 1,
    durationS: frames * scenario.slotsPerFrame * scenario.slotS,
  });
  runEpisode({ scenario, requests, frames, seed: 1, dispatch: probe, orchestration: makeOrchestration('static', scenario) });
  const a = Float64Array.from(actorUs);
  const l = Float64Array.from(lecUs);
  return [
    { name: 'actor.decisionUs.p50', value: +percentile(a, 0.5).toFixed(1), unit: 'us' },
    { name: 'actor.decisionUs.p99', value: +percentile(a, 0.99).toFixed(1), unit: 'us' },
    { name: 'lec.decisionUs.p99', value: +percentile(l, 0.99).toFixed(2), unit: 'us' },
    { name: 'actor.decisions', value: a.length, unit: 'count' },
    { name: 'actor.model', value: shipped ? 1 : 0, unit: '(1: the shipped model with the target scorer, 0: random plain MLP)' },
  ];
}
