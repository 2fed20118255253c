/**
 * `kais train`: cMMAC dispatch on the simulator, one file top to bottom (CleanRL style; the
 * algorithm is ALGORITHMS.md section 2, the learner critic/cmmac/learner.ts).
 *
 *   options -> setup (scenario, nets, learner, checkpoint file) -> per episode: fresh requests,
 *   per frame: // SIM + // ACT (decision rounds, each one batched forward pass) -> // LEARN (one
 *   update on the frame's decisions) -> logging; a checkpoint after every episode.
 *
 * Around the loop, one job per module: options and their checks (train-options.ts), curriculum
 * bookkeeping (../curriculum/tracker.ts), trace windows (../workload/window.ts), evaluations
 * (train-eval.ts), checkpoints (train-checkpoint.ts), what is printed and plotted (train-progress.ts).
 *
 * The default recipe (docs/cmmac.md has the measured table):
 * 1. warm start: the first `bcFrames` (24) frames act with the `deadline-load` teacher
 *    (training/baselines/teacher.ts) and clone it (4 passes per frame, lr 5e-4), the critic fitting the
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
 * Joint training (`--policies cmmac/gpg`, train-joint.ts): the GPG orchestration net trains beside
 * cMMAC through lessons whose `learn` field says which part learns (training/curriculum/joint/:
 * after the cMMAC lessons, GPG with cMMAC frozen, then both); a lesson with `orchestration: "gpg"`
 * runs GPG (sampling while it learns, greedy when frozen), GPG's state goes into every checkpoint,
 * and `--export-gpg` writes the GPG of the best cmmac/gpg evaluation.
 *
 * Resume: checkpoints are taken at episode boundaries with the Adam moments and every Rng state,
 * so `--resume` after a kill (or Ctrl-C, which stops at the next decision slot and says how to go
 * on) recomputes the interrupted episode and ends at the same numbers as an uninterrupted run.
 */
import { performance } from 'perf_hooks';
import type { Argv, CommandModule } from 'yargs';
import { UsageError } from '../../shared/errors';
import { givenOptions, namingFlags, yargsOptions } from '../../shared/config';
import { Rng } from '../../shared/rng';
import { topologyOf, type Scenario } from '../../shared/scenario';
import { loadBackend } from '../../shared/tf-backend';
import type { ObservationShape } from '../../agent/observation';
import { RolloutBuffer } from '../../critic/cmmac/buffer';
import { buildState } from '../../critic/cmmac/state';
import { EdgeCloudEnv } from '../sim/env';
import { episodeRequests } from '../workload/window';
import { makeOrchestration } from '../baselines/registry';
import { CurriculumTracker, lessonPlan, singlePlan, withCloudVms, type CheckpointLabel, type LessonRecord } from '../curriculum/tracker';
import { CheckpointDb, checkScenario, DiskFullError } from '../../shared/nets/checkpoint-db';
import {
  EXPORT_WRITE_FAILED,
  exportBestActor,
  initFrom,
  newRunNets,
  restoreNets,
  resumeFrom,
  saveCheckpoint,
  writeFilesAtomically,
  type BestEval,
} from './train-checkpoint';
import {
  checkStoredLessonTraces,
  checkTrainOptions,
  makeTeacher,
  resolveConfig,
  ignoredOnResume,
  resolveCurriculumFlag,
  TRAIN_CLI_SPEC,
  TRAIN_SPEC,
  type TrainConfig,
  type TrainOptions,
} from './train-options';
import { evalActOf, evaluateActor, viewOfRun } from './train-eval';
import { learnFrame, memo } from './train-learn';
import { checkLayersDir, exportLayers } from './export';
import { isPlotWriteError } from './plot';
import { round } from './rollout';
import { CmmacDispatch } from '../../agent/actor-policy';
import { nodesPerFrameField } from '../../critic/gpg/model';
import type { GpgDecision } from '../../critic/gpg/policy';
import type { OrchestrationPolicy } from '../../shared/policy';
import type { GpgEpisode } from '../../critic/gpg/update';
import * as fs from 'fs';
import {
  asideRollouts,
  gpgEpisodeOf,
  gpgModelText,
  gpgOrchestration,
  gpgSalt,
  gpgWeightsOf,
  newGpgPart,
  type GpgPart,
} from './train-joint';
import type { RunState } from './train-checkpoint';
import {
  evalLine,
  frameRates,
  interruptedLine,
  PROGRESS_LEGEND,
  summaryOf,
  lessonEndLine,
  lessonPrefix,
  lessonStartLine,
  progressLine,
  resumeLine,
  writeLearningCurve,
  type FrameMetrics,
} from './train-progress';

