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
 * The PPO ratio needs the behaviour probability, so the learner uses only decisions drawn from the
 * policy: agents of a learning orchestrator explore a share of their decisions (`kais agent
 * --explore 0.25`; `kais up` does this) and record probability 1 (logProb 0) for the argmax ones.
 *
 * Pace: every `pollMs` the learner reads new batches from the ring; once `batch` eligible
 * transitions are pending it runs one update on the newest `batch` of them (older ones are
 * dropped: on-policy data goes stale). The first `criticWarmup` updates fit only the critic (a
 * fresh critic's advantages are noise), the later ones update the actor and publish. CPU: an
 * update costs about 6 forward+backward passes of a 612-input network per decision, ~10 G
 * multiply-adds for 2,048 decisions (measured 5-40 s on the wasm backend here, depending on what
 * else runs), so learning from every decision at 225 decisions/s would take about a core. After
 * each update the learner rests for (1 / maxDuty - 1) x its duration (default: as long as the
 * update took, i.e. at most half a core on average), and learns from the newest decisions only.
 *
 * Where the tfjs work runs: in a worker thread (learner-worker.ts) when the compiled worker file is
 * there (always, from `dist/`), so the hub's event loop (heartbeats, fan-out, placement) never
 * waits for an update: measured, one update on 2,048 transitions took 28 s on a machine loaded
 * ~5x over its 2 cores, which on the event loop would have stalled every agent's link. In-process
 * (`thread: 'in-process'`, and under jest where only the .ts sources exist) for tests.
 *
 * Surviving any batch: only transitions with a reward in the agent's known bounds and a finite
 * float32 log-probability are learned from (the intake, orchestrator/intake.ts, already refuses
 * the others at the door). An update that throws, or yields non-finite actor or critic weights,
 * is discarded: the engine is re-initialised from the stored actor version and the last saved
 * critic, the failure is counted (`failedUpdates`) and reported (`onEvent`), and the next batch
 * is learned from as usual. An actor update whose approximate KL is past `maxKl` (by default 10x
 * `targetKl`: PPO's early stop only looks between epochs, so one epoch can overshoot) is not
 * published (`refusedUpdates`, event `kl-refused`); the actor goes back to the stored version.
 *
 * Restart: the actor starts from the latest stored weight version; the critic, the experience
 * cursor and the update count come back from the store's `learner` table (saved after every
 * update, in one transaction); Adam's moments start fresh.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Transition, WeightsBody } from '../shared/protocol/envelope';
import { packWeights, unpackWeights, type WeightTensor } from '../shared/protocol/weights';
import { ACTOR_HIDDEN, type HeadActivation } from '../shared/nets/actor';
import { actorFit } from '../shared/nets/actor-fit';
import { criticShapes } from '../shared/nets/value';
import { topologyOf, type Scenario } from '../shared/scenario';
import { observationDim, targetBlockOf } from '../shared/spaces';
import { LearnerCore, type CoreConfig, type CoreResult, type PackedBatch } from '../critic/cmmac/online-core';
import type { WorkerReply, WorkerRequest } from './learner-worker';
import { SerialWorker } from './serial-worker';
import type { ModelRegistry } from './registry';
import type { Store } from './store';
import type { WeightGate } from './gate';

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
  /** Entropy bonus beta_H of the online updates. @defaultValue 0.01 */
  entropyCoef?: number;
  /** PPO early stop on approximate KL. @defaultValue 0.01 */
  targetKl?: number;
  /** An actor update with an approximate KL above this is not published. @defaultValue 10 x targetKl */
  maxKl?: number;
  /**
   * The weight gate (orchestrator/gate.ts): when given, an actor update is published only if its
   * shadow evaluation passes; otherwise the actor goes back to the stored version (as after a
   * KL refusal) and learning goes on.
   */
  gate?: Pick<WeightGate, 'check'> | null;
  /**
   * Where a version that passed goes: the canary rollout (orchestrator/canary.ts), which starts it
   * (returns its body) or keeps it until the running canary ends (null). @defaultValue registry.publishWeights
   */
  publish?: ((tensors: WeightTensor[], head: HeadActivation) => WeightsBody | null) | null;
  /** Failed and refused updates, for the orchestrator's events. */
  onEvent?: (e: { kind: 'update-failed' | 'kl-refused'; message: string }) => void;
  /** Seed of the critic's initial weights and the minibatch order. @defaultValue 1 */
  seed?: number;
  /** Largest share of one core the updates may take on average (the learner rests between them). @defaultValue 0.5 */
  maxDuty?: number;
  /** Where updates run: 'auto' = a worker thread when learner-worker.js exists. @defaultValue 'auto' */
  thread?: 'auto' | 'worker' | 'in-process';
  log?: (line: string) => void;
}

