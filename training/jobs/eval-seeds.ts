/**
 * `kais eval --seeds a-b`: the same evaluation on several seeds, and each pair's mean with its
 * standard error. A figure on one seed says little (the seed draws the arrivals, the deadlines and
 * every policy's random choices), and every bar in docs/gpg.md and docs/cmmac.md is a mean over
 * held-out seeds with its standard error; this makes that measurement a command instead of a script.
 *
 * Each seed is a whole `kais eval --seed s` (eval.ts runEvalSeeds: runEval, the same pairs on the same requests); the
 * report keeps those runs as they are (`runs`) and adds, per pair,
 *   mean  = sum over seeds / n,
 *   se    = sample standard deviation / sqrt(n),
 * and for every pair after the first the paired ratio first / pair, seed by seed (its mean and s.e.:
 * the pairs share each seed's requests, so the ratio's spread is much smaller than either mean's).
 */
import { Problem } from '../../shared/config';
import { alignedLines } from './text-table';
import { calibrationLines, poolCalibration } from './calibration-table';
import type { ViewCalibration } from './rollout';

/** The most seeds one command runs (each is a whole evaluation). */
export const MAX_SEEDS = 1000;

/** Mean of a non-empty list. */
export const mean = (a: readonly number[]): number => a.reduce((x, y) => x + y, 0) / a.length;

/** Standard error of the mean (sample standard deviation / sqrt(n)); 0 for one value. */
export const se = (a: readonly number[]): number => {
  const m = mean(a);
  return a.length > 1 ? Math.sqrt(a.reduce((x, y) => x + (y - m) ** 2, 0) / (a.length - 1) / a.length) : 0;
};

/**
 * `a-b` (inclusive) or `a,b,...`: at least 2 distinct integer seeds, at most MAX_SEEDS; a Problem
 * (the words after "--seeds: ") otherwise.
 */
export function parseSeeds(text: string): number[] | Problem {
  const t = text.trim();
  const range = /^(-?\d+)-(-?\d+)$/.exec(t);
  let seeds: number[];
  if (range) {
    const [a, b] = [Number(range[1]), Number(range[2])];
    if (b < a) return new Problem(`the range ${t} runs backwards (write a-b with a <= b)`);
    if (b - a + 1 > MAX_SEEDS) return new Problem(`${b - a + 1} seeds, more than ${MAX_SEEDS}`);
    seeds = Array.from({ length: b - a + 1 }, (_, k) => a + k);
  } else {
    const parts = t.split(',').map((s) => s.trim());
    seeds = [];
    for (const s of parts) {
      if (!/^-?\d+$/.test(s) || !Number.isSafeInteger(Number(s)))
        return new Problem(`expected a-b or a comma-separated list of integers, got ${JSON.stringify(text)}`);
      seeds.push(Number(s));
    }
    if (seeds.length > MAX_SEEDS) return new Problem(`${seeds.length} seeds, more than ${MAX_SEEDS}`);
    const dup = seeds.find((s, k) => seeds.indexOf(s) !== k);
    if (dup !== undefined) return new Problem(`seed ${dup} is listed twice`);
  }
  if (seeds.length < 2) return new Problem('give at least 2 seeds (for one seed: --seed)');
  return seeds;
}

export interface MeanSe {
  mean: number;
  se: number;
}

export interface SeedsPairSummary {
  policy: string;
  throughputRate: MeanSe;
  /** first pair's throughput rate / this pair's, seed by seed; null for the first pair */
  firstOverPair: MeanSe | null;
  replicaSeconds: MeanSe;
  schedulingCost: MeanSe;
}

/** What the statistics read of one seed's report (eval.ts EvalReport has it; not imported, so this file needs nothing of eval.ts). */
export interface SeedRun {
  results: readonly {
    policy: string;
    throughputRate: number;
    replicaSeconds: number;
    schedulingCost: number;
    viewCalibration?: ViewCalibration;
  }[];
  oracle: { throughputRate: number } | null;
}

/** The JSON of `kais eval --seeds ... --json` (R: eval.ts EvalReport). */
export interface EvalSeedsReport<R extends SeedRun = SeedRun> {
  scenario: string;
  workload: string | null;
  trace: string | null;
  seeds: number[];
  frames: number;
  load: number;
  dequeue: string;
  slotS: number;
  view: 'global' | 'agent';
  filters: boolean;
  /** Per pair, in the order of --policies (the first is the one every ratio is of). */
  summary: SeedsPairSummary[];
  /**
   * The pair with the highest mean throughput rate among the others (null with one pair), the first
   * pair / it, and the first pair's replica-seconds / its, paired seed by seed (the resource side of a
   * comparison: the same throughput on fewer replicas is a win too).
   */
  bestOther: { policy: string; firstOverPair: MeanSe; replicaRatio: MeanSe } | null;
  /** The oracle bound's mean over the seeds; null if any seed left it out. */
  oracle: MeanSe | null;
  /** What the GPG model runs, when an x/gpg pair ran. */
  gpg?: string;
  /** What the guard of the cmmac+guard pairs runs, when one ran (eval.ts EvalReport.guard). */
  guard?: string;
  /** Each seed's report, as `kais eval --seed s --json` prints it. */
  runs: R[];
}