// ------------------------------------------------------------------------------------ OPTIONS

// The options (type, default, range, description) and their checks are declared once in train-options.ts.

export interface TrainResult {
  config: TrainConfig;
  framesDone: number;
  /** stopped by Ctrl-C: framesDone is where the last checkpoint stands */
  interrupted: boolean;
  metrics: FrameMetrics[];
  finalEval: number | null;
  wallS: number;
  framesPerS: number;
  /** --export-actor or --export-gpg could not be written (said in one line; the run is in --out). */
  exportFailed?: boolean;
}

// -------------------------------------------------------------------------------------- SETUP

/** Trains; `stop` (Ctrl-C) ends the run at the next decision slot, its last checkpoint kept for --resume. */
export async function train(
  options: Partial<TrainOptions> & { scenario: string },
  log: (line: string) => void = () => {},
  stop?: AbortSignal,
): Promise<TrainResult> {
  await loadBackend();
  // options left undefined take the defaults
  const given = Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)) as Partial<TrainOptions> & {
    scenario: string;
  };
  const checked = checkTrainOptions(given);
  const { scenario } = checked;
  const topo = topologyOf(scenario);
  const shape = { numServices: topo.numServices, numTargets: topo.numNodes + 1, numEaps: topo.numEaps };
  const existed = fs.existsSync(checked.opts.out);
  const db = openOut(checked.opts.out);
  let removeOut = false;
  try {
    const stored = checked.opts.resume ? db.config<TrainConfig>() : null;
    if (stored) checkScenario(checked.opts.out, stored, scenario);
    // the lessons still to run must find their traces (checked now, not when such a lesson starts)
    if (stored?.lessons) {
      const at = (db.latest()?.state as RunState | undefined)?.curriculum?.lesson ?? 0;
      checkStoredLessonTraces(checked.opts.out, stored.lessons, at);
    }
    if (stored) {
      const ignored = ignoredOnResume(options, stored);
      if (ignored.length > 0) log(`ignored on --resume (the run keeps its stored settings): ${ignored.join(', ')}`);
    }
    const config = resolveConfig(checked, given, stored, shape);
    return await run(config, scenario, shape, db, stored !== null, log, stop);
  } catch (e) {
    if (!(e instanceof DiskFullError)) throw e;
    // a full disk: the failed write was rolled back; say what the file still holds
    const kept = db.latest();
    if (kept)
      throw new DiskFullError(
        e.file,
        e.what,
        `the last complete checkpoint, frame ${kept.frame}, is kept: --resume continues from it once there is room`,
      );
    removeOut = !existed; // a file this run made and could not fill is no run to resume
    throw new DiskFullError(e.file, e.what, removeOut ? 'no checkpoint was written: the file is removed' : 'no checkpoint was written');
  } finally {
    db.close();
    if (removeOut) for (const f of [checked.opts.out, `${checked.opts.out}-journal`]) fs.rmSync(f, { force: true });
  }
}

