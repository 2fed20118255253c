/**
 * The checkpoints of a `kais train` run (file format: checkpoint.ts): what one holds at an episode's
 * end (weights, Adam moments, every Rng state, the curriculum's state, the episode's metrics), what
 * a resume, a lesson's checkpointIn or --init-from takes back out, and --export-actor's file.
 */
import { UsageError } from '../../shared/errors';
import { AtomicWriteError, writeFilesAtomically as writeAllAtomically } from '../../shared/atomic-write';
import { Rng } from '../../shared/rng';
import type { Scenario } from '../../shared/scenario';
import { ActorNet } from '../../shared/nets/actor';
import { ValueNet } from '../../shared/nets/value';
import { CmmacDispatch } from '../../agent/actor-policy';
import { targetBlockOf, type ObservationShape } from '../../agent/observation';
import { packWeights, weightsToBytes } from '../../shared/protocol/weights';
import { CmmacLearner } from '../../critic/cmmac/learner';
import type { CurriculumState } from '../curriculum/tracker';
import { CheckpointDb, initCheckpoint, type CheckpointRow, type CheckpointState } from '../../shared/nets/checkpoint-db';
import type { TrainConfig } from './train-options';
import { gpgStateOf, restoreGpg, type GpgCheckpointState, type GpgPart } from './train-joint';

/** What a checkpoint saves and restores. */
export interface TrainNets {
  actor: ActorNet;
  critic: ValueNet;
  learner: CmmacLearner;
  /** --policies cmmac/gpg: the GPG net and its learner (train-joint.ts) */
  gpg?: GpgPart;
}

/** The state a run's checkpoint holds besides the networks. */
export interface RunState extends CheckpointState {
  curriculum?: CurriculumState;
  /** --policies cmmac/gpg: GPG's weights, optimiser, update count and baseline */
  gpg?: GpgCheckpointState;
}

/** Networks and optimiser from a checkpoint row (the Rng streams are left alone). */
/**
 * A run's nets from its seed (streams 'train/init-actor', 'train/init-critic'), the learner on
 * learnRng and the acting policy (the actor's weights, sampling from actRng).
 */
export function newRunNets(
  config: TrainConfig,
  scenario: Scenario,
  shape: ObservationShape,
  actRng: Rng,
  learnRng: Rng,
): TrainNets & { policy: CmmacDispatch } {
  const actor = new ActorNet(
    config.obsDim,
    shape.numTargets,
    Rng.derive(config.seed, 'train/init-actor'),
    undefined,
    config.head,
    config.targetScorer ? targetBlockOf(shape) : null,
  );
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
  return { actor, critic, learner, policy };
}

export function restoreNets(n: TrainNets, ck: CheckpointRow, path: string): void {
  n.actor.setWeights(ck.actor);
  n.critic.setWeights(ck.critic);
  const na = n.actor.variables.length;
  const nc = n.critic.variables.length;
  if (ck.adam.length !== 2 * (na + nc)) throw new UsageError(`${path}: checkpoint optimiser state does not fit the networks`);
  n.learner.setState({
    actorAdam: { step: ck.state.actorAdamStep, moments: ck.adam.slice(0, 2 * na) },
    criticAdam: { step: ck.state.criticAdamStep, moments: ck.adam.slice(2 * na) },
  });
  if (n.gpg) {
    try {
      restoreGpg(n.gpg, (ck.state as RunState).gpg);
    } catch (e) {
      throw new UsageError(`${path}: ${(e as Error).message}`);
    }
  }
}

/** Where a resumed run continues: its latest checkpoint, restored into the networks and Rng streams. */
export interface Resumed<M> {
  episode: number;
  frame: number;
  weightVersion: number;
  curriculum: CurriculumState | null;
  /** the metrics of the frames before the checkpoint (the later ones are deleted: they are recomputed) */
  metrics: M[];
}

/** --resume: the latest checkpoint of `db` into `n` and `rngs`; null when the run wrote none yet. */
export function resumeFrom<M>(db: CheckpointDb, n: TrainNets, rngs: { act: Rng; learn: Rng }, curriculum: boolean): Resumed<M> | null {
  const ck = db.latest();
  if (!ck) return null;
  restoreNets(n, ck, db.path);
  const rng = (ck.state as Partial<RunState> | null)?.rng;
  if (!rng || typeof rng !== 'object' || !rng.act || !rng.learn)
    throw new UsageError(
      `${db.path}: the checkpoint of frame ${ck.frame} holds no random-number state (damaged, or not written by kais train)`,
      'KAIS_ERR_CHECKPOINT',
    );
  rngs.act.setState(rng.act);
  rngs.learn.setState(rng.learn);
  const state = ck.state as RunState;
  if (curriculum && !state.curriculum) throw new UsageError(`${db.path}: curriculum run without the lesson state in its checkpoint`);
  const metrics = db
    .metrics<M>()
    .filter((m) => m.frame < ck.frame)
    .map((m) => m.json);
  db.truncateMetrics(ck.frame);
  return { episode: ck.episode, frame: ck.frame, weightVersion: state.weightVersion, curriculum: state.curriculum ?? null, metrics };
}

