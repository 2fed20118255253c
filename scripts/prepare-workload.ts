/**
 * Measures the calibration figures of the synthetic workload from an Alibaba v2017 batch_task CSV
 * and writes them to training/workload/calibration.json (figures only, never trace rows: the trace
 * owner's terms forbid copying rows into the repository).
 *
 * Run: `npm run build && node dist/scripts/prepare-workload.js [path/to/batch_task.csv]`
 * (default: ../shared/data/alibaba/v2017_batch_task.csv next to the repository).
 */
import * as fs from 'fs';
import * as path from 'path';
import { isUsageError } from '../shared/errors';
import { loadTrace, type TraceRow } from '../training/workload/alibaba';
import { median, traceTaskCoreS } from '../training/workload/to-requests';
import type { Calibration, QuantileTable } from '../training/workload/synthetic';

/** Dense grid for the tables the generator samples from; coarse one for the figures it only reports. */
const DENSE_P = [...Array.from({ length: 101 }, (_, i) => i / 100), 0.995, 0.999].sort((a, b) => a - b);
const COARSE_P = [0, 0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 1];

function repoRoot(): string {
  let d = __dirname;
  for (let i = 0; i < 6; i++) {
    const pkg = path.join(d, 'package.json');
    if (fs.existsSync(pkg) && (JSON.parse(fs.readFileSync(pkg, 'utf8')) as { name?: string }).name === 'kais') return d;
    d = path.dirname(d);
  }
  return process.cwd();
}

/** Linear-interpolated quantile (type 7) of sorted values. */
function quantileSorted(a: Float64Array, p: number): number {
  const h = (a.length - 1) * p;
  const lo = Math.floor(h);
  const hi = Math.min(a.length - 1, lo + 1);
  return a[lo] + (h - lo) * (a[hi] - a[lo]);
}

function table(values: number[], ps: number[]): QuantileTable {
  const a = Float64Array.from(values).sort();
  return { p: ps, v: ps.map((p) => sig(quantileSorted(a, p))) };
}

/** Rounds to 6 significant digits (figures, not false precision). */
function sig(x: number): number {
  return x === 0 ? 0 : Number(x.toPrecision(6));
}

/** The calibration figures of a set of trace rows. */
export function measure(rows: TraceRow[], source: string): Calibration {
  const statusCounts: Record<string, number> = {};
  let minT = Infinity;
  let maxT = -Infinity;
  let noCpu = 0;
  let noMem = 0;
  let noEnd = 0;
  const durations: number[] = [];
  const cpuCounts = new Map<number, number>();
  const mems: number[] = [];
  const jobs = new Map<string, { n: number; first: number; last: number }>();
  for (const r of rows) {
    statusCounts[r.status] = (statusCounts[r.status] ?? 0) + 1;
    minT = Math.min(minT, r.arrivalS);
    maxT = Math.max(maxT, r.arrivalS);
    if (r.endS !== null && r.endS >= r.arrivalS) durations.push(Math.max(1, r.endS - r.arrivalS));
    else noEnd++;
    if (r.planCpu !== null && r.planCpu > 0) cpuCounts.set(r.planCpu, (cpuCounts.get(r.planCpu) ?? 0) + 1);
    else noCpu++;
    if (r.planMem !== null) mems.push(r.planMem);
    else noMem++;
    const j = jobs.get(r.jobId);
    if (j) {
      j.n++;
      j.first = Math.min(j.first, r.arrivalS);
      j.last = Math.max(j.last, r.arrivalS);
    } else jobs.set(r.jobId, { n: 1, first: r.arrivalS, last: r.arrivalS });
  }
  const spanS = maxT - minT + 1;
  const cpuTotal = [...cpuCounts.values()].reduce((s, x) => s + x, 0);
  const cpuValues = [...cpuCounts.keys()].sort((a, b) => a - b);
  const tasksPerJob = [...jobs.values()].map((j) => j.n);
  const spreads = [...jobs.values()].map((j) => j.last - j.first);

  // Per-minute task counts over the whole span: burstiness at the scale of ~70 tasks.
  const minutes = Math.floor(spanS / 60);
  const perMin = new Float64Array(minutes);
  for (const r of rows) {
    const m = Math.floor((r.arrivalS - minT) / 60);
    if (m < minutes) perMin[m]++;
  }
  let mean = 0;
  for (const c of perMin) mean += c;
  mean /= minutes;
  let v = 0;
  let cov = 0;
  for (let i = 0; i < minutes; i++) {
    v += (perMin[i] - mean) ** 2;
    if (i > 0) cov += (perMin[i] - mean) * (perMin[i - 1] - mean);
  }
  const cv = Math.sqrt(v / minutes) / mean;
  const lag1 = cov / v;

  return {
    source,
    rows: rows.length,
    jobs: jobs.size,
    statusCounts,
    arrivalRangeS: [minT, maxT],
    missing: {
      planCpuShare: sig(noCpu / rows.length),
      planMemShare: sig(noMem / rows.length),
      endShare: sig(noEnd / rows.length),
    },
    durationS: table(durations, DENSE_P),
    planCpu: { values: cpuValues, shares: cpuValues.map((c) => sig((cpuCounts.get(c) ?? 0) / cpuTotal)) },
    planMem: table(mems, COARSE_P),
    tasksPerJob: { ...table(tasksPerJob, DENSE_P), mean: sig(rows.length / jobs.size) },
    jobSpreadS: table(spreads, COARSE_P),
    arrivals: {
      spanS,
      meanTaskRatePerS: sig(rows.length / spanS),
      meanJobRatePerS: sig(jobs.size / spanS),
      perMinuteMeanTasks: sig(mean),
      perMinuteCv: sig(cv),
      perMinuteLag1Autocorr: sig(lag1),
    },
    taskCoreS: { median: sig(median(traceTaskCoreS(rows))) },
  };
}

