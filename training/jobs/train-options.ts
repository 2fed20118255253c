/**
 * The options of `kais train`, declared once (shared/config.ts makes the yargs options, the
 * defaults, the checks and the docs/cli.md table from this). The order of the keys is the order of
 * the resolved config a run stores as its first row (the scenario goes last there): keep it.
 *
 * These defaults are the learner's too: `kais train` hands lr, gamma, entropyCoef, minibatch,
 * normAdv and gaeLambda to critic/cmmac/learner.ts explicitly. The spec's own settings (the
 * paper's) are `--credit team --lr 5e-4 --entropy-coef 0.01` (SPEC_SETTINGS below).
 */
import * as fs from 'fs';
import * as path from 'path';
import { checkOptions, checkSqliteFile, kebab, opt, defaultsOf, Problem, type OptionsOf } from '../../shared/config';
import { UsageError, asFlag } from '../../shared/errors';
import { DEQUEUE_NAMES } from '../../shared/dequeue';
import type { HeadActivation } from '../../shared/nets/dense-f32';
import type { DispatchPolicy } from '../../shared/policy';
import { checkLoad, isScenarioFile, loadScenario, type Scenario } from '../../shared/scenario';
import { makeTrainTeacher } from '../baselines/teacher';
import { ORCHESTRATION_BASELINES, makeDispatch, makeOrchestration } from '../baselines/registry';
import {
  checkTraceWindow,
  LESSON_MAX_EPISODE_FRAMES,
  LESSON_MAX_LOAD,
  loadCurriculum,
  loadValidation,
  type Lesson,
} from '../curriculum/schedule';
import { DEFAULT_WORKLOAD, WORKLOAD_NAMES } from '../workload';
import { traceHasRowsIn } from '../workload/window';
import { loadTrace, type TraceRow } from '../workload/alibaba';
import { initCheckpoint } from '../../shared/nets/checkpoint-db';
import { scenarioFingerprint } from '../../shared/nets/checkpoint-db';
import { observationDim, type ObservationShape } from '../../agent/observation';
import { stateDim } from '../../critic/cmmac/state';
import { ENV_VERSION } from '../sim/env';
import { TRAIN_POLICIES } from './train-joint';

/** `from,to` in trace seconds, from < to. */
export function parseWindow(text: string): [number, number] | Problem {
  const nums = text.split(',').map((x) => (x.trim() === '' ? NaN : Number(x)));
  if (nums.length !== 2 || !nums.every(Number.isFinite) || !(nums[0] < nums[1]))
    return new Problem(`expected from,to with from < to (trace seconds), got "${text}"`);
  return [nums[0], nums[1]];
}

/** Actor heads (shared/nets/actor.ts), the default first. */
export const HEAD_ACTIVATIONS: readonly HeadActivation[] = ['softplus1', 'relu1'];

/** Upper bounds that keep a typo (1e9 for 1) from running for days; far above any real use. */
export const MAX_FRAMES = 100_000;
export const MAX_LOAD = LESSON_MAX_LOAD;
/** Frames per episode: memory grows with an episode's length (schedule.ts LESSON_MAX_EPISODE_FRAMES says how much). */
export const MAX_EPISODE_FRAMES = LESSON_MAX_EPISODE_FRAMES;

