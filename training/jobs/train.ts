/**
 * `kais train`: cMMAC dispatch on the simulator, one file top to bottom (CleanRL style; the
 * algorithm is ALGORITHMS.md section 2, the learner critic/cmmac/learner.ts).
 *
 *   options -> setup (scenario, nets, learner, checkpoint file) -> per episode: fresh requests,
 *   per frame: // SIM + // ACT (decision rounds, each one batched forward pass) -> // LEARN (one
 *   update on the frame's decisions) -> logging; a checkpoint after every episode.
 *
 * The default recipe (docs/cmmac.md has the measured table):
 * 1. warm start: the first `bcFrames` (24) frames act with the `deadline-load` teacher
 *    (critic/cmmac/teacher.ts) and clone it (4 passes per frame, lr 5e-4), the critic fitting the
 *    requests' outcomes meanwhile;
 * 2. RL fine-tuning (frames 25-45): the actor samples, each decision is scored by its own request's
 *    outcome (`--credit request`; the spec's team TD advantage is `--credit team`, see
 *    critic/cmmac/learner.ts for why it is not the default), PPO-clipped updates once per episode at
 *    lr 1e-4 with a KL guard, entropy 0.003;
 * 3. every 3 frames an argmax evaluation on 2 held-out seeds (EVAL_SEED_BASE..), the best one is
 *    recorded (meta 'best'); loadCmmacFromDb and `--export-actor` take that checkpoint, so
 *    fine-tuning can never ship a policy worse, on those seeds, than the cloned one. With
 *    `--eval-trace` (or a curriculum folder's validation.json) each evaluation also replays a trace
 *    window and the best is chosen by the mean of the two rates.
 * The spec's settings are `--credit team --lr 5e-4 --entropy-coef 0.01`.
 * Orchestration is a fixed baseline (`hpa` by default).
 *
 * Curriculum (`--curriculum`, training/curriculum/schedule.ts): each episode takes its workload or
 * trace window, load, length, orchestration, dequeue, cloning/RL and learner settings from the
 * current lesson; after each episode decidePromotion judges the lesson's episode rates, and the
 * lesson state goes into the checkpoint. On `kais` the default is the shipped lessons, which are
 * steps 1-2 above as data (frame for frame the same as `--curriculum none` with the defaults).
 *
 * Resume: checkpoints are taken at episode boundaries with the Adam moments and every Rng state,
 * so `--resume` after a kill recomputes the interrupted episode and ends at the same numbers as an
 * uninterrupted run.
 */
import * as fs from 'fs';
import { performance } from 'perf_hooks';
import type { Argv, CommandModule } from 'yargs';
import { UsageError } from '../../shared/errors';
import { checkOptions, givenOptions, namingFlags, yargsOptions } from '../../shared/config';
import { Rng } from '../../shared/rng';
import { loadScenario, topologyOf, type Scenario } from '../../shared/scenario';
import { loadBackend } from '../../shared/tf-backend';
import { ActorNet } from '../../shared/nets/actor';
import { ValueNet } from '../../shared/nets/value';
import { CmmacDispatch } from '../../agent/actor-policy';
import { observationDim, targetBlockOf, type ObservationShape } from '../../agent/observation';
import { RolloutBuffer } from '../../critic/cmmac/buffer';
import { CmmacLearner } from '../../critic/cmmac/learner';
import { makeTrainTeacher } from '../../critic/cmmac/teacher';
import { buildState, stateDim } from '../../critic/cmmac/state';
import { EdgeCloudEnv, ENV_VERSION } from '../sim/env';
import type { DequeueName } from '../../shared/dequeue';
import { buildRequests, type WorkloadName } from '../workload';
import { makeDispatch, makeOrchestration } from '../baselines/registry';
import type { DispatchPolicy, OrchestrationPolicy } from '../../shared/policy';
import { checkTraceWindow, decidePromotion, loadCurriculum, loadValidation, type Lesson } from '../curriculum/schedule';
import { loadTrace, toRequests, type TraceRow } from '../workload';
import { runEpisode } from './rollout';
import { writePlot } from './plot';
import { CheckpointDb, checkScenario, scenarioFingerprint, type CheckpointRow, type CheckpointState } from './checkpoint';
import { packWeights, weightsToBytes } from '../../shared/protocol/weights';
import { TRAIN_CLI_SPEC, TRAIN_DEFAULTS, TRAIN_SPEC, type TrainOptions } from './train-options';

// ------------------------------------------------------------------------------------ OPTIONS

// The options (type, default, range, description) are declared once in train-options.ts.
export { TRAIN_DEFAULTS, type TrainOptions, parseWindowFlag } from './train-options';

/** Seeds of held-out evaluation episodes (training episodes derive theirs from --seed). */
export const EVAL_SEED_BASE = 1_000_003;

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

/** Where a curriculum run stands, stored in every checkpoint (state.curriculum). */
export interface CurriculumState {
  /** index of the current lesson (lessons.length when all are done) */
  lesson: number;
  /** episodes of the current lesson done */
  episodes: number;
  /** their training throughput rates (the history decidePromotion judges) */
  rates: number[];
  startFrame: number;
  startEpisode: number;
}

/** One started lesson (meta 'lessons' of the checkpoint file). */
export interface LessonRecord {
  lesson: number;
  name: string;
  startFrame: number;
  startEpisode: number;
  endFrame?: number;
  endEpisode?: number;
  episodes?: number;
  reason?: string;
  detail?: string;
}