function main(): void {
  const root = repoRoot();
  const input = process.argv[2] ?? path.resolve(root, '../shared/data/alibaba/v2017_batch_task.csv');
  const out = path.join(root, 'training/workload/calibration.json');
  const trace = loadTrace(input, (line) => console.error(line));
  const cal = measure(trace.rows, `${path.basename(trace.file)} (${trace.layout}, Alibaba Cluster Trace Program)`);
  fs.writeFileSync(out, JSON.stringify(cal, null, 2) + '\n');
  const q = (t: QuantileTable, p: number): number => t.v[t.p.indexOf(p)];
  console.log(`read ${trace.file}: ${cal.rows} tasks, ${cal.jobs} jobs, arrivals ${cal.arrivalRangeS[0]} .. ${cal.arrivalRangeS[1]} s`);
  console.log(`status: ${JSON.stringify(cal.statusCounts)}`);
  console.log(`missing: plan_cpu ${cal.missing.planCpuShare}, plan_mem ${cal.missing.planMemShare}, end ${cal.missing.endShare}`);
  console.log(
    `duration s: p10 ${q(cal.durationS, 0.1)} p50 ${q(cal.durationS, 0.5)} p90 ${q(cal.durationS, 0.9)} p99 ${q(cal.durationS, 0.99)} max ${q(cal.durationS, 1)}`,
  );
  console.log(`plan_cpu: ${cal.planCpu.values.map((x, i) => `${x}:${cal.planCpu.shares[i]}`).join(' ')}`);
  console.log(`plan_mem: p50 ${q(cal.planMem, 0.5)} p90 ${q(cal.planMem, 0.9)} p99 ${q(cal.planMem, 0.99)}`);
  console.log(
    `tasks/job: mean ${cal.tasksPerJob.mean} p50 ${q(cal.tasksPerJob, 0.5)} p90 ${q(cal.tasksPerJob, 0.9)} p99 ${q(cal.tasksPerJob, 0.99)} max ${q(cal.tasksPerJob, 1)}`,
  );
  console.log(`job spread s: p50 ${q(cal.jobSpreadS, 0.5)} p90 ${q(cal.jobSpreadS, 0.9)} max ${q(cal.jobSpreadS, 1)}`);
  const a = cal.arrivals;
  console.log(
    `arrivals: ${a.meanTaskRatePerS} tasks/s, ${a.meanJobRatePerS} jobs/s, per minute mean ${a.perMinuteMeanTasks} cv ${a.perMinuteCv} lag-1 ${a.perMinuteLag1Autocorr}`,
  );
  console.log(`task core-s median ${cal.taskCoreS.median}`);
  console.log(`wrote ${out}`);
}

if (require.main === module) {
  try {
    main();
  } catch (e) {
    if (!isUsageError(e)) throw e;
    console.error(e.message);
    process.exitCode = 2;
  }
}