export const TRAIN_SPEC = {
  scenario: opt.string({ default: 'kais', describe: 'built-in scenario (tiny, small, kais, large) or a scenario JSON file' }),
  workload: opt.choice(WORKLOAD_NAMES, { default: DEFAULT_WORKLOAD, describe: 'synthetic arrival pattern (ignored with --trace)' }),
  trace: opt.file({
    default: null,
    dir: true,
    describe: 'Alibaba batch_task CSV (or a folder holding batch_task.csv) to replay instead of a synthetic pattern',
  }),
  load: opt.number({ default: 1, min: 0, minExclusive: true, max: MAX_LOAD, describe: 'arrival-rate multiplier' }),
  // edf: the order of kais eval's default and of the live nodes; at the edge-cloud-v2 default load it
  // is also the better one for lec (0.793 vs 0.775 discounted, kais seed 1)
  dequeue: opt.choice(DEQUEUE_NAMES, { default: 'edf', describe: 'queue order (node queues) in training and its evaluations' }),
  /**
   * 'agent': the live agent's information model (EnvOptions.agentViews), kais eval's default and
   * what kais up measures; 'global': the whole cluster's true state. Runs stored before the option
   * existed trained on 'global'.
   */
  view: opt.choice(['agent', 'global'] as const, {
    default: 'agent',
    describe:
      "what the actor and its teacher decide on: agent (what the live agent can know, as kais eval's default) or global (the whole cluster's true state)",
  }),
  frames: opt.integer({
    default: 45,
    min: 1,
    max: MAX_FRAMES,
    defaultText: '45; with --curriculum: until the last lesson ends',
    describe: 'total frames to train, behaviour-cloning frames included',
  }),
  episodeFrames: opt.integer({
    default: 3,
    min: 1,
    max: MAX_EPISODE_FRAMES,
    describe: 'frames per episode (fresh requests and a fresh simulator each episode; single lesson only)',
  }),
  bcFrames: opt.integer({
    default: 24,
    min: 0,
    max: MAX_FRAMES,
    describe: 'warm-start frames acting with --teacher and cloning it (0 = pure RL from random weights; single lesson only)',
  }),
  bcEpochs: opt.integer({ default: 4, min: 1, max: 1000, describe: 'passes over each behaviour-cloning frame' }),
  head: opt.choice(HEAD_ACTIVATIONS, {
    default: 'softplus1',
    describe: "actor head: softplus(z)+1 (cannot die; shared/nets/actor.ts) or the paper's ReLU(z)+1",
  }),
  targetScorer: opt.boolean({ default: true, describe: 'actor: add the shared per-target scorer (--no-target-scorer: the plain MLP)' }),
  teacher: opt.string({
    default: 'lec',
    describe: 'heuristic cloned during the warm start (deadline-load, deadline-load-eta, or any kais eval dispatch baseline)',
  }),
  bcLr: opt.number({ default: 5e-4, min: 0, minExclusive: true, max: 1, describe: 'learning rate during the warm start' }),
  dagger: opt.boolean({
    default: false,
    describe: 'warm start: after the first episode the actor acts (argmax) and the teacher labels its states',
  }),
  orchestration: opt.string({ default: 'hpa', describe: 'orchestration baseline held fixed while dispatch learns' }),
  seed: opt.integer({ default: 1, describe: 'seed of every random stream' }),
  lr: opt.number({
    default: 1e-4,
    min: 0,
    minExclusive: true,
    max: 1,
    describe: 'Adam learning rate (actor and critic) after the warm start',
  }),
  gamma: opt.number({ default: 0.9, min: 0, max: 1, maxExclusive: true, describe: 'discount per slot' }),
  entropyCoef: opt.number({ default: 0.003, min: 0, max: 100, describe: 'entropy bonus beta_H' }),
  minibatch: opt.integer({ default: 1024, min: 1, max: 1_000_000, describe: 'decisions per actor minibatch' }),
  normAdv: opt.boolean({ default: false, describe: 'standardise advantages per update' }),
  gaeLambda: opt.number({ default: 0, min: 0, max: 1, describe: "GAE lambda (0 = one-step TD advantage, the spec's)" }),
  rewardEpsilon: opt.number({
    default: 1,
    min: 0,
    max: 1e6,
    describe: 'epsilon of the reward u_b = exp(-lambda_b - epsilon nu_b) (the journal: 1)',
  }),
  /** 'request' scores each decision by its own request's outcome, PPO-clipped once per episode (critic/cmmac/learner.ts says why); 'team' is the spec's team TD advantage, one update per frame. */
  credit: opt.choice(['request', 'team'] as const, {
    default: 'request',
    describe: "credit assignment: each decision's own request outcome (PPO-clipped, per episode) or the spec's team TD advantage",
  }),
  teamShare: opt.number({
    default: 0,
    min: 0,
    max: 1e6,
    describe: "credit request: share of the team TD advantage added to each decision's own",
  }),
  externality: opt.number({
    default: 0,
    min: 0,
    max: 100,
    describe:
      "credit request: charge each decision this many times its request's share of the failures of requests that waited behind it at its target (training/sim/blame.ts)",
  }),
  clip: opt.number({ default: 0.2, min: 0, minExclusive: true, max: 1e6, describe: 'credit request: PPO ratio clip' }),
  ppoEpochs: opt.integer({ default: 4, min: 1, max: 1000, describe: "credit request: passes over an episode's decisions per update" }),
  targetKl: opt.number({
    default: 0.02,
    min: 0,
    minExclusive: true,
    max: 1e6,
    describe: 'credit request: stop the passes above this approximate KL to the acting policy',
  }),
  exportActor: opt.outFile({
    default: null,
    describe: 'write the actor of the best evaluation (or the last one without --eval-every) here (weights .bin + .json)',
  }),
  evalEvery: opt.integer({
    default: 3,
    min: 0,
    max: MAX_FRAMES,
    describe: 'evaluate (held-out seeds, acting as --eval-act) every N frames at episode ends (0 = never)',
  }),
  evalAct: opt.choice(['argmax', 'sample'] as const, {
    default: 'argmax',
    describe:
      'how the evaluations\' actor picks targets: argmax, or sample (drawn from the policy PPO trains, seeded per episode); the best checkpoint is chosen by it and --export-actor records it ("act": "sample"), so kais eval and kais up act the same way (docs/cmmac.md)',
  }),
  evalFrames: opt.integer({ default: 3, min: 1, max: MAX_FRAMES, describe: 'frames per evaluation episode' }),
  evalSeeds: opt.integer({ default: 2, min: 1, max: 1000, describe: 'held-out episodes per evaluation' }),
  evalTrace: opt.optString({
    default: null,
    describe:
      "second validation set: Alibaba CSV whose --eval-trace-window the evaluations also replay; best = mean of the two (default: the curriculum folder's validation.json; 'none': off)",
  }),
  evalTraceWindowS: opt.custom<[number, number]>(
    'from,to',
    { flag: 'eval-trace-window', default: [25000, 30000], describe: 'trace seconds of --eval-trace to replay' },
    parseWindow,
  ),
  initFrom: opt.file({
    default: null,
    sqlite: 'kais checkpoint',
    describe: "start from the actor and critic of another run's latest checkpoint (same scenario; fresh optimiser)",
  }),
  curriculum: opt.optString({
    default: null,
    defaultText: "'default' on kais ('joint' with --policies cmmac/gpg), 'none' elsewhere",
    describe:
      "lessons to train through: 'default' (the shipped ones), 'joint' (those, then GPG's: training/curriculum/joint), a folder of lesson .json files or one file; 'none': one lesson from the flags",
  }),
  filters: opt.boolean({ default: false, describe: 'run the device filters on simulated node telemetry (training and its evaluations)' }),
  policies: opt.choice(TRAIN_POLICIES, {
    default: 'cmmac',
    describe:
      "what trains: cmmac (dispatch; each lesson's orchestration fixed) or cmmac/gpg (dispatch and the GPG orchestration, through lessons whose \"learn\" says which part learns; default curriculum on kais: 'joint')",
  }),
  gpgRollouts: opt.integer({
    default: 4,
    min: 1,
    max: 64,
    describe: "cmmac/gpg: rollouts of each episode's arrivals per GPG update (their mean per frame is the baseline)",
  }),
  gpgOpCost: opt.number({ default: 0.002, min: 0, max: 10, describe: 'cmmac/gpg: GPG reward cost per executed scale operation' }),
  gpgReplicaCost: opt.number({
    default: 0,
    min: 0,
    max: 10,
    describe: 'cmmac/gpg: GPG reward cost per edge replica held (mean over the frame)',
  }),
  gpgLr: opt.number({ default: 1e-3, min: 0, minExclusive: true, max: 1, describe: 'cmmac/gpg: Adam learning rate of GPG' }),
  gpgInit: opt.file({
    default: null,
    describe:
      'cmmac/gpg: start GPG from this model (e.g. models/kais-gpg.json) instead of fresh weights; the entropy schedule continues from its updates',
  }),
  exportGpg: opt.outFile({
    default: null,
    describe: 'cmmac/gpg: write the GPG model of the best cmmac/gpg evaluation (the last weights without one) here (kais eval --gpg)',
  }),
  out: opt.outFile({ default: 'kais-train.db', sqlite: 'kais checkpoint', describe: 'SQLite checkpoint file' }),
  resume: opt.boolean({ default: false, describe: 'continue the run stored in --out (which must exist)' }),
  json: opt.boolean({ default: false, describe: 'print the result as JSON on stdout' }),
};

