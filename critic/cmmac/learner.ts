/**
 * The cMMAC learner (ALGORITHMS.md section 2; kais-reconstruction.md 2.8-2.10, global-critic
 * variant): a centralised critic V(s) on the global state and the shared actor, trained on-policy
 * from a RolloutBuffer.
 *
 *   y_t   = U_t + gamma V(s_{t+1})          U_t = sum_b u_{b,t} (team reward)
 *   A_t   = y_t - V(s_t)                    shared by every decision of slot t (a constant)
 *   L_V   = mean_t (y_t - V(s_t))^2
 *   L_pi  = mean_k [ -A_{t(k)} log pi(a_k|o_k) ] - beta_H mean_k H(pi(.|o_k))
 *
 * log pi is the true log-probability of the masked L1-normalised policy with the mask recorded at
 * acting time (not demo bug 5's log_softmax of probabilities). Targets and advantages are computed
 * once per update with the critic before it changes. Separate Adam optimisers (the spec: lr 5e-4), gamma 0.9.
 *
 * Per-request credit (`updateRequests`, `kais train --credit request`, the default of the recipe;
 * a documented departure from the spec, whose team-reward mode above stays available as
 * `--credit team`). With the team reward every decision of slot t gets the same advantage
 * A_t = U_t + gamma V(s_{t+1}) - V(s_t), but a request's outcome lands 1-2 slots after it was
 * dispatched (transfer, queue, processing, return), so U_t mostly scores decisions of earlier
 * slots and the actor is pushed by noise that is correlated with the load, not with its choices;
 * measured: every fine-tuning run from a behaviour-cloned start got worse (GAE 0.9 drifted to the
 * cloud, epsilon 0 was unstable). Instead each decision k is scored by ITS request:
 *
 *   r_k   = 1 if request k completed within its deadline, 0 if late or dropped (known when it
 *           resolves; decisions still unresolved at the update are left out)
 *   V(s_t) fits the mean r_k of slot t's decisions (the centralised critic on the global state
 *           stays the baseline: it says how likely a request is to make it in this state)
 *   A_k   = r_k - V(s_{t(k)}) + teamShare x A_t   (teamShare 0 by default)
 *   L_pi  = PPO clipped surrogate on rho_k = pi(a_k|o_k) / pi_old(a_k|o_k), clip 0.2, with pi_old
 *           the acting-time log-probability the buffer recorded, a few epochs stopped early once
 *           the approximate KL to the acting policy exceeds `targetKl` - a guard against drifting
 *           away from the behaviour-cloned start - minus beta_H H(pi).
 *
 * Also `imitate`: behaviour cloning, L_bc = mean_k -log pi(a*_k|o_k) on a teacher's actions, to
 * start the actor from a heuristic before RL fine-tunes it (a documented warm start, not part of
 * the paper's algorithm). Every tensor is created inside tf.tidy or disposed explicitly.
 */
import * as tf from '@tensorflow/tfjs';
import type { Rng } from '../../shared/rng';
import type { ActorNet } from '../../shared/nets/actor';
import type { ValueNet } from '../../shared/nets/value';
import { Adam, type AdamState } from './adam';
import type { RolloutBuffer } from './buffer';

/**
 * The learner's settings. `lr` and `entropyCoef` have no default here: each caller's option spec
 * owns them (kais train: training/jobs/train-options.ts, lr 1e-4 and entropy 0.003; the online
 * learner: orchestrator/learner.ts, lr 2e-4 and entropy 0.01), so one number never has two homes.
 * The spec's (paper's) values are lr 5e-4 and entropy 0.01.
 */
export interface LearnerOptions {
  /** Adam learning rate of actor and critic. */
  lr: number;
  /** Discount per decision slot. @defaultValue 0.9 */
  gamma?: number;
  /** beta_H, entropy bonus. */
  entropyCoef: number;
  /** Decisions per actor minibatch. @defaultValue 1024 */
  minibatch?: number;
  /** Critic gradient steps per update (each on all slots). @defaultValue 4 */
  criticSteps?: number;
  /** Passes over the decisions per update. @defaultValue 1 */
  epochs?: number;
  /** Standardise advantages over the update (CleanRL's norm_adv). @defaultValue false */
  normAdv?: boolean;
  /**
   * GAE lambda: 0 = the spec's one-step TD advantage; > 0 sums later TD errors
   * A_t = delta_t + gamma lambda A_{t+1} (and y_t = A_t + V(s_t)), so outcomes that land a few
   * slots after the decision (a cloud round trip) are credited to it. @defaultValue 0
   */
  gaeLambda?: number;
}

