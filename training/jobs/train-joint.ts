/**
 * The GPG half of `kais train --policies cmmac/gpg` (issue 16 item 5): the orchestration net and
 * its learner beside cMMAC's, in the same checkpoints, on the same episodes.
 *
 * A lesson says which parts learn (its `learn` field; training/curriculum/joint/):
 *   - cMMAC learns, orchestration fixed (`hpa`, `static`, ...): the cMMAC lessons, unchanged;
 *   - GPG learns, cMMAC frozen (argmax, no update): orchestration `gpg`, GPG sampling;
 *   - both learn: cMMAC samples and updates as in its own lessons, GPG samples and updates.
 * When GPG learns, an episode is R = --gpg-rollouts rollouts on the episode's requests: the
 * training loop's own (cMMAC records and learns from that one only) and R - 1 run here first with
 * the same cMMAC weights, each GPG sampling from its own seed. The R rollouts give GPG's
 * time-aligned baseline (critic/gpg/update.ts), rewards as in training/jobs/gpg-train.ts (the next
 * frame's throughput rate minus --gpg-op-cost per executed operation and --gpg-replica-cost per
 * mean edge replica held).
 *
 * Every stream derives from --seed: the net from 'train/init-gpg', rollout r of episode k samples
 * GPG with salt 1 + k R + r and cMMAC (when it learns) from 'train/aside-k-r'; the net's weights,
 * Adam moments, update count and baseline go into each checkpoint (state.gpg), so a resume
 * continues exactly.
 */
import type { Request } from '../../shared/domain';
import type { DispatchPolicy, OrchestrationPolicy } from '../../shared/policy';
import { Rng } from '../../shared/rng';
import type { Scenario } from '../../shared/scenario';
import type { DequeueName } from '../../shared/dequeue';
import { GpgNet } from '../../critic/gpg/gnn';
import { loadGpgModel, withScaleIn } from '../../critic/gpg/load';
import { gpgModelToJson, modelNodesPerFrame, updatesSeen, type GpgModelMeta, type GpgScaleIn } from '../../critic/gpg/model';
import { GpgOrchestration, type GpgDecision } from '../../critic/gpg/policy';
import { GpgLearner, type GpgEpisode, type GpgLearnerState } from '../../critic/gpg/update';
import type { FrameStats } from '../sim/env';
import { gpgRewards } from './gpg-train';
import { runEpisode } from './rollout';

/** What `--policies` names: the parts `kais train` trains. */
export const TRAIN_POLICIES = ['cmmac', 'cmmac/gpg'] as const;
export type TrainPolicies = (typeof TRAIN_POLICIES)[number];

/** The parts a lesson can let learn (its `learn` field). */
export const LEARNING_PARTS = ['cmmac', 'gpg'] as const;
export type LearningPart = (typeof LEARNING_PARTS)[number];

/** GPG's settings in a run's config. */
export interface GpgRunSettings {
  seed: number;
  gpgRollouts: number;
  gpgOpCost: number;
  gpgReplicaCost: number;
  gpgLr: number;
  /** Start GPG from this model file (its net config and weights; the entropy schedule continues from its updates). */
  gpgInit?: string | null;
}

export interface GpgPart {
  net: GpgNet;
  learner: GpgLearner;
  /** H, the nodes GPG changes per frame: --gpg-init's model's when it names one, else the scenario's. */
  nodesPerFrame: number;
  /** hpa's scale-in after GPG's orders: --gpg-init's model's when it names one (it trains and ships with it). */
  scaleIn?: GpgScaleIn;
}

/** A checkpoint's GPG state (state.gpg): float32 arrays as base64 of their little-endian bytes. */
export interface GpgCheckpointState {
  weights: string;
  adamStep: number;
  adam: string;
  updates: number;
  baseline: number[];
}

export function newGpgPart(c: GpgRunSettings, scenario: Scenario): GpgPart {
  if (c.gpgInit) {
    // --gpg-init: the model's net and weights, fresh Adam, the entropy schedule where the model left it
    const m = loadGpgModel(c.gpgInit, scenario, '--gpg-init');
    const learner = new GpgLearner(m.net, { lr: c.gpgLr });
    learner.updates = updatesSeen(m.meta);
    return {
      net: m.net,
      learner,
      nodesPerFrame: modelNodesPerFrame(m.meta, scenario),
      ...(m.meta.scaleIn ? { scaleIn: withoutActorSwitch(m.meta.scaleIn) } : {}),
    };
  }
  const net = new GpgNet(scenario.services.length, Rng.derive(c.seed, 'train/init-gpg').nextU32());
  return { net, learner: new GpgLearner(net, { lr: c.gpgLr }), nodesPerFrame: scenario.scaleNodesPerFrame };
}

/**
 * The scale-in a trained model carries from its --gpg-init, without the init's actor switch: the
 * light actor is a file beside the init model (not beside the trained one), and training runs one
 * actor, so the trained model names none (docs/gpg.md, "The actor switch shipped").
 */
export function withoutActorSwitch(si: GpgScaleIn): GpgScaleIn {
  if (!si.light?.actor) return si;
  const { actor: _actor, ...light } = si.light;
  return { ...si, light };
}

function toBase64(arrays: readonly Float32Array[]): string {
  const n = arrays.reduce((s, a) => s + a.length, 0);
  const buf = Buffer.alloc(n * 4);
  let o = 0;
  for (const a of arrays) for (let i = 0; i < a.length; i++, o += 4) buf.writeFloatLE(a[i], o);
  return buf.toString('base64');
}

