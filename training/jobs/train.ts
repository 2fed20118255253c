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
 *    fine-tuning can never ship a policy worse, on those seeds, than the cloned one.
 * The spec's settings are `--credit team --lr 5e-4 --entropy-coef 0.01`.
 * Orchestration is a fixed baseline (`hpa` by default): stage 1 of the curriculum.
 *
 * Resume: checkpoints are taken at episode boundaries with the Adam moments and every Rng state,
 * so `--resume` after a kill recomputes the interrupted episode and ends at the same numbers as an
 * uninterrupted run.
 */
import * as fs from 'fs';
import { performance } from 'perf_hooks';
import type { Argv, CommandModule } from 'yargs';
import { UsageError } from '../../shared/errors';
import { Rng } from '../../shared/rng';
import { loadScenario, topologyOf, type Scenario } from '../../shared/scenario';
import { loadBackend } from '../../shared/tf-backend';
import { ActorNet, type HeadActivation } from '../../shared/nets/actor';
import { ValueNet } from '../../shared/nets/value';
import { CmmacDispatch } from '../../agent/actor-policy';
import { observationDim, targetBlockOf } from '../../agent/observation';
import { RolloutBuffer } from '../../critic/cmmac/buffer';
import { CmmacLearner } from '../../critic/cmmac/learner';
import { makeTrainTeacher } from '../../critic/cmmac/teacher';
import { buildState, stateDim } from '../../critic/cmmac/state';
import { EdgeCloudEnv, ENV_VERSION } from '../sim/env';
import { DEQUEUE_NAMES, type DequeueName } from '../../shared/dequeue';
import { buildRequests, DEFAULT_WORKLOAD, isWorkloadName, WORKLOAD_NAMES, type WorkloadName } from '../workload';
import { makeDispatch, makeOrchestration } from '../baselines/registry';
import { runEpisode } from './rollout';
import { writePlot } from './plot';
import { CheckpointDb, checkScenario, scenarioFingerprint } from './checkpoint';
import { packWeights, weightsToBytes } from '../../shared/protocol/weights';

// ------------------------------------------------------------------------------------ OPTIONS

export interface TrainOptions {
  /** Built-in scenario name or a scenario JSON file. */
  scenario: string;
  /** Synthetic arrival pattern (ignored with --trace). */
  workload: WorkloadName;
  /** Alibaba batch_task CSV (or folder) to replay instead of a synthetic pattern. */
  trace: string | null;
  /** Arrival-rate multiplier. */
  load: number;
  /** Queue order at the eAPs and nodes while training and in the held-out evaluations. */
  dequeue: DequeueName;
  /** Total frames to train (behaviour-cloning frames included). */
  frames: number;
  /** Frames per episode (fresh requests and a fresh simulator each episode). */
  episodeFrames: number;
  /** Warm-start frames acting with `lec` and cloning it (0 = pure RL from random weights). */
  bcFrames: number;
  /** Passes over each BC frame's decisions. */
  bcEpochs: number;
  /** Actor head: 'softplus1' (default, cannot die; see shared/nets/actor.ts) or 'relu1' (the paper's). */
  head: HeadActivation;
  /** Add the actor's shared per-target scorer (shared/nets/actor.ts). */
  targetScorer: boolean;
  /** Heuristic dispatcher cloned during the warm start. */
  teacher: string;
  /** Learning rate during the warm start. */
  bcLr: number;
  /** DAgger: after the first episode of the warm start, act with the actor (argmax) and label its states with the teacher. */
  dagger: boolean;
  /** Orchestration baseline held fixed while dispatch learns. */
  orchestration: string;
  seed: number;
  /** Adam learning rate (actor and critic). */
  lr: number;
  gamma: number;
  entropyCoef: number;
  minibatch: number;
  /** Standardise advantages per update. */
  normAdv: boolean;
  /** GAE lambda (0 = one-step TD advantage, the spec's). */
  gaeLambda: number;
  /** epsilon of the reward u_b = exp(-lambda_b - epsilon nu_b) (the journal: 1). */
  rewardEpsilon: number;
  /**
   * Credit assignment: 'request' (default) scores each decision by its own request's outcome, with
   * PPO-clipped updates once per episode (critic/cmmac/learner.ts explains why); 'team' is the
   * spec's shared one-step TD advantage of the team reward, one update per frame.
   */
  credit: 'request' | 'team';
  /** credit 'request': share of the team TD advantage added to each decision's own. */
  teamShare: number;
  /** credit 'request': PPO ratio clip. */
  clip: number;
  /** credit 'request': passes over an episode's decisions per update. */
  ppoEpochs: number;
  /** credit 'request': stop the passes when the approximate KL to the acting policy exceeds this. */
  targetKl: number;
  /** Write the actor of the best evaluation (or the last one without --eval-every) here (.bin + .json). */
  exportActor: string | null;
  /** Evaluate (argmax, held-out seeds) every this many frames at episode ends; 0 = never. */
  evalEvery: number;
  /** Frames per evaluation episode. */
  evalFrames: number;
  /** Held-out episodes per evaluation (seeds EVAL_SEED_BASE + i). */
  evalSeeds: number;
  /** Start from the actor and critic of another run's latest checkpoint (same scenario; fresh optimiser). */
  initFrom: string | null;
  /** SQLite checkpoint file. */
  out: string;
  resume: boolean;
  json: boolean;
}