/** Options of the per-request update (see the class comment). */
export interface RequestCreditOptions {
  /** Share of the team TD advantage added to each decision's own advantage. @defaultValue 0 */
  teamShare?: number;
  /** PPO ratio clip. @defaultValue 0.2 */
  clip?: number;
  /** Passes over the decisions. @defaultValue 4 */
  epochs?: number;
  /** Stop the passes once the approximate KL to the acting policy exceeds this. @defaultValue 0.02 */
  targetKl?: number;
}

export interface UpdateStats {
  /** losses/value: critic MSE before the update */
  vLoss: number;
  /** losses/policy: mean -A log pi over the last epoch */
  pgLoss: number;
  /** losses/entropy: mean H(pi) */
  entropy: number;
  /** mean advantage and its std (before normalisation) */
  advMean: number;
  advStd: number;
  meanValue: number;
}

export interface LearnerState {
  actorAdam: AdamState;
  criticAdam: AdamState;
}

export class CmmacLearner {
  readonly opts: Required<LearnerOptions>;
  private readonly actorAdam: Adam;
  private readonly criticAdam: Adam;

  constructor(
    readonly actor: ActorNet,
    readonly critic: ValueNet,
    /** Minibatch shuffling (part of the run's seeded stream). */
    private readonly rng: Rng,
    options: LearnerOptions,
  ) {
    this.opts = { gamma: 0.9, minibatch: 1024, criticSteps: 4, epochs: 1, normAdv: false, gaeLambda: 0, ...options };
    this.actorAdam = new Adam(actor.variables, this.opts.lr);
    this.criticAdam = new Adam(critic.variables, this.opts.lr);
  }

  /**
   * Critic steps only (y_t = U_t + gamma V(s_{t+1}) with the current critic, opts.criticSteps steps);
   * returns L_V before the steps. Used while behaviour cloning, so that V already fits the
   * teacher's returns when RL starts instead of feeding random advantages to the actor.
   */
  fitCritic(buf: RolloutBuffer): number {
    if (!buf.isFinished) throw new Error('CmmacLearner.fitCritic: call buffer.finish(state) first');
    const S = buf.numSlots;
    const D = buf.stateDim;
    if (S === 0) return 0;
    const values = tf.tidy(() => this.critic.value(tf.tensor2d(buf.states.subarray(0, (S + 1) * D), [S + 1, D])));
    const v = values.dataSync() as Float32Array;
    values.dispose();
    const y = new Float32Array(S);
    let vLoss = 0;
    for (let t = 0; t < S; t++) {
      y[t] = buf.rewards[t] + this.opts.gamma * v[t + 1];
      vLoss += (y[t] - v[t]) ** 2;
    }
    this.criticSteps(buf, y);
    return vLoss / S;
  }

  private criticSteps(buf: RolloutBuffer, y: Float32Array): void {
    const S = buf.numSlots;
    const D = buf.stateDim;
    const sT = tf.tensor2d(buf.states.subarray(0, S * D), [S, D]);
    const yT = tf.tensor1d(y);
    for (let i = 0; i < this.opts.criticSteps; i++) {
      this.step(this.critic.variables, this.criticAdam, () => tf.mean(tf.square(tf.sub(yT, this.critic.value(sT)))) as tf.Scalar);
    }
    tf.dispose([sT, yT]);
  }