const meanSe = (v: readonly number[], digits = 4): MeanSe => {
  const f = 10 ** digits;
  return { mean: Math.round(mean(v) * f) / f, se: Math.round(se(v) * f) / f };
};

/** Per pair mean and s.e. over the runs (same pairs in the same order in every run). */
export function summariseSeeds(runs: readonly SeedRun[]): Pick<EvalSeedsReport, 'summary' | 'bestOther' | 'oracle'> {
  if (runs.length === 0) throw new Error('summariseSeeds: no runs');
  const pairs = runs[0].results.map((r) => r.policy);
  const of = (k: number, f: (r: SeedRun['results'][number]) => number) => runs.map((run) => f(run.results[k]));
  const first = of(0, (r) => r.throughputRate);
  const firstReplicaS = of(0, (r) => r.replicaSeconds);
  const summary = pairs.map((policy, k) => {
    const rate = of(k, (r) => r.throughputRate);
    return {
      policy,
      throughputRate: meanSe(rate),
      firstOverPair: k === 0 ? null : meanSe(first.map((x, i) => (rate[i] > 0 ? x / rate[i] : Number.NaN))),
      replicaSeconds: meanSe(
        of(k, (r) => r.replicaSeconds),
        1,
      ),
      schedulingCost: meanSe(
        of(k, (r) => r.schedulingCost),
        2,
      ),
    };
  });
  const others = summary.slice(1);
  const best = others.length ? others.reduce((b, x) => (x.throughputRate.mean > b.throughputRate.mean ? x : b)) : null;
  const oracles = runs.map((r) => r.oracle?.throughputRate ?? null);
  return {
    summary,
    bestOther: best
      ? {
          policy: best.policy,
          firstOverPair: best.firstOverPair!,
          replicaRatio: meanSe(
            of(summary.indexOf(best), (r) => r.replicaSeconds).map((x, i) => (x > 0 ? firstReplicaS[i] / x : Number.NaN)),
            3,
          ),
        }
      : null,
    oracle: oracles.every((x): x is number => x !== null) ? meanSe(oracles) : null,
  };
}

/** The table printed on a terminal: pairs by mean throughput, the first pair's paired ratio to each. */
export function formatSeedsTable(r: EvalSeedsReport): string {
  const first = r.summary[0].policy;
  const f = (m: MeanSe, d = 3) => `${m.mean.toFixed(d)} (${m.se.toFixed(d)})`;
  const head = ['policy', 'throughput (s.e.)', `${first} / pair (s.e.)`, 'replica-s', 'cost'];
  // pair indices by mean throughput, for the table and the calibration block alike
  const order = r.summary.map((_, k) => k).sort((a, b) => r.summary[b].throughputRate.mean - r.summary[a].throughputRate.mean);
  const rows = order
    .map((k) => r.summary[k])
    .map((x) => [
      x.policy,
      f(x.throughputRate),
      x.firstOverPair ? f(x.firstOverPair) : '-',
      x.replicaSeconds.mean.toFixed(0),
      x.schedulingCost.mean.toFixed(1),
    ]);
  const src = r.trace ? `trace ${r.trace}` : `workload ${r.workload}`;
  const s = r.seeds;
  const contiguous = s.every((x, k) => k === 0 || x === s[k - 1] + 1);
  const seedText = contiguous ? `seeds ${s[0]}..${s[s.length - 1]}` : `seeds ${s.join(',')}`;
  return [
    `scenario ${r.scenario}, ${src}, ${seedText} (${s.length}), ${r.frames} frames, load ${r.load}, dequeue ${r.dequeue}, ${r.slotS} s slots; mean (standard error) over the seeds`,
    ...alignedLines(head, rows),
    r.oracle ? `oracle (upper bound)  ${f(r.oracle)}` : 'oracle (upper bound)  -  (not computed on every seed)',
    ...(r.bestOther
      ? [
          `${first} / the best other pair (${r.bestOther.policy}): ${f(r.bestOther.firstOverPair)}, paired seed by seed, ` +
            `at ${r.bestOther.replicaRatio.mean.toFixed(2)}x its replica-seconds (s.e. ${r.bestOther.replicaRatio.se.toFixed(2)})`,
        ]
      : []),
    ...(r.gpg !== undefined ? [`orchestration: ${r.gpg}`] : []),
    ...(r.guard !== undefined ? [`cmmac+guard: ${r.guard}`] : []),
    ...pooledCalibration(r, order),
  ].join('\n');
}

/** With --calibration: each pair's counts added over the seeds, pairs in `order` (the table's). */
function pooledCalibration(r: EvalSeedsReport, order: readonly number[]): string[] {
  const pooled = order.map((k) => {
    const cals = r.runs.map((run) => run.results[k].viewCalibration).filter((c): c is ViewCalibration => c !== undefined);
    return { policy: r.summary[k].policy, viewCalibration: cals.length === r.runs.length ? poolCalibration(cals) : undefined };
  });
  return calibrationLines(pooled, 'view calibration (seeds pooled)');
}
