/**
 * Teacher search for the warm start of `kais train`, on TRAINING conditions only (docs/cmmac.md
 * "Teacher search on training data"): never the test seeds 2000-2002, the validation seeds
 * 1000003-4 or the trace rows after 25000 s.
 *
 *   npm run build && node dist/scripts/teacher-search.js '["deadline-load", {"margin": 0.75, "fallback": "min-eta"}]'
 *   (NS=12 episodes per workload by default; TRACE=path/to/v2017_batch_task.csv, default ../shared/data/alibaba)
 *
 * Conditions: `kais`, hpa, 5-frame episodes, each with the discounted and the edf dequeue:
 * NS P4 episodes with the seeds of `kais train --seed 1`'s training episodes 0..NS-1, and NS
 * episodes of the early Alibaba window [-1100, 25000] s, each from a start drawn as a lesson draws
 * it (train/trace-window-(100+k) of seed 1; the rows before the start moved after the window).
 * Prints per variant the 4 columns (mean throughput rate), each divided by the best of lec/hpa and
 * jsq/hpa in that column, their minimum and their mean.
 *
 * A variant is a train teacher's name (critic/cmmac/teacher.ts), a `kais eval` dispatch baseline,
 * or an object of the knobs below (a search-only generalisation of deadline-load).
 */
import * as path from 'path';
import { Rng } from '../shared/rng';
import { loadScenario } from '../shared/scenario';
import type { ClusterView, DispatchItem, DispatchPolicy } from '../shared/policy';
import type { Request } from '../shared/domain';
import { expectedCompletionS } from '../shared/eta';
import { makeTrainTeacher } from '../critic/cmmac/teacher';
import { makeDispatch, makeOrchestration } from '../training/baselines/registry';
import { buildRequests, loadTrace, toRequests, type TraceRow } from '../training/workload';
import { runEpisode } from '../training/jobs/rollout';

interface Knobs {
  /** feasible iff margin x eta <= slack (deadline-load: 0.7) */
  margin?: number;
  /** key = loadWeight x load + etaWeight x eta (+ cloudPenalty at the cloud, - sameEapBonus at the own eAP's nodes) */
  etaWeight?: number;
  loadWeight?: number;
  /** 'service': (queued + busy of w) / ready replicas (jsq's); 'node': all queued / cores; 'none' */
  load?: 'service' | 'node' | 'none';
  cloudPenalty?: number;
  sameEapBonus?: number;
  /** no feasible target: the cloud, or the smallest eta (lec's) */
  fallback?: 'cloud' | 'min-eta';
}

class SearchTeacher implements DispatchPolicy {
  readonly name = 'search';
  constructor(private readonly k: Required<Knobs>) {}
  decide(item: DispatchItem, view: ClusterView): number {
    const { k } = this;
    const w = item.request.service;
    const b = item.eap;
    const slack = item.request.deadlineS - view.nowS();
    let best = -1;
    let bestKey = Infinity;
    let minEta = Infinity;
    let minEtaT = view.cloudTarget;
    for (let t = 0; t < view.numTargets; t++) {
      if (!item.mask[t]) continue;
      const eta = expectedCompletionS(view, b, t, w, item.request.inputMB);
      if (eta < minEta) {
        minEta = eta;
        minEtaT = t;
      }
      if (k.margin * eta > slack) continue;
      let ld = 0;
      if (k.load === 'service') ld = (view.serviceQueueLen(t, w) + view.busyReplicas(t, w)) / Math.max(1, view.readyReplicas(t, w));
      else if (k.load === 'node') ld = view.queueLen(t) / Math.max(1, view.cpuCores(t));
      let key = k.loadWeight * ld + k.etaWeight * eta;
      if (t === view.cloudTarget) key += k.cloudPenalty;
      else if (view.nodeEap(t) === b) key -= k.sameEapBonus;
      if (key < bestKey) {
        bestKey = key;
        best = t;
      }
    }
    if (best >= 0) return best;
    return k.fallback === 'min-eta' ? minEtaT : view.cloudTarget;
  }
}