export interface FrameMetrics {
  frame: number;
  episode: number;
  phase: 'bc' | 'rl';
  /** curriculum: name of the lesson */
  lesson?: string;
  'charts/throughputRate': number;
  'charts/teamReward': number;
  'charts/decisions': number;
  'losses/value': number;
  'losses/policy': number;
  'losses/entropy': number;
  'losses/bc': number;
  /** credit 'request': approximate KL of the update to the acting policy */
  'losses/approxKl'?: number;
  'charts/evalThroughputRate'?: number;
  /** --eval-trace: the evaluation on the trace window, and the selection score (mean of the two) */
  'charts/evalTraceThroughputRate'?: number;
  'charts/evalScore'?: number;
  /** --filters, last frame of an episode: share of healthy node-time the device filters excluded */
  'charts/falseExclusionRate'?: number;
  /** wall seconds of this frame (sim + act + learn), not reproducible */
  wallS: number;
  /** wall seconds of the LEARN part */
  learnS?: number;
}

export interface TrainResult {
  config: TrainConfig;
  framesDone: number;
  metrics: FrameMetrics[];
  finalEval: number | null;
  wallS: number;
  framesPerS: number;
}

// -------------------------------------------------------------------------------------- SETUP

export async function train(options: Partial<TrainOptions> & { scenario: string }, log: (line: string) => void = () => {}): Promise<TrainResult> {
  await loadBackend();
  // options left undefined take the defaults
  const given = Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)) as Partial<TrainOptions> & { scenario: string };
  let opts: TrainOptions = { ...TRAIN_DEFAULTS, ...given };
  const scenario = loadScenario(opts.scenario);
  if (opts.curriculum === 'none') opts.curriculum = null;
  validate(opts);
  if (opts.curriculum && (given.episodeFrames !== undefined || given.bcFrames !== undefined)) {
    throw new UsageError(
      `--episode-frames/--bc-frames: a curriculum sets these per lesson (episodeFrames, teacher); pass --curriculum none to train a single lesson from the flags`,
    );
  }
  if (opts.resume && !fs.existsSync(opts.out)) throw new UsageError(`--resume: --out ${opts.out} does not exist, so there is no run to continue (leave out --resume to start one)`);
  // bad lesson files fail before anything is written (a resume reads the stored lessons instead)
  const fresh = !opts.resume || fs.statSync(opts.out).size === 0;
  const newLessons = fresh && opts.curriculum ? checkLessons(loadCurriculum(opts.curriculum), scenario) : null;
  // the second validation set: --eval-trace (none: off), else the curriculum folder's validation.json
  if (given.evalTrace === 'none') {
    opts.evalTrace = null;
  } else if (given.evalTrace) {
    if (!fs.existsSync(given.evalTrace)) throw new UsageError(`--eval-trace: ${given.evalTrace} does not exist`);
  } else if (fresh && opts.curriculum) {
    const v = loadValidation(opts.curriculum);
    if (v) {
      opts.evalTrace = v.trace;
      if (given.evalTraceWindowS === undefined) opts.evalTraceWindowS = v.traceWindowS;
    }
  }
  if (given.evalTraceWindowS !== undefined) {
    checkTraceWindow(given.evalTraceWindowS, '--eval-trace-window');
    if (!opts.evalTrace) throw new UsageError('--eval-trace-window: needs --eval-trace (or a curriculum with a validation.json)');
  }
  if (fresh && opts.evalTrace) {
    // an empty validation window fails now, not at the first evaluation
    const [from, to] = opts.evalTraceWindowS;
    let rows = traceCache.get(opts.evalTrace);
    if (!rows) traceCache.set(opts.evalTrace, (rows = loadTrace(opts.evalTrace).rows));
    if (!rows.some((r) => r.arrivalS >= from && r.arrivalS <= to)) throw new UsageError(`--eval-trace: ${opts.evalTrace} has no rows in the window [${from}, ${to}]`);
  }

  const topo = topologyOf(scenario);
  const shape = { numServices: topo.numServices, numTargets: topo.numNodes + 1, numEaps: topo.numEaps };
  if (!opts.resume && fs.existsSync(opts.out) && fs.statSync(opts.out).size > 0) {
    throw new UsageError(`--out ${opts.out}: file exists; pass --resume to continue it or choose another file`);
  }
  const db = openOut(opts.out);
  try {
    const stored = opts.resume ? db.config<TrainConfig>() : null;
    if (stored) {
      checkScenario(opts.out, stored, scenario);
      // the stored run config wins; only the total length may be extended
      opts = { ...stored, frames: given.frames ?? stored.frames, out: opts.out, resume: true, json: opts.json };
    }
    // the lessons are read once, when the run starts; a resume uses the stored ones
    const lessons = stored ? (stored.lessons ?? null) : (newLessons ?? (opts.curriculum ? checkLessons(loadCurriculum(opts.curriculum), scenario) : null));
    // a curriculum runs until its last lesson ends unless --frames caps it: the budget is the default
    if (lessons && !stored && given.frames === undefined) opts.frames = lessons.reduce((n, l) => n + l.maxEpisodes * l.episodeFrames, 0);
    const config: TrainConfig = {
      ...opts,
      ...(lessons ? { lessons } : {}),
      scenarioFingerprint: scenarioFingerprint(scenario),
      envVersion: ENV_VERSION,
      obsDim: observationDim(shape),
      numActions: shape.numTargets,
      stateDim: stateDim(shape),
    };
    return await run(config, scenario, shape, db, stored !== null, log);
  } finally {
    db.close();
  }
}

/** The checkpoint file of --out (its problems name the flag). */
function openOut(out: string): CheckpointDb {
  try {
    return CheckpointDb.open(out, 'create');
  } catch (e) {
    throw e instanceof UsageError ? new UsageError(`--out ${e.message}`, e.code) : e;
  }
}

