/**
 * Dispatch policies across arrival loads on TRAINING-side seeds (never the test seeds 2000-2002
 * nor the validation seeds 1000003-4): `kais`, hpa, 5 frames, p4 (or TRACE=<csv>), the requests,
 * seeds and runEpisode of `kais eval`. Prints the mean throughput rate per load. It exists to see
 * where a policy loses (docs/cmmac.md "Where cmmac loses: overload").
 *
 *   node dist/scripts/load-sweep.js 'lec;jsq;cmmac;deadline-load;db:/tmp/run.db@51'
 *   LOADS=1,1.3 TRACE=/tmp/trace-early.csv DQ=edf SEEDS=700001,700002 node dist/scripts/load-sweep.js 'lec;cmmac'
 *
 * Policies by name as scripts/policy-by-name.ts reads them (baselines, teachers, `cmmac`, `bin:`, `db:`).
 */
import { loadScenario } from '../shared/scenario';
import type { DequeueName } from '../shared/dequeue';
import { episodeRate } from './policy-by-name';

function numbers(v: string): number[] {
  return v.split(',').map((s) => {
    const n = Number(s);
    if (!Number.isFinite(n)) throw new Error(`not a number: ${s}`);
    return n;
  });
}

function main(): void {
  const scenario = loadScenario('kais');
  const loads = numbers(process.env.LOADS ?? '1,1.3,1.6');
  const seeds = numbers(process.env.SEEDS ?? '700001,700002,700003');
  const dequeue = (process.env.DQ ?? 'discounted') as DequeueName;
  const tracePath = process.env.TRACE ?? null;
  console.log(['policy'.padEnd(32), ...loads.map((l) => `load ${l}`.padEnd(9))].join(' '));
  for (const n of (process.argv[2] ?? 'lec;jsq;cmmac').split(';')) {
    const row: string[] = [];
    for (const load of loads) {
      let sum = 0;
      for (const seed of seeds) sum += episodeRate(scenario, n, { frames: 5, seed, load, tracePath, dequeue });
      row.push((sum / seeds.length).toFixed(4).padEnd(9));
    }
    console.log([n.slice(0, 32).padEnd(32), ...row].join(' '));
  }
}

main();