/** --export-layers checked by trying it (export.ts checkLayersDir; its problems name the flag). */
function exportLayersTarget(dir: string): void {
  try {
    checkLayersDir(dir);
  } catch (e) {
    throw e instanceof UsageError ? new UsageError(`--export-layers ${e.message}`, e.code) : e;
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

async function run(
  config: TrainConfig,
  scenario: Scenario,
  shape: ObservationShape,
  db: CheckpointDb,
  resuming: boolean,
  log: (line: string) => void,
  stop: AbortSignal | undefined,
): Promise<TrainResult> {
  const t0 = performance.now();
  // TRY NOT TO MODIFY: seeding. Every stream derives from --seed and is checkpointed.
  const actRng = Rng.derive(config.seed, 'train/act');
  const learnRng = Rng.derive(config.seed, 'train/learn');
  const { actor, critic, learner, policy } = newRunNets(config, scenario, shape, actRng, learnRng);
  const teacher = makeTeacher(config.teacher, scenario);
  const buf = new RolloutBuffer(actor.obsDim, shape.numTargets, config.stateDim, 8192);
  const sBuf = new Float32Array(config.stateDim);
  const obsBuf = new Float32Array(actor.obsDim);
  // --policies cmmac/gpg: the GPG orchestration learns beside cMMAC (train-joint.ts)
  const joint = (config.policies ?? 'cmmac') === 'cmmac/gpg';
  const gpg: GpgPart | undefined = joint ? newGpgPart(config, scenario) : undefined;
  const nets = { actor, critic, learner, gpg };
  let weightVersion = 0;
  const resumed = resuming ? resumeFrom<FrameMetrics>(db, nets, { act: actRng, learn: learnRng }, config.lessons !== undefined) : null;
  if (resumed) {
    weightVersion = resumed.weightVersion;
    policy.setWeights(weightVersion, actor.getWeights().arrays);
    log(resumeLine(db.path, resumed, config.lessons ?? null));
  } else if (!resuming) {
    if (config.initFrom) {
      const frame = initFrom(config.initFrom, scenario, nets);
      policy.setWeights(0, actor.getWeights().arrays);
      log(`starting from ${config.initFrom} (${frame} frames trained there)`);
    }
    db.writeConfig(config);
  }
  const metrics: FrameMetrics[] = resumed?.metrics ?? [];
  log(PROGRESS_LEGEND);
  const startEpisode = resumed ? resumed.episode + 1 : 0;

  const totalEpisodes = Math.ceil(config.frames / config.episodeFrames);
  const orchestrationOf = memo((name) => makeOrchestration(name, scenario));
  const teacherOf = memo((name) => makeTeacher(name, scenario), [[config.teacher, teacher]]);
  let finalEval: number | null = null;
  const actions: number[] = new Array(shape.numEaps).fill(-1);
  const perRequest = (config.credit ?? 'team') === 'request';
  let best = resuming ? db.meta<BestEval>('best') : null;
  let bestActor: Float32Array[] | null = null;
  let bestGpg: Float32Array[] | null = null;
  let bestGpgUpdates = 0; // the learner's update count at bestGpg (the --gpg-init model's included)
  let framesDone = resumed?.frame ?? 0;
  const framesAtStart = framesDone;
  /** curriculum: where the run is, the lessons started so far, the checkpoint labels of finished ones */
  const course = config.lessons
    ? new CurriculumTracker(config.lessons, {
        state: resumed?.curriculum ?? null,
        log: resuming ? db.meta<LessonRecord[]>('lessons') : null,
        labels: resuming ? db.meta<Record<string, CheckpointLabel>>('labels') : null,
      })
    : null;
  let lastCheckpointEpisode = startEpisode - 1;

  for (let episode = startEpisode; ; episode++) {
    // which lesson, and what its episodes look like (single lesson: the run's own options)
    const lesson = course ? course.lesson : null;
    if (course ? lesson === null || framesDone >= config.frames : episode >= totalEpisodes) break;
    const plan = lesson ? lessonPlan(lesson, config) : singlePlan(config);
    if (course && course.starting) {
      // a lesson starts: from its checkpointIn when that is not where the run stands
      const from = course.start(episode, framesDone, lastCheckpointEpisode);
      if (from) {
        const ck = db.latest(from.frame);
        if (!ck || ck.episode !== from.episode)
          throw new UsageError(`${db.path}: checkpoint "${lesson!.checkpointIn}" (episode ${from.episode}) is missing`);
        restoreNets(nets, ck, db.path);
        policy.setWeights(++weightVersion, actor.getWeights().arrays);
      }
      log(lessonStartLine(course.state, course.lessons, plan, framesDone, course.origin()));
    }
    const epFrames = Math.min(lesson ? lesson.episodeFrames : config.episodeFrames, config.frames - framesDone);
    const epSeed = Rng.derive(config.seed, `train/episode-${episode}`).nextU32();
    const requests = episodeRequests(
      { scenario, ...plan, seed: epSeed, durationS: epFrames * scenario.slotsPerFrame * scenario.slotS, warn: log },
      Rng.derive(config.seed, `train/trace-window-${episode}`),
    );
    // the simulated cluster of this episode: the run's scenario, or with the lesson's cloud (cloudVms);
    // arrivals (above), the nets' shape and the evaluations stay the run's
    const epScenario = withCloudVms(scenario, plan.cloudVms, Rng.derive(config.seed, `train/cloud-${episode}`));
    // which parts learn (cmmac alone outside --policies cmmac/gpg); a part that does not acts frozen
    const cmmacLearns = plan.learn.includes('cmmac');
    const gpgLearns = plan.learn.includes('gpg');
    const gpgDecisions: GpgDecision[] = [];
    const gpgAside: { episodes: GpgEpisode[]; throughput: number[] } = { episodes: [], throughput: [] };
    if (gpgLearns) {
      // GPG's other rollouts on these requests, with the dispatch this episode starts with (train-joint.ts)
      const weights = actor.getWeights().arrays;
      Object.assign(
        gpgAside,
        asideRollouts(gpg!, config, {
          scenario: epScenario,
          requests,
          frames: epFrames,
          seed: epSeed,
          episode,
          nodeDequeue: plan.dequeue,
          view: viewOfRun(config),
          deviceFilters: config.filters ?? false,
          dispatchOf: (r) =>
            plan.teacher !== null
              ? makeTeacher(plan.teacher, scenario)
              : new CmmacDispatch({
                  shape,
                  queueCapPerReplica: scenario.queueCapPerReplica,
                  weights,
                  mode: cmmacLearns ? 'sample' : 'argmax',
                  rng: Rng.derive(config.seed, `train/aside-${episode}-${r}`),
                  head: config.head,
                }),
        }),
      );
    }
    const env = new EdgeCloudEnv(epScenario, {
      requests,
      frames: epFrames,
      orchestration:
        plan.orchestration === 'gpg'
          ? gpgOrchestration(
              gpg!,
              scenario,
              gpgLearns ? 'sample' : 'greedy',
              gpgLearns ? gpgSalt(episode, 0, config.gpgRollouts) : 0,
              gpgDecisions,
            )
          : orchestrationOf(plan.orchestration),
      illegalAction: 'throw',
      rewardEpsilon: config.rewardEpsilon ?? 1,
      nodeDequeue: plan.dequeue,
      deviceFilters: config.filters ?? false,
      agentViews: viewOfRun(config) === 'agent',
      // --externality: the ledger of who queued ahead of whom (training/sim/blame.ts)
      queueBlame: plan.externality > 0,
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
      let slots = 0;
      // cMMAC frozen (a GPG lesson): argmax, nothing recorded, no update
      policy.mode = cmmacLearns ? 'sample' : 'argmax';
      policy.recorder = bc || !cmmacLearns ? null : buf;
      if (!bc && cmmacLearns && rlStart < 0) rlStart = buf.n;
      while (!env.isDone && env.slotIndex < frameEnd) {
        // SIM: a new decision slot starts: remember s_t for the critic
        if (env.slotIndex !== lastSlot) {
          await new Promise((r) => setImmediate(r)); // lets Ctrl-C (stop) in
          if (stop?.aborted) break;
          if (cmmacLearns) {
            buildState(env.state(), sBuf);
            buf.beginSlot(sBuf);
          }
          lastSlot = env.slotIndex;
          slots++;
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
          if (perRequest && cmmacLearns) buf.tagRequests(items.map((it) => it.request.id));
        }
        for (const b of live) actions[b] = observations[b].action;
        const step = env.step(actions);
        observations = step.observations;
        let u = 0;
        for (const b of env.possibleAgents) u += step.rewards[b];
        if (cmmacLearns) buf.addReward(u);
        teamReward += u;
      }
      if (stop?.aborted) break;
      // LEARN: one update on this frame's decisions, bootstrapped from the state reached
      // (credit 'request': one update per episode, at its last frame, once outcomes are known)
      const tl0 = performance.now();
      const learnNow = cmmacLearns && (!perRequest || fi === epFrames - 1);
      if (perRequest && bc) {
        // cloning stays per frame (on this frame's decisions); the critic waits for the outcomes
        learner.setLearningRate(config.bcLr);
        bcLoss = learner.imitate(buf, config.bcEpochs, frameStart);
      }
      frameStart = learnNow || !cmmacLearns ? 0 : buf.n;
      if (learnNow) {
        buildState(env.state(), sBuf);
        buf.finish(sBuf);
      }
      const m: FrameMetrics = {
        frame,
        episode,
        phase: bc ? 'bc' : cmmacLearns ? 'rl' : 'frozen',
        ...frameRates(env.frames[fi]),
        'charts/teamReward': round(teamReward / Math.max(1, slots), 4),
        'charts/decisions': buf.n,
        'losses/value': 0,
        'losses/policy': 0,
        'losses/entropy': 0,
        'losses/bc': 0,
        wallS: 0,
      };
      if (lesson) m.lesson = lesson.name;
      if (perRequest && bc) m['losses/bc'] = round(bcLoss, 5);
      learnFrame(m, { learner, buf, env, config, plan, bc, perRequest, learnNow, rlStart });
      if (learnNow) {
        buf.clear();
        rlStart = -1;
        policy.setWeights(++weightVersion, actor.getWeights().arrays);
      }
      m.wallS = round((performance.now() - tf0) / 1000, 3);
      m.learnS = round((performance.now() - tl0) / 1000, 3);
      epMetrics.push(m);
      metrics.push(m);
      const where = course ? lessonPrefix(course.state, course.lessons) : '';
      log(where + progressLine(m, config.frames, metrics.length - framesAtStart, (performance.now() - t0) / 1000));
    }
    if (stop?.aborted) break; // this episode is not checkpointed: a resume recomputes it
    framesDone += epFrames;
    if (gpgLearns && epMetrics.length > 0) {
      // GPG's update on the episode's rollouts: the loop's own first, then the others
      const st = gpg!.learner.update([gpgEpisodeOf(config, scenario, gpgDecisions, env.frames), ...gpgAside.episodes]);
      const last = epMetrics[epMetrics.length - 1];
      const thr = [
        env.frames.reduce((s, f) => s + f.completedInTime, 0) /
          Math.max(
            1,
            env.frames.reduce((s, f) => s + f.arrived, 0),
          ),
        ...gpgAside.throughput,
      ];
      last['gpg/meanReturn'] = round(st.meanReturn, 4);
      last['gpg/nodeEntropy'] = round(st.nodeEntropy, 4);
      last['gpg/scaleEntropy'] = round(st.scaleEntropy, 4);
      last['gpg/rolloutThroughputRate'] = round(thr.reduce((s, x) => s + x, 0) / thr.length, 4);
      log(
        `gpg update ${gpg!.learner.updates} on ${thr.length} rollouts: throughput rate ${last['gpg/rolloutThroughputRate']} return ${last['gpg/meanReturn']} H(node) ${last['gpg/nodeEntropy']} H(scale) ${last['gpg/scaleEntropy']}`,
      );
    }
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
      // a cmmac/gpg run evaluates the pair its lesson trains (GPG greedy when it orchestrates)
      const evalOrch = joint ? evalOrchestration(plan.orchestration, scenario, gpg!) : undefined;
      const ev = evaluateActor(scenario, config, actor.getWeights().arrays, shape, evalOrch);
      const last = epMetrics[epMetrics.length - 1];
      last['charts/evalThroughputRate'] = ev.heldOut;
      if (ev.trace !== null) {
        last['charts/evalTraceThroughputRate'] = ev.trace;
        last['charts/evalScore'] = ev.score;
      }
      finalEval = ev.score;
      course?.evaluated(episode, framesDone, ev.score); // a lesson's best, for a later lesson's checkpointFrom: best
      log(evalLine(ev, framesDone, config, joint ? plan.orchestration : undefined));
      // a cmmac/gpg run ships the pair: only evaluations with GPG orchestrating can be its best
      const candidate = !joint || plan.orchestration === 'gpg';
      if (candidate && (best === null || ev.score > best.eval)) {
        best = { episode, frame: framesDone, eval: ev.score };
        bestActor = actor.getWeights().arrays.map((a) => Float32Array.from(a));
        if (gpg) {
          bestGpg = gpg.net.getWeights().map((a) => Float32Array.from(a));
          bestGpgUpdates = gpg.learner.updates;
        }
      }
    }

    // promotion (curriculum): decided on the episodes' training throughput rates, then stored
    // with the checkpoint so that --resume continues in the same lesson with the same history
    const meta: Record<string, unknown> = best ? { best } : {};
    if (course) {
      const rate = round(epMetrics.reduce((s, x) => s + x['charts/throughputRate'], 0) / Math.max(1, epMetrics.length), 4);
      const index = course.state.lesson;
      const d = course.endEpisode(episode, framesDone, rate);
      if (d.promote) log(lessonEndLine(index, course.lessons, d, framesDone));
      meta.lessons = course.log;
      meta.labels = course.labels;
    }

    // checkpoint: weights, optimiser, Rng states and this episode's metrics in one transaction
    const rngs = { act: actRng, learn: learnRng };
    saveCheckpoint(
      db,
      nets,
      { episode, frame: framesDone, weightVersion, rngs, curriculum: course ? course.state : null },
      epMetrics,
      meta,
    );
    lastCheckpointEpisode = episode;
  }
  // an export the file system refuses (a full disk, a folder in the way) is one line and exit 1
  // after the summary; the run itself is kept in --out
  let exportFailed = false;
  const exporting = (flag: string, write: () => void) => {
    try {
      write();
    } catch (e) {
      if (!(e instanceof UsageError && e.code === EXPORT_WRITE_FAILED)) throw e;
      log(`kais: ${flag} ${e.message}; the run is kept in ${config.out} (kais eval --checkpoint reads it)`);
      exportFailed = true;
    }
  };
  if (stop?.aborted)
    metrics.length = framesDone; // the frames after the last checkpoint are recomputed on --resume
  else if (config.exportActor) {
    const { scenarioFingerprint, head, obsDim, numActions, frames } = config;
    const file = config.exportActor;
    exporting('--export-actor', () =>
      log(
        exportBestActor(file, db, best, bestActor, actor, {
          scenario: scenario.name,
          scenarioFingerprint,
          head,
          obsDim,
          numActions,
          frames,
          // a model chosen by sampled evaluations is deployed sampling (kais eval, kais up read it)
          ...(evalActOf(config) === 'sample' ? { act: 'sample' as const } : {}),
        }),
      ),
    );
  }
  if (!stop?.aborted && gpg && config.exportGpg) {
    // the GPG of the best cmmac/gpg evaluation (its checkpoint when found before a resume), else the last
    let weights = bestGpg;
    let updates = bestGpgUpdates;
    if (!weights && best) {
      const s = (db.latest(best.frame)?.state as RunState | undefined)?.gpg;
      if (s) {
        weights = gpgWeightsOf(gpg, s);
        updates = s.updates;
      }
    }
    if (!weights) {
      weights = gpg.net.getWeights();
      updates = gpg.learner.updates;
    }
    const text = gpgModelText(gpg, weights, {
      scenario: scenario.name,
      ...nodesPerFrameField(gpg.nodesPerFrame, scenario),
      trainedWith: {
        command: 'kais train --policies cmmac/gpg',
        seed: config.seed,
        frame: best?.frame ?? framesDone,
        evalThroughputRate: best?.eval ?? null,
        gpgRollouts: config.gpgRollouts,
        gpgOpCost: config.gpgOpCost,
        gpgReplicaCost: config.gpgReplicaCost,
        gpgLr: config.gpgLr,
        // every update the weights have seen, --gpg-init's included (critic/gpg/model.ts updatesSeen)
        updates,
        ...(config.gpgInit ? { gpgInit: config.gpgInit } : {}),
      },
    });
    const file = config.exportGpg;
    exporting('--export-gpg', () => {
      writeFilesAtomically([[file, text]]);
      log(`GPG written to ${file} (${best ? `best evaluation, frame ${best.frame}, ${best.eval.toFixed(4)}` : 'last weights'})`);
    });
  }
  if (gpg) {
    gpg.learner.dispose();
    gpg.net.dispose();
  }
  learner.dispose();
  actor.dispose();
  critic.dispose();
  const wallS = (performance.now() - t0) / 1000;
  const trainedNow = metrics.length - framesAtStart;
  return {
    config,
    framesDone: metrics.length,
    interrupted: stop?.aborted === true,
    metrics,
    finalEval,
    wallS: round(wallS, 2),
    framesPerS: round(trainedNow / wallS, 3),
    ...(exportFailed ? { exportFailed } : {}),
  };
}

/** The scenario a stored run was trained on, or null when the file is not a readable run (later checks say why). */
function storedScenarioOf(out: string | null | undefined): string | null {
  if (!out || !fs.existsSync(out) || fs.statSync(out).size === 0) return null;
  try {
    const db = CheckpointDb.open(out, 'read');
    try {
      return db.config<TrainConfig>()?.scenario ?? null;
    } finally {
      db.close();
    }
  } catch {
    return null;
  }
}

/** The orchestration a cmmac/gpg run's evaluation uses: the lesson's, GPG greedy when that is gpg. */
function evalOrchestration(name: string, scenario: Scenario, gpg: GpgPart): () => OrchestrationPolicy {
  return () => (name === 'gpg' ? gpgOrchestration(gpg, scenario, 'greedy') : makeOrchestration(name, scenario));
}

// ---------------------------------------------------------------------------------------- CLI

export const trainCommand: CommandModule<object, object> = {
  command: 'train',
  describe: 'train the cMMAC dispatcher (with --policies cmmac/gpg also the GPG orchestration) on the simulator (checkpoints in SQLite)',
  builder: (y: Argv<object>) =>
    yargsOptions(y.example('$0 train --scenario tiny --frames 6 --out /tmp/tiny.db', 'a tiny run in seconds'), TRAIN_CLI_SPEC),
  handler: namingFlags(TRAIN_CLI_SPEC, async (argv) => {
    const { plot: plotFile, exportLayers: layersDir, ...given } = givenOptions(TRAIN_CLI_SPEC, argv);
    // the layers model is written after training: a folder that cannot take it is refused now, before --out is created
    if (layersDir) exportLayersTarget(layersDir);
    // --resume without --scenario: the run's own (the line printed at Ctrl-C names no scenario)
    const scenario =
      given.scenario ??
      (given.resume ? storedScenarioOf(given.out ?? TRAIN_SPEC.out.default) : null) ??
      TRAIN_SPEC.scenario.default ??
      'kais';
    // Ctrl-C: stop at the next decision slot, keep the last checkpoint; a second one exits at the next chance
    const stop = new AbortController();
    const onSigint = () => (stop.signal.aborted ? process.exit(130) : stop.abort());
    process.on('SIGINT', onSigint);
    const curriculum = resolveCurriculumFlag(given.curriculum ?? undefined, scenario, given.policies ?? 'cmmac');
    let r: TrainResult;
    try {
      r = await train({ ...given, scenario, curriculum }, (line) => process.stderr.write(`${line}\n`), stop.signal);
    } catch (e) {
      // a full disk is the file system's failure, not a usage error: one line, exit 1
      if (!(e instanceof DiskFullError)) throw e;
      process.stderr.write(`kais: --out ${e.message}\n`);
      process.exitCode = 1;
      return;
    } finally {
      process.off('SIGINT', onSigint);
    }
    if (r.interrupted) {
      process.stderr.write(`${interruptedLine(r.config.out, r.framesDone, r.config.frames)}\n`);
      process.exitCode = 130;
      return;
    }
    const summary = summaryOf(r);
    // the result first: a plot the file system refuses (exit 1, one line) must not take it away
    if (given.json) process.stdout.write(`${JSON.stringify(summary)}\n`);
    else process.stdout.write(`trained ${summary.frames} frames in ${summary.wallS} s -> ${summary.out}\n`);
    if (plotFile) {
      try {
        writeLearningCurve(plotFile, r.metrics, r.config);
      } catch (e) {
        if (!isPlotWriteError(e)) throw e;
        process.stderr.write(`kais: ${e.message}\n`);
        process.exitCode = 1;
      }
    }
    if (layersDir) for (const f of await exportLayers(r.config.out, layersDir)) process.stderr.write(`wrote ${f}\n`);
    if (r.exportFailed) process.exitCode = 1;
  }),
};