  /** One on-policy update from a finished buffer (clears nothing). */
  update(buf: RolloutBuffer): UpdateStats {
    if (!buf.isFinished) throw new Error('CmmacLearner.update: call buffer.finish(state) first');
    const S = buf.numSlots;
    const D = buf.stateDim;
    if (S === 0 || buf.n === 0) return { vLoss: 0, pgLoss: 0, entropy: 0, advMean: 0, advStd: 0, meanValue: 0 };
    const { gamma } = this.opts;

    // ---- targets and advantages with the critic as it is now
    const values = tf.tidy(() => this.critic.value(tf.tensor2d(buf.states.subarray(0, (S + 1) * D), [S + 1, D])));
    const v = values.dataSync() as Float32Array; // [S + 1]
    values.dispose();
    const y = new Float32Array(S);
    const adv = new Float32Array(S);
    let vLoss = 0;
    let meanValue = 0;
    for (let t = 0; t < S; t++) {
      y[t] = buf.rewards[t] + gamma * v[t + 1];
      adv[t] = y[t] - v[t];
      vLoss += adv[t] * adv[t];
      meanValue += v[t];
    }
    const lam = this.opts.gaeLambda;
    if (lam > 0) {
      for (let t = S - 2; t >= 0; t--) adv[t] += gamma * lam * adv[t + 1];
      for (let t = 0; t < S; t++) y[t] = adv[t] + v[t];
    }
    vLoss /= S;
    meanValue /= S;
    // per-decision advantage
    const N = buf.n;
    const advK = new Float32Array(N);
    let am = 0;
    for (let k = 0; k < N; k++) {
      advK[k] = adv[buf.slot[k]];
      am += advK[k];
    }
    am /= N;
    let as = 0;
    for (let k = 0; k < N; k++) as += (advK[k] - am) ** 2;
    as = Math.sqrt(as / N);
    if (this.opts.normAdv) for (let k = 0; k < N; k++) advK[k] = (advK[k] - am) / (as + 1e-8);

    // ---- critic: L_V on all slots
    this.criticSteps(buf, y);

    // ---- actor: L_pi on minibatches of decisions
    let pg = 0;
    let ent = 0;
    for (let e = 0; e < this.opts.epochs; e++) {
      pg = 0;
      ent = 0;
      for (const idx of this.minibatches(N)) {
        const mb = this.gather(buf, idx);
        const advMb = tf.tensor1d(Float32Array.from(idx, (k) => advK[k]));
        let pgMb = 0;
        let entMb = 0;
        this.step(this.actor.variables, this.actorAdam, () => {
          const { logProb, entropy } = this.actor.logProbAndEntropy(mb.obs, mb.mask, mb.actions);
          const pgLoss = tf.neg(tf.mean(tf.mul(advMb, logProb)));
          const h = tf.mean(entropy);
          pgMb = (pgLoss.dataSync() as Float32Array)[0];
          entMb = (h.dataSync() as Float32Array)[0];
          return tf.sub(pgLoss, tf.mul(h, this.opts.entropyCoef)) as tf.Scalar;
        });
        tf.dispose([mb.obs, mb.mask, mb.actions, advMb]);
        pg += pgMb * idx.length;
        ent += entMb * idx.length;
      }
    }
    return { vLoss, pgLoss: pg / N, entropy: ent / N, advMean: am, advStd: as, meanValue };
  }

  /**
   * Critic only, per-request targets: V(s_t) fits the mean outcome of slot t's resolved decisions
   * (outcome[k] = 1 in time, 0 failed, NaN unresolved). Returns the loss before the steps.
   */
  fitCriticRequests(buf: RolloutBuffer, outcome: Float32Array, steps = this.opts.criticSteps): number {
    const { slots, y } = this.slotTargets(buf, outcome);
    if (slots.length === 0) return 0;
    const D = buf.stateDim;
    const st = new Float32Array(slots.length * D);
    slots.forEach((t, i) => st.set(buf.states.subarray(t * D, (t + 1) * D), i * D));
    const sT = tf.tensor2d(st, [slots.length, D]);
    const yT = tf.tensor1d(y);
    const before = tf.tidy(() => (tf.mean(tf.square(tf.sub(yT, this.critic.value(sT)))).dataSync() as Float32Array)[0]);
    for (let i = 0; i < steps; i++) {
      this.step(this.critic.variables, this.criticAdam, () => tf.mean(tf.square(tf.sub(yT, this.critic.value(sT)))) as tf.Scalar);
    }
    tf.dispose([sT, yT]);
    return before;
  }