function fromBase64(text: string, shapes: readonly number[][], what: string): Float32Array[] {
  const buf = Buffer.from(text, 'base64');
  const sizes = shapes.map((sh) => sh.reduce((p, d) => p * d, 1));
  const total = sizes.reduce((s, x) => s + x, 0);
  if (buf.length !== total * 4) throw new TypeError(`${what}: ${buf.length} bytes, the GPG net needs ${total * 4}`);
  let o = 0;
  return sizes.map((size) => {
    const a = new Float32Array(size);
    for (let i = 0; i < size; i++, o += 4) a[i] = buf.readFloatLE(o);
    return a;
  });
}

export function gpgStateOf(p: GpgPart): GpgCheckpointState {
  const ls = p.learner.getState();
  return {
    weights: toBase64(p.net.getWeights()),
    adamStep: ls.adam.step,
    adam: toBase64(ls.adam.moments),
    updates: ls.updates,
    baseline: ls.baseline,
  };
}

/** Restores a checkpoint's GPG state; a TypeError naming the problem when it does not fit the net. */
export function restoreGpg(p: GpgPart, s: GpgCheckpointState | undefined): void {
  if (!s) throw new TypeError('a cmmac/gpg run without the GPG state in its checkpoint');
  const shapes = p.net.shapes;
  p.net.setWeights(fromBase64(s.weights, shapes, 'GPG weights'));
  const state: GpgLearnerState = {
    updates: s.updates,
    baseline: s.baseline,
    adam: { step: s.adamStep, moments: fromBase64(s.adam, [...shapes, ...shapes], 'GPG optimiser state') },
  };
  p.learner.setState(state);
}

/**
 * GPG deciding once per frame: 'sample' while it learns (rollout r of episode k), 'greedy' when
 * frozen and in evaluations; followed by hpa's scale-in when the part has one (its removals are
 * part of the world GPG learns in, not GPG's decisions).
 */
export function gpgOrchestration(
  p: GpgPart,
  scenario: Scenario,
  mode: 'sample' | 'greedy',
  salt = 0,
  sink?: GpgDecision[],
): OrchestrationPolicy {
  const gpg = new GpgOrchestration(p.net, {
    periodS: scenario.slotS * scenario.slotsPerFrame,
    nodesPerDecision: p.nodesPerFrame,
    mode,
    sampleSalt: salt,
    onDecision: sink ? (d) => sink.push(d) : undefined,
  });
  return withScaleIn(gpg, p);
}

/** GPG's sampling salt of rollout r in episode k (r = 0: the training loop's own). */
export function gpgSalt(episode: number, r: number, rollouts: number): number {
  return 1 + episode * rollouts + r;
}

/** One rollout's GPG episode from its decisions and frames (the last decision has no next frame). */
export function gpgEpisodeOf(
  c: GpgRunSettings,
  scenario: Scenario,
  decisions: readonly GpgDecision[],
  frames: readonly FrameStats[],
): GpgEpisode {
  const rewards = gpgRewards(frames, decisions.length, scenario.slotS * scenario.slotsPerFrame, c.gpgOpCost, c.gpgReplicaCost);
  return { decisions: decisions.slice(0, rewards.length), rewards };
}

/**
 * Rollouts 1..R-1 of episode k on the episode's requests, GPG sampling, the dispatch of
 * `dispatchOf(r)` (cMMAC with the weights the loop's rollout starts from, or the lesson's teacher).
 */
export function asideRollouts(
  p: GpgPart,
  c: GpgRunSettings,
  o: {
    scenario: Scenario;
    requests: Request[];
    frames: number;
    seed: number;
    episode: number;
    nodeDequeue: DequeueName;
    view: 'agent' | 'global';
    deviceFilters: boolean;
    dispatchOf: (r: number) => DispatchPolicy;
  },
): { episodes: GpgEpisode[]; throughput: number[] } {
  const episodes: GpgEpisode[] = [];
  const throughput: number[] = [];
  for (let r = 1; r < c.gpgRollouts; r++) {
    const decisions: GpgDecision[] = [];
    let frames: readonly FrameStats[] = [];
    const res = runEpisode({
      scenario: o.scenario,
      requests: o.requests,
      frames: o.frames,
      seed: o.seed,
      dispatch: o.dispatchOf(r),
      orchestration: gpgOrchestration(p, o.scenario, 'sample', gpgSalt(o.episode, r, c.gpgRollouts), decisions),
      nodeDequeue: o.nodeDequeue,
      view: o.view,
      deviceFilters: o.deviceFilters,
      onFrames: (f) => (frames = f),
    });
    episodes.push(gpgEpisodeOf(c, o.scenario, decisions, frames));
    throughput.push(res.throughputRate);
  }
  return { episodes, throughput };
}

/** GPG weights as a model file for `kais eval --gpg` (critic/gpg/model.ts). */
export function gpgModelText(
  p: GpgPart,
  weights: readonly Float32Array[],
  meta: Omit<GpgModelMeta, 'scaleIn'> & { trainedWith: Record<string, unknown> },
): string {
  p.net.setWeights(weights);
  return gpgModelToJson(p.net, { ...meta, ...(p.scaleIn ? { scaleIn: p.scaleIn } : {}) });
}

/** The GPG weights stored in a checkpoint's state (for the export of a best found before a resume). */
export function gpgWeightsOf(p: GpgPart, s: GpgCheckpointState): Float32Array[] {
  return fromBase64(s.weights, p.net.shapes, 'GPG weights');
}