/** The heuristic a lesson (or the warm start) clones. */
function makeTeacher(name: string, scenario: Scenario): DispatchPolicy {
  return makeTrainTeacher(name) ?? makeDispatch(name, scenario);
}

/**
 * Checks what the lesson files cannot check alone, naming the file: every lesson trains the run's
 * scenario (one run trains one scenario's networks), its orchestration and teacher exist.
 */
export function checkLessons(lessons: Lesson[], scenario: Scenario): Lesson[] {
  for (const l of lessons) {
    const src = l.source ?? l.name;
    const field = (f: string, e: unknown) => new UsageError(`${src}: field "${f}" ${(e instanceof Error ? e.message : String(e)).split('\n')[0]}`, 'KAIS_ERR_CURRICULUM');
    let ls: Scenario;
    try {
      ls = loadScenario(l.scenario);
    } catch (e) {
      throw field('scenario', e);
    }
    if (scenarioFingerprint(ls) !== scenarioFingerprint(scenario)) {
      throw new UsageError(`${src}: field "scenario" is "${l.scenario}", but this run trains scenario "${scenario.name}" (pass --scenario ${l.scenario}, or --curriculum none)`, 'KAIS_ERR_CURRICULUM');
    }
    try {
      makeOrchestration(l.orchestration, scenario);
    } catch (e) {
      throw field('orchestration', e);
    }
    if (l.teacher !== undefined) {
      try {
        makeTeacher(l.teacher, scenario);
      } catch (e) {
        throw field('teacher', e);
      }
    }
  }
  return lessons;
}

/** What one episode trains on: a lesson's settings, or the run's own (single lesson). */
interface EpisodePlan {
  workload: WorkloadName;
  trace: string | null;
  traceWindowS: [number, number] | null;
  load: number;
  orchestration: string;
  dequeue: DequeueName;
  /** curriculum: the lesson clones this heuristic (single lesson: --bc-frames decides per frame) */
  teacher: string | null;
  lr: number;
  entropyCoef: number;
  teamShare: number;
}

/** The run's view; runs stored before --view existed trained and evaluated on the whole cluster. */
function viewOfRun(c: Pick<TrainOptions, 'view'>): 'agent' | 'global' {
  return c.view ?? 'global';
}

function singlePlan(c: TrainConfig): EpisodePlan {
  return {
    workload: c.workload,
    trace: c.trace,
    traceWindowS: null,
    load: c.load,
    orchestration: c.orchestration,
    // runs written before --dequeue existed trained with the env's default (edf)
    dequeue: c.dequeue ?? 'edf',
    teacher: null,
    lr: c.lr,
    entropyCoef: c.entropyCoef,
    teamShare: c.teamShare,
  };
}

function lessonPlan(l: Lesson, c: TrainConfig): EpisodePlan {
  return {
    workload: l.workload,
    trace: l.trace ?? null,
    traceWindowS: l.traceWindowS ?? null,
    load: l.load,
    orchestration: l.orchestration,
    dequeue: l.dequeue ?? c.dequeue,
    teacher: l.teacher ?? null,
    lr: l.lr ?? c.lr,
    entropyCoef: l.entropyCoef ?? c.entropyCoef,
    teamShare: l.teamShare ?? c.teamShare,
  };
}

const traceCache = new Map<string, TraceRow[]>();

/**
 * An episode's requests. With a trace window the rows of [from, to] are replayed from a start drawn
 * in the window (`windowRng`), the rows before the start moved after the window's end, so each
 * episode sees another stretch of the same rows and nothing outside the window.
 */
function episodeRequests(scenario: Scenario, p: EpisodePlan, seed: number, windowRng: Rng, durationS: number, warn: (line: string) => void) {
  if (!p.trace || !p.traceWindowS) {
    return buildRequests({ scenario, workload: p.workload, tracePath: p.trace, seed, load: p.load, durationS, warn });
  }
  const [from, to] = p.traceWindowS;
  return windowRequests(scenario, p.trace, p.traceWindowS, from + windowRng.next() * (to - from), seed, p.load, durationS, warn);
}

/** The rows of `trace` in [from, to], replayed from `start` (the rows before it moved after `to`). */
function windowRequests(scenario: Scenario, trace: string, [from, to]: [number, number], start: number, seed: number, load: number, durationS: number, warn: (line: string) => void) {
  let rows = traceCache.get(trace);
  if (!rows) traceCache.set(trace, (rows = loadTrace(trace, warn).rows));
  const span = to - from + 1;
  const windowRows: TraceRow[] = [];
  for (const r of rows) {
    if (r.arrivalS < from || r.arrivalS > to) continue;
    windowRows.push(r.arrivalS >= start ? r : { ...r, arrivalS: r.arrivalS + span, endS: r.endS === null ? null : r.endS + span });
  }
  if (windowRows.length === 0) throw new UsageError(`trace ${trace}: no rows in the window [${from}, ${to}]`);
  return toRequests(windowRows, { scenario, seed, load, durationS, warn, source: trace });
}

/** The spec's checks (shared/config.ts: the same as on the command line), then the names it cannot know. */
function validate(o: TrainOptions): void {
  checkOptions(TRAIN_SPEC, o);
  makeOrchestration(o.orchestration, loadScenario(o.scenario));
  if (!makeTrainTeacher(o.teacher)) makeDispatch(o.teacher, loadScenario(o.scenario));
}

