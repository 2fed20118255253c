/**
 * Trace windows: the rows of an Alibaba trace whose arrival lies in [from, to], replayed from a
 * start inside the window. The rows before the start are moved after the window's end, so an
 * episode that starts anywhere in the window sees every row of the window once and nothing outside
 * it (a curriculum lesson's `traceWindowS`, `kais train --eval-trace-window`).
 */
import { UsageError } from '../../shared/errors';
import type { Request } from '../../shared/domain';
import type { Rng } from '../../shared/rng';
import type { Scenario } from '../../shared/scenario';
import { loadTrace, type TraceRow } from './alibaba';
import { toRequests } from './to-requests';
import { buildRequests, type WorkloadName } from './index';

/** Parsed traces by path: a run replays the same file every episode. */
const traceCache = new Map<string, TraceRow[]>();

function traceRows(trace: string, warn: (line: string) => void): TraceRow[] {
  let rows = traceCache.get(trace);
  if (!rows) traceCache.set(trace, (rows = loadTrace(trace, warn).rows));
  return rows;
}

/** Whether `trace` has a row in [from, to] (checked before a run starts, not at its first use). */
export function traceHasRowsIn(trace: string, [from, to]: [number, number]): boolean {
  return traceRows(trace, () => {}).some((r) => r.arrivalS >= from && r.arrivalS <= to);
}

export interface WindowOptions {
  scenario: Scenario;
  trace: string;
  window: [number, number];
  /** trace second to start from, in the window */
  start: number;
  seed: number;
  load: number;
  durationS: number;
  warn: (line: string) => void;
}

/** The requests of the rows of `trace` in [from, to], replayed from `start`. */
export function windowRequests(o: WindowOptions): Request[] {
  const [from, to] = o.window;
  const span = to - from + 1;
  const windowRows: TraceRow[] = [];
  for (const r of traceRows(o.trace, o.warn)) {
    if (r.arrivalS < from || r.arrivalS > to) continue;
    windowRows.push(r.arrivalS >= o.start ? r : { ...r, arrivalS: r.arrivalS + span, endS: r.endS === null ? null : r.endS + span });
  }
  if (windowRows.length === 0) throw new UsageError(`trace ${o.trace}: no rows in the window [${from}, ${to}]`);
  return toRequests(windowRows, {
    scenario: o.scenario,
    seed: o.seed,
    load: o.load,
    durationS: o.durationS,
    warn: o.warn,
    source: o.trace,
  });
}

/** A training episode's window: the start drawn uniformly in the window from `rng` (one draw). */
export function sampledWindowRequests(o: Omit<WindowOptions, 'start'>, rng: Rng): Request[] {
  const [from, to] = o.window;
  return windowRequests({ ...o, start: from + rng.next() * (to - from) });
}

/** Evaluation episode `i` of `n`: starts i/n of the way into the window (spread, not drawn). */
export function spreadWindowRequests(o: Omit<WindowOptions, 'start'>, i: number, n: number): Request[] {
  const [from, to] = o.window;
  return windowRequests({ ...o, start: from + (i / n) * (to - from) });
}

/** A training episode's requests: the synthetic workload (or whole trace), or a stretch of the trace window drawn by `windowRng`. */
export function episodeRequests(
  o: {
    scenario: Scenario;
    workload: WorkloadName;
    trace: string | null;
    traceWindowS: [number, number] | null;
    seed: number;
    load: number;
    durationS: number;
    warn: (line: string) => void;
  },
  windowRng: Rng,
): Request[] {
  const { scenario, workload, trace, seed, load, durationS, warn } = o;
  if (!trace || !o.traceWindowS) return buildRequests({ scenario, workload, tracePath: trace, seed, load, durationS, warn });
  return sampledWindowRequests({ scenario, trace, window: o.traceWindowS, seed, load, durationS, warn }, windowRng);
}