/** The options of a training run (what train() takes and a run stores). */
export type TrainOptions = OptionsOf<typeof TRAIN_SPEC>;

/** Defaults of everything but the scenario, in the stored order. */
export const TRAIN_DEFAULTS: Omit<TrainOptions, 'scenario'> = (() => {
  const { scenario: _scenario, ...rest } = defaultsOf(TRAIN_SPEC) as TrainOptions;
  void _scenario;
  return rest;
})();

/** `kais train`: the run's options plus what only the command line does. */
export const TRAIN_CLI_SPEC = {
  ...TRAIN_SPEC,
  plot: opt.outFile({
    ext: /\.(svg|png)$/i,
    extText: 'a file ending in .svg or .png',
    describe: 'learning curve: throughput rate per frame next to jsq/hpa and lec/hpa',
  }),
  exportLayers: opt.outDir({
    describe:
      "write the actor of --out's best evaluation (the newest checkpoint without one) here as a TensorFlow.js layers model (model.json + weights.bin; docs/cmmac.md)",
  }),
};

/** The paper's learner settings (ALGORITHMS.md section 2), for reference and `--credit team` runs. */
export const SPEC_SETTINGS = { credit: 'team', lr: 5e-4, entropyCoef: 0.01 } as const;

/** `--eval-trace-window from,to` -> [from, to]; undefined when not given (train() reads it too). */
export function parseWindowFlag(v: string | undefined): [number, number] | undefined {
  if (v === undefined) return undefined;
  const w = parseWindow(String(v));
  if (w instanceof Problem) throw new UsageError(`--eval-trace-window: ${w.why}`);
  return w;
}