async function run(
  config: TrainConfig,
  scenario: Scenario,
  shape: ObservationShape,
  db: CheckpointDb,
  resuming: boolean,
  log: (line: string) => void,
): Promise<TrainResult> {
  const t0 = performance.now();
  // TRY NOT TO MODIFY: seeding. Every stream derives from --seed and is checkpointed.
  const actRng = Rng.derive(config.seed, 'train/act');
  const learnRng = Rng.derive(config.seed, 'train/learn');
  const actor = new ActorNet(config.obsDim, shape.numTargets, Rng.derive(config.seed, 'train/init-actor'), undefined, config.head, config.targetScorer ? targetBlockOf(shape) : null);
  const critic = new ValueNet(config.stateDim, Rng.derive(config.seed, 'train/init-critic'));
  const learner = new CmmacLearner(actor, critic, learnRng, {
    lr: config.lr,
    gamma: config.gamma,
    entropyCoef: config.entropyCoef,
    minibatch: config.minibatch,
    normAdv: config.normAdv,
    gaeLambda: config.gaeLambda ?? 0,
  });
  const policy = new CmmacDispatch({
    shape,
    queueCapPerReplica: scenario.queueCapPerReplica,
    weights: actor.getWeights().arrays,
    mode: 'sample',
    rng: actRng,
    head: config.head,
  });
  const teacher = makeTeacher(config.teacher, scenario);
  const buf = new RolloutBuffer(actor.obsDim, shape.numTargets, config.stateDim, 8192);
  const sBuf = new Float32Array(config.stateDim);
  const obsBuf = new Float32Array(actor.obsDim);
  const metrics: FrameMetrics[] = [];
  let weightVersion = 0;
  let startEpisode = 0;
  let resumedFrame = 0;
  let resumedCurriculum: CurriculumState | null = null;

  /** Networks and optimiser from a checkpoint row (the Rng streams are left alone). */
  const restoreCheckpoint = (ck: CheckpointRow) => {
    actor.setWeights(ck.actor);
    critic.setWeights(ck.critic);
    const na = actor.variables.length;
    const nc = critic.variables.length;
    if (ck.adam.length !== 2 * (na + nc)) throw new UsageError(`${db.path}: checkpoint optimiser state does not fit the networks`);
    learner.setState({
      actorAdam: { step: ck.state.actorAdamStep, moments: ck.adam.slice(0, 2 * na) },
      criticAdam: { step: ck.state.criticAdamStep, moments: ck.adam.slice(2 * na) },
    });
    policy.setWeights(++weightVersion, actor.getWeights().arrays);
  };

  if (resuming) {
    const ck = db.latest();
    if (ck) {
      restoreCheckpoint(ck);
      actRng.setState(ck.state.rng.act);
      learnRng.setState(ck.state.rng.learn);
      weightVersion = ck.state.weightVersion;
      policy.setWeights(weightVersion, actor.getWeights().arrays);
      startEpisode = ck.episode + 1;
      resumedFrame = ck.frame;
      resumedCurriculum = (ck.state as CheckpointState & { curriculum?: CurriculumState }).curriculum ?? null;
      if (config.lessons && !resumedCurriculum) throw new UsageError(`${db.path}: curriculum run without the lesson state in its checkpoint`);
      for (const m of db.metrics<FrameMetrics>()) if (m.frame < ck.frame) metrics.push(m.json);
      db.truncateMetrics(ck.frame);
      const where = config.lessons && resumedCurriculum ? `, in lesson ${resumedCurriculum.lesson + 1}/${config.lessons.length} "${config.lessons[resumedCurriculum.lesson]?.name ?? '(all done)'}" after ${resumedCurriculum.episodes} of its episodes` : '';
      log(`resuming ${db.path} after episode ${ck.episode} (${ck.frame} frames done${where})`);
    }
  } else {
    if (config.initFrom) {
      const src = CheckpointDb.open(config.initFrom, 'read');
      try {
        const cfg = src.config<TrainConfig>();
        if (!cfg) throw new UsageError(`--init-from ${config.initFrom}: no config row`);
        checkScenario(config.initFrom, cfg, scenario);
        const ck = src.latest();
        if (!ck) throw new UsageError(`--init-from ${config.initFrom}: no checkpoint written yet`);
        actor.setWeights(ck.actor);
        critic.setWeights(ck.critic);
        policy.setWeights(0, actor.getWeights().arrays);
        log(`starting from ${config.initFrom} (${ck.frame} frames trained there)`);
      } finally {
        src.close();
      }
    }
    db.writeConfig(config);
  }

  const E = config.episodeFrames;
  const lessons = config.lessons ?? null;
  const totalEpisodes = Math.ceil(config.frames / E);
  const orchestrations = new Map<string, OrchestrationPolicy>();
  const orchestrationOf = (name: string) => {
    let o = orchestrations.get(name);
    if (!o) orchestrations.set(name, (o = makeOrchestration(name, scenario)));
    return o;
  };
  const teachers = new Map<string, ReturnType<typeof makeTeacher>>([[config.teacher, teacher]]);
  const teacherOf = (name: string) => {
    let t = teachers.get(name);
    if (!t) teachers.set(name, (t = makeTeacher(name, scenario)));
    return t;
  };
  let finalEval: number | null = null;
  const actions: number[] = new Array(shape.numEaps).fill(-1);
  const perRequest = (config.credit ?? 'team') === 'request';
  let best = resuming ? db.meta<BestEval>('best') : null;
  let bestActor: Float32Array[] | null = null;
  let framesDone = resumedFrame;
  const framesAtStart = resumedFrame;
  /** lessons: where the run is; `lessonLog` the lessons started so far (meta 'lessons'). */
  let cur: CurriculumState = resumedCurriculum ?? { lesson: 0, episodes: 0, rates: [], startFrame: 0, startEpisode: 0 };
  const lessonLog: LessonRecord[] = (resuming ? db.meta<LessonRecord[]>('lessons') : null) ?? [];
  /** checkpoint labels written by finished lessons (meta 'labels': label -> checkpoint episode and frame) */
  const labels: Record<string, { episode: number; frame: number }> = (resuming ? db.meta<Record<string, { episode: number; frame: number }>>('labels') : null) ?? {};
  let lastCheckpointEpisode = startEpisode - 1;

  for (let episode = startEpisode; ; episode++) {
    // which lesson, and what its episodes look like (single lesson: the run's own options)
    const lesson = lessons ? (lessons[cur.lesson] ?? null) : null;
    if (lessons ? lesson === null || framesDone >= config.frames : episode >= totalEpisodes) break;
    const plan = lesson ? lessonPlan(lesson, config) : singlePlan(config);
    if (lesson && cur.episodes === 0) {
      // a lesson starts: from its checkpointIn when that is not where the run stands
      const from = lesson.checkpointIn !== undefined ? labels[lesson.checkpointIn] : undefined;
      if (from && from.episode !== lastCheckpointEpisode) {
        const ck = db.latest(from.frame);
        if (!ck || ck.episode !== from.episode) throw new UsageError(`${db.path}: checkpoint "${lesson.checkpointIn}" (episode ${from.episode}) is missing`);
        restoreCheckpoint(ck);
      }
      if (!lessonLog.some((r) => r.lesson === cur.lesson)) {
        lessonLog.push({ lesson: cur.lesson, name: lesson.name, startFrame: framesDone, startEpisode: episode });
      }
      log(
        `lesson ${cur.lesson + 1}/${lessons!.length} "${lesson.name}" starts at frame ${framesDone}: ${lesson.trace ? `trace ${lesson.trace}${lesson.traceWindowS ? ` [${lesson.traceWindowS.join(', ')}] s` : ''}` : lesson.workload} x${lesson.load}, ` +
          `${lesson.episodeFrames}-frame episodes, ${lesson.orchestration}, ${plan.dequeue}, ${lesson.teacher ? `cloning ${lesson.teacher}` : 'RL'}, at most ${lesson.maxEpisodes} episodes` +
          (lesson.checkpointIn ? `, from checkpoint "${lesson.checkpointIn}"` : ''),
      );
    }
    const epE = lesson ? lesson.episodeFrames : E;
    const epFrames = Math.min(epE, config.frames - framesDone);
    const epSeed = Rng.derive(config.seed, `train/episode-${episode}`).nextU32();
    const requests = episodeRequests(scenario, plan, epSeed, Rng.derive(config.seed, `train/trace-window-${episode}`), epFrames * scenario.slotsPerFrame * scenario.slotS, log);
    const env = new EdgeCloudEnv(scenario, {
      requests,
      frames: epFrames,
      orchestration: orchestrationOf(plan.orchestration),
      illegalAction: 'throw',
      rewardEpsilon: config.rewardEpsilon ?? 1,
      nodeDequeue: plan.dequeue,
      deviceFilters: config.filters ?? false,
      agentViews: viewOfRun(config) === 'agent',
    });
    const epTeacher = teacherOf(plan.teacher ?? config.teacher);
    let { observations } = env.reset({ seed: epSeed });
    policy.reset(epSeed);
    epTeacher.reset?.(epSeed, env.view);
    learner.setEntropyCoef(plan.entropyCoef);
    const epMetrics: FrameMetrics[] = [];
    let frameStart = 0;
    let bcLoss = 0;
    /** credit 'request': index of the first decision the actor sampled in this episode's buffer */
    let rlStart = -1;

    for (let fi = 0; fi < epFrames; fi++) {
      const tf0 = performance.now();
      const frame = framesDone + fi;
      const bc = lesson ? plan.teacher !== null : frame < config.bcFrames;
      const frameEnd = (fi + 1) * scenario.slotsPerFrame;
      let lastSlot = -1;
      let teamReward = 0;
      policy.recorder = bc ? null : buf;
      if (!bc && rlStart < 0) rlStart = buf.n;
      while (!env.isDone && env.slotIndex < frameEnd) {
        // SIM: a new decision slot starts: remember s_t for the critic
        if (env.slotIndex !== lastSlot) {
          buildState(env.state(), sBuf);
          buf.beginSlot(sBuf);
          lastSlot = env.slotIndex;
        }
        // ACT: one batched forward pass over the live eAPs (or the teacher while cloning)
        const live = env.agents;
        const items = live.map((b) => observations[b]);
        // one request reaches one eAP per step: its agent's view (or the cluster's, view 'global')
        const view = env.viewOf(live[0]);
        if (bc) {
          for (const it of items) {
            it.action = epTeacher.decide(it, view);
            policy.observations.build(it, view, obsBuf);
            buf.record(obsBuf, it.mask, it.action, 0, it.eap);
          }
          if (perRequest) buf.tagRequests(items.map((it) => it.request.id));
          if (config.dagger && episode > 0) {
            policy.mode = 'argmax';
            policy.decideBatch(items, view); // the student acts; the teacher's labels are recorded
            policy.mode = 'sample';
          }
        } else {
          policy.decideBatch(items, view);
          if (perRequest) buf.tagRequests(items.map((it) => it.request.id));
        }
        for (const b of live) actions[b] = observations[b].action;
        const step = env.step(actions);
        observations = step.observations;
        let u = 0;
        for (const b of env.possibleAgents) u += step.rewards[b];
        buf.addReward(u);
        teamReward += u;
      }
      // LEARN: one update on this frame's decisions, bootstrapped from the state reached
      // (credit 'request': one update per episode, at its last frame, once outcomes are known)
      const tl0 = performance.now();
      const learnNow = !perRequest || fi === epFrames - 1;
      if (perRequest && bc) {
        // cloning stays per frame (on this frame's decisions); the critic waits for the outcomes
        learner.setLearningRate(config.bcLr);
        bcLoss = learner.imitate(buf, config.bcEpochs, frameStart);
      }
      frameStart = learnNow ? 0 : buf.n;
      if (learnNow) {
        buildState(env.state(), sBuf);
        buf.finish(sBuf);
      }
      const m: FrameMetrics = {
        frame,
        episode,
        phase: bc ? 'bc' : 'rl',
        'charts/throughputRate': frameRate(env, fi),
        'charts/teamReward': round(teamReward / Math.max(1, buf.numSlots), 4),
        'charts/decisions': buf.n,
        'losses/value': 0,
        'losses/policy': 0,
        'losses/entropy': 0,
        'losses/bc': 0,
        wallS: 0,
      };
      if (lesson) m.lesson = lesson.name;
      if (perRequest && bc) m['losses/bc'] = round(bcLoss, 5);
      if (!learnNow) {
        // keep collecting this episode's decisions
      } else if (perRequest) {
        const outcome = requestOutcomes(env, buf);
        if (bc) {
          m['losses/value'] = round(learner.fitCriticRequests(buf, outcome), 5);
        } else {
          learner.setLearningRate(plan.lr);
          // an episode that started with cloning frames: only the actor's own samples are on-policy
          outcome.fill(Number.NaN, 0, Math.max(0, rlStart));
          const st = learner.updateRequests(buf, outcome, { teamShare: plan.teamShare, clip: config.clip, epochs: config.ppoEpochs, targetKl: config.targetKl });
          m['losses/value'] = round(st.vLoss, 5);
          m['losses/policy'] = round(st.pgLoss, 5);
          m['losses/entropy'] = round(st.entropy, 5);
          m['losses/approxKl'] = round(st.approxKl, 5);
        }
      } else if (bc) {
        learner.setLearningRate(config.bcLr);
        m['losses/bc'] = round(learner.imitate(buf, config.bcEpochs), 5);
        m['losses/value'] = round(learner.fitCritic(buf), 5);
      } else {
        learner.setLearningRate(plan.lr);
        const st = learner.update(buf);
        m['losses/value'] = round(st.vLoss, 5);
        m['losses/policy'] = round(st.pgLoss, 5);
        m['losses/entropy'] = round(st.entropy, 5);
      }
      if (learnNow) {
        buf.clear();
        rlStart = -1;
        policy.setWeights(++weightVersion, actor.getWeights().arrays);
      }
      m.wallS = round((performance.now() - tf0) / 1000, 3);
      m.learnS = round((performance.now() - tl0) / 1000, 3);
      epMetrics.push(m);
      metrics.push(m);
      const where = lesson ? `lesson ${cur.lesson + 1}/${lessons!.length} ${lesson.name} ep ${cur.episodes + 1}/${lesson.maxEpisodes} | ` : '';
      log(where + progressLine(m, config.frames, metrics.length - framesAtStart, (performance.now() - t0) / 1000));
    }
    framesDone += epFrames;
    if (env.telemetry && epMetrics.length > 0) {
      // --filters: share of healthy node-time the device filters excluded this episode (kais eval reports the same)
      const fx = round(env.telemetry.falseExclusionRate, 4);
      epMetrics[epMetrics.length - 1]['charts/falseExclusionRate'] = fx;
      log(`device filters: false exclusion rate ${fx} in episode ${episode}`);
    }

    // evaluation on held-out seeds (argmax), at episode ends
    // (the schedule depends on frames done only, not on --frames, so a run stopped early and
    // resumed with more frames evaluates exactly where an uninterrupted one does)
    if (config.evalEvery > 0 && Math.floor(framesDone / config.evalEvery) > Math.floor((framesDone - epFrames) / config.evalEvery)) {
      const evW = evaluate(scenario, config, actor.getWeights().arrays, shape, config.evalSeeds ?? 1);
      const last = epMetrics[epMetrics.length - 1];
      last['charts/evalThroughputRate'] = evW;
      let ev = evW;
      let line = `eval after ${framesDone} frames: cmmac/${config.orchestration} throughput rate ${evW.toFixed(4)} (held-out seed)`;
      if (config.evalTrace) {
        const evT = evaluateTraceWindow(scenario, config, actor.getWeights().arrays, shape, config.evalSeeds ?? 1);
        ev = round((evW + evT) / 2, 4);
        last['charts/evalTraceThroughputRate'] = evT;
        last['charts/evalScore'] = ev;
        line += `, trace window [${config.evalTraceWindowS.join(', ')}] s ${evT.toFixed(4)}, selection score (mean) ${ev.toFixed(4)}`;
      }
      finalEval = ev;
      log(line);
      if (best === null || ev > best.eval) {
        best = { episode, frame: framesDone, eval: ev };
        bestActor = actor.getWeights().arrays.map((a) => Float32Array.from(a));
      }
    }

    // promotion (curriculum): decided on the episodes' training throughput rates, then stored
    // with the checkpoint so that --resume continues in the same lesson with the same history
    const meta: Record<string, unknown> = best ? { best } : {};
    if (lesson) {
      const rate = round(epMetrics.reduce((s, x) => s + x['charts/throughputRate'], 0) / Math.max(1, epMetrics.length), 4);
      cur = { ...cur, episodes: cur.episodes + 1, rates: [...cur.rates, rate] };
      const d = decidePromotion(lesson, cur.rates);
      if (d.promote) {
        const rec = lessonLog.find((r) => r.lesson === cur.lesson)!;
        Object.assign(rec, { endFrame: framesDone, endEpisode: episode, episodes: cur.episodes, reason: d.reason, detail: d.detail });
        labels[lesson.checkpointOut] = { episode, frame: framesDone };
        log(`lesson ${cur.lesson + 1}/${lessons!.length} "${lesson.name}" ended after ${cur.episodes} episodes (frame ${framesDone}): ${d.reason}, ${d.detail}; checkpoint "${lesson.checkpointOut}"`);
        cur = { lesson: cur.lesson + 1, episodes: 0, rates: [], startFrame: framesDone, startEpisode: episode + 1 };
      }
      meta.lessons = lessonLog;
      meta.labels = labels;
    }

    // checkpoint: weights, optimiser, Rng states and this episode's metrics in one transaction
    const ls = learner.getState();
    db.writeCheckpoint(
      {
        episode,
        frame: framesDone,
        actor: actor.getWeights().arrays,
        actorShapes: actor.getWeights().shapes,
        critic: critic.getWeights().arrays,
        criticShapes: critic.getWeights().shapes,
        adam: [...ls.actorAdam.moments, ...ls.criticAdam.moments],
        adamShapes: [...actor.getWeights().shapes, ...actor.getWeights().shapes, ...critic.getWeights().shapes, ...critic.getWeights().shapes],
        state: {
          weightVersion,
          actorAdamStep: ls.actorAdam.step,
          criticAdamStep: ls.criticAdam.step,
          rng: { act: actRng.getState(), learn: learnRng.getState() },
          ...(lessons ? { curriculum: cur } : {}),
        },
      },
      epMetrics.map((x) => ({ frame: x.frame, json: x })),
      meta,
    );
    lastCheckpointEpisode = episode;
  }
  if (config.exportActor) {
    let arrays = bestActor;
    if (!arrays && best) arrays = db.latest(best.frame)?.actor ?? null; // best found before a resume
    arrays ??= actor.getWeights().arrays;
    exportActor(config.exportActor, arrays, actor.getWeights().shapes, {
      scenario: scenario.name,
      scenarioFingerprint: config.scenarioFingerprint,
      head: config.head,
      obsDim: config.obsDim,
      numActions: config.numActions,
      frame: best?.frame ?? config.frames,
      evalThroughputRate: best?.eval ?? null,
    });
    log(`actor written to ${config.exportActor} (${best ? `best evaluation, frame ${best.frame}, ${best.eval.toFixed(4)}` : 'last weights'})`);
  }

  learner.dispose();
  actor.dispose();
  critic.dispose();
  const wallS = (performance.now() - t0) / 1000;
  const trainedNow = metrics.length - framesAtStart;
  return { config, framesDone: metrics.length, metrics, finalEval, wallS: round(wallS, 2), framesPerS: round(trainedNow / wallS, 3) };
}