/** An episode's checkpoint: networks, optimiser, Rng states and the episode's metrics in one transaction. */
export function saveCheckpoint(
  db: CheckpointDb,
  n: TrainNets,
  at: { episode: number; frame: number; weightVersion: number; rngs: { act: Rng; learn: Rng }; curriculum: CurriculumState | null },
  metrics: { frame: number }[],
  meta: Record<string, unknown>,
): void {
  const ls = n.learner.getState();
  const a = n.actor.getWeights();
  const c = n.critic.getWeights();
  const state: RunState = {
    weightVersion: at.weightVersion,
    actorAdamStep: ls.actorAdam.step,
    criticAdamStep: ls.criticAdam.step,
    rng: { act: at.rngs.act.getState(), learn: at.rngs.learn.getState() },
    ...(at.curriculum ? { curriculum: at.curriculum } : {}),
    ...(n.gpg ? { gpg: gpgStateOf(n.gpg) } : {}),
  };
  db.writeCheckpoint(
    {
      episode: at.episode,
      frame: at.frame,
      actor: a.arrays,
      actorShapes: a.shapes,
      critic: c.arrays,
      criticShapes: c.shapes,
      adam: [...ls.actorAdam.moments, ...ls.criticAdam.moments],
      adamShapes: [...a.shapes, ...a.shapes, ...c.shapes, ...c.shapes],
      state,
    },
    metrics.map((x) => ({ frame: x.frame, json: x })),
    meta,
  );
}

/** --init-from: the actor and critic of another run's latest checkpoint (same scenario); returns its frame. */
export function initFrom(file: string, scenario: Scenario, n: Pick<TrainNets, 'actor' | 'critic'>): number {
  const ck = initCheckpoint(file, scenario);
  n.actor.setWeights(ck.actor);
  n.critic.setWeights(ck.critic);
  return ck.frame;
}

/** Best held-out evaluation so far (meta key 'best' of the checkpoint file). */
export interface BestEval {
  episode: number;
  frame: number;
  eval: number;
}

/**
 * --export-actor: the actor of the best evaluation (its weights kept in memory, or its checkpoint
 * when it was found before a resume), else the last one; returns the line to print.
 */
export function exportBestActor(
  file: string,
  db: CheckpointDb,
  best: BestEval | null,
  bestActor: Float32Array[] | null,
  actor: ActorNet,
  fits: { scenario: string; scenarioFingerprint: string; head: string; obsDim: number; numActions: number; frames: number; act?: 'sample' },
): string {
  let arrays = bestActor;
  if (!arrays && best) arrays = db.latest(best.frame)?.actor ?? null; // best found before a resume
  arrays ??= actor.getWeights().arrays;
  const { frames, ...meta } = fits;
  exportActor(file, arrays, actor.getWeights().shapes, { ...meta, frame: best?.frame ?? frames, evalThroughputRate: best?.eval ?? null });
  return `actor written to ${file} (${best ? `best evaluation, frame ${best.frame}, ${best.eval.toFixed(4)}` : 'last weights'})`;
}

/** Writes actor weights as `<path>` (shared/protocol/weights.ts bytes) and `<path>.json` (what it fits). */
export function exportActor(file: string, arrays: Float32Array[], shapes: number[][], meta: Record<string, unknown>): void {
  const bytes = weightsToBytes(
    packWeights(
      arrays.map((data, i) => ({ data, shape: shapes[i] })),
      0,
    ),
  );
  writeFilesAtomically([
    [`${file}.json`, `${JSON.stringify(meta, null, 2)}\n`],
    [file, bytes],
  ]);
}

/** The code of writeFilesAtomically's file-system failure (a UsageError: one line; the caller decides the exit code). */
export const EXPORT_WRITE_FAILED = 'KAIS_ERR_EXPORT_WRITE';

/**
 * Writes each [path, data] through a temporary beside it, renamed in order once all are written
 * (shared/atomic-write.ts): a full disk or a folder in the way leaves the previous files (or none)
 * and no temporary, never a new .bin beside an old .json. A file-system failure is a UsageError
 * (code EXPORT_WRITE_FAILED) naming the file.
 */
export function writeFilesAtomically(files: [string, string | Uint8Array][]): void {
  try {
    writeAllAtomically(files);
  } catch (e) {
    if (e instanceof AtomicWriteError) throw new UsageError(e.message, EXPORT_WRITE_FAILED);
    throw e;
  }
}
