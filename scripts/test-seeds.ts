/**
 * Issue 3's test table on many held-out seeds: `kais`, hpa, 5 frames, load 1, p4 and (with TRACE)
 * the later trace window, discounted and edf queues, the requests, seeds and runEpisode of
 * `kais eval` (scripts/policy-by-name.ts; each number equals `kais eval --seed S --dequeue D
 * --policies ...`). Per column: the mean throughput rate of each policy, and cmmac's ratio to the
 * better of lec/hpa and jsq/hpa (ratio of means, and the per-seed paired ratios: mean, standard
 * error, range, seeds at or above 1.03).
 *
 *   awk -F, '$1 > 30000' ../shared/data/alibaba/v2017_batch_task.csv > /tmp/trace-late.csv
 *   TRACE=/tmp/trace-late.csv SEEDS=2000-2019 node dist/scripts/test-seeds.js      # about 8 min
 *   POLICIES='cmmac;lec;jsq' DQ=edf SEEDS=2000-2002 node dist/scripts/test-seeds.js
 */
import { loadScenario } from '../shared/scenario';
import type { DequeueName } from '../shared/dequeue';
import { episodeRate } from './policy-by-name';

function seedList(v: string): number[] {
  const range = /^(\d+)-(\d+)$/.exec(v);
  if (range) {
    const out: number[] = [];
    for (let s = Number(range[1]); s <= Number(range[2]); s++) out.push(s);
    return out;
  }
  return v.split(',').map((s) => {
    const n = Number(s);
    if (!Number.isInteger(n)) throw new Error(`SEEDS: not a seed: ${s}`);
    return n;
  });
}

const mean = (a: number[]): number => a.reduce((x, y) => x + y, 0) / a.length;
const sd = (a: number[]): number => {
  const m = mean(a);
  return a.length > 1 ? Math.sqrt(a.reduce((x, y) => x + (y - m) ** 2, 0) / (a.length - 1)) : 0;
};

function main(): void {
  const scenario = loadScenario('kais');
  const seeds = seedList(process.env.SEEDS ?? '2000-2019');
  const dequeues = (process.env.DQ ?? 'discounted,edf').split(',') as DequeueName[];
  const policies = (process.env.POLICIES ?? 'cmmac;lec;jsq;round-robin;greedy').split(';');
  for (const p of ['cmmac', 'lec', 'jsq']) if (!policies.includes(p)) policies.push(p);
  const workloads: [string, string | null][] = [['p4', null]];
  if (process.env.TRACE) workloads.push(['trace', process.env.TRACE]);
  console.log(`seeds ${seeds[0]}..${seeds[seeds.length - 1]} (${seeds.length}), kais, hpa, 5 frames, load 1`);
  for (const [wname, tracePath] of workloads) {
    for (const dequeue of dequeues) {
      const rates = new Map<string, number[]>();
      for (const p of policies) rates.set(p, seeds.map((seed) => episodeRate(scenario, p, { frames: 5, seed, load: 1, tracePath, dequeue })));
      const m = (p: string) => mean(rates.get(p) as number[]);
      const bestName = m('jsq') > m('lec') ? 'jsq' : 'lec';
      const best = rates.get(bestName) as number[];
      const paired = (rates.get('cmmac') as number[]).map((c, i) => c / best[i]);
      console.log(`${wname}, ${dequeue}: ${policies.map((p) => `${p} ${m(p).toFixed(4)}`).join(', ')}`);
      console.log(
        `  cmmac / ${bestName} ${(m('cmmac') / m(bestName)).toFixed(3)}; per seed ${mean(paired).toFixed(4)} ` +
          `(s.e. ${(sd(paired) / Math.sqrt(paired.length)).toFixed(4)}, ${Math.min(...paired).toFixed(3)}..${Math.max(...paired).toFixed(3)}, ` +
          `${paired.filter((x) => x >= 1.03).length}/${paired.length} seeds >= 1.03)`,
      );
    }
  }
}

main();