/** Best held-out evaluation so far (meta key 'best' of the checkpoint file). */
interface BestEval {
  episode: number;
  frame: number;
  eval: number;
}

/** Outcome of each recorded decision's request: 1 completed in time, 0 late or dropped, NaN not resolved yet (EdgeCloudEnv.requestOutcome). */
export function requestOutcomes(env: EdgeCloudEnv, buf: RolloutBuffer): Float32Array {
  const out = new Float32Array(buf.n);
  for (let k = 0; k < buf.n; k++) {
    const i = buf.requestId[k];
    if (i < 0) throw new Error('requestOutcomes: decision without a request id (tagRequests)');
    out[k] = env.requestOutcome(i);
  }
  return out;
}

/** Writes actor weights as `<path>` (shared/protocol/weights.ts bytes) and `<path>.json` (what it fits). */
export function exportActor(file: string, arrays: Float32Array[], shapes: number[][], meta: Record<string, unknown>): void {
  const bytes = weightsToBytes(packWeights(arrays.map((data, i) => ({ data, shape: shapes[i] })), 0));
  fs.writeFileSync(`${file}.tmp`, bytes);
  fs.renameSync(`${file}.tmp`, file);
  fs.writeFileSync(`${file}.json`, `${JSON.stringify(meta, null, 2)}\n`);
}

