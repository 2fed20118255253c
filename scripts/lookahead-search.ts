/**
 * Measures the `queue-lookahead` teacher (critic/cmmac/queue-teacher.ts) as a policy on TRAINING
 * conditions only, the same conditions as scripts/teacher-search.ts (p4 with the seeds of
 * `kais train --seed 1`'s episodes, and the early Alibaba window [-1100, 25000] s; both dequeues;
 * never a test or validation seed, never a trace row after 25000 s).
 *
 *   npx tsc -p tsconfig.json && node dist/scripts/lookahead-search.js '[{"margin":0.9}, "deadline-load"]'
 *   (NS episodes per workload, default 12; TRACE as in teacher-search; WINDOW=25000,30000 replays
 *   the validation window instead of the training window; DEQUEUES=discounted,edf)
 *
 * A variant is a train teacher's name, a `kais eval` dispatch baseline, or an object of
 * QueueLookaheadOptions.
 */
import * as path from 'path';
import { Rng } from '../shared/rng';
import { loadScenario } from '../shared/scenario';
import type { DispatchPolicy } from '../shared/policy';
import type { Request } from '../shared/domain';
import { makeTrainTeacher } from '../critic/cmmac/teacher';
import { QueueLookaheadDispatch, type QueueLookaheadOptions } from '../critic/cmmac/queue-teacher';
import { makeDispatch, makeOrchestration } from '../training/baselines/registry';
import { buildRequests, loadTrace, toRequests, type TraceRow } from '../training/workload';
import { runEpisode } from '../training/jobs/rollout';

function main(): void {
  const scenario = loadScenario('kais');
  const frames = 5;
  const durationS = frames * scenario.slotsPerFrame * scenario.slotS;
  const ns = Number(process.env.NS ?? 12);
  const dequeues = (process.env.DEQUEUES ?? 'discounted,edf').split(',') as ('discounted' | 'edf')[];
  const tracePath = process.env.TRACE ?? path.resolve(__dirname, '..', '..', '..', 'shared', 'data', 'alibaba', 'v2017_batch_task.csv');
  const rows = loadTrace(tracePath).rows;
  // WINDOW=from,to: another trace window (default the training window; 25000,30000 is the validation one)
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
    conds.push({ kind: 'trace', seed, requests: windowRequests(seed, from + Rng.derive(1, `train/trace-window-${100 + k}`).next() * (to - from)) });
  }
  const cols = dequeues.flatMap((dq) => [`p4/${dq}`, `trace/${dq}`]);
  const score = (make: () => DispatchPolicy): Record<string, number> => {
    const sums: Record<string, number[]> = {};
    for (const dq of dequeues) {
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
    console.log([name.padEnd(56), ...cols.map((c) => m[c].toFixed(4)), ...r.map((x) => x.toFixed(3)), `min ${Math.min(...r).toFixed(3)}`, `mean ${mean.toFixed(4)}`].join(' '));
  };
  console.log(`${'variant'.padEnd(56)} ${cols.join(' ')} (then / best of lec, jsq)`);
  line('lec/hpa', lec);
  line('jsq/hpa', jsq);
  const variants = JSON.parse(process.argv[2] ?? '[{}]') as (string | QueueLookaheadOptions)[];
  for (const v of variants) {
    const make = typeof v === 'string' ? () => makeTrainTeacher(v) ?? makeDispatch(v, scenario) : () => new QueueLookaheadDispatch(v);
    line(typeof v === 'string' ? v : `ql ${JSON.stringify(v)}`, score(make));
  }
}

main();