// ------------------------------------------------------------------------------------- CHECKS

/** The heuristic a lesson (or the warm start) clones. */
export function makeTeacher(name: string, scenario: Scenario): DispatchPolicy {
  return makeTrainTeacher(name) ?? makeDispatch(name, scenario);
}

/**
 * Checks what the lesson files cannot check alone, naming the file: every lesson trains the run's
 * scenario (one run trains one scenario's networks), its orchestration and teacher exist.
 */
export function checkLessons(lessons: Lesson[], scenario: Scenario, policies: string = 'cmmac'): Lesson[] {
  for (const l of lessons) {
    const src = l.source ?? l.name;
    const field = (f: string, e: unknown) =>
      new UsageError(
        // a checker written for a flag (`--scenario: ...`) speaks of the field instead
        `${src}: field "${f}" ${(e instanceof Error ? e.message : String(e)).split('\n')[0].replace(/^--[a-z][a-z0-9-]*: /, ': ')}`.replace(
          '" : ',
          '": ',
        ),
        'KAIS_ERR_CURRICULUM',
      );
    let ls: Scenario;
    try {
      ls = loadScenario(l.scenario);
    } catch (e) {
      throw field('scenario', e);
    }
    try {
      checkLoad(ls, l.load);
    } catch (e) {
      throw field('load', e);
    }
    if (scenarioFingerprint(ls) !== scenarioFingerprint(scenario)) {
      throw new UsageError(
        `${src}: field "scenario" is "${l.scenario}", but this run trains scenario "${scenario.name}" (pass --scenario ${l.scenario}, or --curriculum none)`,
        'KAIS_ERR_CURRICULUM',
      );
    }
    if (l.orchestration === 'gpg' || l.learn?.includes('gpg')) {
      if (policies !== 'cmmac/gpg')
        throw new UsageError(
          `${src}: field "${l.orchestration === 'gpg' ? 'orchestration' : 'learn'}" needs GPG: pass --policies cmmac/gpg`,
          'KAIS_ERR_CURRICULUM',
        );
    } else {
      try {
        makeOrchestration(l.orchestration, scenario);
      } catch (e) {
        throw field('orchestration', e);
      }
    }
    if (l.teacher !== undefined) {
      try {
        makeTeacher(l.teacher, scenario);
      } catch (e) {
        throw field('teacher', e);
      }
    }
  }
  // every lesson's trace is read and its window checked now, not when the lesson starts (a late
  // lesson's bad trace would otherwise stop the run after the earlier lessons trained, with --out written)
  const rows = new Map<string, TraceRow[]>();
  for (const l of lessons) {
    const problem = lessonTraceProblem(l, rows);
    if (problem) throw new UsageError(`${l.source ?? l.name}: field "${problem.field}"${problem.text}`, 'KAIS_ERR_CURRICULUM');
  }
  return lessons;
}

