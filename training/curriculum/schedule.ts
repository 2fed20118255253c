/**
 * Curriculum (ALGORITHMS.md section 4): lessons are data files (training/curriculum/lessons/*.json,
 * or a folder/file of the user's), and promotion is a pure function of the metric history.
 *
 * A lesson ends, and the next starts, when one of these holds (checked in this order):
 *   threshold  the last episode's throughput rate reached `promotion.threshold`;
 *   plateau    over the last `plateauEpisodes` episodes the best rate improved on the best before
 *              them by less than `minImprovement`;
 *   budget     `maxEpisodes` episodes were run.
 * The reason is returned so that the training log can say why each lesson ended.
 */
import * as fs from 'fs';
import * as path from 'path';
import { UsageError } from '../../shared/errors';
import { readInputFile } from '../../shared/config';
import { isScenarioFile } from '../../shared/scenario';

export interface Lesson {
  name: string;
  description?: string;
  /** built-in scenario name or scenario file (a relative path is relative to the lesson file) */
  scenario: string;
  workload: 'p1' | 'p2' | 'p3' | 'p4' | 'mixed';
  load: number;
  /** frames per episode */
  episodeFrames: number;
  orchestration: string;
  maxEpisodes: number;
  promotion: { threshold?: number; plateauEpisodes: number; minImprovement: number };
  /** checkpoint label to start from (a previous lesson's checkpointOut) */
  checkpointIn?: string;
  /**
   * Which of that lesson's checkpoints: `last` (default: where it ended) or `best` (its best held-out
   * evaluation; its last when it ran none).
   */
  checkpointFrom?: 'last' | 'best';
  checkpointOut: string;
  /**
   * Optional: the lesson is behaviour cloning of this heuristic (`deadline-load`, `deadline-load-eta` or a `kais eval`
   * dispatch baseline): the teacher acts and the actor learns to imitate it; the critic fits the
   * outcomes. Without it the lesson is RL fine-tuning.
   */
  teacher?: string;
  /** Optional: Alibaba batch_task CSV (or folder) replayed instead of `workload`; relative paths are relative to the lesson file. */
  trace?: string;
  /**
   * Optional, with `trace`: only rows whose arrival (create time, trace seconds) is in [from, to]
   * are replayed, each episode from a start drawn uniformly in the window (seeded by the episode),
   * so episodes see different stretches of the trace and the rows after `to` stay held out.
   */
  traceWindowS?: [number, number];
  /** Optional: queue order at the eAPs and nodes (default: the run's --dequeue). */
  dequeue?: 'fifo' | 'edf' | 'discounted';
  /**
   * Optional (`kais train --policies cmmac/gpg`): which parts learn in this lesson, `cmmac` and/or
   * `gpg` (default: cmmac alone). A part that does not learn acts frozen: cMMAC by argmax, GPG
   * greedy. GPG learning needs `orchestration: "gpg"`; cloning a teacher needs cMMAC learning.
   */
  learn?: ('cmmac' | 'gpg')[];
  /** Optional learner settings for this lesson (default: the run's --lr, --entropy-coef, --team-share, --externality). */
  lr?: number;
  entropyCoef?: number;
  teamShare?: number;
  externality?: number;
  /**
   * Optional: the cloud's VMs in this lesson's training episodes (the scenario's when left out), a
   * number or a range [min, max] drawn anew for each episode (uniform integers, seeded by the run's
   * seed and the episode): lessons where the cloud, not the edge, is the scarce side. Arrivals,
   * evaluations and the checkpoints' scenario stay the run's; only the simulated cloud of the
   * training episodes changes (docs/cmmac.md "Curriculum"; docs/gpg.md "A smaller cloud in training").
   */
  cloudVms?: number | [number, number];
  /** Set by loadCurriculum: the file the lesson came from (for error messages; not a JSON field). */
  source?: string;
}

export interface PromotionDecision {
  promote: boolean;
  reason: 'threshold' | 'plateau' | 'budget' | 'continue';
  detail: string;
}