export interface OnlineLearnerStats {
  /** Updates run (critic-only warm-up ones included), over the store's whole life. */
  updates: number;
  /**
   * Weight versions this process published: to every agent, or to a canary's eAPs (a version that
   * waited for its canary counts when the canary starts; main.ts calls noteVersion then).
   */
  published: number;
  /** Transitions read from the ring, and of those learned from. */
  transitionsRead: number;
  transitionsUsed: number;
  /** Wall time of the last update (ms, inside the engine), its approximate KL and the mean reward of its batch. */
  lastUpdateMs: number;
  lastApproxKl: number;
  lastMeanReward: number;
  /** Updates that threw or produced non-finite weights (discarded; learning went on). */
  failedUpdates: number;
  /** Actor updates not published because their KL was past maxKl. */
  refusedUpdates: number;
  /** Transitions skipped for a reward or log-probability out of bounds. */
  transitionsOutOfBounds: number;
  /** Transitions the light actor decided (the actor switch): not learned from, the learner learns the main actor. */
  transitionsLight: number;
  /** Actor updates the weight gate rejected (not published). */
  gateRejected: number;
  /**
   * Actor updates not published because the weights were rolled back (by a canary or the admin) or
   * learning was frozen while they ran: they were learned from the version just rolled back.
   */
  staleUpdates: number;
}

/** Runs LearnerCore somewhere: a worker thread or this thread. */
interface Engine {
  readonly where: string;
  init(config: CoreConfig, actor: Float32Array[], critic: Float32Array[] | null): Promise<string>;
  setActor(actor: Float32Array[]): Promise<void>;
  update(batch: PackedBatch, criticOnly: boolean): Promise<CoreResult>;
  dispose(): void;
}

class InProcessEngine implements Engine {
  readonly where = 'in-process';
  private core: LearnerCore | null = null;
  async init(config: CoreConfig, actor: Float32Array[], critic: Float32Array[] | null): Promise<string> {
    this.core?.dispose();
    this.core = new LearnerCore(config, actor, critic);
    return 'current';
  }
  async setActor(actor: Float32Array[]): Promise<void> {
    this.core!.setActor(actor);
  }
  async update(batch: PackedBatch, criticOnly: boolean): Promise<CoreResult> {
    return this.core!.update(batch, criticOnly);
  }
  dispose(): void {
    this.core?.dispose();
    this.core = null;
  }
}

class WorkerEngine implements Engine {
  readonly where = 'worker thread';
  private readonly w: SerialWorker<WorkerRequest, WorkerReply>;
  private backend = '';

  constructor(file: string) {
    this.w = new SerialWorker(file, 'learner');
  }

  private async call(msg: WorkerRequest, transfer: ArrayBuffer[] = []): Promise<CoreResult | null> {
    const r = (await this.w.call(msg, transfer)) as { ok: true; result: CoreResult | null; backend?: string };
    if (r.backend) this.backend = r.backend;
    return r.result;
  }

  async init(config: CoreConfig, actor: Float32Array[], critic: Float32Array[] | null): Promise<string> {
    await this.call({ kind: 'init', config, actor, critic });
    return this.backend;
  }
  async setActor(actor: Float32Array[]): Promise<void> {
    await this.call({ kind: 'setActor', actor });
  }
  async update(batch: PackedBatch, criticOnly: boolean): Promise<CoreResult> {
    const transfer = [batch.obs, batch.mask, batch.action, batch.logProb, batch.reward, batch.eap].map((a) => a.buffer as ArrayBuffer);
    return (await this.call({ kind: 'update', batch, criticOnly }, transfer))!;
  }
  dispose(): void {
    this.w.dispose();
  }
}

