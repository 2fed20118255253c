/**
 * Synthetic workloads: the request patterns of the KaiS experiments (kais-reconstruction.md 7.1,
 * ALGORITHMS.md 4), calibrated on figures measured from the Alibaba v2017 trace
 * (calibration.json, written by scripts/prepare-workload.ts; figures only, no trace rows).
 *
 * | pattern | arrivals                                                    | service mix                                    |
 * | ------- | ----------------------------------------------------------- | ---------------------------------------------- |
 * | p1      | Poisson, rate R x (1 + 0.5 sin(2 pi t / T)), T = 4 frames    | CPU-heavy share oscillates with the rate       |
 * | p2      | same rate curve                                             | memory-heavy share oscillates with the rate    |
 * | p3      | p1 at twice the frequency (T / 2)                           | as p1                                          |
 * | p4      | jobs: Poisson, modulated by a lognormal AR(1) factor on     | one service per job (by services[w].weight),   |
 * |         | windows of one trace-minute; tasks per job from the trace;   | one eAP per job                                |
 * |         | a job's tasks arrive in a burst as long as its trace spread  |                                                |
 * | mixed   | segments of 2 T (8 frames) of p1, p2, p3, p4, p1, ... in turn |                                               |
 *
 * R = workload.ratePerS x load; a frame = slotS x slotsPerFrame. "CPU-heavy": cpuCores x workScale
 * above the median of the scenario's services; "memory-heavy": memGB above the median. The service
 * of a request at time t is drawn with weights weight[w] x (1 + 0.8 s(t) h[w]), s(t) the sine of
 * the rate curve, h[w] = +1 for heavy and -1 for the others. eAPs are uniform in p1..p3.
 *
 * Task sizes in every pattern: duration from the trace's duration quantiles (log-interpolated),
 * plan_cpu from its frequency table, independently; they become work, deadline and input size
 * through the same rules as a trace replay (shapedRequests in to-requests.ts).
 *
 * Streaming (source.ts): the patterns are generators that push tasks and yield watermarks, so
 * `syntheticSource` produces requests as the simulator asks (holding the p4 bursts in progress and
 * the p4 modulation path, one number per trace-minute window); `generateSynthetic` drains it.
 *
 * p4 burstiness: a trace-minute holds K = perMinuteMeanTasks tasks on average, so one window lasts
 * K / R simulated seconds. Compound-Poisson job batches alone give a squared CV of per-window
 * counts of E[S^2] / (E[S] K); the modulation m = exp(sigma z), z an AR(1) with unit variance, adds
 * the rest of the trace's measured CV: sigma^2 = ln(1 + max(0, cv^2 - E[S^2] / (E[S] K))), lag-1
 * correlation min(0.99, lag1 x cv^2 / Var m). The path of m is normalised to mean 1 over the run, so
 * the mean rate stays R.
 *
 * Seeded: Rng.derive(seed, "workload/synthetic/<pattern>") (and "workload/shape" for shaping).
 */
import type { Request } from '../../shared/domain';
import { Rng } from '../../shared/rng';
import type { Scenario } from '../../shared/scenario';
import calibrationJson from './calibration.json';
import { TASK_CHUNK, drain } from './source';
import type { RequestSource, TaskSink } from './source';
import { coreSeconds, median, shapedRequests } from './to-requests';

export interface QuantileTable {
  /** Probabilities, increasing from 0 to 1. */
  p: number[];
  /** Values at those probabilities. */
  v: number[];
}

/** Figures measured from the trace by scripts/prepare-workload.ts. */
export interface Calibration {
  source: string;
  rows: number;
  jobs: number;
  statusCounts: Record<string, number>;
  arrivalRangeS: [number, number] | number[];
  missing: { planCpuShare: number; planMemShare: number; endShare: number };
  /** max(1, end - create) of rows with a valid end (s). */
  durationS: QuantileTable;
  /** plan_cpu values (100 = one core) and their shares among rows that have one. */
  planCpu: { values: number[]; shares: number[] };
  planMem: QuantileTable;
  tasksPerJob: QuantileTable & { mean: number };
  /** last - first create time of the tasks of one job (s). */
  jobSpreadS: QuantileTable;
  arrivals: {
    spanS: number;
    meanTaskRatePerS: number;
    meanJobRatePerS: number;
    perMinuteMeanTasks: number;
    perMinuteCv: number;
    perMinuteLag1Autocorr: number;
  };
  taskCoreS: { median: number };
}

export const CALIBRATION = calibrationJson as unknown as Calibration;

export type PatternName = 'p1' | 'p2' | 'p3' | 'p4';
export const PATTERNS: PatternName[] = ['p1', 'p2', 'p3', 'p4'];

/** Pattern constants (documented in the table above). */
export const SYNTHETIC = {
  periodFrames: 4,
  rateAmplitude: 0.5,
  mixAmplitude: 0.8,
  mixedSegmentPeriods: 2,
} as const;

export interface SyntheticOptions {
  scenario: Scenario;
  pattern: PatternName | 'mixed';
  seed: number;
  load: number;
  durationS: number;
  calibration?: Calibration;
}

