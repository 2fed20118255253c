/**
 * Trace rows -> requests, and the request shaping rules shared with the synthetic generator.
 *
 * The mapping is part of the project's contract (DESIGN.md "Trace format"): keep it stable and
 * record any change here. It works on any time window of the trace, in any row order.
 *
 * | request   | rule                                                                                 |
 * | --------- | ------------------------------------------------------------------------------------ |
 * | rows      | every row, whatever its status (the request arrived even if the batch task failed);  |
 * |           | sorted by trace arrival, file order breaking ties. One request per task.            |
 * | used rows | the first N = ceil(ratePerS x load x durationS) rows, or all n rows if fewer          |
 * | arrivalS  | offset + (arrival - first arrival + u) x c, u ~ U[0,1) seeded (1 s trace resolution: |
 * |           | a trace second is spread over its compressed interval). Replay starts at the        |
 * |           | window's first arrival, whatever its absolute time.                                 |
 * | c         | RATE-NORMALISED compression (simulated s per trace s) = (m / span) / (ratePerS x     |
 * |           | load), m rows replayed, span = their last - first arrival + 1 s. So every window     |
 * |           | arrives at the scenario's rate with the trace's own burstiness and mix, and `--load  |
 * |           | x` multiplies the arrival rate by x.                                                 |
 * | wrap      | when n < N the window is replayed again, shifted by the previous pieces' length      |
 * |           | (m / rate), until N rows are placed; each piece is normalised over its own rows      |
 * |           | (the last may replay only the first rows). Said once through warn().               |
 * | service   | fmix32(hashString(jobId)) mod numServices: the tasks of one job are one application, |
 * |           | so a job is a burst of one service                                                   |
 * | eap       | fmix32(hashString("eap/" + jobId)) mod numEaps: a job arrives at one eAP             |
 * | taskCoreS | max(planCpu, 1) / 100 x max(end - arrival, 1 s), one instance (instance_num unused).  |
 * |           | Imputation: end null (0 in the trace) or before arrival -> median duration of the   |
 * |           | valid used rows (30 s if none); planCpu null or <= 0 -> median planCpu of the used   |
 * |           | rows (50 if none).                                                                   |
 * | workCoreS | 0.12 x services[w].workScale x clamp((taskCoreS / M)^0.5, 0.2, 5), M the median      |
 * |           | taskCoreS of the tasks shaped: the median request works 0.12 core-s x workScale, the |
 * |           | spread of real task sizes is kept (square root), heavy tails are clamped (25x ratio). |
 * | deadlineS | arrivalS + max(1 ms, deadlineBaseS + deadlineSlack x (workCoreS /                    |
 * |           | services[w].cpuCores) x j), j ~ U[0.75, 1.25] seeded                                 |
 * | inputMB   | workload.inputMB x exp(0.5 z - 0.125), z ~ N(0,1) seeded (mean-1 lognormal, sigma    |
 * |           | 0.5), clamped to [0.05, 5]                                                           |
 * | id        | dense 0..n-1 in arrival order; only arrivals in [0, durationS) are kept              |
 * | gaps      | one gap between consecutive used arrivals of >= 1 h covering over half their span: |
 * |           | a warning line; over 1e7 s: a UsageError (checkReplayGaps, below)                   |
 *
 * Seeded draws: Rng.derive(seed, "workload/trace") gives u in row order, piece by piece;
 * Rng.derive(seed, "workload/shape") gives j then z per request in id order. Same rows + same
 * options -> same requests.
 *
 * Streaming (source.ts): `traceSource` gives the requests one by one as the simulator asks; only
 * the rows and per-row tables are held (the trace's size, not the run's). `toRequests` is the
 * same source drained into an array. M (the median taskCoreS) comes from one pass over the tasks
 * before the first request (streamMedian).
 */
import type { Request } from '../../shared/domain';
import { Rng, hashString } from '../../shared/rng';
import type { Scenario } from '../../shared/scenario';
import { UsageError } from '../../shared/errors';
import type { TraceRow } from './alibaba';
import { TASK_CHUNK, drain, median, shapedSource } from './source';
import type { RequestSource, TaskGen, TaskSink } from './source';