  /**
   * One per-request-credit update (class comment): critic on per-slot mean outcomes, then PPO
   * clipped epochs on A_k = outcome_k - V(s_t(k)) (+ teamShare x the team TD advantage).
   */
  updateRequests(
    buf: RolloutBuffer,
    outcome: Float32Array,
    o: RequestCreditOptions = {},
  ): UpdateStats & { approxKl: number; epochsDone: number } {
    if (!buf.isFinished) throw new Error('CmmacLearner.updateRequests: call buffer.finish(state) first');
    const clip = o.clip ?? 0.2;
    const epochs = o.epochs ?? 4;
    const targetKl = o.targetKl ?? 0.02;
    const teamShare = o.teamShare ?? 0;
    const S = buf.numSlots;
    const D = buf.stateDim;
    const empty = { vLoss: 0, pgLoss: 0, entropy: 0, advMean: 0, advStd: 0, meanValue: 0, approxKl: 0, epochsDone: 0 };
    if (S === 0 || buf.n === 0) return empty;
    const vLoss = this.fitCriticRequests(buf, outcome);
    const values = tf.tidy(() => this.critic.value(tf.tensor2d(buf.states.subarray(0, (S + 1) * D), [S + 1, D])));
    const v = values.dataSync() as Float32Array;
    values.dispose();
    const keep: number[] = [];
    for (let k = 0; k < buf.n; k++) if (!Number.isNaN(outcome[k])) keep.push(k);
    const N = keep.length;
    if (N === 0) return { ...empty, vLoss };
    const advK = new Float32Array(N);
    let am = 0;
    let meanValue = 0;
    for (let j = 0; j < N; j++) {
      const k = keep[j];
      const t = buf.slot[k];
      let a = outcome[k] - v[t];
      if (teamShare > 0) a += teamShare * (buf.rewards[t] + this.opts.gamma * v[t + 1] - v[t]);
      advK[j] = a;
      am += a;
      meanValue += v[t];
    }
    am /= N;
    meanValue /= N;
    let as = 0;
    for (let j = 0; j < N; j++) as += (advK[j] - am) ** 2;
    as = Math.sqrt(as / N);
    if (this.opts.normAdv) for (let j = 0; j < N; j++) advK[j] = (advK[j] - am) / (as + 1e-8);
    const keepIdx = Int32Array.from(keep);

    let pg = 0;
    let ent = 0;
    let kl = 0;
    let epochsDone = 0;
    for (let e = 0; e < epochs; e++) {
      pg = 0;
      ent = 0;
      kl = 0;
      for (const pos of this.minibatches(N)) {
        const idx = Int32Array.from(pos, (j) => keepIdx[j]);
        const mb = this.gather(buf, idx);
        const advMb = tf.tensor1d(Float32Array.from(pos, (j) => advK[j]));
        const oldLp = tf.tensor1d(Float32Array.from(idx, (k) => buf.logProb[k]));
        let pgMb = 0;
        let entMb = 0;
        let klMb = 0;
        this.step(this.actor.variables, this.actorAdam, () => {
          const { logProb, entropy } = this.actor.logProbAndEntropy(mb.obs, mb.mask, mb.actions);
          const logRatio = tf.sub(logProb, oldLp);
          const ratio = tf.exp(logRatio);
          const surr = tf.minimum(tf.mul(ratio, advMb), tf.mul(tf.clipByValue(ratio, 1 - clip, 1 + clip), advMb));
          const pgLoss = tf.neg(tf.mean(surr));
          const h = tf.mean(entropy);
          // approx KL(old || new) = E[(ratio - 1) - log ratio] (always >= 0)
          const k1 = tf.mean(tf.sub(tf.sub(ratio, 1), logRatio));
          pgMb = (pgLoss.dataSync() as Float32Array)[0];
          entMb = (h.dataSync() as Float32Array)[0];
          klMb = (k1.dataSync() as Float32Array)[0];
          return tf.sub(pgLoss, tf.mul(h, this.opts.entropyCoef)) as tf.Scalar;
        });
        tf.dispose([mb.obs, mb.mask, mb.actions, advMb, oldLp]);
        pg += pgMb * pos.length;
        ent += entMb * pos.length;
        kl += klMb * pos.length;
      }
      epochsDone++;
      kl /= N;
      if (kl > targetKl) break;
    }
    return { vLoss, pgLoss: pg / N, entropy: ent / N, advMean: am, advStd: as, meanValue, approxKl: kl, epochsDone };
  }