export const TRAIN_DEFAULTS: Omit<TrainOptions, 'scenario'> = {
  workload: DEFAULT_WORKLOAD,
  trace: null,
  load: 1,
  dequeue: 'discounted',
  frames: 45,
  episodeFrames: 3,
  bcFrames: 24,
  bcEpochs: 4,
  head: 'softplus1',
  targetScorer: true,
  teacher: 'deadline-load',
  bcLr: 5e-4,
  dagger: false,
  orchestration: 'hpa',
  seed: 1,
  lr: 1e-4,
  gamma: 0.9,
  entropyCoef: 0.003,
  minibatch: 1024,
  normAdv: false,
  gaeLambda: 0,
  rewardEpsilon: 1,
  credit: 'request',
  teamShare: 0,
  clip: 0.2,
  ppoEpochs: 4,
  targetKl: 0.02,
  exportActor: null,
  evalEvery: 3,
  evalFrames: 3,
  evalSeeds: 2,
  initFrom: null,
  out: 'kais-train.db',
  resume: false,
  json: false,
};

/** Seeds of held-out evaluation episodes (training episodes derive theirs from --seed). */
export const EVAL_SEED_BASE = 1_000_003;

/** Resolved config: the options plus what they imply; the first row a run writes. */
export interface TrainConfig extends TrainOptions {
  scenarioFingerprint: string;
  envVersion: string;
  obsDim: number;
  numActions: number;
  stateDim: number;
}

export interface FrameMetrics {
  frame: number;
  episode: number;
  phase: 'bc' | 'rl';
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
  let opts: TrainOptions = { ...TRAIN_DEFAULTS, ...options };
  const scenario = loadScenario(opts.scenario);
  validate(opts);

