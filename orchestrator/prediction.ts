/**
 * The simulator's prediction of a run, for the dashboard (issue 18 item 3: live throughput against
 * the simulator's prediction). `kais up` runs the simulator on the very requests it then replays
 * (launcher/up.ts predictRate) and hands the figures to the orchestrator in a file named by the
 * config's `"prediction"`:
 *
 *   {"policy": "lec/static", "throughputRate": 0.774, "frameS": 25,
 *    "arrivedPerFrame": [812, 790, ...], "completedInTimePerFrame": [601, 622, ...],
 *    "startMs": null | <ms since the epoch when scenario time 0 was replayed>}
 *
 * Frame k covers scenario seconds [k frameS, (k+1) frameS); `arrivedPerFrame[k]` counts the requests
 * that arrived in it, `completedInTimePerFrame[k]` those answered within their deadline in it (by
 * the time of the answer, as the agents' telemetry counts theirs). Wall time t is scenario second
 * (t - startMs) x speed (the config's `speed`). `startMs` is null until the load is planned: `kais up`
 * writes the file again (a rename) with it 2 s before its load generator starts at that instant,
 * and the orchestrator reads the file again when it changed (checked at most once a second), so a
 * restarted orchestrator finds it too. The orchestrator's placement steps take their clock from it
 * (orchestrator/placement-loop.ts `alignTo`).
 */
import * as fs from 'node:fs';
import { UsageError } from '../shared/errors';
import { writeFileAtomically } from '../shared/atomic-write';

export interface Prediction {
  /** `<dispatch>/<orchestration>` the simulator ran (`kais eval`'s name). */
  policy: string;
  /** In-time completions / arrivals over the whole run (the summary's evalThroughputRate). */
  throughputRate: number;
  /** Scenario seconds per frame of the series. */
  frameS: number;
  arrivedPerFrame: number[];
  completedInTimePerFrame: number[];
  /** Wall-clock ms of scenario time 0; null: the run has not started. */
  startMs: number | null;
}

const FIELDS = ['policy', 'throughputRate', 'frameS', 'arrivedPerFrame', 'completedInTimePerFrame', 'startMs'];
/** Longest series: a week of 0.1 s frames. */
const MAX_FRAMES = 7 * 86_400 * 10;

/** Checks a parsed prediction; UsageError `<where>: field "<f>" ...` for anything wrong. */
export function parsePrediction(raw: unknown, where: string): Prediction {
  const fail = (field: string, why: string): never => {
    throw new UsageError(`${where}: field "${field}" ${why}`);
  };
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new UsageError(`${where}: must hold a JSON object`);
  const o = raw as Record<string, unknown>;
  for (const k of Object.keys(o)) if (!FIELDS.includes(k)) fail(k, `is not a field of a prediction (known: ${FIELDS.join(', ')})`);
  if (typeof o.policy !== 'string' || o.policy === '' || o.policy.length > 200) fail('policy', 'must be a name of 1..200 characters');
  const rate = o.throughputRate;
  if (typeof rate !== 'number' || !(rate >= 0 && rate <= 1))
    fail('throughputRate', `must be a share in [0, 1], got ${JSON.stringify(rate)}`);
  const frameS = o.frameS;
  if (typeof frameS !== 'number' || !(frameS > 0 && frameS <= 86_400))
    fail('frameS', `must be seconds in (0, 86400], got ${JSON.stringify(frameS)}`);
  const series = (k: string): number[] => {
    const v = o[k];
    if (!Array.isArray(v) || v.length === 0 || v.length > MAX_FRAMES)
      return fail(k, `must be a list of 1..${MAX_FRAMES} counts, one per frame`);
    v.forEach((x, i) => {
      if (typeof x !== 'number' || !Number.isFinite(x) || x < 0) fail(`${k}[${i}]`, `must be a count >= 0, got ${JSON.stringify(x)}`);
    });
    return v as number[];
  };
  const arrivedPerFrame = series('arrivedPerFrame');
  const completedInTimePerFrame = series('completedInTimePerFrame');
  if (completedInTimePerFrame.length !== arrivedPerFrame.length)
    fail(
      'completedInTimePerFrame',
      `must have one count per frame, as arrivedPerFrame (${arrivedPerFrame.length}), got ${completedInTimePerFrame.length}`,
    );
  const start = o.startMs === undefined ? null : o.startMs;
  if (start !== null && (typeof start !== 'number' || !Number.isFinite(start) || start <= 0))
    fail('startMs', `must be null or a time in ms since the epoch, got ${JSON.stringify(start)}`);
  return {
    policy: o.policy as string,
    throughputRate: rate as number,
    frameS: frameS as number,
    arrivedPerFrame,
    completedInTimePerFrame,
    startMs: start as number | null,
  };
}

