/**
 * The online learner of the orchestrator: agents' `experience` frames (stored in the Store's
 * experience ring) -> critic and actor updates -> a new weight version, stored and pushed to every
 * agent through the ModelRegistry. It is the per-request-credit update of `kais train`
 * (critic/cmmac/learner.ts, `updateRequests`) run on live experience:
 *
 *   r_k  = the transition's reward (1: the device got its answer in time, 0: late or refused)
 *   A_k  = r_k - V(o_k)
 *   L_pi = PPO clipped surrogate on pi(a_k|o_k) / b(a_k|o_k), b = the acting-time probability the
 *          agent recorded, epochs stopped early past `targetKl`, minus beta_H H(pi)
 *
 * One departure from training, and why: in the simulator the critic sees the global state s_t of
 * a decision slot. Live, nobody has a synchronised global state per slot (each agent sees its own
 * eAP's view, at its own time), so the live critic is V(o): one network, trained on every agent's
 * experience, on the decision's observation (which already holds the eAP's view of every target
 * and its eAP id). It is the baseline of the advantage only; the actor update is the same.
 *
 * What is learned from: transitions decided by the actor (weightVersion not null) at most `maxLag`
 * versions behind the current one; the heuristic fallback's decisions and older ones are skipped.
 * The PPO ratio needs the behaviour probability, so agents of a learning orchestrator act by
 * sampling (`kais agent --act sample`; `kais up` does this): an argmax agent's recorded logProb is
 * not the probability of what it did.
 *
 * Pace: every `pollMs` the learner reads new batches from the ring; once `batch` eligible
 * transitions are pending it runs one update. The first `criticWarmup` updates fit only the critic
 * (a fresh critic's advantages are noise), the later ones update the actor and publish. An update
 * on 2,048 transitions takes ~0.2-0.6 s on the wasm backend and runs on the orchestrator's event
 * loop: heartbeats (5 s) and fan-out wait that long at most. The update time is logged and kept
 * in `stats`.
 *
 * Restart: the actor starts from the latest stored weight version; the critic, the experience
 * cursor and the update count come back from the store's `learner` table (saved after every
 * update, in one transaction); Adam's moments start fresh.
 */
import * as tf from '@tensorflow/tfjs';
import type { Transition } from '../shared/protocol/envelope';
import { packWeights, unpackWeights, type WeightTensor } from '../shared/protocol/weights';
import { ActorNet, actorArrayCount, type HeadActivation } from '../shared/nets/actor';
import { ValueNet } from '../shared/nets/value';
import { Rng } from '../shared/rng';
import { topologyOf, type Scenario } from '../shared/scenario';
import { observationDim, targetBlockOf } from '../shared/spaces';
import { CmmacLearner } from '../critic/cmmac/learner';
import { RolloutBuffer } from '../critic/cmmac/buffer';
import type { ModelRegistry } from './registry';
import type { Store } from './store';

export interface OnlineLearnerOptions {
  scenario: Scenario;
  store: Store;
  registry: ModelRegistry;
  /** Head of the actor the weights belong to. */
  head: HeadActivation;
  /** Eligible transitions per update. @defaultValue 2048 */
  batch?: number;
  /** How often the ring is read (ms). @defaultValue 1000 */
  pollMs?: number;
  /** Updates that fit only the critic before the actor learns. @defaultValue 1 */
  criticWarmup?: number;
  /** Oldest weight version learned from: current - maxLag. @defaultValue 2 */
  maxLag?: number;
  /** Adam learning rate (smaller than training: every update reaches production). @defaultValue 2e-4 */
  lr?: number;
  /** PPO early stop on approximate KL. @defaultValue 0.01 */
  targetKl?: number;
  /** Seed of the critic's initial weights and the minibatch order. @defaultValue 1 */
  seed?: number;
  log?: (line: string) => void;
}

export interface OnlineLearnerStats {
  /** Updates run (critic-only warm-up ones included), over the store's whole life. */
  updates: number;
  /** Weight versions this process published. */
  published: number;
  /** Transitions read from the ring, and of those learned from. */
  transitionsRead: number;
  transitionsUsed: number;
  /** Wall time of the last update (ms), its approximate KL and the mean reward of its batch. */
  lastUpdateMs: number;
  lastApproxKl: number;
  lastMeanReward: number;
}