/** Pure: should the lesson end after these episodes' throughput rates? */
export function decidePromotion(lesson: Lesson, rates: readonly number[]): PromotionDecision {
  const n = rates.length;
  const p = lesson.promotion;
  if (n > 0 && p.threshold !== undefined && rates[n - 1] >= p.threshold) {
    return { promote: true, reason: 'threshold', detail: `throughput rate ${rates[n - 1].toFixed(3)} >= ${p.threshold}` };
  }
  const k = p.plateauEpisodes;
  if (n > k) {
    const before = Math.max(...rates.slice(0, n - k));
    const recent = Math.max(...rates.slice(n - k));
    if (recent - before < p.minImprovement) {
      return {
        promote: true,
        reason: 'plateau',
        detail: `best of the last ${k} episodes ${recent.toFixed(3)} improved on ${before.toFixed(3)} by less than ${p.minImprovement}`,
      };
    }
  }
  if (n >= lesson.maxEpisodes) return { promote: true, reason: 'budget', detail: `${n} episodes run (max ${lesson.maxEpisodes})` };
  return { promote: false, reason: 'continue', detail: `${n} episodes` };
}

const WORKLOADS = ['p1', 'p2', 'p3', 'p4', 'mixed'];
const DEQUEUES = ['fifo', 'edf', 'discounted'];
const FIELDS = [
  'name', 'description', 'scenario', 'workload', 'load', 'episodeFrames', 'orchestration', 'maxEpisodes', 'promotion',
  'checkpointIn', 'checkpointFrom', 'checkpointOut', 'teacher', 'trace', 'traceWindowS', 'dequeue', 'lr', 'entropyCoef', 'teamShare', 'externality', 'learn',
  'cloudVms',
];
const PROMOTION_FIELDS = ['threshold', 'plateauEpisodes', 'minImprovement'];
const PARTS = ['cmmac', 'gpg'];
/** The cap of a lesson's `load`, and of `kais train --load` (train-options.ts MAX_LOAD). */
export const LESSON_MAX_LOAD = 100;
/**
 * The cap of a lesson's `episodeFrames`, and of `kais train --episode-frames`: an episode's
 * arrivals are generated before it starts and its decisions are held until its end (the
 * per-episode update of `--credit request`), so memory grows with the episode's length: about
 * 40 MB a frame on `kais` (1.5 GB at 30 frames). 50 frames (about 2.5 GB there) is six times
 * the longest shipped lesson's episode (8 frames).
 */
export const LESSON_MAX_EPISODE_FRAMES = 50;

