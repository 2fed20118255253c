/**
 * Dispatch policies across arrival loads on TRAINING-side seeds (never the test seeds 2000-2002
 * nor the validation seeds 1000003-4): `kais`, hpa, 5 frames, p4 (or TRACE=<csv>), the requests,
 * seeds and runEpisode of `kais eval`. Prints the mean throughput rate per load. It exists to see
 * where a policy loses (docs/cmmac.md "Where cmmac loses: overload").
 *
 *   node dist/scripts/load-sweep.js 'lec;jsq;cmmac;deadline-load;db:/tmp/run.db@51'
 *   LOADS=1,1.3 TRACE=/tmp/trace-early.csv DQ=edf SEEDS=700001,700002 node dist/scripts/load-sweep.js 'lec;cmmac'
 *
 * A policy is a `kais eval` baseline, a train-only teacher (critic/cmmac/teacher.ts), `cmmac` (the
 * shipped model), `bin:<exported actor>` or `db:<kais train output>[@<frame>]` (its newest
 * checkpoint at or before the frame; without @, its best).
 */
import { loadScenario } from '../shared/scenario';
import type { DispatchPolicy } from '../shared/policy';
import { makeTrainTeacher } from '../critic/cmmac/teacher';
import { makeDispatch, makeOrchestration } from '../training/baselines/registry';
import { buildRequests } from '../training/workload';
import { runEpisode } from '../training/jobs/rollout';
import { loadActorFile, loadCmmacFromDb, loadDefaultCmmac } from '../training/jobs/checkpoint';
import type { DequeueName } from '../shared/dequeue';

function numbers(v: string): number[] {
  return v.split(',').map((s) => {
    const n = Number(s);
    if (!Number.isFinite(n)) throw new Error(`not a number: ${s}`);
    return n;
  });
}

function main(): void {
  const scenario = loadScenario('kais');
  const frames = 5;
  const durationS = frames * scenario.slotsPerFrame * scenario.slotS;
  const loads = numbers(process.env.LOADS ?? '1,1.3,1.6');
  const seeds = numbers(process.env.SEEDS ?? '700001,700002,700003');
  const dq = (process.env.DQ ?? 'discounted') as DequeueName;
  const trace = process.env.TRACE ?? null;
  const make = (n: string): DispatchPolicy => {
    const db = /^db:(.+?)(?:@(\d+))?$/.exec(n);
    if (db) return loadCmmacFromDb(db[1], scenario, db[2] ? { maxFrame: Number(db[2]) } : {});
    if (n.startsWith('bin:')) return loadActorFile(n.slice(4), scenario);
    if (n === 'cmmac') {
      const p = loadDefaultCmmac(scenario);
      if (!p) throw new Error('no shipped kais model');
      return p;
    }
    return makeTrainTeacher(n) ?? makeDispatch(n, scenario);
  };
  console.log(['policy'.padEnd(32), ...loads.map((l) => `load ${l}`.padEnd(9))].join(' '));
  for (const n of (process.argv[2] ?? 'lec;jsq;cmmac').split(';')) {
    const row: string[] = [];
    for (const load of loads) {
      let sum = 0;
      for (const seed of seeds) {
        const requests = buildRequests({ scenario, workload: 'p4', tracePath: trace, seed, load, durationS });
        sum += runEpisode({ scenario, requests, frames, seed, dispatch: make(n), orchestration: makeOrchestration('hpa', scenario), eapDequeue: dq, nodeDequeue: dq }).throughputRate;
      }
      row.push((sum / seeds.length).toFixed(4).padEnd(9));
    }
    console.log([n.slice(0, 32).padEnd(32), ...row].join(' '));
  }
}

main();