/** Throughput rate of frame fi of the env: in-time completions / arrivals in that frame. */
function frameRate(env: EdgeCloudEnv, fi: number): number {
  const f = env.frames[fi];
  return f && f.arrived > 0 ? round(f.completedInTime / f.arrived, 4) : 0;
}

/** Mean throughput rate of the argmax policy over `seeds` held-out episodes. */
export function evaluate(
  scenario: Scenario,
  config: TrainOptions,
  actorWeights: Float32Array[],
  shape: ObservationShape,
  seeds: number,
): number {
  const durationS = config.evalFrames * scenario.slotsPerFrame * scenario.slotS;
  return evaluateOn(scenario, config, actorWeights, shape, seeds, (seed) =>
    buildRequests({ scenario, workload: config.workload, tracePath: config.trace, seed, load: config.load, durationS }),
  );
}

/**
 * Mean throughput rate of the argmax policy on `seeds` episodes replaying the window
 * config.evalTraceWindowS of config.evalTrace: episode i starts i/seeds of the way into the window
 * (the rows before the start moved after its end, as in a lesson's trace window), seed
 * EVAL_SEED_BASE + i.
 */
export function evaluateTraceWindow(
  scenario: Scenario,
  config: TrainOptions,
  actorWeights: Float32Array[],
  shape: ObservationShape,
  seeds: number,
): number {
  const durationS = config.evalFrames * scenario.slotsPerFrame * scenario.slotS;
  const [from, to] = config.evalTraceWindowS;
  return evaluateOn(scenario, config, actorWeights, shape, seeds, (seed, i) =>
    windowRequests(scenario, config.evalTrace!, [from, to], from + (i / seeds) * (to - from), seed, config.load, durationS, () => {}),
  );
}