  /** Slots with at least one resolved decision and the mean outcome of those decisions. */
  private slotTargets(buf: RolloutBuffer, outcome: Float32Array): { slots: number[]; y: Float32Array } {
    const sum = new Float64Array(buf.numSlots);
    const cnt = new Float64Array(buf.numSlots);
    for (let k = 0; k < buf.n; k++) {
      if (Number.isNaN(outcome[k])) continue;
      sum[buf.slot[k]] += outcome[k];
      cnt[buf.slot[k]]++;
    }
    const slots: number[] = [];
    const y: number[] = [];
    for (let t = 0; t < buf.numSlots; t++) {
      if (cnt[t] > 0) {
        slots.push(t);
        y.push(sum[t] / cnt[t]);
      }
    }
    return { slots, y: Float32Array.from(y) };
  }

  /**
   * Behaviour cloning on the buffer's recorded actions (a teacher's): `epochs` passes of
   * minibatches minimising mean -log pi(a*|o), over decisions from..n-1 (default all). Returns the
   * last pass's mean loss.
   */
  imitate(buf: RolloutBuffer, epochs = 1, from = 0): number {
    let loss = 0;
    const n = buf.n - from;
    for (let e = 0; e < epochs; e++) {
      loss = 0;
      for (const pos of this.minibatches(n)) {
        const idx = from === 0 ? pos : Int32Array.from(pos, (j) => j + from);
        const mb = this.gather(buf, idx);
        let l = 0;
        this.step(this.actor.variables, this.actorAdam, () => {
          const { logProb } = this.actor.logProbAndEntropy(mb.obs, mb.mask, mb.actions);
          const bc = tf.neg(tf.mean(logProb)) as tf.Scalar;
          l = (bc.dataSync() as Float32Array)[0];
          return bc;
        });
        tf.dispose([mb.obs, mb.mask, mb.actions]);
        loss += l * idx.length;
      }
      loss /= Math.max(1, n);
    }
    return loss;
  }

  /** Changes the learning rate of both optimisers (e.g. a faster one for behaviour cloning). */
  setLearningRate(lr: number): void {
    this.actorAdam.lr = lr;
    this.criticAdam.lr = lr;
  }

  /** Changes the entropy bonus beta_H (a curriculum lesson may set its own). */
  setEntropyCoef(c: number): void {
    this.opts.entropyCoef = c;
  }

  getState(): LearnerState {
    return { actorAdam: this.actorAdam.getState(), criticAdam: this.criticAdam.getState() };
  }

  setState(s: LearnerState): void {
    this.actorAdam.setState(s.actorAdam);
    this.criticAdam.setState(s.criticAdam);
  }

  dispose(): void {
    this.actorAdam.dispose();
    this.criticAdam.dispose();
  }

  /** grads of loss() w.r.t. vars, one Adam step, everything disposed. */
  private step(vars: tf.Variable[], opt: Adam, loss: () => tf.Scalar): void {
    const { value, grads } = tf.variableGrads(loss, vars);
    const g = vars.map((x) => grads[x.name]);
    opt.apply(g);
    value.dispose();
    tf.dispose(Object.values(grads));
  }

  /** Shuffled index minibatches of size opts.minibatch (last one smaller). */
  private minibatches(n: number): Int32Array[] {
    const perm = new Int32Array(n);
    for (let i = 0; i < n; i++) perm[i] = i;
    for (let i = n - 1; i > 0; i--) {
      const j = this.rng.int(i + 1);
      const t = perm[i];
      perm[i] = perm[j];
      perm[j] = t;
    }
    const out: Int32Array[] = [];
    for (let s = 0; s < n; s += this.opts.minibatch) out.push(perm.subarray(s, Math.min(n, s + this.opts.minibatch)));
    return out;
  }

  /** Minibatch tensors (caller disposes): obs [m, D], mask [m, A] float, actions [m] int32. */
  private gather(buf: RolloutBuffer, idx: Int32Array): { obs: tf.Tensor2D; mask: tf.Tensor2D; actions: tf.Tensor1D } {
    const m = idx.length;
    const D = buf.obsDim;
    const A = buf.numActions;
    const obs = new Float32Array(m * D);
    const mask = new Float32Array(m * A);
    const actions = new Int32Array(m);
    for (let r = 0; r < m; r++) {
      const k = idx[r];
      obs.set(buf.obs.subarray(k * D, (k + 1) * D), r * D);
      for (let a = 0; a < A; a++) mask[r * A + a] = buf.mask[k * A + a];
      actions[r] = buf.action[k];
    }
    return { obs: tf.tensor2d(obs, [m, D]), mask: tf.tensor2d(mask, [m, A]), actions: tf.tensor1d(actions, 'int32') };
  }
}