export class OnlineLearner {
  readonly stats: OnlineLearnerStats = {
    updates: 0,
    published: 0,
    transitionsRead: 0,
    transitionsUsed: 0,
    lastUpdateMs: 0,
    lastApproxKl: 0,
    lastMeanReward: 0,
    failedUpdates: 0,
    refusedUpdates: 0,
    staleUpdates: 0,
    transitionsOutOfBounds: 0,
    transitionsLight: 0,
    gateRejected: 0,
  };
  private readonly o: Required<Omit<OnlineLearnerOptions, 'log' | 'onEvent' | 'maxKl' | 'gate' | 'publish'>> & {
    gate: OnlineLearnerOptions['gate'];
    publish: OnlineLearnerOptions['publish'];
    log: (line: string) => void;
    onEvent: OnlineLearnerOptions['onEvent'];
    maxKl: number;
  };
  private readonly shape: { numServices: number; numTargets: number; numEaps: number };
  private readonly obsDim: number;
  private readonly numActions: number;
  private readonly criticShapes: number[][];
  private readonly engine: Engine;
  private engineReady = false;
  private savedCritic: Float32Array[] | null = null;
  /** Shapes of the actor arrays (from the stored version), for publishing. */
  private shapes: number[][] = [];
  private version: number | null = null;
  private cursor = 0;
  private pending: Transition[] = [];
  private timer: NodeJS.Timeout | null = null;
  private busy = false;
  /** No update before this time (performance.now ms): the rest after the previous one. */
  private restUntil = 0;
  private disposed = false;
  private frozen = false;
  /** Decisions skipped because they were taken with probability 1. */
  private deterministic = 0;
  /** Whether the "agents do not explore" hint was logged. */
  private hinted = false;
  /** A stored version that is not an actor of this scenario (logged once). */
  private misfit: number | null = null;
  /** The actor must go back to the latest stored version before the next update (a canary rollback). */
  private reloadWanted = false;
  /** Decisions of versions below this one are not learned from (those of a rolled-back canary). */
  private minVersion = 0;