  const topo = topologyOf(scenario);
  const shape = { numServices: topo.numServices, numTargets: topo.numNodes + 1, numEaps: topo.numEaps };
  if (!opts.resume && fs.existsSync(opts.out) && fs.statSync(opts.out).size > 0) {
    throw new UsageError(`--out ${opts.out}: file exists; pass --resume to continue it or choose another file`);
  }
  const db = CheckpointDb.open(opts.out, 'create');
  try {
    let stored = opts.resume ? db.config<TrainConfig>() : null;
    if (stored) {
      checkScenario(opts.out, stored, scenario);
      // the stored run config wins; only the total length may be extended
      opts = { ...stored, frames: options.frames ?? stored.frames, out: opts.out, resume: true, json: opts.json };
    }
    const config: TrainConfig = {
      ...opts,
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

function validate(o: TrainOptions): void {
  const posInt = (name: string, v: number, min = 1) => {
    if (!Number.isInteger(v) || v < min) throw new UsageError(`--${name}: expected an integer >= ${min}, got ${v}`);
  };
  posInt('frames', o.frames);
  posInt('episode-frames', o.episodeFrames);
  posInt('bc-frames', o.bcFrames, 0);
  posInt('bc-epochs', o.bcEpochs);
  posInt('minibatch', o.minibatch);
  posInt('eval-every', o.evalEvery, 0);
  posInt('eval-frames', o.evalFrames);
  posInt('eval-seeds', o.evalSeeds);
  if (!Number.isFinite(o.seed)) throw new UsageError(`--seed: expected a number, got ${o.seed}`);
  if (!isWorkloadName(o.workload)) throw new UsageError(`--workload: unknown "${o.workload}" (valid: ${WORKLOAD_NAMES.join(', ')})`);
  if (!(o.lr > 0) || !(o.gamma >= 0 && o.gamma < 1) || !(o.entropyCoef >= 0)) {
    throw new UsageError(`--lr/--gamma/--entropy-coef: expected lr > 0, 0 <= gamma < 1, entropy >= 0`);
  }
  if (!(o.rewardEpsilon >= 0)) throw new UsageError(`--reward-epsilon: expected a number >= 0, got ${o.rewardEpsilon}`);
  if (o.credit !== 'request' && o.credit !== 'team') throw new UsageError(`--credit: expected request or team, got ${String(o.credit)}`);
  if (!(o.clip > 0) || !(o.targetKl > 0) || !(o.teamShare >= 0)) throw new UsageError(`--clip/--target-kl/--team-share: expected clip > 0, target-kl > 0, team-share >= 0`);
  posInt('ppo-epochs', o.ppoEpochs);
  if (!(o.gaeLambda >= 0 && o.gaeLambda <= 1)) throw new UsageError(`--gae-lambda: expected a number in [0, 1], got ${o.gaeLambda}`);
  makeOrchestration(o.orchestration, loadScenario(o.scenario));
  if (!makeTrainTeacher(o.teacher)) makeDispatch(o.teacher, loadScenario(o.scenario));
}

async function run(
  config: TrainConfig,
  scenario: Scenario,
  shape: { numServices: number; numTargets: number; numEaps: number },
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
  const teacher = makeTrainTeacher(config.teacher) ?? makeDispatch(config.teacher, scenario);
  const buf = new RolloutBuffer(actor.obsDim, shape.numTargets, config.stateDim, 8192);
  const sBuf = new Float32Array(config.stateDim);
  const obsBuf = new Float32Array(actor.obsDim);
  const metrics: FrameMetrics[] = [];
  let weightVersion = 0;
  let startEpisode = 0;

  if (resuming) {
    const ck = db.latest();
    if (ck) {
      actor.setWeights(ck.actor);
      critic.setWeights(ck.critic);
      const na = actor.variables.length;
      const nc = critic.variables.length;
      if (ck.adam.length !== 2 * (na + nc)) throw new UsageError(`${db.path}: checkpoint optimiser state does not fit the networks`);
      learner.setState({
        actorAdam: { step: ck.state.actorAdamStep, moments: ck.adam.slice(0, 2 * na) },
        criticAdam: { step: ck.state.criticAdamStep, moments: ck.adam.slice(2 * na) },
      });
      actRng.setState(ck.state.rng.act);
      learnRng.setState(ck.state.rng.learn);
      weightVersion = ck.state.weightVersion;
      policy.setWeights(weightVersion, actor.getWeights().arrays);
      startEpisode = ck.episode + 1;
      for (const m of db.metrics()) if (m.frame < ck.frame) metrics.push(m.json as unknown as FrameMetrics);
      db.truncateMetrics(ck.frame);
      log(`resuming ${db.path} after episode ${ck.episode} (${ck.frame} frames done)`);
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
  const totalEpisodes = Math.ceil(config.frames / E);
  const orchestration = makeOrchestration(config.orchestration, scenario);
  let finalEval: number | null = null;
  const actions: number[] = new Array(shape.numEaps).fill(-1);
  const perRequest = (config.credit ?? 'team') === 'request';
  let best = resuming ? db.meta<BestEval>('best') : null;
  let bestActor: Float32Array[] | null = null;

  for (let episode = startEpisode; episode < totalEpisodes; episode++) {
    const epFrames = Math.min(E, config.frames - episode * E);
    const epSeed = Rng.derive(config.seed, `train/episode-${episode}`).nextU32();
    const requests = buildRequests({
      scenario,
      workload: config.workload,
      tracePath: config.trace,
      seed: epSeed,
      load: config.load,
      durationS: epFrames * scenario.slotsPerFrame * scenario.slotS,
      warn: log,
    });
    const env = new EdgeCloudEnv(scenario, {
      requests,
      frames: epFrames,
      orchestration,
      illegalAction: 'throw',
      rewardEpsilon: config.rewardEpsilon ?? 1,
      // runs written before --dequeue existed trained with the env's default (edf)
      eapDequeue: config.dequeue ?? 'edf',
      nodeDequeue: config.dequeue ?? 'edf',
    });
    let { observations } = env.reset({ seed: epSeed });
    policy.reset(epSeed);
    teacher.reset?.(epSeed, env.view);
    const view = env.view;
    const epMetrics: FrameMetrics[] = [];
    let frameStart = 0;
    let bcLoss = 0;
    /** credit 'request': index of the first decision the actor sampled in this episode's buffer */
    let rlStart = -1;

    for (let fi = 0; fi < epFrames; fi++) {
      const tf0 = performance.now();
      const frame = episode * E + fi;
      const bc = frame < config.bcFrames;
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
        if (bc) {
          for (const it of items) {
            it.action = teacher.decide(it, view);
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
      if (perRequest && bc) m['losses/bc'] = round(bcLoss, 5);
      if (!learnNow) {
        // keep collecting this episode's decisions
      } else if (perRequest) {
        const outcome = requestOutcomes(env, buf);
        if (bc) {
          m['losses/value'] = round(learner.fitCriticRequests(buf, outcome), 5);
        } else {
          learner.setLearningRate(config.lr);
          // an episode that started with cloning frames: only the actor's own samples are on-policy
          outcome.fill(Number.NaN, 0, Math.max(0, rlStart));
          const st = learner.updateRequests(buf, outcome, { teamShare: config.teamShare, clip: config.clip, epochs: config.ppoEpochs, targetKl: config.targetKl });
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
        learner.setLearningRate(config.lr);
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
      log(progressLine(m, config.frames, metrics.length - startEpisode * E, (performance.now() - t0) / 1000));
    }

    // evaluation on held-out seeds (argmax), at episode ends
    const framesDone = episode * E + epFrames;
    // (the schedule depends on frames done only, not on --frames, so a run stopped early and
    // resumed with more frames evaluates exactly where an uninterrupted one does)
    if (config.evalEvery > 0 && Math.floor(framesDone / config.evalEvery) > Math.floor((framesDone - epFrames) / config.evalEvery)) {
      const ev = evaluate(scenario, config, actor.getWeights().arrays, shape, config.evalSeeds ?? 1);
      epMetrics[epMetrics.length - 1]['charts/evalThroughputRate'] = ev;
      finalEval = ev;
      log(`eval after ${framesDone} frames: cmmac/${config.orchestration} throughput rate ${ev.toFixed(4)} (held-out seed)`);
      if (best === null || ev > best.eval) {
        best = { episode, frame: framesDone, eval: ev };
        bestActor = actor.getWeights().arrays.map((a) => Float32Array.from(a));
      }
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
        },
      },
      epMetrics.map((x) => ({ frame: x.frame, json: x })),
      best ? { best } : {},
    );
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
  const trainedNow = metrics.length - startEpisode * E;
  return { config, framesDone: metrics.length, metrics, finalEval, wallS: round(wallS, 2), framesPerS: round(trainedNow / wallS, 3) };
}

/** Best held-out evaluation so far (meta key 'best' of the checkpoint file). */
interface BestEval {
  episode: number;
  frame: number;
  eval: number;
}

/**
 * Outcome of each recorded decision's request: 1 completed in time, 0 late or dropped, NaN not
 * resolved yet. The simulator (training/sim, not ours to change) keeps per-request status private,
 * so this reads its request table the way `onFinish` judges a completion: finished at
 * start + work / cores, back at the device return time later, in time iff by the deadline. At the
 * end of an episode the count of 1s is checked against env.outcome.completedInTime, so a change of
 * the simulator's internals fails loudly instead of training on wrong outcomes.
 */
export function requestOutcomes(env: EdgeCloudEnv, buf: RolloutBuffer): Float32Array {
  const internal = env as unknown as {
    status: Uint8Array;
    req: { startS: Float64Array; workCoreS: Float64Array; target: Int32Array; deadlineS: Float64Array; service: Int32Array; eap: Int32Array };
  };
  const { status, req } = internal;
  const c = env.cluster;
  const DONE = 6;
  const out = new Float32Array(buf.n);
  let inTime = 0;
  for (let k = 0; k < buf.n; k++) {
    const i = buf.requestId[k];
    if (i < 0) throw new Error('requestOutcomes: decision without a request id (tagRequests)');
    if (status[i] !== DONE) {
      out[k] = NaN;
      continue;
    }
    const t = req.target[i];
    const started = req.startS[i] > 0 && t >= 0;
    const w = req.service[i];
    const doneAt = req.startS[i] + req.workCoreS[i] / c.svcCpu[w] + c.net.returnS(req.eap[i], t);
    out[k] = started && doneAt <= req.deadlineS[i] ? 1 : 0;
    inTime += out[k];
  }
  if (env.isDone && env.outcome.completedInTime !== inTime && buf.n === env.dispatched) {
    throw new Error(`requestOutcomes: ${inTime} in-time decisions, the simulator counts ${env.outcome.completedInTime}; did training/sim change?`);
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
  shape: { numServices: number; numTargets: number; numEaps: number },
  seeds: number,
): number {
  let sum = 0;
  for (let i = 0; i < seeds; i++) {
    const seed = EVAL_SEED_BASE + i;
    const requests = buildRequests({
      scenario,
      workload: config.workload,
      tracePath: config.trace,
      seed,
      load: config.load,
      durationS: config.evalFrames * scenario.slotsPerFrame * scenario.slotS,
    });
    const dispatch = new CmmacDispatch({ shape, queueCapPerReplica: scenario.queueCapPerReplica, weights: actorWeights, mode: 'argmax', head: config.head });
    const dq = config.dequeue ?? 'discounted'; // older runs evaluated with rollout's unset (= discounted) order
    const r = runEpisode({ scenario, requests, frames: config.evalFrames, seed, dispatch, orchestration: makeOrchestration(config.orchestration, scenario), eapDequeue: dq, nodeDequeue: dq });
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

export const trainCommand: CommandModule<object, TrainOptions> = {
  command: 'train',
  describe: 'train the cMMAC dispatcher on the simulator (checkpoints in SQLite)',
  builder: (y: Argv) =>
    y
      .option('scenario', { type: 'string', default: 'kais', describe: 'built-in scenario name or scenario JSON file' })
      .option('workload', { type: 'string', default: TRAIN_DEFAULTS.workload, describe: `synthetic pattern (${WORKLOAD_NAMES.join(', ')})` })
      .option('trace', { type: 'string', describe: 'Alibaba batch_task CSV (or folder) to replay' })
      .option('load', { type: 'number', default: TRAIN_DEFAULTS.load, describe: 'arrival-rate multiplier' })
      .option('dequeue', { type: 'string', choices: [...DEQUEUE_NAMES], default: TRAIN_DEFAULTS.dequeue, describe: 'queue order (eAP and node queues) in training and its evaluations' })
      .option('frames', { type: 'number', default: TRAIN_DEFAULTS.frames, describe: 'total frames to train (BC frames included)' })
      .option('episode-frames', { type: 'number', default: TRAIN_DEFAULTS.episodeFrames, describe: 'frames per episode' })
      .option('bc-frames', { type: 'number', default: TRAIN_DEFAULTS.bcFrames, describe: 'warm-start frames cloning --teacher (0 = none)' })
      .option('bc-epochs', { type: 'number', default: TRAIN_DEFAULTS.bcEpochs, describe: 'passes over each BC frame' })
      .option('head', { type: 'string', choices: ['softplus1', 'relu1'], default: TRAIN_DEFAULTS.head, describe: 'actor head: softplus(z)+1 or the paper\'s ReLU(z)+1' })
      .option('target-scorer', { type: 'boolean', default: TRAIN_DEFAULTS.targetScorer, describe: 'actor: add the shared per-target scorer (--no-target-scorer: the plain MLP)' })
      .option('teacher', { type: 'string', default: TRAIN_DEFAULTS.teacher, describe: 'heuristic cloned during the warm start (deadline-load, or any kais eval dispatch baseline)' })
      .option('bc-lr', { type: 'number', default: TRAIN_DEFAULTS.bcLr, describe: 'learning rate during the warm start' })
      .option('dagger', { type: 'boolean', default: TRAIN_DEFAULTS.dagger, describe: 'warm start: the actor acts after the first episode, the teacher labels' })
      .option('orchestration', { type: 'string', default: TRAIN_DEFAULTS.orchestration, describe: 'fixed orchestration baseline' })
      .option('seed', { type: 'number', default: TRAIN_DEFAULTS.seed, describe: 'seed of every random stream' })
      .option('lr', { type: 'number', default: TRAIN_DEFAULTS.lr, describe: 'Adam learning rate' })
      .option('gamma', { type: 'number', default: TRAIN_DEFAULTS.gamma, describe: 'discount per slot' })
      .option('entropy-coef', { type: 'number', default: TRAIN_DEFAULTS.entropyCoef, describe: 'entropy bonus beta_H' })
      .option('minibatch', { type: 'number', default: TRAIN_DEFAULTS.minibatch, describe: 'decisions per actor minibatch' })
      .option('norm-adv', { type: 'boolean', default: TRAIN_DEFAULTS.normAdv, describe: 'standardise advantages' })
      .option('gae-lambda', { type: 'number', default: TRAIN_DEFAULTS.gaeLambda, describe: 'GAE lambda (0 = one-step TD advantage)' })
      .option('reward-epsilon', { type: 'number', default: TRAIN_DEFAULTS.rewardEpsilon, describe: 'epsilon of the imbalance term of the reward' })
      .option('credit', { type: 'string', choices: ['request', 'team'], default: TRAIN_DEFAULTS.credit, describe: "credit assignment: each decision's own request outcome (PPO-clipped, per episode) or the spec's team TD advantage" })
      .option('team-share', { type: 'number', default: TRAIN_DEFAULTS.teamShare, describe: 'credit request: share of the team advantage added' })
      .option('clip', { type: 'number', default: TRAIN_DEFAULTS.clip, describe: 'credit request: PPO ratio clip' })
      .option('ppo-epochs', { type: 'number', default: TRAIN_DEFAULTS.ppoEpochs, describe: 'credit request: passes per update' })
      .option('target-kl', { type: 'number', default: TRAIN_DEFAULTS.targetKl, describe: 'credit request: stop passes above this approximate KL' })
      .option('export-actor', { type: 'string', describe: 'write the best-evaluated actor (weights .bin + .json) here' })
      .option('eval-every', { type: 'number', default: TRAIN_DEFAULTS.evalEvery, describe: 'evaluate every N frames (0 = never)' })
      .option('eval-seeds', { type: 'number', default: TRAIN_DEFAULTS.evalSeeds, describe: 'held-out episodes per evaluation' })
      .option('eval-frames', { type: 'number', default: TRAIN_DEFAULTS.evalFrames, describe: 'frames per evaluation episode' })
      .option('init-from', { type: 'string', describe: "start from another run's latest checkpoint (same scenario)" })
      .option('out', { type: 'string', default: TRAIN_DEFAULTS.out, describe: 'SQLite checkpoint file' })
      .option('resume', { type: 'boolean', default: false, describe: 'continue the run stored in --out' })
      .option('json', { type: 'boolean', default: false, describe: 'print the result as JSON on stdout' })
      .option('plot', { type: 'string', describe: 'learning curve (.svg or .png): throughput rate per frame next to jsq/hpa and lec/hpa' }) as unknown as Argv<TrainOptions>,
  handler: async (argv) => {
    const plotFile = (argv as unknown as { plot?: string }).plot;
    if (plotFile !== undefined && !/\.(svg|png)$/i.test(plotFile)) throw new UsageError(`--plot: ${plotFile}: the file must end in .svg or .png`);
    const r = await train(
      {
        scenario: argv.scenario,
        workload: argv.workload,
        trace: argv.trace ?? null,
        load: argv.load,
        dequeue: argv.dequeue,
        frames: argv.frames,
        episodeFrames: argv.episodeFrames,
        bcFrames: argv.bcFrames,
        bcEpochs: argv.bcEpochs,
        head: argv.head,
        targetScorer: argv.targetScorer,
        teacher: argv.teacher,
        bcLr: argv.bcLr,
        dagger: argv.dagger,
        orchestration: argv.orchestration,
        seed: argv.seed,
        lr: argv.lr,
        gamma: argv.gamma,
        entropyCoef: argv.entropyCoef,
        minibatch: argv.minibatch,
        normAdv: argv.normAdv,
        gaeLambda: argv.gaeLambda,
        rewardEpsilon: argv.rewardEpsilon,
        credit: argv.credit,
        teamShare: argv.teamShare,
        clip: argv.clip,
        ppoEpochs: argv.ppoEpochs,
        targetKl: argv.targetKl,
        exportActor: argv.exportActor ?? null,
        evalEvery: argv.evalEvery,
        evalFrames: argv.evalFrames,
        evalSeeds: argv.evalSeeds,
        initFrom: argv.initFrom ?? null,
        out: argv.out,
        resume: argv.resume,
        json: argv.json,
      },
      (line) => process.stderr.write(`${line}\n`),
    );
    const last = r.metrics[r.metrics.length - 1];
    const summary = {
      out: r.config.out,
      frames: r.framesDone,
      throughputRate: last ? last['charts/throughputRate'] : null,
      evalThroughputRate: r.finalEval,
      wallS: r.wallS,
      framesPerS: r.framesPerS,
    };
    if (plotFile) writeLearningCurve(plotFile, r.metrics, argv);
    if (argv.json) process.stdout.write(`${JSON.stringify(summary)}\n`);
    else process.stdout.write(`trained ${summary.frames} frames in ${summary.wallS} s -> ${summary.out}\n`);
  },
};

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
      eapDequeue: o.dequeue,
      nodeDequeue: o.dequeue,
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