export class OnlineLearner {
  readonly stats: OnlineLearnerStats = { updates: 0, published: 0, transitionsRead: 0, transitionsUsed: 0, lastUpdateMs: 0, lastApproxKl: 0, lastMeanReward: 0 };
  private readonly o: Required<Omit<OnlineLearnerOptions, 'log'>> & { log: (line: string) => void };
  private readonly obsDim: number;
  private readonly numActions: number;
  private actor: ActorNet | null = null;
  private critic: ValueNet | null = null;
  private learner: CmmacLearner | null = null;
  private version: number | null = null;
  private cursor = 0;
  private pending: Transition[] = [];
  private timer: NodeJS.Timeout | null = null;
  private busy = false;
  /** A stored version that is not an actor of this scenario (logged once). */
  private misfit: number | null = null;

  constructor(options: OnlineLearnerOptions) {
    this.o = {
      batch: 2048,
      pollMs: 1000,
      criticWarmup: 1,
      maxLag: 2,
      lr: 2e-4,
      targetKl: 0.01,
      seed: 1,
      log: () => undefined,
      ...Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)),
    } as unknown as OnlineLearner['o'];
    if (!(Number.isInteger(this.o.batch) && this.o.batch > 0)) throw new TypeError(`OnlineLearner: batch must be a positive integer, got ${this.o.batch}`);
    const topo = topologyOf(this.o.scenario);
    const shape = { numServices: topo.numServices, numTargets: topo.numNodes + 1, numEaps: topo.numEaps };
    this.obsDim = observationDim(shape);
    this.numActions = shape.numTargets;
    const saved = this.o.store.learnerState();
    if (saved) {
      this.cursor = saved.cursor;
      this.stats.updates = saved.updates;
    } else {
      // a fresh learner learns from what arrives from now on, not from an old run's ring
      this.cursor = this.o.store.experienceSeqEnd;
    }
    const rng = Rng.derive(this.o.seed, 'orchestrator/learner');
    this.critic = new ValueNet(this.obsDim, rng);
    if (saved) this.critic.setWeights(unpackWeights(saved.critic).map((t) => t.data));
    this.loadActor(rng);
  }

  /** Current weight version the actor is at (null: no model yet, nothing to learn from). */
  get weightVersion(): number | null {
    return this.version;
  }

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => this.poll(), this.o.pollMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  dispose(): void {
    this.stop();
    this.learner?.dispose();
    this.actor?.dispose();
    this.critic?.dispose();
    this.learner = null;
    this.actor = null;
    this.critic = null;
  }

  /**
   * Reads new experience and runs at most one update when enough is pending; returns whether an
   * update ran. Called by the timer; tests call it directly.
   */
  poll(): boolean {
    if (this.busy || !this.critic) return false;
    this.busy = true;
    try {
      if (this.version === null) this.loadActor(Rng.derive(this.o.seed, 'orchestrator/learner/late'));
      this.read();
      if (this.pending.length < this.o.batch || !this.learner) return false;
      this.update(this.pending.splice(0, this.o.batch));
      return true;
    } finally {
      this.busy = false;
    }
  }

  private read(): void {
    for (;;) {
      const recs = this.o.store.readExperience(this.cursor, 64);
      if (recs.length === 0) return;
      for (const r of recs) {
        for (const t of r.body.transitions) {
          this.stats.transitionsRead++;
          if (this.eligible(t)) this.pending.push(t);
        }
        this.cursor = r.seq + 1;
      }
      // keep the newest experience when the learner falls behind
      if (this.pending.length > 4 * this.o.batch) this.pending.splice(0, this.pending.length - 4 * this.o.batch);
    }
  }

  private eligible(t: Transition): boolean {
    if (this.version === null || t.weightVersion === null) return false;
    if (t.weightVersion < this.version - this.o.maxLag || t.weightVersion > this.version) return false;
    return t.obs.length === this.obsDim && t.mask.length === this.numActions && Number.isFinite(t.logProb) && t.logProb <= 0;
  }

  /** Actor from the latest stored weights (none yet: stays null until a version exists). */
  private loadActor(rng: Rng): void {
    const body = this.o.store.latestModel();
    if (!body) return;
    if (body.version === this.misfit) return;
    const tensors = unpackWeights(body);
    const mlpArrays = actorArrayCount();
    const fits =
      tensors[0]?.shape[0] === this.obsDim &&
      tensors[mlpArrays - 1]?.shape[0] === this.numActions &&
      (tensors.length === mlpArrays || tensors.length === actorArrayCount(undefined, true));
    if (!fits) {
      this.misfit = body.version;
      this.o.log(`learner: stored weights v${body.version} are not a ${this.o.scenario.name} actor (shapes ${JSON.stringify(tensors.map((t) => t.shape))}); not learning`);
      return;
    }
    const topo = topologyOf(this.o.scenario);
    const scorer = tensors.length > mlpArrays;
    const shape = { numServices: topo.numServices, numTargets: topo.numNodes + 1, numEaps: topo.numEaps };
    this.actor?.dispose();
    this.learner?.dispose();
    this.actor = new ActorNet(this.obsDim, this.numActions, rng, undefined, this.o.head, scorer ? targetBlockOf(shape) : null);
    this.actor.setWeights(tensors.map((t) => t.data));
    this.learner = new CmmacLearner(this.actor, this.critic!, rng, { lr: this.o.lr });
    this.version = body.version;
  }

  private update(batch: Transition[]): void {
    const t0 = performance.now();
    const n = batch.length;
    // one "slot" per decision whose state is the decision's observation: the live critic is V(o)
    const buf = new RolloutBuffer(this.obsDim, this.numActions, this.obsDim, n);
    const outcome = new Float32Array(n);
    let rewardSum = 0;
    for (let k = 0; k < n; k++) {
      const t = batch[k];
      buf.beginSlot(t.obs);
      buf.record(t.obs, t.mask, t.action, t.logProb, t.eap);
      outcome[k] = t.reward;
      rewardSum += t.reward;
    }
    buf.finish(new Float32Array(this.obsDim));
    const learner = this.learner!;
    const warm = this.stats.updates < this.o.criticWarmup;
    let kl = 0;
    if (warm) {
      learner.fitCriticRequests(buf, outcome, 16);
    } else {
      const st = learner.updateRequests(buf, outcome, { targetKl: this.o.targetKl });
      kl = st.approxKl;
    }
    this.stats.updates++;
    this.stats.transitionsUsed += n;
    this.stats.lastApproxKl = kl;
    this.stats.lastMeanReward = rewardSum / n;
    if (!warm) this.publish();
    this.o.store.putLearnerState({ cursor: this.cursor, updates: this.stats.updates, critic: packWeights(toTensors(this.critic!.getWeights()), this.stats.updates) });
    this.stats.lastUpdateMs = performance.now() - t0;
    this.o.log(
      `learner: update ${this.stats.updates}${warm ? ' (critic warm-up)' : ` -> weights v${this.version}`} on ${n} transitions, ` +
        `mean reward ${(rewardSum / n).toFixed(3)}, kl ${kl.toFixed(4)}, ${this.stats.lastUpdateMs.toFixed(0)} ms, tensors ${tf.memory().numTensors}`,
    );
  }

  private publish(): void {
    const tensors = toTensors(this.actor!.getWeights());
    for (const t of tensors) {
      for (let i = 0; i < t.data.length; i++) {
        if (!Number.isFinite(t.data[i])) {
          // a diverged update must never reach production: reload the last good version
          this.o.log('learner: update produced non-finite weights; discarded, back to the stored version');
          this.loadActor(Rng.derive(this.o.seed, `orchestrator/learner/reload-${this.stats.updates}`));
          return;
        }
      }
    }
    const body = this.o.registry.publishWeights(tensors);
    this.version = body.version;
    this.stats.published++;
  }
}

function toTensors(w: { shapes: number[][]; arrays: Float32Array[] }): WeightTensor[] {
  return w.arrays.map((data, i) => ({ shape: w.shapes[i], data }));
}