/**
 * What is wrong with a lesson's trace (its `trace` cannot be read as a batch_task CSV, or its
 * `traceWindowS` holds none of the trace's rows), or null; `rows` caches the traces read. The
 * text follows the field name (`: <problem>` or ` <problem>`).
 */
export function lessonTraceProblem(
  l: Lesson,
  rows: Map<string, TraceRow[]> = new Map(),
): { field: 'trace' | 'traceWindowS'; text: string } | null {
  if (l.trace === undefined) return null;
  let r = rows.get(l.trace);
  if (!r) {
    try {
      // read without the cache of training/workload/window.ts, so that the training log still gets
      // the trace's skipped-rows line when the lesson replays it
      r = loadTrace(l.trace).rows;
    } catch (e) {
      if (!(e instanceof UsageError)) throw e;
      return { field: 'trace', text: `: ${e.message.split('\n')[0].replace(/^--trace: /, '')}` };
    }
    rows.set(l.trace, r);
  }
  const w = l.traceWindowS;
  if (w && !r.some((x) => x.arrivalS >= w[0] && x.arrivalS <= w[1]))
    return { field: 'traceWindowS', text: ` [${w.join(', ')}] holds no rows of the trace ${l.trace}` };
  return null;
}

/**
 * --resume replays the lessons stored when the run started: the current one and those after it
 * (from lesson index `from`) must still find their traces. Names the lesson and says what to do.
 */
export function checkStoredLessonTraces(out: string, lessons: Lesson[], from: number): void {
  const rows = new Map<string, TraceRow[]>();
  for (const [i, l] of lessons.entries()) {
    if (i < from) continue;
    const problem = lessonTraceProblem(l, rows);
    if (!problem) continue;
    const fix =
      problem.field === 'trace'
        ? `put the trace back at ${l.trace}, or start a new run (another --out)`
        : 'the lessons are stored when a run starts, so start a new run (another --out) with the lesson fixed';
    throw new UsageError(
      `--resume ${out}: stored lesson ${i + 1} "${l.name}" (${l.source ?? 'its lesson file'}) field "${problem.field}"${problem.text}; ${fix}`,
      'KAIS_ERR_CURRICULUM',
    );
  }
}