/** Inverse CDF of a quantile table at u in [0, 1); log-linear between points when `log` and values are > 0. */
export function sampleQuantile(t: QuantileTable, u: number, log: boolean): number {
  const p = t.p;
  const v = t.v;
  let lo = 0;
  let hi = p.length - 1;
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if (p[mid] <= u) lo = mid;
    else hi = mid;
  }
  const span = p[hi] - p[lo];
  const f = span > 0 ? Math.min(1, Math.max(0, (u - p[lo]) / span)) : 0;
  const a = v[lo];
  const b = v[hi];
  if (log && a > 0 && b > 0) return a * Math.pow(b / a, f);
  return a + f * (b - a);
}

/** Samplers built once per calibration. */
class TaskSizes {
  private readonly cpuCum: Float64Array;
  /** E[S] and E[S^2] of the tasks-per-job sampler (numerical integration over u). */
  readonly tasksMean: number;
  readonly tasksMeanSq: number;

  constructor(private readonly cal: Calibration) {
    const shares = cal.planCpu.shares;
    this.cpuCum = new Float64Array(shares.length);
    let acc = 0;
    for (let i = 0; i < shares.length; i++) this.cpuCum[i] = acc += shares[i];
    const m = 20000;
    let s1 = 0;
    let s2 = 0;
    for (let i = 0; i < m; i++) {
      const s = this.tasksOfU((i + 0.5) / m);
      s1 += s;
      s2 += s * s;
    }
    this.tasksMean = s1 / m;
    this.tasksMeanSq = s2 / m;
  }

  private tasksOfU(u: number): number {
    return Math.max(1, Math.round(sampleQuantile(this.cal.tasksPerJob, u, false)));
  }

  tasksPerJob(rng: Rng): number {
    return this.tasksOfU(rng.next());
  }

  /** A job's burst length in trace seconds (1 s resolution: spread + 1). */
  jobSpreadTraceS(rng: Rng): number {
    return sampleQuantile(this.cal.jobSpreadS, rng.next(), false) + 1;
  }

  coreS(rng: Rng): number {
    const dur = sampleQuantile(this.cal.durationS, rng.next(), true);
    const u = rng.next() * this.cpuCum[this.cpuCum.length - 1];
    let k = 0;
    while (k < this.cpuCum.length - 1 && u >= this.cpuCum[k]) k++;
    return coreSeconds(this.cal.planCpu.values[k], dur);
  }
}

interface Ctx {
  scenario: Scenario;
  rate: number;
  rng: Rng;
  sizes: TaskSizes;
  cal: Calibration;
  /** services[w].weight (all 1 when every weight is 0). */
  baseWeights: Float64Array;
  out: TaskSink;
}

/** Services of one class with cumulative base weights, for O(log W) weighted picks. */
interface ServiceClass {
  ids: Int32Array;
  cum: Float64Array;
  total: number;
}

/** Splits services into heavy (score above the median score) and the others. */
function splitByScore(scores: number[], weights: Float64Array): { heavy: ServiceClass; light: ServiceClass } {
  const med = median(scores);
  const make = (heavy: boolean): ServiceClass => {
    const ids = Int32Array.from(scores.flatMap((sc, w) => (sc > med === heavy ? [w] : [])));
    const cum = new Float64Array(ids.length);
    let acc = 0;
    for (let i = 0; i < ids.length; i++) cum[i] = acc += weights[ids[i]];
    return { ids, cum, total: acc };
  };
  return { heavy: make(true), light: make(false) };
}

function pickIn(c: ServiceClass, rng: Rng): number {
  const u = rng.next() * c.total;
  let lo = 0;
  let hi = c.cum.length - 1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (c.cum[mid] > u) hi = mid;
    else lo = mid + 1;
  }
  return c.ids[lo];
}

/**
 * p1 / p2 / p3 on [t0, t1): thinning of a Poisson process at the peak rate; phase from absolute
 * time. The service is drawn with weights weight[w] x (1 + b s(t) h[w]): first the class (heavy
 * with probability H(1 + b s) / (H(1 + b s) + L(1 - b s)), H and L the classes' weight sums), then
 * a service within the class by weight.
 */
function* periodic(
  ctx: Ctx,
  t0: number,
  t1: number,
  periodS: number,
  classes: { heavy: ServiceClass; light: ServiceClass },
): Generator<number, void, void> {
  const { rng, out } = ctx;
  const { heavy, light } = classes;
  const a = SYNTHETIC.rateAmplitude;
  const b = SYNTHETIC.mixAmplitude;
  const peak = ctx.rate * (1 + a);
  const numEaps = ctx.scenario.eaps.length;
  const omega = (2 * Math.PI) / periodS;
  let t = t0;
  for (;;) {
    t += rng.exp(peak);
    if (t >= t1) break;
    const s = Math.sin(omega * t);
    if (rng.next() * (1 + a) >= 1 + a * s) continue;
    const h = heavy.total * (1 + b * s);
    const l = light.total * (1 - b * s);
    const service = rng.next() * (h + l) < h ? pickIn(heavy, rng) : pickIn(light, rng);
    out.push(t, service, rng.int(numEaps), ctx.sizes.coreS(rng));
    if (out.fresh >= TASK_CHUNK) yield t; // arrivals only grow
  }
}