export { median } from './source';

/** Shaping constants (documented in the table above). */
export const SHAPE = {
  medianWorkCoreS: 0.12,
  workExponent: 0.5,
  workRatioMin: 0.2,
  workRatioMax: 5,
  deadlineJitterMin: 0.75,
  deadlineJitterMax: 1.25,
  minRelativeDeadlineS: 0.001,
  inputSigma: 0.5,
  inputMinMB: 0.05,
  inputMaxMB: 5,
  /** Imputation fallbacks when no row of the window has a valid value. */
  defaultDurationS: 30,
  defaultPlanCpu: 50,
} as const;

export interface ShapeOptions {
  scenario: Scenario;
  seed: number;
  durationS: number;
}

/** Core-seconds of one task instance: plan_cpu 100 = one core; durations under the trace's 1 s resolution count as 1 s. */
export function coreSeconds(planCpu: number, durationS: number): number {
  return (Math.max(planCpu, 1) / 100) * Math.max(durationS, 1);
}

/** 32-bit avalanche finaliser (murmur3 fmix32): FNV-1a's low bits are weak for short numeric ids. */
export function fmix32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** Stable bucket of a job id: the service class (salt "") or the arrival eAP (salt "eap/"). */
export function jobBucket(jobId: string, salt: string, n: number): number {
  return fmix32(hashString(salt + jobId)) % n;
}

/**
 * Per-row task core-seconds with the imputation rules of the table above (median duration /
 * planCpu of the valid rows given). Shared with scripts/prepare-workload.ts.
 */
export function traceTaskCoreS(rows: readonly TraceRow[]): Float64Array {
  const durs: number[] = [];
  const cpus: number[] = [];
  for (const r of rows) {
    if (r.endS !== null && r.endS >= r.arrivalS) durs.push(r.endS - r.arrivalS);
    if (r.planCpu !== null && r.planCpu > 0) cpus.push(r.planCpu);
  }
  const durFill = durs.length > 0 ? median(durs) : SHAPE.defaultDurationS;
  const cpuFill = cpus.length > 0 ? median(cpus) : SHAPE.defaultPlanCpu;
  const out = new Float64Array(rows.length);
  for (let i = 0; i < rows.length; i++) {
    const r = rows[i];
    const dur = r.endS !== null && r.endS >= r.arrivalS ? r.endS - r.arrivalS : durFill;
    const cpu = r.planCpu !== null && r.planCpu > 0 ? r.planCpu : cpuFill;
    out[i] = coreSeconds(cpu, dur);
  }
  return out;
}

/** Per task, in id order: the request with work, deadline and input size by the rules of the table above. */
export type ShapeFn = (id: number, arrivalS: number, service: number, eap: number, taskCoreS: number) => Request;

/**
 * The shaping rules for one run: given M (the median taskCoreS of the tasks shaped), a function
 * that shapes tasks in id order, with its own Rng.derive(seed, "workload/shape").
 */
export function shaper(opts: ShapeOptions): (medianTaskCoreS: number) => ShapeFn {
  const wl = opts.scenario.workload;
  const services = opts.scenario.services;
  const halfSigma2 = 0.5 * SHAPE.inputSigma * SHAPE.inputSigma;
  return (med) => {
    const rng = Rng.derive(opts.seed, 'workload/shape');
    return (id, arrivalS, service, eap, taskCoreS) => {
      const svc = services[service];
      let ratio = Math.sqrt(taskCoreS / med);
      if (SHAPE.workExponent !== 0.5) ratio = Math.pow(taskCoreS / med, SHAPE.workExponent);
      if (!(ratio >= SHAPE.workRatioMin)) ratio = SHAPE.workRatioMin;
      else if (ratio > SHAPE.workRatioMax) ratio = SHAPE.workRatioMax;
      const workCoreS = SHAPE.medianWorkCoreS * svc.workScale * ratio;
      const jitter = rng.uniform(SHAPE.deadlineJitterMin, SHAPE.deadlineJitterMax);
      const relS = Math.max(SHAPE.minRelativeDeadlineS, wl.deadlineBaseS + wl.deadlineSlack * (workCoreS / svc.cpuCores) * jitter);
      let inputMB = wl.inputMB * Math.exp(SHAPE.inputSigma * rng.normal() - halfSigma2);
      if (!(inputMB >= SHAPE.inputMinMB)) inputMB = SHAPE.inputMinMB;
      else if (inputMB > SHAPE.inputMaxMB) inputMB = SHAPE.inputMaxMB;
      return { id, service, eap, arrivalS, deadlineS: arrivalS + relS, workCoreS, inputMB };
    };
  };
}