/** The options of a run about to start or resume, checked before anything is written. */
export interface CheckedOptions {
  opts: TrainOptions;
  scenario: Scenario;
  /** a fresh run's lessons (null on a resume, which reads the stored ones) */
  newLessons: Lesson[] | null;
}

/**
 * The given options over the defaults, checked: the spec's checks (the same as on the command
 * line), the names it cannot know, the curriculum's lesson files, the second validation set
 * (--eval-trace, else the curriculum folder's validation.json) and the --out / --resume pair.
 */
export function checkTrainOptions(given: Partial<TrainOptions> & { scenario: string }): CheckedOptions {
  const opts: TrainOptions = { ...TRAIN_DEFAULTS, ...given };
  const scenario = loadScenario(opts.scenario);
  if (opts.curriculum === 'none') opts.curriculum = null;
  checkOptions(TRAIN_SPEC, opts);
  checkLoad(scenario, opts.load); // as kais eval and kais up hold it
  if (!(ORCHESTRATION_BASELINES as readonly string[]).includes(opts.orchestration))
    throw new UsageError(
      `--orchestration: "${opts.orchestration}" cannot be held fixed while dispatch learns (${ORCHESTRATION_BASELINES.join(', ')}; GPG trains with --policies cmmac/gpg)`,
    );
  if (!makeTrainTeacher(opts.teacher)) asFlag('--teacher', () => makeDispatch(opts.teacher, scenario));
  if (opts.curriculum && (given.episodeFrames !== undefined || given.bcFrames !== undefined)) {
    throw new UsageError(
      `--episode-frames/--bc-frames: a curriculum sets these per lesson (episodeFrames, teacher); pass --curriculum none to train a single lesson from the flags`,
    );
  }
  if (opts.resume && !fs.existsSync(opts.out))
    throw new UsageError(`--resume: --out ${opts.out} does not exist, so there is no run to continue (leave out --resume to start one)`);
  // bad lesson files fail before anything is written (a resume reads the stored lessons instead)
  const fresh = !opts.resume || fs.statSync(opts.out).size === 0;
  // a bad trace fails now, before --out is created or anything is printed (a resume replays the stored one)
  if (fresh && opts.trace) loadTrace(opts.trace);
  if (fresh && opts.policies === 'cmmac/gpg' && !opts.curriculum)
    throw new UsageError(
      `--policies cmmac/gpg: trains through lessons that say which part learns; pass --curriculum joint (kais) or a folder of lessons`,
    );
  if (fresh && opts.policies !== 'cmmac/gpg') {
    const gpgFlags = (['gpgRollouts', 'gpgOpCost', 'gpgReplicaCost', 'gpgLr', 'gpgInit', 'exportGpg'] as const).filter(
      (k) => given[k] !== undefined && given[k] !== null,
    );
    if (gpgFlags.length > 0) throw new UsageError(`--${kebab(gpgFlags[0])}: only with --policies cmmac/gpg`);
  }
  // --init-from: a file that is not a usable run fails now, before --out is created
  if (fresh && opts.initFrom) {
    initCheckpoint(opts.initFrom, scenario);
  }
  // --gpg-init: a model that does not fit the scenario fails now, before anything is written
  if (fresh && opts.gpgInit) {
    // lazily: tfjs loads only when a model is named (kais train --help stays light)
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const { loadGpgNet } = require('../../critic/gpg/load') as typeof import('../../critic/gpg/load');
    loadGpgNet(opts.gpgInit, scenario, '--gpg-init').dispose();
  }
  const newLessons = fresh && opts.curriculum ? checkLessons(loadCurriculum(opts.curriculum), scenario, opts.policies) : null;
  // the second validation set: --eval-trace (none: off), else the curriculum folder's validation.json
  let validationFile: string | null = null;
  if (given.evalTrace === 'none') {
    opts.evalTrace = null;
  } else if (given.evalTrace) {
    if (!fs.existsSync(given.evalTrace)) throw new UsageError(`--eval-trace: ${given.evalTrace} does not exist`);
  } else if (fresh && opts.curriculum) {
    const v = loadValidation(opts.curriculum);
    if (v) {
      validationFile = v.file;
      opts.evalTrace = v.trace;
      if (given.evalTraceWindowS === undefined) opts.evalTraceWindowS = v.traceWindowS;
    }
  }
  if (given.evalTraceWindowS !== undefined) {
    checkTraceWindow(given.evalTraceWindowS, '--eval-trace-window');
    if (!opts.evalTrace) throw new UsageError('--eval-trace-window: needs --eval-trace (or a curriculum with a validation.json)');
  }
  // an empty validation window fails now, not at the first evaluation; the line names where the
  // trace came from: the flag, or the curriculum's validation.json (no flag was given then)
  const fromFile = validationFile;
  const traceSource = fromFile ? `${fromFile}: field "trace"` : '--eval-trace';
  if (fresh && opts.evalTrace && !asFlag(traceSource, () => traceHasRowsIn(opts.evalTrace!, opts.evalTraceWindowS))) {
    const window = `[${opts.evalTraceWindowS.join(', ')}]`;
    throw new UsageError(
      fromFile && given.evalTraceWindowS === undefined
        ? `${fromFile}: field "traceWindowS" ${window} holds no rows of the trace ${opts.evalTrace}`
        : `${traceSource}: ${opts.evalTrace} has no rows in the window ${window}`,
    );
  }
  if (!opts.resume && fs.existsSync(opts.out) && fs.statSync(opts.out).size > 0) {
    throw new UsageError(`--out ${opts.out}: file exists; pass --resume to continue it or choose another file`);
  }
  checkExportTarget('--export-actor', opts.exportActor, opts, ['.json']);
  checkExportTarget('--export-gpg', opts.exportGpg, opts, []);
  return { opts, scenario, newLessons };
}

