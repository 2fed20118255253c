/**
 * The LEARN step of `kais train` (train.ts): which update a frame gets and the losses it reports.
 *
 *   credit 'request' (default): one update per episode at its last frame, each decision scored by
 *     its own request's outcome (cloning frames fit the critic to the outcomes; RL frames run the
 *     PPO-clipped per-request update on the actor's own samples only)
 *   credit 'team': one update per frame on the frame's decisions (cloning, or the spec's TD update)
 *
 * The per-frame cloning step of credit 'request' stays in the loop (it runs before the buffer is
 * finished).
 */
import type { RolloutBuffer } from '../../critic/cmmac/buffer';
import type { CmmacLearner } from '../../critic/cmmac/learner';
import type { EdgeCloudEnv } from '../sim/env';
import type { EpisodePlan } from '../curriculum/tracker';
import { round } from './rollout';
import type { TrainConfig } from './train-options';
import type { FrameMetrics } from './train-progress';

export interface LearnInputs {
  learner: CmmacLearner;
  buf: RolloutBuffer;
  env: EdgeCloudEnv;
  config: TrainConfig;
  plan: Pick<EpisodePlan, 'lr' | 'teamShare' | 'externality'>;
  /** the frame cloned the teacher */
  bc: boolean;
  perRequest: boolean;
  /** update now (every frame with credit 'team'; the episode's last frame with credit 'request') */
  learnNow: boolean;
  /** credit 'request': index of the first decision the actor sampled in this episode's buffer (-1: none) */
  rlStart: number;
}

/** Runs the frame's update (if any) and writes its losses into m. */
export function learnFrame(m: FrameMetrics, x: LearnInputs): void {
  const { learner, buf, env, config, plan, bc, perRequest, learnNow, rlStart } = x;
  if (!learnNow) return; // keep collecting this episode's decisions
  if (perRequest) {
    const outcome = requestOutcomes(env, buf);
    if (plan.externality > 0) m['credit/meanBlame'] = round(chargeBlame(outcome, env.requestBlame(), buf, plan.externality), 5);
    if (bc) {
      m['losses/value'] = round(learner.fitCriticRequests(buf, outcome), 5);
    } else {
      learner.setLearningRate(plan.lr);
      // an episode that started with cloning frames: only the actor's own samples are on-policy
      outcome.fill(Number.NaN, 0, Math.max(0, rlStart));
      const st = learner.updateRequests(buf, outcome, {
        teamShare: plan.teamShare,
        clip: config.clip,
        epochs: config.ppoEpochs,
        targetKl: config.targetKl,
      });
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

/**
 * --externality: each resolved decision's outcome minus `share` x its request's share of the
 * failures of requests that waited behind it at its target (training/sim/blame.ts), so the critic
 * fits, and the actor is credited with, what the decision did to the others as well as to its own
 * request. Unresolved decisions stay NaN (left out, as before).
 */
export function chargeBlame(outcome: Float32Array, blame: Float32Array, buf: RolloutBuffer, share: number): number {
  let sum = 0;
  let n = 0;
  for (let k = 0; k < buf.n; k++) {
    if (Number.isNaN(outcome[k])) continue;
    const i = buf.requestId[k];
    const b = i < blame.length ? blame[i] : 0;
    outcome[k] -= share * b;
    sum += b;
    n++;
  }
  return n > 0 ? sum / n : 0; // the mean blame of the resolved decisions
}

/** `make` once per name. */
export function memo<T>(make: (name: string) => T, seed: [string, T][] = []): (name: string) => T {
  const made = new Map<string, T>(seed);
  return (name) => {
    let x = made.get(name);
    if (x === undefined) made.set(name, (x = make(name)));
    return x;
  };
}
