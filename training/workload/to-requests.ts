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
 *
 * Seeded draws: Rng.derive(seed, "workload/trace") gives u in row order, piece by piece;
 * Rng.derive(seed, "workload/shape") gives j then z per request in id order. Same rows + same
 * options -> same requests.
 */
import type { Request } from '../../shared/domain';
import { Rng, hashString } from '../../shared/rng';
import type { Scenario } from '../../shared/scenario';
import { UsageError } from '../../shared/errors';
import type { TraceRow } from './alibaba';

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

/**
 * Tasks placed in simulated time, before they are shaped into requests: parallel typed arrays
 * (no object per task) that grow as tasks are pushed.
 */
export class TaskBuffer {
  length = 0;
  /** Simulated seconds. */
  arrivalS: Float64Array = new Float64Array(1024);
  service: Int32Array = new Int32Array(1024);
  eap: Int32Array = new Int32Array(1024);
  /** Core-seconds of the original task (plan cores x duration), > 0. */
  taskCoreS: Float64Array = new Float64Array(1024);

  push(arrivalS: number, service: number, eap: number, taskCoreS: number): void {
    if (this.length === this.arrivalS.length) this.grow();
    const i = this.length++;
    this.arrivalS[i] = arrivalS;
    this.service[i] = service;
    this.eap[i] = eap;
    this.taskCoreS[i] = taskCoreS;
  }

  private grow(): void {
    const cap = this.arrivalS.length * 2;
    const f = (a: Float64Array): Float64Array => {
      const b = new Float64Array(cap);
      b.set(a);
      return b;
    };
    const g = (a: Int32Array): Int32Array => {
      const b = new Int32Array(cap);
      b.set(a);
      return b;
    };
    this.arrivalS = f(this.arrivalS);
    this.service = g(this.service);
    this.eap = g(this.eap);
    this.taskCoreS = f(this.taskCoreS);
  }
}

export interface ShapeOptions {
  scenario: Scenario;
  seed: number;
  durationS: number;
}

/** Core-seconds of one task instance: plan_cpu 100 = one core; durations under the trace's 1 s resolution count as 1 s. */
export function coreSeconds(planCpu: number, durationS: number): number {
  return (Math.max(planCpu, 1) / 100) * Math.max(durationS, 1);
}