/** Validates one lesson object; errors name the file and the field. */
export function validateLesson(raw: unknown, source: string): Lesson {
  const fail = (field: string, problem: string): never => {
    throw new UsageError(`${source}: field "${field}" ${problem}`, 'KAIS_ERR_CURRICULUM');
  };
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return fail('(root)', 'must be an object');
  const r = raw as Record<string, unknown>;
  const str = (k: string, optional = false): string | undefined => {
    if (r[k] === undefined && optional) return undefined;
    if (typeof r[k] !== 'string' || (r[k] as string).length === 0) return fail(k, 'must be a non-empty string');
    return r[k] as string;
  };
  const num = (o: Record<string, unknown>, k: string, field: string, min: number, max: number, integer = false): number => {
    const v = o[k];
    if (typeof v !== 'number' || !Number.isFinite(v) || v < min || v > max || (integer && !Number.isInteger(v))) {
      return fail(field, `must be ${integer ? 'an integer' : 'a number'} in [${min}, ${max}], got ${JSON.stringify(v)}`);
    }
    return v;
  };
  const workload = str('workload')!;
  if (!WORKLOADS.includes(workload)) fail('workload', `must be one of ${WORKLOADS.join(', ')}, got "${workload}"`);
  const pr = r.promotion;
  if (typeof pr !== 'object' || pr === null || Array.isArray(pr)) return fail('promotion', 'must be an object');
  const po = pr as Record<string, unknown>;
  for (const k of Object.keys(r)) if (!FIELDS.includes(k)) fail(k, `is not a lesson field (valid: ${FIELDS.join(', ')})`);
  for (const k of Object.keys(po))
    if (!PROMOTION_FIELDS.includes(k)) fail(`promotion.${k}`, `is not a promotion field (valid: ${PROMOTION_FIELDS.join(', ')})`);
  const dequeue = str('dequeue', true);
  if (dequeue !== undefined && !DEQUEUES.includes(dequeue)) fail('dequeue', `must be one of ${DEQUEUES.join(', ')}, got "${dequeue}"`);
  let traceWindowS: [number, number] | undefined;
  if (r.traceWindowS !== undefined) {
    const w = r.traceWindowS as unknown[];
    if (!Array.isArray(w) || w.length !== 2 || !w.every((x) => typeof x === 'number' && Number.isFinite(x)) || !((w[0] as number) < (w[1] as number))) {
      return fail('traceWindowS', `must be [from, to] with from < to (trace seconds), got ${JSON.stringify(w)}`);
    }
    if (r.trace === undefined) fail('traceWindowS', 'needs a "trace" to cut');
    traceWindowS = [w[0] as number, w[1] as number];
  }
  const optNum = (k: string, min: number, max: number) => (r[k] === undefined ? undefined : num(r, k, k, min, max));
  let learn: Lesson['learn'];
  if (r.learn !== undefined) {
    const l = r.learn as unknown[];
    if (!Array.isArray(l) || l.length === 0 || !l.every((x) => typeof x === 'string' && PARTS.includes(x)) || new Set(l).size !== l.length)
      return fail('learn', `must be a non-empty list of distinct parts (${PARTS.join(', ')}), got ${JSON.stringify(r.learn)}`);
    learn = l as Lesson['learn'];
    if (learn!.includes('gpg') && r.orchestration !== 'gpg') fail('learn', 'names gpg, which learns only with "orchestration": "gpg"');
    if (!learn!.includes('cmmac') && r.teacher !== undefined) fail('learn', 'leaves cmmac frozen, but the lesson clones a "teacher" into it');
  }
  const checkpointFrom = str('checkpointFrom', true);
  if (checkpointFrom !== undefined) {
    if (checkpointFrom !== 'last' && checkpointFrom !== 'best') fail('checkpointFrom', `must be "last" or "best", got "${checkpointFrom}"`);
    if (r.checkpointIn === undefined) fail('checkpointFrom', 'needs a "checkpointIn" to start from');
  }
  return {
    name: str('name')!,
    description: str('description', true),
    scenario: str('scenario')!,
    workload: workload as Lesson['workload'],
    load: num(r, 'load', 'load', 1e-6, LESSON_MAX_LOAD),
    episodeFrames: num(r, 'episodeFrames', 'episodeFrames', 1, LESSON_MAX_EPISODE_FRAMES, true),
    orchestration: str('orchestration')!,
    maxEpisodes: num(r, 'maxEpisodes', 'maxEpisodes', 1, 1e6, true),
    promotion: {
      threshold: po.threshold === undefined ? undefined : num(po, 'threshold', 'promotion.threshold', 0, 1),
      plateauEpisodes: num(po, 'plateauEpisodes', 'promotion.plateauEpisodes', 1, 1e6, true),
      minImprovement: num(po, 'minImprovement', 'promotion.minImprovement', 0, 1),
    },
    checkpointIn: str('checkpointIn', true),
    ...(checkpointFrom ? { checkpointFrom: checkpointFrom as 'last' | 'best' } : {}),
    checkpointOut: str('checkpointOut')!,
    teacher: str('teacher', true),
    trace: str('trace', true),
    traceWindowS,
    dequeue: dequeue as Lesson['dequeue'],
    lr: optNum('lr', 1e-9, 1),
    entropyCoef: optNum('entropyCoef', 0, 10),
    teamShare: optNum('teamShare', 0, 10),
    externality: optNum('externality', 0, 100),
    ...(learn ? { learn } : {}),
    ...(r.cloudVms !== undefined ? { cloudVms: cloudVmsField(r.cloudVms, fail) } : {}),
  };
}

