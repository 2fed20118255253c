/**
 * Issue 3's test table (docs/cmmac.md): `kais`, hpa, 5 frames, load 1, held-out seeds, p4 and
 * (with TRACE) the later trace window, discounted and edf queues, the requests, seeds and
 * runEpisode of `kais eval` (scripts/policy-by-name.ts; each number equals `kais eval --seed S
 * --dequeue D --policies ...`, which cannot run a train-only teacher or a `db:` checkpoint by
 * frame). Per column: each policy's mean throughput rate (with the per-seed values when there are
 * at most 5 seeds), and for each policy but lec and jsq its ratio to the better of lec/hpa and
 * jsq/hpa (ratio of means, and the per-seed paired ratios: mean, standard error, range, seeds at or
 * above 1.03). For reporting only, after a choice: never use it to choose anything.
 *
 *   awk -F, '$1 > 30000' ../shared/data/alibaba/v2017_batch_task.csv > /tmp/trace-late.csv
 *   TRACE=/tmp/trace-late.csv SEEDS=2000-2019 node dist/scripts/test-seeds.js      # about 8 min
 *   TRACE=/tmp/trace-late.csv SEEDS=2000-2002 POLICIES='deadline-load;queue-lookahead;db:/tmp/run.db@24' node dist/scripts/test-seeds.js
 *   DQ=edf SEEDS=2000,2001 node dist/scripts/test-seeds.js
 *
 * POLICIES: names as scripts/policy-by-name.ts reads them, separated by ';' (a JSON object of
 * QueueLookaheadOptions contains commas); default cmmac;round-robin;greedy. lec and jsq always run.
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
  const policies = ['lec', 'jsq', ...(process.env.POLICIES ?? 'cmmac;round-robin;greedy').split(';').filter((p) => p !== 'lec' && p !== 'jsq')];
  const trace = process.env.TRACE ?? null;
  const cols: [string, string | null, DequeueName][] = dequeues.flatMap((dq) => [['p4', null, dq], ...(trace ? [['trace', trace, dq]] : [])] as [string, string | null, DequeueName][]);
  console.log(`seeds ${seeds[0]}..${seeds[seeds.length - 1]} (${seeds.length}), kais, hpa, 5 frames, load 1`);
  for (const [wname, tracePath, dequeue] of cols) {
    const rates = new Map<string, number[]>();
    for (const p of policies) rates.set(p, seeds.map((seed) => episodeRate(scenario, p, { frames: 5, seed, load: 1, tracePath, dequeue })));
    const m = (p: string) => mean(rates.get(p) as number[]);
    const bestName = m('jsq') > m('lec') ? 'jsq' : 'lec';
    const best = rates.get(bestName) as number[];
    console.log(`${wname}, ${dequeue}:`);
    for (const p of policies) {
      const v = rates.get(p) as number[];
      let line = `  ${p.padEnd(28)} ${m(p).toFixed(4)}${seeds.length <= 5 ? ` [${v.join(' ')}]` : ''}`;
      if (p !== 'lec' && p !== 'jsq') {
        const paired = v.map((c, i) => c / best[i]);
        line +=
          ` | / ${bestName} ${(m(p) / m(bestName)).toFixed(3)}; per seed ${mean(paired).toFixed(4)} ` +
          `(s.e. ${(sd(paired) / Math.sqrt(paired.length)).toFixed(4)}, ${Math.min(...paired).toFixed(3)}..${Math.max(...paired).toFixed(3)}, ` +
          `${paired.filter((x) => x >= 1.03).length}/${paired.length} seeds >= 1.03)`;
      }
      console.log(line);
    }
  }
}

main();