/**
 * An export file must not be one the run reads or writes (--out, --init-from, --gpg-init, the other
 * export), nor another SQLite file (a run: --export-actor q.db once turned the run's own database
 * into weights), and no folder may stand where it or its temporaries go. Checked before training.
 */
function checkExportTarget(flag: string, file: string | null | undefined, opts: TrainOptions, companions: string[]): void {
  if (!file) return;
  const target = path.resolve(file);
  const mine = [target, ...companions.map((c) => `${target}${c}`)];
  const others: [string, string | null | undefined][] = [
    ['--out', opts.out],
    ['--init-from', opts.initFrom],
    ['--gpg-init', opts.gpgInit],
    ['--export-actor', opts.exportActor],
    ['--export-gpg', opts.exportGpg],
  ];
  for (const [f, v] of others)
    if (f !== flag && v && mine.includes(path.resolve(v)))
      throw new UsageError(`${flag} ${file}: it is the ${f} file too, and would be overwritten; choose another name`);
  const st = fs.statSync(target, { throwIfNoEntry: false });
  if (st?.isFile() && st.size > 0 && checkSqliteFile(target) === target)
    throw new UsageError(`${flag} ${file}: is a SQLite database (a kais train run?), and would be overwritten; choose another name`);
  for (const p of [...mine, ...mine.map((m) => `${m}.tmp`)]) {
    const st = fs.statSync(p, { throwIfNoEntry: false });
    if (st && !st.isFile()) throw new UsageError(`${flag} ${file}: ${p} is in the way (not a regular file)`);
  }
}

/** Settings a resume takes from the command line; every other one comes from the stored run. */
const RESUME_TAKES = new Set(['frames', 'out', 'resume', 'json', 'exportActor', 'exportGpg', 'scenario', 'curriculum']);

