/**
 * The tfjs half of the online learner (orchestrator/learner.ts has the whole story): the actor and
 * the live critic V(o), and one update on a packed batch of transitions. It knows nothing of the
 * store or the hub, so it runs the same in a worker thread (learner-worker.ts, what the
 * orchestrator uses: an update never blocks the hub's event loop) and in-process (tests).
 */
import * as tf from '@tensorflow/tfjs';
import { ActorNet, type HeadActivation, type TargetBlock } from '../../shared/nets/actor';
import { ValueNet } from '../../shared/nets/value';
import { Rng } from '../../shared/rng';
import { CmmacLearner } from './learner';
import { RolloutBuffer } from './buffer';

export interface CoreConfig {
  obsDim: number;
  numActions: number;
  head: HeadActivation;
  /** The actor's shared target scorer block, when its weights have one. */
  targetBlock: TargetBlock | null;
  lr: number;
  /** Entropy bonus beta_H. */
  entropyCoef: number;
  targetKl: number;
  /** Critic steps of a warm-up (critic-only) update. */
  warmupCriticSteps: number;
  /** PPO passes over a batch (each costs a forward and backward pass of the actor on it). */
  epochs: number;
  seed: number;
}

/** n transitions, row-major, as typed arrays (transferable to a worker without copying). */
export interface PackedBatch {
  n: number;
  obs: Float32Array;
  mask: Uint8Array;
  action: Int32Array;
  logProb: Float32Array;
  reward: Float32Array;
  eap: Int32Array;
}

export interface CoreResult {
  /** New actor arrays (getWeights order), null after a critic-only update. */
  actor: Float32Array[] | null;
  critic: Float32Array[];
  approxKl: number;
  epochsDone: number;
  ms: number;
  /** Live tfjs tensors after the update (flat across updates: no leak). */
  tensors: number;
}

export class LearnerCore {
  private actor: ActorNet;
  private readonly critic: ValueNet;
  private learner: CmmacLearner;
  private readonly rng: Rng;

  constructor(
    private readonly c: CoreConfig,
    actor: readonly Float32Array[],
    critic: readonly Float32Array[] | null,
  ) {
    this.rng = Rng.derive(c.seed, 'orchestrator/learner');
    this.critic = new ValueNet(c.obsDim, this.rng);
    if (critic) this.critic.setWeights(critic);
    this.actor = this.makeActor(actor);
    this.learner = new CmmacLearner(this.actor, this.critic, this.rng, { lr: c.lr, entropyCoef: c.entropyCoef });
  }

  /** Replaces the actor (e.g. a version published by someone else); Adam starts fresh. */
  setActor(arrays: readonly Float32Array[]): void {
    this.learner.dispose();
    this.actor.dispose();
    this.actor = this.makeActor(arrays);
    this.learner = new CmmacLearner(this.actor, this.critic, this.rng, { lr: this.c.lr, entropyCoef: this.c.entropyCoef });
  }

  update(b: PackedBatch, criticOnly: boolean): CoreResult {
    const t0 = performance.now();
    const { obsDim: D, numActions: A } = this.c;
    // one "slot" per decision whose state is the decision's observation: the live critic is V(o)
    const buf = new RolloutBuffer(D, A, D, b.n);
    for (let k = 0; k < b.n; k++) {
      const obs = b.obs.subarray(k * D, (k + 1) * D);
      buf.beginSlot(obs);
      buf.record(obs, b.mask.subarray(k * A, (k + 1) * A), b.action[k], b.logProb[k], b.eap[k]);
    }
    buf.finish(new Float32Array(D));
    let approxKl = 0;
    let epochsDone = 0;
    if (criticOnly) {
      this.learner.fitCriticRequests(buf, b.reward, this.c.warmupCriticSteps);
    } else {
      const st = this.learner.updateRequests(buf, b.reward, { targetKl: this.c.targetKl, epochs: this.c.epochs });
      approxKl = st.approxKl;
      epochsDone = st.epochsDone;
    }
    return {
      actor: criticOnly ? null : this.actor.getWeights().arrays,
      critic: this.critic.getWeights().arrays,
      approxKl,
      epochsDone,
      ms: performance.now() - t0,
      tensors: tf.memory().numTensors,
    };
  }

  dispose(): void {
    this.learner.dispose();
    this.actor.dispose();
    this.critic.dispose();
  }

  private makeActor(arrays: readonly Float32Array[]): ActorNet {
    const a = new ActorNet(this.c.obsDim, this.c.numActions, this.rng, undefined, this.c.head, this.c.targetBlock);
    a.setWeights(arrays);
    return a;
  }
}