function evaluateOn(
  scenario: Scenario,
  config: TrainOptions,
  actorWeights: Float32Array[],
  shape: ObservationShape,
  seeds: number,
  requestsOf: (seed: number, i: number) => ReturnType<typeof buildRequests>,
): number {
  let sum = 0;
  for (let i = 0; i < seeds; i++) {
    const seed = EVAL_SEED_BASE + i;
    const requests = requestsOf(seed, i);
    const dispatch = new CmmacDispatch({ shape, queueCapPerReplica: scenario.queueCapPerReplica, weights: actorWeights, mode: 'argmax', head: config.head });
    const dq = config.dequeue ?? 'discounted'; // older runs evaluated with rollout's unset (= discounted) order
    const r = runEpisode({
      scenario,
      requests,
      frames: config.evalFrames,
      seed,
      dispatch,
      orchestration: makeOrchestration(config.orchestration, scenario),
      nodeDequeue: dq,
      view: viewOfRun(config),
      deviceFilters: config.filters ?? false,
    });
    sum += r.throughputRate;
  }
  return round(sum / seeds, 4);
}

function progressLine(m: FrameMetrics, total: number, framesThisRun: number, elapsedS: number): string {
  const fps = framesThisRun / Math.max(1e-9, elapsedS);
  const losses =
    m.phase === 'bc'
      ? `bc ${m['losses/bc'].toFixed(3)} v ${m['losses/value'].toFixed(3)}`
      : `v ${m['losses/value'].toFixed(3)} pg ${m['losses/policy'].toFixed(3)} H ${m['losses/entropy'].toFixed(2)}`;
  return `frame ${m.frame + 1}/${total} [${m.phase}] throughput ${m['charts/throughputRate'].toFixed(3)} U ${m['charts/teamReward'].toFixed(2)} ${losses} | ${m.wallS.toFixed(1)} s/frame (learn ${(m.learnS ?? 0).toFixed(1)}), ${fps.toFixed(2)} frames/s`;
}