/**
 * --resume: the flags given that differ from the stored run's settings, which the run keeps (as
 * --flag names), for one "ignored" line. --scenario is checked against the run, and a curriculum's
 * lessons are stored with it.
 */
export function ignoredOnResume(given: Partial<TrainOptions>, stored: TrainConfig): string[] {
  const out: string[] = [];
  for (const [k, v] of Object.entries(given)) {
    if (v === undefined || RESUME_TAKES.has(k)) continue;
    if (JSON.stringify(v) !== JSON.stringify((stored as unknown as Record<string, unknown>)[k])) out.push(`--${kebab(k)}`);
  }
  return out;
}

/** Resolved config: the options plus what they imply; the first row a run writes. */
export interface TrainConfig extends TrainOptions {
  scenarioFingerprint: string;
  envVersion: string;
  obsDim: number;
  numActions: number;
  stateDim: number;
  /** the lessons of --curriculum, as read when the run started (a resume uses these, not the files) */
  lessons?: Lesson[];
}

/** The config a run uses: a fresh run's checked options, or on a resume the stored config (only --frames may change it). */
export function resolveConfig(
  checked: CheckedOptions,
  given: Partial<TrainOptions>,
  stored: TrainConfig | null,
  shape: ObservationShape,
): TrainConfig {
  const { scenario, newLessons } = checked;
  let opts = checked.opts;
  // the stored run config wins; only the total length may be extended
  // (an export named now is written at the end, as a fresh run's would be)
  if (stored)
    opts = {
      ...stored,
      frames: given.frames ?? stored.frames,
      out: opts.out,
      resume: true,
      json: opts.json,
      exportActor: given.exportActor ?? stored.exportActor,
      exportGpg: given.exportGpg ?? stored.exportGpg,
    };
  // a fresh run stores its files as absolute paths, so that --resume, --plot and kais export find
  // them from any directory (runs stored before read theirs from the working directory, as then)
  else
    opts = {
      ...opts,
      scenario: isScenarioFile(opts.scenario) ? path.resolve(opts.scenario) : opts.scenario,
      trace: opts.trace ? path.resolve(opts.trace) : opts.trace,
      evalTrace: opts.evalTrace ? path.resolve(opts.evalTrace) : opts.evalTrace,
    };
  // the lessons are read once, when the run starts; a resume uses the stored ones
  const lessons = stored
    ? (stored.lessons ?? null)
    : (newLessons ?? (opts.curriculum ? checkLessons(loadCurriculum(opts.curriculum), scenario, opts.policies) : null));
  // a curriculum runs until its last lesson ends unless --frames caps it: the budget is the default
  if (lessons && !stored && given.frames === undefined) opts.frames = lessons.reduce((n, l) => n + l.maxEpisodes * l.episodeFrames, 0);
  return {
    ...opts,
    ...(lessons ? { lessons } : {}),
    scenarioFingerprint: scenarioFingerprint(scenario),
    envVersion: ENV_VERSION,
    obsDim: observationDim(shape),
    numActions: shape.numTargets,
    stateDim: stateDim(shape),
  };
}

/**
 * `--curriculum` as given, or when it is not given: the shipped lessons for the scenario they are
 * written for (the default recipe; with --policies cmmac/gpg the joint lessons after them), a single
 * lesson from the flags for any other scenario.
 */
export function resolveCurriculumFlag(flag: string | undefined, scenario: string, policies: string = 'cmmac'): string | null {
  if (flag !== undefined) return flag === 'none' ? null : flag;
  if (!DEFAULT_CURRICULUM_SCENARIOS.includes(scenario)) return null;
  return policies === 'cmmac/gpg' ? 'joint' : 'default';
}

/** Scenarios the shipped lessons are written for (`kais train` without --curriculum runs them there). */
export const DEFAULT_CURRICULUM_SCENARIOS: string[] = ['kais'];
