/**
 * `cmmac`: the learned dispatcher as a DispatchPolicy (ALGORITHMS.md section 2). All items of a
 * decision round (one per live eAP) go through ONE forward pass of the actor; the simulator then
 * applies them and builds the next round from the updated view, so an eAP's later decisions in a
 * slot see its earlier ones.
 *
 * Modes: 'sample' draws a ~ pi(.|o) from a seeded Rng (training; also allowed in production),
 * 'argmax' takes the most probable valid target (production default). With a recorder attached,
 * every decision is reported as (obs, mask, action, log pi(a|o)) for the learner.
 */
import type { ClusterView, DispatchItem, DispatchPolicy } from '../shared/policy';
import { Rng } from '../shared/rng';
import { ActorF32, ACTOR_HIDDEN, type HeadActivation } from '../shared/nets/actor-f32';
import { argmaxMasked, maskedPolicyRow, sampleMasked } from '../shared/nets/masked-f32';
import { ObservationBuilder, targetBlockOf, type ObservationShape } from './observation';

export type ActMode = 'sample' | 'argmax';

/** Receives every decision; `obs` and `mask` are views valid only during the call (copy them). */
export interface DecisionRecorder {
  /** `light`: the light actor decided (setLightWeights), not the main one. */
  record(obs: Float32Array, mask: Uint8Array, action: number, logProb: number, eap: number, light?: boolean): void;
}

export interface CmmacOptions {
  shape: ObservationShape;
  queueCapPerReplica: number;
  /** Actor weights [W1, b1, ..., Wh, bh] (kernels [in, out]), optionally followed by the shared target scorer's 4 arrays (shared/nets/actor.ts). */
  weights: readonly Float32Array[];
  /** @defaultValue 0 */
  version?: number;
  /** @defaultValue 'argmax' */
  mode?: ActMode;
  /**
   * Sampling stream. Given: used as is and never re-seeded (training keeps one stream across
   * episodes and checkpoints its state). Not given: derived from the episode seed at reset().
   */
  rng?: Rng;
  hidden?: readonly number[];
  /** Actor head, as trained. @defaultValue 'relu1' */
  head?: HeadActivation;
}

export class CmmacDispatch implements DispatchPolicy {
  readonly name = 'cmmac';
  readonly observations: ObservationBuilder;
  readonly numActions: number;
  mode: ActMode;
  recorder: DecisionRecorder | null = null;
  private actor: ActorF32;
  /** The light-load actor (the actor switch), used while the view's actorSlot() is `light`; null: none. */
  private lightActor: ActorF32 | null = null;
  private _version: number;
  private rng: Rng;
  private readonly ownRng: boolean;
  private readonly hidden: readonly number[];
  readonly head: HeadActivation;
  private obsBuf: Float32Array;
  private readonly pi: Float32Array;

  constructor(o: CmmacOptions) {
    this.observations = new ObservationBuilder(o.shape, o.queueCapPerReplica);
    this.numActions = o.shape.numTargets;
    this.hidden = o.hidden ?? ACTOR_HIDDEN;
    this.head = o.head ?? 'relu1';
    this.actor = new ActorF32(this.observations.dim, this.numActions, o.weights, this.hidden, this.head, targetBlockOf(o.shape));
    this._version = o.version ?? 0;
    this.mode = o.mode ?? 'argmax';
    this.ownRng = o.rng === undefined;
    this.rng = o.rng ?? new Rng(0);
    this.obsBuf = new Float32Array(8 * this.observations.dim);
    this.pi = new Float32Array(this.numActions);
  }

  get version(): number {
    return this._version;
  }

  /** Swap in new actor weights (e.g. from a `weights` frame or after a learner update). */
  setWeights(version: number, arrays: readonly Float32Array[]): void {
    this.actor = new ActorF32(
      this.observations.dim,
      this.numActions,
      arrays,
      this.hidden,
      this.head,
      targetBlockOf(this.observations.shape),
    );
    this._version = version;
  }

  /**
   * Hold a light-load actor beside the main one (the actor switch: a weights body's `light` actor,
   * which decides by argmax, whatever the mode, while the view's actorSlot() is `light`: decisions
   * are drawn (sample mode) only where the main actor decides),
   * or `kais eval`'s for a GPG model that names one), or none (null). Same observation and targets
   * as the main actor; its own head.
   */
  setLightWeights(arrays: readonly Float32Array[] | null, head: HeadActivation = this.head, hidden: readonly number[] = this.hidden): void {
    this.lightActor =
      arrays === null
        ? null
        : new ActorF32(this.observations.dim, this.numActions, arrays, hidden, head, targetBlockOf(this.observations.shape));
  }

  /** Hold another policy's main actor as this one's light actor (kais eval: the GPG model's light actor file, loaded as a policy). */
  setLightFrom(other: CmmacDispatch): void {
    if (other.observations.dim !== this.observations.dim || other.numActions !== this.numActions)
      throw new TypeError(
        `the light actor takes ${other.observations.dim} inputs and ${other.numActions} targets, the main one ${this.observations.dim} and ${this.numActions}`,
      );
    this.lightActor = other.actor;
  }

  /** Whether a light actor is held (setLightWeights). */
  get hasLight(): boolean {
    return this.lightActor !== null;
  }

  reset(seed: number): void {
    if (this.ownRng) this.rng = Rng.derive(seed, 'cmmac');
  }

  decide(item: DispatchItem, view: ClusterView): number {
    this.decideBatch([item], view);
    return item.action;
  }

  decideBatch(items: DispatchItem[], view: ClusterView): void {
    const n = items.length;
    if (n === 0) return;
    const D = this.observations.dim;
    const A = this.numActions;
    if (this.obsBuf.length < n * D) this.obsBuf = new Float32Array(Math.max(n, 2 * (this.obsBuf.length / D)) * D);
    const obs = this.obsBuf;
    for (let i = 0; i < n; i++) this.observations.build(items[i], view, obs, i * D);
    // the actor switch: the light actor while the orchestration names it (the view's last placement),
    // always by argmax: sampling (an agent's explored decisions, what the online learner learns the
    // main actor from) happens only where the main actor decides
    const light = this.lightActor !== null && view.actorSlot?.() === 'light';
    const draw = this.mode === 'sample' && !light;
    const q = (light ? this.lightActor! : this.actor).scores(obs, n); // [n, A]
    for (let i = 0; i < n; i++) {
      const item = items[i];
      const sum = maskedPolicyRow(q, i, item.mask, this.pi);
      const a = draw ? sampleMasked(this.pi, this.rng) : argmaxMasked(this.pi);
      item.action = a;
      if (this.recorder) {
        const logProb = Math.log(q[i * A + a]) - Math.log(sum);
        this.recorder.record(obs.subarray(i * D, (i + 1) * D), item.mask, a, logProb, item.eap, light);
      }
    }
  }

  /** The Rng state (training checkpoints it so a resumed run samples the same actions). */
  rngState(): number[] {
    return this.rng.getState();
  }
}