/** Median of a numeric array (copy sorted; NaN-free input). */
export function median(values: ArrayLike<number>): number {
  const n = values.length;
  if (n === 0) return NaN;
  const a = Float64Array.from(values as ArrayLike<number>).sort();
  return n % 2 === 1 ? a[(n - 1) / 2] : 0.5 * (a[n / 2 - 1] + a[n / 2]);
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

/**
 * Indices of the tasks with arrivals in [0, durationS), ordered by arrival, push order breaking
 * ties. Expected O(n): a stable counting sort into n buckets over [0, durationS), then an insertion
 * sort that only fixes the order inside buckets; falls back to a comparison sort if the arrivals are
 * so clustered that the insertion sort would go quadratic.
 */
export function arrivalOrder(tasks: TaskBuffer, durationS: number): Uint32Array {
  const arr = tasks.arrivalS;
  let k = 0;
  for (let i = 0; i < tasks.length; i++) if (arr[i] >= 0 && arr[i] < durationS) k++;
  const buckets = Math.max(1, k);
  const scale = buckets / durationS;
  const start = new Uint32Array(buckets + 1);
  for (let i = 0; i < tasks.length; i++) {
    const t = arr[i];
    if (t >= 0 && t < durationS) start[Math.min(buckets - 1, Math.floor(t * scale)) + 1]++;
  }
  for (let b = 0; b < buckets; b++) start[b + 1] += start[b];
  const order = new Uint32Array(k);
  for (let i = 0; i < tasks.length; i++) {
    const t = arr[i];
    if (t >= 0 && t < durationS) order[start[Math.min(buckets - 1, Math.floor(t * scale))]++] = i;
  }
  let moves = 0;
  const budget = 64 * k + 1024;
  for (let i = 1; i < k; i++) {
    const x = order[i];
    const tx = arr[x];
    let j = i - 1;
    while (j >= 0 && arr[order[j]] > tx) {
      order[j + 1] = order[j];
      j--;
    }
    order[j + 1] = x;
    moves += i - 1 - j;
    if (moves > budget) return order.sort((a, b) => arr[a] - arr[b] || a - b);
  }
  return order;
}

/**
 * Tasks -> requests: keeps arrivals in [0, durationS), sorts them by arrival (stable), gives
 * dense ids, and derives work, deadline and input size (see the table above). Used by the trace
 * replay and by every synthetic pattern.
 */
export function shapeRequests(tasks: TaskBuffer, opts: ShapeOptions): Request[] {
  const { scenario, durationS } = opts;
  const order = arrivalOrder(tasks, durationS);
  const n = order.length;
  const core = new Float64Array(n);
  for (let i = 0; i < n; i++) core[i] = tasks.taskCoreS[order[i]];
  const med = n > 0 ? median(core) : 1;
  const rng = Rng.derive(opts.seed, 'workload/shape');
  const wl = scenario.workload;
  const services = scenario.services;
  const halfSigma2 = 0.5 * SHAPE.inputSigma * SHAPE.inputSigma;
  const out: Request[] = new Array(n);
  for (let i = 0; i < n; i++) {
    const k = order[i];
    const service = tasks.service[k];
    const arrivalS = tasks.arrivalS[k];
    const svc = services[service];
    let ratio = Math.sqrt(core[i] / med);
    if (SHAPE.workExponent !== 0.5) ratio = Math.pow(core[i] / med, SHAPE.workExponent);
    if (!(ratio >= SHAPE.workRatioMin)) ratio = SHAPE.workRatioMin;
    else if (ratio > SHAPE.workRatioMax) ratio = SHAPE.workRatioMax;
    const workCoreS = SHAPE.medianWorkCoreS * svc.workScale * ratio;
    const jitter = rng.uniform(SHAPE.deadlineJitterMin, SHAPE.deadlineJitterMax);
    const relS = Math.max(SHAPE.minRelativeDeadlineS, wl.deadlineBaseS + wl.deadlineSlack * (workCoreS / svc.cpuCores) * jitter);
    let inputMB = wl.inputMB * Math.exp(SHAPE.inputSigma * rng.normal() - halfSigma2);
    if (!(inputMB >= SHAPE.inputMinMB)) inputMB = SHAPE.inputMinMB;
    else if (inputMB > SHAPE.inputMaxMB) inputMB = SHAPE.inputMaxMB;
    out[i] = { id: i, service, eap: tasks.eap[k], arrivalS, deadlineS: arrivalS + relS, workCoreS, inputMB };
  }
  return out;
}

export interface TraceToRequestsOptions extends ShapeOptions {
  load: number;
  /** Receives at most one line (the wrap-around notice). */
  warn?: (line: string) => void;
  /** Names the trace in messages (the file path). */
  source?: string;
}

/** Trace rows (any time window, any order) -> requests over [0, durationS). See the table above. */
export function toRequests(rows: readonly TraceRow[], opts: TraceToRequestsOptions): Request[] {
  const { scenario, durationS, load } = opts;
  const source = opts.source ?? 'trace';
  if (rows.length === 0) throw new UsageError(`--trace: ${source}: no rows to replay`);
  const targetRate = scenario.workload.ratePerS * load;
  if (!(targetRate > 0) || !(durationS > 0)) return [];

  // Rows by arrival, file order breaking ties (Array.prototype.sort is stable).
  const sorted = rows.slice().sort((a, b) => a.arrivalS - b.arrivalS);
  const wanted = Math.ceil(targetRate * durationS);
  const used = sorted.length > wanted ? sorted.slice(0, wanted) : sorted;
  const n = used.length;
  const t0 = used[0].arrivalS;

  const numServices = scenario.services.length;
  const numEaps = scenario.eaps.length;
  const serviceOf = new Int32Array(n);
  const eapOf = new Int32Array(n);
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
  }
  const taskCore = traceTaskCoreS(used);

  // Pieces: the window once (or its first `wanted` rows), then again, shifted, while rows are
  // still wanted; each piece is rate-normalised over the rows it replays.
  const rng = Rng.derive(opts.seed, 'workload/trace');
  const tasks = new TaskBuffer();
  let offsetS = 0;
  let remaining = wanted;
  let pieces = 0;
  while (remaining > 0 && offsetS < durationS) {
    const m = Math.min(n, remaining);
    const spanTraceS = used[m - 1].arrivalS - t0 + 1;
    // Simulated seconds per trace second: (tasks per trace-second) / (requests per simulated second).
    const compression = m / spanTraceS / targetRate;
    for (let i = 0; i < m; i++) {
      const arrivalS = offsetS + (used[i].arrivalS - t0 + rng.next()) * compression;
      if (arrivalS < durationS) tasks.push(arrivalS, serviceOf[i], eapOf[i], taskCore[i]);
    }
    offsetS += m / targetRate;
    remaining -= m;
    pieces++;
  }
  if (pieces > 1) {
    opts.warn?.(
      `kais: ${source}: the trace window holds ${n} tasks, ${(n / targetRate).toFixed(1)} s at ${fmt(targetRate)} requests/s; ` +
        `replayed ${(wanted / n).toFixed(1)} times to fill ${fmt(durationS)} s`,
    );
  }
  return shapeRequests(tasks, opts);
}

function fmt(x: number): string {
  return Number.isInteger(x) ? String(x) : x.toFixed(2);
}
