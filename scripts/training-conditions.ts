/**
 * The training-conditions harness of the teacher searches (scripts/teacher-search.ts,
 * scripts/lookahead-search.ts): `kais`, hpa, 5-frame episodes, each with the discounted and the
 * edf dequeue; NS P4 episodes with the seeds of `kais train --seed 1`'s training episodes 0..NS-1,
 * and NS episodes of the early Alibaba window [-1100, 25000] s, each from a start drawn as a lesson
 * draws it (train/trace-window-(100+k) of seed 1; the rows before the start moved after the
 * window). Never the test seeds 2000-2002, the validation seeds 1000003-4 or the trace rows after
 * 25000 s (unless WINDOW says so).
 *
 * Environment: NS (episodes per workload, default 12), TRACE (v2017_batch_task.csv, default
 * ../shared/data/alibaba), WINDOW=from,to (another trace window; 25000,30000 is the validation
 * one), DEQUEUES (default discounted,edf).
 *
 * Prints per variant the columns (mean throughput rate), each divided by the best of lec/hpa and
 * jsq/hpa in that column, their minimum and their mean.
 */
import * as path from 'path';
import { Rng } from '../shared/rng';
import type { Scenario } from '../shared/scenario';
import type { DispatchPolicy } from '../shared/policy';
import type { Request } from '../shared/domain';
import { makeTrainTeacher } from '../training/baselines/teacher';
import { makeDispatch, makeOrchestration } from '../training/baselines/registry';
import { buildRequests, loadTrace, toRequests, type TraceRow } from '../training/workload';
import { runEpisode } from '../training/jobs/rollout';

export interface Variant {
  name: string;
  make: () => DispatchPolicy;
}

/** A variant named by a train teacher (training/baselines/teacher.ts) or a `kais eval` dispatch baseline. */
export function namedVariant(name: string, scenario: Scenario): Variant {
  return { name, make: () => makeTrainTeacher(name) ?? makeDispatch(name, scenario) };
}

/** Scores lec/hpa, jsq/hpa and every variant on the training conditions and prints the table. */
export function compareOnTrainingConditions(scenario: Scenario, variants: readonly Variant[]): void {
  const frames = 5;
  const durationS = frames * scenario.slotsPerFrame * scenario.slotS;
  const ns = Number(process.env.NS ?? 12);
  const dequeues = (process.env.DEQUEUES ?? 'discounted,edf').split(',') as ('discounted' | 'edf')[];
  const tracePath = process.env.TRACE ?? path.resolve(__dirname, '..', '..', '..', 'shared', 'data', 'alibaba', 'v2017_batch_task.csv');
  const rows = loadTrace(tracePath).rows;
  const [from, to] = (process.env.WINDOW ?? '-1100,25000').split(',').map(Number);
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
    conds.push({
      kind: 'trace',
      seed,
      requests: windowRequests(seed, from + Rng.derive(1, `train/trace-window-${100 + k}`).next() * (to - from)),
    });
  }
  const cols = dequeues.flatMap((dq) => [`p4/${dq}`, `trace/${dq}`]);
  const score = (make: () => DispatchPolicy): Record<string, number> => {
    const sums: Record<string, number[]> = {};
    for (const dq of dequeues) {
      for (const c of conds) {
        const r = runEpisode({
          scenario,
          requests: c.requests,
          frames,
          seed: c.seed,
          dispatch: make(),
          orchestration: makeOrchestration('hpa', scenario),
          nodeDequeue: dq,
        });
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
    console.log(
      [
        name.padEnd(56),
        ...cols.map((c) => m[c].toFixed(4)),
        ...r.map((x) => x.toFixed(3)),
        `min ${Math.min(...r).toFixed(3)}`,
        `mean ${mean.toFixed(4)}`,
      ].join(' '),
    );
  };
  console.log(`${'variant'.padEnd(56)} ${cols.join(' ')} (then / best of lec, jsq)`);
  line('lec/hpa', lec);
  line('jsq/hpa', jsq);
  for (const v of variants) line(v.name, score(v.make));
}