  constructor(options: OnlineLearnerOptions) {
    this.o = {
      batch: 2048,
      pollMs: 1000,
      criticWarmup: 1,
      maxLag: 2,
      lr: 2e-4,
      entropyCoef: 0.01,
      targetKl: 0.01,
      seed: 1,
      thread: 'auto',
      maxDuty: 0.5,
      log: () => undefined,
      ...Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)),
    } as unknown as OnlineLearner['o'];
    this.o.maxKl ??= 10 * this.o.targetKl;
    if (!(this.o.maxKl > 0)) throw new TypeError(`OnlineLearner: maxKl must be > 0, got ${this.o.maxKl}`);
    if (!(this.o.maxDuty > 0 && this.o.maxDuty <= 1))
      throw new TypeError(`OnlineLearner: maxDuty must be in (0, 1], got ${this.o.maxDuty}`);
    if (!(Number.isInteger(this.o.batch) && this.o.batch > 0))
      throw new TypeError(`OnlineLearner: batch must be a positive integer, got ${this.o.batch}`);
    const topo = topologyOf(this.o.scenario);
    this.shape = { numServices: topo.numServices, numTargets: topo.numNodes + 1, numEaps: topo.numEaps };
    this.obsDim = observationDim(this.shape);
    this.numActions = this.shape.numTargets;
    this.criticShapes = criticShapes(this.obsDim);
    const saved = this.o.store.learnerState();
    if (saved) {
      this.cursor = saved.cursor;
      this.stats.updates = saved.updates;
      this.savedCritic = unpackWeights(saved.critic).map((t) => t.data);
    } else {
      // a fresh learner learns from what arrives from now on, not from an old run's ring
      this.cursor = this.o.store.experienceSeqEnd;
    }
    const workerFile = path.join(__dirname, 'learner-worker.js');
    const useWorker = this.o.thread === 'worker' || (this.o.thread === 'auto' && fs.existsSync(workerFile));
    this.engine = useWorker ? new WorkerEngine(workerFile) : new InProcessEngine();
  }

  /** Current weight version the actor is at (null: no model yet, nothing to learn from). */
  get weightVersion(): number | null {
    return this.version;
  }

  /** Where updates run ('worker thread' or 'in-process'). */
  get where(): string {
    return this.engine.where;
  }

  /** Loads the starting model (if one is stored) and starts polling. */
  async start(): Promise<void> {
    try {
      await this.loadActor();
    } catch (e) {
      if (this.disposed) return; // closed while the worker was still loading
      throw e;
    }
    if (this.timer || this.disposed) return;
    this.timer = setInterval(() => {
      this.poll().catch((e: Error) => {
        if (!this.disposed) this.o.log(`learner: update failed: ${e.message}`);
      });
    }, this.o.pollMs);
    this.timer.unref();
  }

  /**
   * After a canary rollback: the actor goes back to the latest stored version (`restored`, the good
   * weights again) and the pending decisions are dropped before the next update; from then on it
   * learns only from decisions of `restored` and later (not from the rolled-back version's).
   */
  reload(restored: number): void {
    this.reloadWanted = true;
    this.minVersion = Math.max(this.minVersion, restored);
  }

  /**
   * The admin froze online learning (`kais weights --freeze`): experience is still read (and counted)
   * but no update runs and no version is published until `unfreeze`.
   */
  freeze(): void {
    this.frozen = true;
  }

  /** Learning again, from `current` (the version every agent holds now): decisions before it are not learned from. */
  unfreeze(current: number | null): void {
    this.frozen = false;
    if (current !== null) this.reload(current);
  }

  /** An update that ends now must not be published: a rollback (reload pending) or a freeze came while it ran. */
  private overtaken(): boolean {
    return this.reloadWanted || this.frozen;
  }

  /** Whether the admin froze learning. */
  get isFrozen(): boolean {
    return this.frozen;
  }

  /** A version of this learner's that waited behind a canary has started as `version`: decisions of it are learned from. */
  noteVersion(version: number): void {
    // a learned version that waited (behind a canary, or for its baseline) is published when its canary starts
    if (this.version !== null && version > this.version) {
      this.version = version;
      this.stats.published++;
    }
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  dispose(): void {
    this.stop();
    this.disposed = true;
    this.engine.dispose();
  }

  /**
   * Reads new experience and runs at most one update when enough is pending; resolves to whether
   * an update ran. Called by the timer; tests call it directly.
   */
  async poll(): Promise<boolean> {
    if (this.busy || this.disposed) return false;
    this.busy = true;
    try {
      if (this.reloadWanted) {
        this.reloadWanted = false;
        this.pending.length = 0;
        if (this.engineReady) await this.loadActor();
      }
      if (this.version === null) await this.loadActor();
      this.read();
      if (this.frozen) {
        // frozen by the admin: nothing pending is learned from, now or after the thaw
        this.pending.length = 0;
        return false;
      }
      if (!this.hinted && this.deterministic >= this.o.batch && this.pending.length === 0 && this.stats.transitionsUsed === 0) {
        this.hinted = true;
        this.o.log(
          `learner: ${this.deterministic} actor decisions and none explored: agents must explore (kais agent --explore <share>) for the orchestrator to learn`,
        );
      }
      if (this.pending.length < this.o.batch || !this.engineReady || performance.now() < this.restUntil) return false;
      // the newest batch: older decisions were made by an older policy
      const batch = this.pending.splice(this.pending.length - this.o.batch, this.o.batch);
      this.pending.length = 0;
      const t0 = performance.now();
      try {
        await this.update(batch);
      } catch (e) {
        if (this.disposed) return false;
        await this.discard(`update failed: ${(e as Error).message}`);
      }
      const took = performance.now() - t0;
      this.restUntil = performance.now() + took * (1 / this.o.maxDuty - 1);
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
      // keep only the newest experience when the learner falls behind
      if (this.pending.length > 2 * this.o.batch) this.pending.splice(0, this.pending.length - this.o.batch);
    }
  }

  private eligible(t: Transition): boolean {
    if (this.version === null || t.weightVersion === null) return false;
    if (t.actor === 'light') {
      // the light actor's decisions are off-policy for the main actor, the one learned
      this.stats.transitionsLight++;
      return false;
    }
    if (t.weightVersion < this.version - this.o.maxLag || t.weightVersion > this.version || t.weightVersion < this.minVersion) return false;
    if (t.obs.length !== this.obsDim || t.mask.length !== this.numActions || !Number.isFinite(t.logProb) || t.logProb > 0) return false;
    // what goes into the Float32Array batch must stay finite there (1e300 is Infinity in float32)
    if (!(t.reward >= 0 && t.reward <= 1) || !Number.isFinite(Math.fround(t.logProb))) {
      this.stats.transitionsOutOfBounds++;
      return false;
    }
    if (t.logProb === 0) {
      // taken with probability 1 (not explored, or a single valid target): no policy gradient
      this.deterministic++;
      return false;
    }
    return true;
  }

  /** Actor from the latest stored weights (none yet: stays null until a version exists). */
  private async loadActor(): Promise<void> {
    const body = this.o.store.latestModel();
    if (!body || body.version === this.misfit || this.disposed) return;
    const tensors = unpackWeights(body);
    // the learner trains the default widths (ACTOR_HIDDEN), so those are required too
    const fits = actorFit(
      tensors.map((t) => t.shape),
      { obsDim: this.obsDim, numActions: this.numActions, hidden: ACTOR_HIDDEN, scorerInputs: targetBlockOf(this.shape).stride },
    );
    if (!fits) {
      this.misfit = body.version;
      this.o.log(
        `learner: stored weights v${body.version} are not a ${this.o.scenario.name} actor (shapes ${JSON.stringify(tensors.map((t) => t.shape))}); not learning`,
      );
      return;
    }
    const arrays = tensors.map((t) => t.data);
    if (!this.engineReady) {
      const config: CoreConfig = {
        obsDim: this.obsDim,
        numActions: this.numActions,
        head: this.o.head,
        targetBlock: fits.targetScorer ? targetBlockOf(this.shape) : null,
        lr: this.o.lr,
        entropyCoef: this.o.entropyCoef,
        targetKl: this.o.targetKl,
        // CPU: the learner shares the machine with the hub (and, under kais up, the agents); an
        // update on 2,048 decisions with 2 epochs is ~3-4 s of one core on wasm (measured), so
        // the learner keeps up with ~225 decisions/s while using at most about half a core
        warmupCriticSteps: 4,
        epochs: 2,
        seed: this.o.seed,
      };
      const backend = await this.engine.init(config, arrays, this.savedCritic);
      this.engineReady = true;
      this.o.log(`learner: ${this.engine.where}, tfjs backend ${backend}`);
    } else {
      await this.engine.setActor(arrays);
    }
    this.shapes = tensors.map((t) => t.shape);
    this.version = body.version;
  }

  private async update(batch: Transition[]): Promise<void> {
    const n = batch.length;
    const D = this.obsDim;
    const A = this.numActions;
    const packed: PackedBatch = {
      n,
      obs: new Float32Array(n * D),
      mask: new Uint8Array(n * A),
      action: new Int32Array(n),
      logProb: new Float32Array(n),
      reward: new Float32Array(n),
      eap: new Int32Array(n),
    };
    let rewardSum = 0;
    batch.forEach((t, k) => {
      packed.obs.set(t.obs, k * D);
      packed.mask.set(t.mask, k * A);
      packed.action[k] = t.action;
      packed.logProb[k] = t.logProb;
      packed.reward[k] = t.reward;
      packed.eap[k] = t.eap;
      rewardSum += t.reward;
    });
    const warm = this.stats.updates < this.o.criticWarmup;
    const res = await this.engine.update(packed, warm);
    if (this.disposed) return;
    if (!allFinite(res.critic) || (res.actor !== null && !allFinite(res.actor)) || !Number.isFinite(res.approxKl)) {
      // a diverged update must never reach production nor the saved state; the one check of a
      // published actor's values before the agents' codecs (shared/protocol/weights.ts)
      await this.discard('update produced non-finite weights');
      return;
    }
    this.stats.updates++;
    this.stats.transitionsUsed += n;
    this.stats.lastApproxKl = res.approxKl;
    this.stats.lastMeanReward = rewardSum / n;
    this.stats.lastUpdateMs = res.ms;
    if (res.actor && this.overtaken()) {
      // rolled back or frozen while the update ran: its actor came from what the admin or a canary just
      // took back (the next poll reloads the restored version; a thaw reloads the current one)
      this.stats.staleUpdates++;
      this.o.log(
        `learner: update ${this.stats.updates} not published: ${this.frozen ? 'learning was frozen' : 'the weights were rolled back'} while it ran`,
      );
    } else if (res.actor && res.approxKl > this.o.maxKl) {
      this.stats.refusedUpdates++;
      const message = `update ${this.stats.updates} not published: approximate KL ${res.approxKl.toFixed(4)} is past ${this.o.maxKl} (target ${this.o.targetKl}); actor back to weights v${this.version}`;
      this.o.log(`learner: ${message}`);
      this.o.onEvent?.({ kind: 'kl-refused', message });
      await this.loadActor();
    } else if (res.actor) await this.publish(res.actor);
    const critic = res.critic.map((data, i) => ({ shape: this.criticShapes[i], data }));
    this.o.store.putLearnerState({ cursor: this.cursor, updates: this.stats.updates, critic: packWeights(critic, this.stats.updates) });
    this.o.log(
      `learner: update ${this.stats.updates}${warm ? ' (critic warm-up)' : ` -> weights v${this.version}`} on ${n} transitions, ` +
        `mean reward ${(rewardSum / n).toFixed(3)}, kl ${res.approxKl.toFixed(4)}, ${res.ms.toFixed(0)} ms, tensors ${res.tensors}`,
    );
  }

  /**
   * Throws away what the engine holds after a failed update: a fresh engine from the stored actor
   * version and the last saved critic (Adam's moments start again), so the next batch learns as
   * if the failed one never came.
   */
  private async discard(why: string): Promise<void> {
    this.stats.failedUpdates++;
    const message = `${why}; discarded, learning goes on from weights v${this.version ?? 'none'} and the last saved critic`;
    this.o.log(`learner: ${message}`);
    this.o.onEvent?.({ kind: 'update-failed', message });
    try {
      const saved = this.o.store.learnerState();
      this.savedCritic = saved ? unpackWeights(saved.critic).map((t) => t.data) : null;
      this.engineReady = false;
      this.version = null;
      await this.loadActor();
    } catch (e) {
      // the next poll tries again (version null: loadActor first)
      this.o.log(`learner: could not reset after a failed update (${(e as Error).message}); retrying at the next poll`);
    }
  }

  private async publish(arrays: Float32Array[]): Promise<void> {
    if (this.o.gate) {
      const stored = this.o.store.latestModel();
      const current = stored
        ? {
            version: stored.version,
            head: (stored.head ?? this.o.head) as HeadActivation,
            arrays: unpackWeights(stored).map((t) => t.data),
          }
        : null;
      const verdict = await this.o.gate.check(
        { version: (stored?.version ?? 0) + 1, head: this.o.head, arrays: arrays.map((a) => a.slice()) },
        current,
      );
      if (this.disposed) return;
      if (this.overtaken()) {
        this.stats.staleUpdates++;
        this.o.log(
          `learner: update ${this.stats.updates} not published: the weights were rolled back or learning frozen during its gate check`,
        );
        return;
      }
      if (!verdict.pass) {
        this.stats.gateRejected++;
        this.o.log(
          `learner: update ${this.stats.updates} not published: gate rejected it (${verdict.reason}); actor back to weights v${this.version}`,
        );
        await this.loadActor();
        return;
      }
    }
    const tensors: WeightTensor[] = arrays.map((data, i) => ({ shape: this.shapes[i], data }));
    const body = this.o.publish ? this.o.publish(tensors, this.o.head) : this.o.registry.publishWeights(tensors, this.o.head);
    if (body === null) return; // waits behind a running canary or for its baseline; counted when its canary starts (noteVersion)
    // a canary started at once has told noteVersion already
    if (body.version !== this.version) {
      this.version = body.version;
      this.stats.published++;
    }
  }
}

function allFinite(arrays: readonly Float32Array[]): boolean {
  for (const a of arrays) {
    for (let i = 0; i < a.length; i++) if (!Number.isFinite(a[i])) return false;
  }
  return true;
}