function round(x: number, d: number): number {
  const f = 10 ** d;
  return Math.round(x * f) / f;
}

// ---------------------------------------------------------------------------------------- CLI

export const trainCommand: CommandModule<object, object> = {
  command: 'train',
  describe: 'train the cMMAC dispatcher on the simulator (checkpoints in SQLite)',
  builder: (y: Argv<object>) => yargsOptions(y.example('$0 train --scenario tiny --frames 6 --out /tmp/tiny.db', 'a tiny run in seconds'), TRAIN_CLI_SPEC),
  handler: namingFlags(TRAIN_CLI_SPEC, async (argv) => {
    const { plot: plotFile, ...given } = givenOptions(TRAIN_CLI_SPEC, argv);
    const scenario = given.scenario ?? TRAIN_SPEC.scenario.default ?? 'kais';
    const r = await train({ ...given, scenario, curriculum: resolveCurriculumFlag(given.curriculum ?? undefined, scenario) }, (line) => process.stderr.write(`${line}\n`));
    const last = r.metrics[r.metrics.length - 1];
    const summary = {
      out: r.config.out,
      frames: r.framesDone,
      throughputRate: last ? last['charts/throughputRate'] : null,
      evalThroughputRate: r.finalEval,
      wallS: r.wallS,
      framesPerS: r.framesPerS,
    };
    if (plotFile) writeLearningCurve(plotFile, r.metrics, r.config);
    if (given.json) process.stdout.write(`${JSON.stringify(summary)}\n`);
    else process.stdout.write(`trained ${summary.frames} frames in ${summary.wallS} s -> ${summary.out}\n`);
  }),
};

/**
 * `--curriculum` as given, or when it is not given: the shipped lessons for the scenario they are
 * written for (the default recipe), a single lesson from the flags for any other scenario.
 */
export function resolveCurriculumFlag(flag: string | undefined, scenario: string): string | null {
  if (flag !== undefined) return flag === 'none' ? null : flag;
  return DEFAULT_CURRICULUM_SCENARIOS.includes(scenario) ? 'default' : null;
}

/** Scenarios the shipped lessons are written for (`kais train` without --curriculum runs them there). */
export const DEFAULT_CURRICULUM_SCENARIOS: string[] = ['kais'];

/**
 * The learning curve: throughput rate of each training frame and of the held-out evaluations,
 * next to jsq/hpa and lec/hpa run on one episode of the same length, workload, dequeue and seed
 * (dashed: the level a heuristic reaches on this workload, frame by frame).
 */
function writeLearningCurve(file: string, metrics: FrameMetrics[], o: TrainOptions): void {
  const scenario = loadScenario(o.scenario);
  const frames = Math.max(1, metrics.length);
  const requests = buildRequests({
    scenario,
    workload: o.workload,
    tracePath: o.trace ?? null,
    seed: o.seed,
    load: o.load,
    durationS: frames * scenario.slotsPerFrame * scenario.slotS,
  });
  const baseline = (d: string, orch: string) =>
    runEpisode({
      scenario,
      requests,
      frames,
      seed: o.seed,
      dispatch: makeDispatch(d, scenario),
      orchestration: makeOrchestration(orch, scenario),
      nodeDequeue: o.dequeue,
      view: viewOfRun(o),
    }).throughputPerFrame;
  writePlot(
    file,
    `kais train on ${scenario.name}: throughput rate per frame`,
    [
      { name: 'cmmac (training)', values: metrics.map((m) => m['charts/throughputRate']) },
      { name: 'cmmac (held-out eval)', values: metrics.map((m) => m['charts/evalThroughputRate'] ?? NaN) },
      { name: 'jsq/hpa', values: baseline('jsq', 'hpa'), dashed: true },
      { name: 'lec/hpa', values: baseline('lec', 'hpa'), dashed: true },
    ],
    'frame',
    'throughput rate',
  );
}
