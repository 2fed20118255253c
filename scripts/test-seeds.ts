/**
 * The held-out table (docs/cmmac.md): `kais`, hpa, held-out seeds, P4 and (with TRACE) the later
 * trace window, at one or more loads, with the requests, seeds and runEpisode of `kais eval`
 * (scripts/policy-by-name.ts; each number equals `kais eval --seed S --load L --frames F
 * --dequeue D --policies ...`). Per column: each policy's mean throughput rate (with the per-seed
 * values when there are at most 5 seeds); the best heuristic pair (the best mean among HEURISTICS,
 * all with hpa); for every other policy its ratio to that best heuristic and to round-robin and
 * greedy (ratio of means, and the per-seed paired ratios: mean and standard error); and the oracle
 * bound (training/jobs/oracle.ts) on the same requests. For reporting only, after a choice: never
 * use it to choose anything.
 *
 *   awk -F, '$1 > 30000' ../shared/data/alibaba/v2017_batch_task.csv > /tmp/trace-late.csv
 *   TRACE=/tmp/trace-late.csv SEEDS=2000-2009 LOADS=0.5,1,1.5,2 node dist/scripts/test-seeds.js
 *   SEEDS=2000-2002 POLICIES='cmmac;db:/tmp/run.db@24' node dist/scripts/test-seeds.js
 *
 * VIEW (agent or global: what the policies decide on, kais eval --view; default agent), SEEDS (default 2000-2009), LOADS (default 1), DQ (node queue orders, default edf), FRAMES
 * (default 5), POLICIES (names as policy-by-name.ts reads them, ';'-separated; default cmmac),
 * HEURISTICS (default lec;jsq;p2c;round-robin;greedy;random: always run, the best of them is the
 * bar).
 */
import { loadScenario } from '../shared/scenario';
import type { DequeueName } from '../shared/dequeue';
import { buildRequests } from '../training/workload';
import { oracleBound } from '../training/jobs/oracle';
import { episodeRate } from './policy-by-name';
import { mean, se, seedList } from './seed-stats';
import { UsageError } from '../shared/errors';

function main(): void {
  const scenario = loadScenario('kais');
  const seeds = seedList(process.env.SEEDS ?? '2000-2009');
  const loads = (process.env.LOADS ?? '1').split(',').map(Number);
  const frames = Number(process.env.FRAMES ?? 5);
  const dequeues = (process.env.DQ ?? 'edf').split(',') as DequeueName[];
  const heuristics = (process.env.HEURISTICS ?? 'lec;jsq;p2c;round-robin;greedy;random').split(';');
  const others = (process.env.POLICIES ?? 'cmmac').split(';').filter((p) => p && !heuristics.includes(p));
  const trace = process.env.TRACE ?? null;
  const view = (process.env.VIEW ?? 'agent') as 'global' | 'agent';
  const workloads: [string, string | null][] = [['p4', null], ...(trace ? [['trace', trace] as [string, string]] : [])];
  console.log(`seeds ${seeds[0]}..${seeds[seeds.length - 1]} (${seeds.length}), kais, hpa, ${frames} frames, view ${view}`);
  for (const dequeue of dequeues) {
    for (const [wname, tracePath] of workloads) {
      for (const load of loads) {
        const rates = new Map<string, number[]>();
        for (const p of [...heuristics, ...others])
          rates.set(
            p,
            seeds.map((seed) => episodeRate(scenario, p, { frames, seed, load, tracePath, dequeue, view })),
          );
        const oracle = seeds.map((seed) => {
          const durationS = frames * scenario.slotsPerFrame * scenario.slotS;
          return oracleBound(scenario, buildRequests({ scenario, workload: 'p4', tracePath, seed, load, durationS }), durationS)
            .throughputRate;
        });
        const m = (p: string) => mean(rates.get(p) as number[]);
        const bestName = heuristics.reduce((a, b) => (m(b) > m(a) ? b : a));
        console.log(
          `${wname}, load ${load}, ${dequeue}: best heuristic ${bestName}/hpa ${m(bestName).toFixed(4)}; oracle ${mean(oracle).toFixed(4)} (s.e. ${se(oracle).toFixed(4)})`,
        );
        const ratio = (v: number[], ref: string): string => {
          const r = rates.get(ref) as number[];
          const paired = v.map((c, i) => c / r[i]);
          return `/ ${ref} ${(mean(v) / m(ref)).toFixed(3)} (per seed ${mean(paired).toFixed(4)}, s.e. ${se(paired).toFixed(4)})`;
        };
        for (const p of [...heuristics, ...others]) {
          const v = rates.get(p) as number[];
          let line = `  ${p.padEnd(14)} ${m(p).toFixed(4)} (s.e. ${se(v).toFixed(4)})${seeds.length <= 5 ? ` [${v.join(' ')}]` : ''}`;
          if (!heuristics.includes(p)) {
            line += ` | ${ratio(v, bestName)}`;
            for (const ref of ['round-robin', 'greedy']) if (rates.has(ref) && ref !== bestName) line += ` | ${ratio(v, ref)}`;
          }
          console.log(line);
        }
      }
    }
  }
}

try {
  main();
} catch (e) {
  process.stderr.write(`test-seeds: ${(e as Error).message}\n`);
  process.exit(e instanceof UsageError ? 2 : 1);
}