/**
 * Tasks -> requests, as a stream: keeps arrivals in [0, durationS), in arrival order (push order
 * breaking ties), gives dense ids, and derives work, deadline and input size (see the table
 * above). Used by the trace replay and by every synthetic pattern.
 */
export function shapedRequests(gen: TaskGen, opts: ShapeOptions): RequestSource {
  return shapedSource(gen, { durationS: opts.durationS, shaper: shaper(opts) });
}

export interface TraceToRequestsOptions extends ShapeOptions {
  load: number;
  /** Receives at most two lines: the gap warning (checkReplayGaps) and the wrap-around notice. */
  warn?: (line: string) => void;
  /** Names the trace in messages (the file path). */
  source?: string;
}

/** Trace rows (any time window, any order) -> requests over [0, durationS). See the table above. */
export function toRequests(rows: readonly TraceRow[], opts: TraceToRequestsOptions): Request[] {
  return drain(traceSource(rows, opts));
}

/** The requests of toRequests as a stream (source.ts); the gap warning and the wrap-around notice are given here, once. */
export function traceSource(rows: readonly TraceRow[], opts: TraceToRequestsOptions): RequestSource {
  const { scenario, durationS, load } = opts;
  const source = opts.source ?? 'trace';
  if (rows.length === 0) throw new UsageError(`--trace: ${source}: no rows to replay`);
  const targetRate = scenario.workload.ratePerS * load;
  if (!(targetRate > 0) || !(durationS > 0)) return shapedRequests(function* () {}, opts);

  // Rows by arrival, file order breaking ties (Array.prototype.sort is stable).
  const sorted = rows.slice().sort((a, b) => a.arrivalS - b.arrivalS);
  const wanted = Math.ceil(targetRate * durationS);
  const used = sorted.length > wanted ? sorted.slice(0, wanted) : sorted;
  const n = used.length;
  const t0 = used[0].arrivalS;
  checkReplayGaps(used, source, opts.warn);

  const numServices = scenario.services.length;
  const numEaps = scenario.eaps.length;
  const serviceOf = new Int32Array(n);
  const eapOf = new Int32Array(n);
  const relS = new Float64Array(n);
  const cache = new Map<string, [number, number]>();
  for (let i = 0; i < n; i++) {
    const id = used[i].jobId;
    let se = cache.get(id);
    if (se === undefined) {
      se = [jobBucket(id, '', numServices), jobBucket(id, 'eap/', numEaps)];
      cache.set(id, se);
    }
    serviceOf[i] = se[0];
    eapOf[i] = se[1];
    relS[i] = used[i].arrivalS - t0;
  }
  const taskCore = traceTaskCoreS(used);

  // Pieces: the window once (or its first `wanted` rows), then again, shifted, while rows are
  // still wanted; each piece is rate-normalised over the rows it replays.
  const tasks = function* (sink: TaskSink): Generator<number, void, void> {
    const rng = Rng.derive(opts.seed, 'workload/trace');
    let offsetS = 0;
    let remaining = wanted;
    while (remaining > 0 && offsetS < durationS) {
      const m = Math.min(n, remaining);
      const spanTraceS = relS[m - 1] + 1;
      // Simulated seconds per trace second: (tasks per trace-second) / (requests per simulated second).
      const compression = m / spanTraceS / targetRate;
      const nextOffsetS = offsetS + m / targetRate;
      for (let i = 0; i < m; i++) {
        const arrivalS = offsetS + (used[i].arrivalS - t0 + rng.next()) * compression;
        if (arrivalS < durationS) sink.push(arrivalS, serviceOf[i], eapOf[i], taskCore[i]);
        // later rows arrive no earlier in the trace (u >= 0), later pieces from nextOffsetS
        if (sink.fresh >= TASK_CHUNK) yield Math.min(offsetS + relS[i] * compression, nextOffsetS);
      }
      offsetS = nextOffsetS;
      remaining -= m;
    }
  };
  let pieces = 0;
  for (let offsetS = 0, remaining = wanted; remaining > 0 && offsetS < durationS; pieces++) {
    const m = Math.min(n, remaining);
    offsetS += m / targetRate;
    remaining -= m;
  }
  if (pieces > 1) {
    opts.warn?.(
      `kais: ${source}: the trace window holds ${n} tasks, ${(n / targetRate).toFixed(1)} s at ${fmt(targetRate)} requests/s; ` +
        `replayed ${(wanted / n).toFixed(1)} times to fill ${fmt(durationS)} s`,
    );
  }
  return shapedRequests(tasks, opts);
}

