/**
 * The single entry of the workload: the simulator and the CLI call openWorkload (the requests as
 * a stream, source.ts: a run holds the requests in the system, not all of them) or buildRequests
 * (the same requests in an array: drain(openWorkload(...))) and nothing else.
 *
 * With `tracePath` set, the Alibaba trace is replayed (see to-requests.ts for the mapping) and
 * `workload` does not affect arrivals; without it, the synthetic pattern `workload` is generated
 * (see synthetic.ts). Either way: requests sorted by arrivalS, ids dense 0..n-1, arrivals in
 * [0, durationS), mean rate scenario.workload.ratePerS x load.
 */
import type { Request } from '../../shared/domain';
import { UsageError } from '../../shared/errors';
import type { Scenario } from '../../shared/scenario';
import { loadTrace } from './alibaba';
import { drain } from './source';
import type { RequestSource } from './source';
import { syntheticSource } from './synthetic';
import { traceSource } from './to-requests';

export type WorkloadName = 'p1' | 'p2' | 'p3' | 'p4' | 'mixed';
export const WORKLOAD_NAMES: WorkloadName[] = ['p1', 'p2', 'p3', 'p4', 'mixed'];
/** What the CLI uses when no --workload is given. */
export const DEFAULT_WORKLOAD: WorkloadName = 'p4';

export interface WorkloadOptions {
  scenario: Scenario;
  workload: WorkloadName;
  /** An Alibaba batch_task CSV, or a folder holding one; null/undefined for the synthetic pattern. */
  tracePath?: string | null;
  seed: number;
  /** Multiplies the scenario's arrival rate; finite and > 0. */
  load: number;
  /** Simulated seconds to fill. */
  durationS: number;
  /** One-line notices (skipped malformed rows, trace replayed more than once); the CLI prints them to stderr. */
  warn?: (line: string) => void;
}

export function isWorkloadName(s: unknown): s is WorkloadName {
  return typeof s === 'string' && (WORKLOAD_NAMES as string[]).includes(s);
}

/** Every request of the workload, in arrival order. */
export function buildRequests(opts: WorkloadOptions): Request[] {
  return drain(openWorkload(opts));
}

/**
 * The requests of buildRequests as a stream: `count` and `open()` (source.ts). Reading the trace,
 * checking the options and the wrap-around notice happen here, once; each reader generates the
 * requests again as they are read.
 */
export function openWorkload(opts: WorkloadOptions): RequestSource {
  const { scenario, load, durationS, seed } = opts;
  if (typeof load !== 'number' || !Number.isFinite(load) || load <= 0) {
    throw new UsageError(`--load: must be a positive number, got ${String(load)}`);
  }
  if (!isWorkloadName(opts.workload)) {
    throw new UsageError(`--workload: unknown workload "${String(opts.workload)}" (valid: ${WORKLOAD_NAMES.join(', ')})`);
  }
  if (typeof durationS !== 'number' || !Number.isFinite(durationS) || durationS < 0) {
    throw new TypeError(`buildRequests: durationS must be a finite number >= 0, got ${String(durationS)}`);
  }
  if (typeof seed !== 'number' || !Number.isFinite(seed)) {
    throw new TypeError(`buildRequests: seed must be a finite number, got ${String(seed)}`);
  }
  const warn = opts.warn ?? (() => {});
  if (opts.tracePath) {
    const trace = loadTrace(opts.tracePath, warn);
    return traceSource(trace.rows, { scenario, seed, load, durationS, warn, source: trace.file });
  }
  return syntheticSource({ scenario, pattern: opts.workload, seed, load, durationS });
}

export { loadTrace, parseTrace, resolveTracePath } from './alibaba';
export type { LoadedTrace, TraceLayout, TraceRow } from './alibaba';
export { toRequests, traceSource, shapedRequests } from './to-requests';
export { generateSynthetic, syntheticSource, CALIBRATION } from './synthetic';
export { arraySource, drain, isRequestSource } from './source';
export type { RequestReader, RequestSource } from './source';