const DEFAULT_KNOBS: Required<Knobs> = { margin: 0.7, etaWeight: 0.5, loadWeight: 1, load: 'service', cloudPenalty: 0, sameEapBonus: 0, fallback: 'cloud' };

function main(): void {
  const scenario = loadScenario('kais');
  const frames = 5;
  const durationS = frames * scenario.slotsPerFrame * scenario.slotS;
  const ns = Number(process.env.NS ?? 12);
  const tracePath = process.env.TRACE ?? path.resolve(__dirname, '..', '..', '..', 'shared', 'data', 'alibaba', 'v2017_batch_task.csv');
  const rows = loadTrace(tracePath).rows;
  const [from, to] = [-1100, 25000];
  const windowRequests = (seed: number, start: number): Request[] => {
    const span = to - from + 1;
    const w: TraceRow[] = [];
    for (const r of rows) {
      if (r.arrivalS < from || r.arrivalS > to) continue;
      w.push(r.arrivalS >= start ? r : { ...r, arrivalS: r.arrivalS + span, endS: r.endS === null ? null : r.endS + span });
    }
    return toRequests(w, { scenario, seed, load: 1, durationS, source: tracePath });
  };
  const conds: { kind: string; seed: number; requests: Request[] }[] = [];
  for (let k = 0; k < ns; k++) {
    const seed = Rng.derive(1, `train/episode-${k}`).nextU32();
    conds.push({ kind: 'p4', seed, requests: buildRequests({ scenario, workload: 'p4', tracePath: null, seed, load: 1, durationS }) });
  }
  for (let k = 0; k < ns; k++) {
    const seed = Rng.derive(1, `train/episode-${100 + k}`).nextU32();
    conds.push({ kind: 'trace', seed, requests: windowRequests(seed, from + Rng.derive(1, `train/trace-window-${100 + k}`).next() * (to - from)) });
  }
  const cols = ['p4/discounted', 'trace/discounted', 'p4/edf', 'trace/edf'];
  const score = (make: () => DispatchPolicy): Record<string, number> => {
    const sums: Record<string, number[]> = {};
    for (const dq of ['discounted', 'edf'] as const) {
      for (const c of conds) {
        const r = runEpisode({ scenario, requests: c.requests, frames, seed: c.seed, dispatch: make(), orchestration: makeOrchestration('hpa', scenario), eapDequeue: dq, nodeDequeue: dq });
        (sums[`${c.kind}/${dq}`] ??= []).push(r.throughputRate);
      }
    }
    return Object.fromEntries(Object.entries(sums).map(([k, v]) => [k, v.reduce((a, b) => a + b, 0) / v.length]));
  };
  const lec = score(() => makeDispatch('lec', scenario));
  const jsq = score(() => makeDispatch('jsq', scenario));
  const bestH = Object.fromEntries(cols.map((c) => [c, Math.max(lec[c], jsq[c])]));
  const line = (name: string, m: Record<string, number>) => {
    const r = cols.map((c) => m[c] / bestH[c]);
    const mean = r.reduce((a, b) => a + b, 0) / r.length;
    console.log([name.padEnd(48), ...cols.map((c) => m[c].toFixed(4)), ...r.map((x) => x.toFixed(3)), `min ${Math.min(...r).toFixed(3)}`, `mean ${mean.toFixed(4)}`].join(' '));
  };
  console.log(`${'variant'.padEnd(48)} ${cols.join(' ')} (then / best of lec, jsq)`);
  line('lec/hpa', lec);
  line('jsq/hpa', jsq);
  const variants = JSON.parse(process.argv[2] ?? '["deadline-load"]') as (string | Knobs)[];
  for (const v of variants) {
    const make =
      typeof v === 'string' ? () => makeTrainTeacher(v) ?? makeDispatch(v, scenario) : () => new SearchTeacher({ ...DEFAULT_KNOBS, ...v });
    line(typeof v === 'string' ? v : JSON.stringify(v), score(make));
  }
}

main();