/** A lesson's cloudVms: a whole number of VMs >= 1, or [min, max] of them with min < max. */
function cloudVmsField(v: unknown, fail: (field: string, problem: string) => never): number | [number, number] {
  const ok = (x: unknown): x is number => typeof x === 'number' && Number.isInteger(x) && x >= 1 && x <= 1e6;
  if (ok(v)) return v;
  if (Array.isArray(v) && v.length === 2 && ok(v[0]) && ok(v[1]) && v[0] < v[1]) return [v[0], v[1]];
  return fail('cloudVms', `must be a whole number of VMs in [1, 1000000] or [min, max] of them with min < max, got ${JSON.stringify(v)}`);
}

/** The shipped lessons (JSON is not compiled into dist/, so from dist/ look back at the sources). */
export const BUILT_IN_CURRICULUM = [path.join(__dirname, 'lessons'), path.resolve(__dirname, '..', '..', '..', 'training', 'curriculum', 'lessons')].find(
  (d) => fs.existsSync(d),
) ?? path.join(__dirname, 'lessons');

/**
 * The joint lessons (`kais train --policies cmmac/gpg`): `--curriculum joint` is the shipped cMMAC
 * lessons followed by these (GPG with cMMAC frozen, then both learning).
 */
export const BUILT_IN_JOINT = [path.join(__dirname, 'joint'), path.resolve(__dirname, '..', '..', '..', 'training', 'curriculum', 'joint')].find((d) =>
  fs.existsSync(d),
) ?? path.join(__dirname, 'joint');

/** File name, in a curriculum folder, of the optional validation set (not a lesson). */
export const VALIDATION_FILE = 'validation.json';

/**
 * A second validation set for the selection of the best checkpoint (`kais train --eval-trace`):
 * held-out evaluations also replay this window of a trace, and `best` is chosen by the mean of the
 * workload's and the trace window's throughput rates.
 */
export interface ValidationSpec {
  /** Alibaba batch_task CSV (or folder); relative paths are relative to validation.json. */
  trace: string;
  /** [from, to] trace seconds (create time) replayed by the evaluation episodes. */
  traceWindowS: [number, number];
}

/** Checks a [from, to] trace window (from < to, finite); `what` names the flag or the file and field. */
export function checkTraceWindow(w: unknown, what: string, code = 'KAIS_ERR_USAGE'): [number, number] {
  if (!Array.isArray(w) || w.length !== 2 || !w.every((x) => typeof x === 'number' && Number.isFinite(x)) || !((w[0] as number) < (w[1] as number))) {
    throw new UsageError(`${what} must be [from, to] with from < to (trace seconds), got ${JSON.stringify(w)}`, code);
  }
  return [w[0] as number, w[1] as number];
}

/**
 * The validation set of a curriculum folder (its validation.json), or null when it has none (or
 * the curriculum is one file). Errors name the file and the field.
 */