/** Reads and checks a prediction file; `where` names it in errors (default: the file). */
export function readPrediction(file: string, where = file): Prediction {
  let raw: unknown;
  try {
    raw = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (e) {
    throw new UsageError(`${where}: cannot read it as JSON (${(e as Error).message.split('\n')[0]})`);
  }
  return parsePrediction(raw, where);
}

/** Writes a prediction file whole (a temporary file, then a rename: a reader never sees half of it). */
export function writePrediction(file: string, p: Prediction): void {
  writeFileAtomically(file, JSON.stringify(p), { mode: 0o600 });
}

/**
 * A prediction file as it is now: read again when its size or modification time changed, checked
 * at most once a second. A file that became unreadable or wrong keeps the last good prediction
 * (one log line per change).
 */
export class PredictionFile {
  private stamp: string;
  private checkedMs = 0;

  constructor(
    private readonly file: string,
    private value: Prediction,
    private readonly log: (line: string) => void = () => undefined,
  ) {
    this.stamp = PredictionFile.stampOf(file);
  }

  private static stampOf(file: string): string {
    try {
      const s = fs.statSync(file);
      return `${s.size}/${s.mtimeMs}/${s.ino}`;
    } catch {
      return 'missing';
    }
  }

  current(nowMs = Date.now()): Prediction {
    if (nowMs - this.checkedMs < 1000) return this.value;
    this.checkedMs = nowMs;
    const stamp = PredictionFile.stampOf(this.file);
    if (stamp === this.stamp) return this.value;
    this.stamp = stamp;
    try {
      this.value = readPrediction(this.file);
    } catch (e) {
      this.log(`prediction: ${(e as Error).message}; keeping the one read before`);
    }
    return this.value;
  }
}

/**
 * In-time completions the prediction expects in the wall-clock interval [fromMs, toMs): whole
 * frames, and the covered share of partial ones (a frame's completions spread evenly over it);
 * null when the run has not started or the interval lies outside the predicted frames.
 */
export function predictedInTime(p: Prediction, speed: number, fromMs: number, toMs: number): number | null {
  if (p.startMs === null || !(toMs > fromMs)) return null;
  const frames = p.completedInTimePerFrame.length;
  // in frames since scenario time 0
  const a = (((fromMs - p.startMs) / 1000) * speed) / p.frameS;
  const b = (((toMs - p.startMs) / 1000) * speed) / p.frameS;
  if (b <= 0 || a >= frames) return null;
  let sum = 0;
  for (let k = Math.max(0, Math.floor(a)); k < Math.min(frames, Math.ceil(b)); k++) {
    const covered = Math.min(b, k + 1) - Math.max(a, k);
    if (covered > 0) sum += p.completedInTimePerFrame[k] * covered;
  }
  return sum;
}

/** The frame of the prediction at wall time `nowMs` (0-based; null before the start), and whether it is past the last. */
export function predictedFrame(p: Prediction, speed: number, nowMs: number): { frame: number; over: boolean } | null {
  if (p.startMs === null || nowMs < p.startMs) return null;
  const frame = Math.floor((((nowMs - p.startMs) / 1000) * speed) / p.frameS);
  return { frame, over: frame >= p.completedInTimePerFrame.length };
}