/**
 * Gaps in the trace times that would distort the replay. Compression is set by the span of the
 * rows replayed, so a single outlier time (a 0 among rows at 1e5 s, a 1e15 typed for 1e5) stretches
 * the span and every other row arrives in a short burst: the run sees an overload that is not in
 * the trace. What is checked is the largest gap between consecutive sorted arrivals of those rows:
 *
 * - a gap that covers more than half of the span AND lasts at least an hour gets one warning line
 *   (the replay is kept: a quiet stretch may be real). Both are needed: in short prefixes of real
 *   traces a quiet stretch does cover half the span (the shared v2017 excerpt's first 50 rows: a
 *   482 s gap over 913 s), but no Alibaba batch trace has an hour without one task created (the
 *   excerpt's longest gap is 482 s, its usual windows' at most 150 s).
 * - a gap over 1e7 s (116 days: more than ten times the longest Alibaba trace, v2018's 8 days) is
 *   no trace window at all but a broken time: a UsageError naming the file and the two times.
 *
 * Rows outside a documented time range are not dropped instead: the traces document no range
 * (create times before 0 are real: tasks created before the trace window).
 */
export const REPLAY_GAP = { share: 0.5, minWarnS: 3600, maxS: 1e7 } as const;

function checkReplayGaps(sorted: readonly TraceRow[], source: string, warn?: (line: string) => void): void {
  const n = sorted.length;
  if (n < 2) return;
  let gap = 0;
  let at = 0;
  for (let i = 1; i < n; i++) {
    const d = sorted[i].arrivalS - sorted[i - 1].arrivalS;
    if (d > gap) {
      gap = d;
      at = i;
    }
  }
  const first = sorted[0].arrivalS;
  const last = sorted[n - 1].arrivalS;
  const span = last - first + 1;
  if (!(gap > REPLAY_GAP.share * span) || gap < REPLAY_GAP.minWarnS) return;
  const [a, b] = [sorted[at - 1].arrivalS, sorted[at].arrivalS];
  const where = `between trace times ${a} and ${b} (rows replayed: ${n}, times ${first} .. ${last})`;
  if (gap > REPLAY_GAP.maxS) {
    throw new UsageError(
      `--trace: ${source}: a gap of ${gap} s without tasks ${where} is longer than any Alibaba trace (${REPLAY_GAP.maxS} s): ` +
        `a broken time? fix or remove that row, or replay a window without it`,
    );
  }
  const share = gap / span;
  warn?.(
    `kais: ${source}: a gap of ${gap} s without tasks ${where} is ${(100 * share).toFixed(1)}% of their span: ` +
      `the replay compresses the other rows into ${(100 * (1 - share)).toFixed(1)}% of the run (an outlier time?)`,
  );
}

function fmt(x: number): string {
  return Number.isInteger(x) ? String(x) : x.toFixed(2);
}