export function loadValidation(spec: string): (ValidationSpec & { file: string }) | null {
  const dir = spec === 'default' || spec === 'joint' ? BUILT_IN_CURRICULUM : spec;
  const f = path.join(dir, VALIDATION_FILE);
  if (!fs.existsSync(dir) || !fs.statSync(dir).isDirectory() || !fs.existsSync(f)) return null;
  let raw: unknown;
  try {
    raw = JSON.parse(readInputFile(f, f));
  } catch (e) {
    throw new UsageError(`${f}: not readable JSON (${(e as Error).message})`, 'KAIS_ERR_CURRICULUM');
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new UsageError(`${f}: field "(root)" must be an object`, 'KAIS_ERR_CURRICULUM');
  const r = raw as Record<string, unknown>;
  for (const k of Object.keys(r)) {
    if (!['description', 'trace', 'traceWindowS'].includes(k)) throw new UsageError(`${f}: field "${k}" is not a validation field (valid: description, trace, traceWindowS)`, 'KAIS_ERR_CURRICULUM');
  }
  if (typeof r.trace !== 'string' || r.trace.length === 0) throw new UsageError(`${f}: field "trace" must be a non-empty string`, 'KAIS_ERR_CURRICULUM');
  const trace = path.isAbsolute(r.trace) ? r.trace : path.resolve(dir, r.trace);
  if (!fs.existsSync(trace)) throw new UsageError(`${f}: field "trace": ${trace} does not exist`, 'KAIS_ERR_CURRICULUM');
  return { file: f, trace, traceWindowS: checkTraceWindow(r.traceWindowS, `${f}: field "traceWindowS"`, 'KAIS_ERR_CURRICULUM') };
}

/**
 * `--curriculum <name|dir|file>`: `default` (the shipped lessons), `joint` (those, then the shipped
 * joint lessons of training/curriculum/joint/), a folder of lesson files (taken
 * in file-name order; validation.json is not a lesson, see loadValidation) or one lesson file. Checks that each checkpointIn names an earlier lesson's
 * checkpointOut.
 */
export function loadCurriculum(spec: string): Lesson[] {
  if (spec === 'none') throw new UsageError('--curriculum none: no lessons (the caller trains a single lesson from the flags)');
  const targets = spec === 'default' ? [BUILT_IN_CURRICULUM] : spec === 'joint' ? [BUILT_IN_CURRICULUM, BUILT_IN_JOINT] : [spec];
  let files: string[] = [];
  let target = targets[0];
  try {
    for (target of targets) {
      const dir = target;
      files = files.concat(
        fs.statSync(dir).isDirectory()
          ? fs
              .readdirSync(dir)
              .filter((f) => f.endsWith('.json') && f !== VALIDATION_FILE)
              .sort()
              .map((f) => path.join(dir, f))
          : [dir],
      );
    }
  } catch (e) {
    throw new UsageError(`--curriculum: cannot read ${target}: ${(e as NodeJS.ErrnoException).code ?? String(e)}`);
  }
  if (files.length === 0) throw new UsageError(`--curriculum: ${target} holds no .json lesson files`);
  const lessons = files.map((f) => {
    let raw: unknown;
    try {
      raw = JSON.parse(readInputFile(f, '--curriculum'));
    } catch (e) {
      if (e instanceof UsageError) throw e;
      throw new UsageError(`${f}: not a readable JSON lesson (${(e as Error).message})`);
    }
    const l = validateLesson(raw, f);
    // a scenario file, like a trace, is found beside the lesson (lessons written when it was read
    // from the working directory still work: that path is taken when there is no file beside it)
    if (isScenarioFile(l.scenario) && !path.isAbsolute(l.scenario)) {
      const beside = path.resolve(path.dirname(f), l.scenario);
      if (fs.existsSync(beside) || !fs.existsSync(l.scenario)) l.scenario = beside;
    }
    if (l.trace !== undefined) {
      if (!path.isAbsolute(l.trace)) l.trace = path.resolve(path.dirname(f), l.trace);
      if (!fs.existsSync(l.trace)) throw new UsageError(`${f}: field "trace": ${l.trace} does not exist`, 'KAIS_ERR_CURRICULUM');
    }
    l.source = f;
    return l;
  });
  const outs = new Map<string, string>();
  for (const [i, l] of lessons.entries()) {
    if (l.checkpointIn !== undefined && !outs.has(l.checkpointIn)) {
      throw new UsageError(`${files[i]}: field "checkpointIn" names "${l.checkpointIn}", which no earlier lesson writes`);
    }
    // a label names one checkpoint: a second lesson writing it would make checkpointIn ambiguous
    const earlier = outs.get(l.checkpointOut);
    if (earlier !== undefined) {
      throw new UsageError(
        `${files[i]}: field "checkpointOut" is "${l.checkpointOut}", which ${earlier} writes already (each lesson needs its own label)`,
        'KAIS_ERR_CURRICULUM',
      );
    }
    outs.set(l.checkpointOut, files[i]);
  }
  return lessons;
}