/** p4 on [t0, t1): modulated Poisson job arrivals, each a burst of tasks of one service at one eAP. */
function* stochastic(ctx: Ctx, t0: number, t1: number): Generator<number, void, void> {
  const { rng, out, sizes, cal } = ctx;
  const a = cal.arrivals;
  const k = a.perMinuteMeanTasks;
  const winS = k / ctx.rate;
  // callers check the rate (shared/scenario.ts MIN_RATE_PER_S); an infinite window would never end
  if (!Number.isFinite(winS)) return;
  const cv2 = a.perMinuteCv * a.perMinuteCv;
  const varM = Math.max(0, cv2 - sizes.tasksMeanSq / (sizes.tasksMean * k));
  const sigma = Math.sqrt(Math.log(1 + varM));
  const rho = varM > 0 ? Math.min(0.99, Math.max(0, (a.perMinuteLag1Autocorr * cv2) / varM)) : 0;
  const nWin = Math.max(1, Math.ceil((t1 - t0) / winS));
  const m = new Float64Array(nWin);
  let z = rng.normal();
  let sum = 0;
  for (let i = 0; i < nWin; i++) {
    if (i > 0) z = rho * z + Math.sqrt(1 - rho * rho) * rng.normal();
    m[i] = Math.exp(sigma * z);
    sum += m[i];
  }
  const jobRate = ctx.rate / sizes.tasksMean;
  const simPerTraceS = a.meanTaskRatePerS / ctx.rate;
  const numEaps = ctx.scenario.eaps.length;
  for (let i = 0; i < nWin; i++) {
    const rate = (jobRate * m[i] * nWin) / sum;
    const end = Math.min(t1, t0 + (i + 1) * winS);
    let t = t0 + i * winS;
    for (;;) {
      t += rng.exp(rate);
      if (t >= end) break;
      const n = sizes.tasksPerJob(rng);
      const service = rng.weighted(ctx.baseWeights);
      const eap = rng.int(numEaps);
      const burstS = sizes.jobSpreadTraceS(rng) * simPerTraceS;
      for (let j = 0; j < n; j++) {
        out.push(t + rng.next() * burstS, service, eap, sizes.coreS(rng));
      }
      if (out.fresh >= TASK_CHUNK) yield t; // later jobs start no earlier, their tasks come after their start
    }
  }
}

/** Requests of a synthetic pattern over [0, durationS). Same options and seed -> identical requests. */
export function generateSynthetic(opts: SyntheticOptions): Request[] {
  return drain(syntheticSource(opts));
}

/** The requests of generateSynthetic as a stream (source.ts). */
export function syntheticSource(opts: SyntheticOptions): RequestSource {
  const { scenario, durationS } = opts;
  const cal = opts.calibration ?? CALIBRATION;
  const rate = scenario.workload.ratePerS * opts.load;
  const shape = { scenario, seed: opts.seed, durationS };
  if (!(rate > 0) || !(durationS > 0)) return shapedRequests(function* () {}, shape);
  const services = scenario.services;
  const weights = Float64Array.from(services, (s) => s.weight);
  if (!weights.some((x) => x > 0)) weights.fill(1);
  const periodS = SYNTHETIC.periodFrames * scenario.slotS * scenario.slotsPerFrame;
  const cpuHeavy = splitByScore(
    services.map((s) => s.cpuCores * s.workScale),
    weights,
  );
  const memHeavy = splitByScore(
    services.map((s) => s.memGB),
    weights,
  );
  const sizes = new TaskSizes(cal);
  return shapedRequests(function* (out: TaskSink): Generator<number, void, void> {
    const ctx: Ctx = {
      scenario,
      rate,
      rng: Rng.derive(opts.seed, `workload/synthetic/${opts.pattern}`),
      sizes,
      cal,
      baseWeights: weights,
      out,
    };
    const run = (p: PatternName, t0: number, t1: number): Generator<number, void, void> => {
      if (p === 'p1') return periodic(ctx, t0, t1, periodS, cpuHeavy);
      if (p === 'p2') return periodic(ctx, t0, t1, periodS, memHeavy);
      if (p === 'p3') return periodic(ctx, t0, t1, periodS / 2, cpuHeavy);
      return stochastic(ctx, t0, t1);
    };
    if (opts.pattern === 'mixed') {
      // segment k arrives from k x segS on: the watermarks of one segment hold for the next ones
      const segS = SYNTHETIC.mixedSegmentPeriods * periodS;
      for (let k = 0; k * segS < durationS; k++) yield* run(PATTERNS[k % PATTERNS.length], k * segS, Math.min(durationS, (k + 1) * segS));
    } else {
      yield* run(opts.pattern, 0, durationS);
    }
  }, shape);
}
