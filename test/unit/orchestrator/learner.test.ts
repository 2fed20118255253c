/**
 * The online learner on a real Store (SQLite file) and a real hub on loopback: experience batches
 * go into the ring as the orchestrator would store them, the learner turns them into new weight
 * versions, and what it learns is what the rewards say.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import type { Transition } from '../../../shared/protocol/envelope';
import { unpackWeights } from '../../../shared/protocol/weights';
import { ActorF32, actorShapes, initActorWeights } from '../../../shared/nets/actor';
import { maskedPolicyRow } from '../../../shared/nets/masked';
import { Rng } from '../../../shared/rng';
import { loadScenario, topologyOf } from '../../../shared/scenario';
import { observationDim } from '../../../shared/spaces';
import { OnlineLearner } from '../../../orchestrator/learner';
import { LearnerCore } from '../../../critic/cmmac/online-core';
import { ModelRegistry, startHub } from '../../../orchestrator/registry';
import { Store } from '../../../orchestrator/store';
import type { Hub } from '../../../orchestrator/hub';

const scenario = loadScenario('tiny');
const topo = topologyOf(scenario);
const A = topo.numNodes + 1;
const D = observationDim({ numServices: topo.numServices, numTargets: A, numEaps: topo.numEaps });

/** Transitions acted by sampling from `weights`; reward 1 only for target 0 (a "best node"). */
function experience(weights: Float32Array[], version: number, n: number, rng: Rng): Transition[] {
  const actor = new ActorF32(D, A, weights, undefined, 'relu1');
  const pi = new Float32Array(A);
  const mask = new Uint8Array(A).fill(1);
  const out: Transition[] = [];
  for (let k = 0; k < n; k++) {
    const obs = new Float32Array(D);
    for (let i = 0; i < D; i++) obs[i] = rng.next();
    maskedPolicyRow(actor.scores(obs, 1), 0, mask, pi);
    let u = rng.next();
    let a = 0;
    while (a < A - 1 && u >= pi[a]) u -= pi[a++];
    out.push({
      eap: 0,
      slot: k,
      service: 0,
      obs,
      mask,
      action: a,
      logProb: Math.log(pi[a]),
      reward: a === 0 ? 1 : 0,
      latencyMs: 10,
      metDeadline: a === 0,
      done: false,
      weightVersion: version,
    });
  }
  return out;
}

function probOfTarget0(weights: Float32Array[], rng: Rng): number {
  const actor = new ActorF32(D, A, weights, undefined, 'relu1');
  const pi = new Float32Array(A);
  const mask = new Uint8Array(A).fill(1);
  let s = 0;
  for (let k = 0; k < 200; k++) {
    const obs = new Float32Array(D);
    for (let i = 0; i < D; i++) obs[i] = rng.next();
    maskedPolicyRow(actor.scores(obs, 1), 0, mask, pi);
    s += pi[0];
  }
  return s / 200;
}

describe('OnlineLearner', () => {
  let dir: string;
  let store: Store;
  let hub: Hub;
  let registry: ModelRegistry;
  beforeEach(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kais-learner-'));
    store = Store.open(path.join(dir, 'o.db'));
    hub = await startHub(store, { port: 0 });
    registry = new ModelRegistry(store, hub);
  });
  afterEach(async () => {
    registry.dispose();
    await hub.close();
    store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const latest = () => unpackWeights(store.latestModel()!).map((t) => t.data);
  /** A learner on this test's store and registry, updating in this thread at full duty, with `o` on top. */
  const learnerWith = (o: Partial<ConstructorParameters<typeof OnlineLearner>[0]>) =>
    new OnlineLearner({ scenario, store, registry, head: 'relu1', thread: 'in-process', maxDuty: 1, ...o });
  /** Seeded random actor weights published as v1; returns them. */
  const publishV1 = (): Float32Array[] => {
    const shapes = actorShapes(D, A);
    const w = initActorWeights(D, A, 5);
    registry.publishWeights(w.map((data, i) => ({ shape: shapes[i], data })));
    return w;
  };

  it('turns experience into new weight versions that follow the rewards, without leaking tensors', async () => {
    const shapes = actorShapes(D, A);
    registry.publishWeights(initActorWeights(D, A, 5).map((data, i) => ({ shape: shapes[i], data })));
    const learner = learnerWith({ batch: 128, criticWarmup: 1, lr: 2e-3, targetKl: 0.05 });
    const rng = new Rng(11);
    const before = probOfTarget0(latest(), new Rng(3));
    // nothing pending: no update
    expect(await learner.poll()).toBe(false);
    let tensors = -1;
    for (let u = 0; u < 5; u++) {
      const v = store.latestModelVersion()!;
      store.appendExperience({ eap: 0, transitions: experience(latest(), v, 128, rng) });
      expect(await learner.poll()).toBe(true);
      if (u === 2) tensors = tf.memory().numTensors;
    }
    // update 1 fits the critic only, the 4 others each published a version
    expect(learner.stats.updates).toBe(5);
    expect(learner.stats.published).toBe(4);
    expect(store.latestModelVersion()).toBe(5);
    expect(learner.weightVersion).toBe(5);
    expect(tf.memory().numTensors).toBe(tensors);
    const after = probOfTarget0(latest(), new Rng(3));
    expect(after).toBeGreaterThan(before + 0.05);
    learner.dispose();
  });

  it("skips the fallback heuristic, deterministic decisions, stale versions, misshapen transitions and the light actor's decisions", async () => {
    const shapes = actorShapes(D, A);
    const w = initActorWeights(D, A, 5);
    for (let v = 1; v <= 4; v++) registry.publishWeights(w.map((data, i) => ({ shape: shapes[i], data })));
    const learner = learnerWith({ batch: 64, maxLag: 2 });
    const rng = new Rng(1);
    const good = experience(w, 4, 10, rng);
    const fallback = experience(w, 4, 10, rng).map((t) => ({ ...t, weightVersion: null }));
    const stale = experience(w, 1, 10, rng); // 4 - 1 > maxLag
    const short = experience(w, 4, 10, rng).map((t) => ({ ...t, obs: t.obs.subarray(0, D - 1) }));
    const argmax = experience(w, 4, 10, rng).map((t) => ({ ...t, logProb: 0 })); // an argmax decision's (not explored)
    // the light actor's decisions (the actor switch): off-policy for the main actor, the one learned
    const light = experience(w, 4, 10, rng).map((t) => ({ ...t, actor: 'light' as const }));
    store.appendExperience({ eap: 0, transitions: [...good, ...fallback, ...stale, ...short, ...argmax, ...light] });
    expect(await learner.poll()).toBe(false);
    expect(learner.stats.transitionsRead).toBe(60);
    expect(learner.stats.transitionsLight).toBe(10);
    // only the 10 good ones are pending; 54 more make a batch
    store.appendExperience({ eap: 0, transitions: experience(w, 3, 54, rng) });
    expect(await learner.poll()).toBe(true);
    expect(learner.stats.transitionsUsed).toBe(64);
    learner.dispose();
    // agents that never explore: one line says why nothing is learned
    const lines: string[] = [];
    const idle = learnerWith({ batch: 16, log: (l) => lines.push(l) });
    await idle.start();
    idle.stop();
    store.appendExperience({ eap: 0, transitions: experience(w, 4, 40, rng).map((t) => ({ ...t, logProb: 0 })) });
    expect(await idle.poll()).toBe(false);
    expect(await idle.poll()).toBe(false);
    expect(lines.filter((l) => /40 actor decisions and none explored/.test(l))).toHaveLength(1);
    idle.dispose();
  });

  it('counts a learned version once it reaches agents: at once, or when the canary it waited for starts', async () => {
    const shapes = actorShapes(D, A);
    const w = initActorWeights(D, A, 6);
    registry.publishWeights(w.map((data, i) => ({ shape: shapes[i], data }))); // v1
    // a publish path as the canary's: the first proposal starts at once (its start tells the learner first,
    // as main.ts's onStarted does), the second waits (null) and starts later
    let proposals = 0;
    let learnerRef: OnlineLearner | null = null;
    const learner = learnerWith({
      batch: 64,
      criticWarmup: 0,
      publish: (tensors, head) => {
        proposals++;
        if (proposals > 1) return null;
        const body = registry.publishWeights(tensors, head);
        learnerRef!.noteVersion(body.version);
        return body;
      },
    });
    learnerRef = learner;
    await learner.start();
    learner.stop();
    const rng = new Rng(12);
    for (let u = 0; u < 2; u++) {
      store.appendExperience({ eap: 0, transitions: experience(w, store.latestModelVersion()!, 64, rng) });
      expect(await learner.poll()).toBe(true);
    }
    expect(proposals).toBe(2);
    expect(learner.stats.published).toBe(1); // started at once, counted once
    const waited = registry.publishWeights(w.map((data, i) => ({ shape: shapes[i], data }))); // its canary starts
    learner.noteVersion(waited.version);
    expect(learner.stats.published).toBe(2);
    expect(learner.weightVersion).toBe(waited.version);
    learner.dispose();
  });

  it('after a canary rollback, goes back to the restored weights and learns nothing from the rolled-back version', async () => {
    const w = publishV1(); // the good one
    const learner = learnerWith({ batch: 32, maxLag: 2 });
    await learner.start();
    learner.stop();
    const bad = w.map((a) => a.map((x) => -x));
    const shapes = actorShapes(D, A);
    registry.publishWeights(bad.map((data, i) => ({ shape: shapes[i], data }))); // v2, the canary
    learner.noteVersion(2);
    registry.restore(1); // v3 = v1's weights
    learner.reload(3);
    const rng = new Rng(4);
    store.appendExperience({ eap: 0, transitions: experience(bad, 2, 40, rng) });
    expect(await learner.poll()).toBe(false); // v2's 40 decisions are skipped
    expect(learner.weightVersion).toBe(3);
    store.appendExperience({ eap: 0, transitions: experience(w, 3, 32, rng) });
    expect(await learner.poll()).toBe(true);
    expect(learner.stats.transitionsUsed).toBe(32);
    learner.dispose();
  });

  it('frozen by the admin, reads experience but runs no update; unfrozen, learns from the current version on', async () => {
    const w = publishV1();
    const learner = learnerWith({ batch: 32, maxLag: 2 });
    await learner.start();
    learner.stop();
    learner.freeze();
    expect(learner.isFrozen).toBe(true);
    const rng = new Rng(6);
    store.appendExperience({ eap: 0, transitions: experience(w, 1, 64, rng) });
    expect(await learner.poll()).toBe(false); // a batch and more pending, and no update
    expect(learner.stats.transitionsRead).toBe(64);
    expect(learner.stats.updates).toBe(0);
    learner.unfreeze(1);
    expect(learner.isFrozen).toBe(false);
    // the 64 decisions read while frozen are gone: 31 more make no batch of 32, one more does
    store.appendExperience({ eap: 0, transitions: experience(w, 1, 31, rng) });
    expect(await learner.poll()).toBe(false);
    store.appendExperience({ eap: 0, transitions: experience(w, 1, 1, rng) });
    expect(await learner.poll()).toBe(true);
    expect(learner.stats.updates).toBe(1);
    expect(learner.stats.transitionsUsed).toBe(32);
    learner.dispose();
  });

  it('does not publish an update that a rollback or a freeze overtook while it ran', async () => {
    const w = publishV1();
    const learner = learnerWith({ batch: 32, criticWarmup: 0, targetKl: 1 });
    await learner.start();
    learner.stop();
    const rng = new Rng(8);
    store.appendExperience({ eap: 0, transitions: experience(w, 1, 32, rng) });
    // the update is under way when v1 is rolled back (v2 = v1's weights)
    const running = learner.poll();
    registry.restore(1);
    learner.reload(2);
    expect(await running).toBe(true);
    expect(learner.stats.updates).toBe(1);
    expect(learner.stats.staleUpdates).toBe(1);
    expect(learner.stats.published).toBe(0);
    expect(store.latestModelVersion()).toBe(2);
    // the next poll reloads v2 (nothing pending); then frozen while an update runs: the same
    expect(await learner.poll()).toBe(false);
    expect(learner.weightVersion).toBe(2);
    store.appendExperience({ eap: 0, transitions: experience(w, 2, 32, rng) });
    const again = learner.poll();
    learner.freeze();
    expect(await again).toBe(true);
    expect(learner.stats.staleUpdates).toBe(2);
    expect(store.latestModelVersion()).toBe(2);
    // untouched, an update publishes
    learner.unfreeze(2);
    store.appendExperience({ eap: 0, transitions: experience(w, 2, 32, rng) });
    expect(await learner.poll()).toBe(true);
    expect(store.latestModelVersion()).toBe(3);
    learner.dispose();
  });

  it('waits for a model, and after a restart resumes its cursor, update count and critic', async () => {
    const rng = new Rng(2);
    const first = learnerWith({ batch: 32 });
    await first.start();
    first.stop();
    expect(first.weightVersion).toBeNull();
    const shapes = actorShapes(D, A);
    const w = initActorWeights(D, A, 9);
    // experience before any model: the heuristic's, nothing to learn
    store.appendExperience({ eap: 0, transitions: experience(w, 1, 32, rng).map((t) => ({ ...t, weightVersion: null })) });
    expect(await first.poll()).toBe(false);
    registry.publishWeights(w.map((data, i) => ({ shape: shapes[i], data })));
    store.appendExperience({ eap: 0, transitions: experience(w, 1, 32, rng) });
    expect(await first.poll()).toBe(true); // picked up v1, warm-up update of the critic
    store.appendExperience({ eap: 0, transitions: experience(w, 1, 32, rng) });
    expect(await first.poll()).toBe(true);
    expect(store.latestModelVersion()).toBe(2);
    const saved = store.learnerState()!;
    expect(saved.updates).toBe(2);
    expect(saved.cursor).toBe(3);
    first.dispose();

    // "restart": a new learner on the same store continues where the first stopped
    const second = learnerWith({ batch: 32 });
    await second.start();
    second.stop();
    expect(second.weightVersion).toBe(2);
    expect(second.stats.updates).toBe(2);
    expect(await second.poll()).toBe(false); // nothing new: the old batches are not learned twice
    store.appendExperience({ eap: 0, transitions: experience(latest(), 2, 32, rng) });
    expect(await second.poll()).toBe(true); // no second warm-up: straight to a new version
    expect(store.latestModelVersion()).toBe(3);
    second.dispose();
  });

  it('rests after an update so that updates take at most maxDuty of a core, and learns from the newest decisions', async () => {
    const w = publishV1();
    const learner = learnerWith({ batch: 32, maxDuty: 0.001 });
    const rng = new Rng(4);
    store.appendExperience({ eap: 0, transitions: experience(w, 1, 80, rng) });
    expect(await learner.poll()).toBe(true);
    expect(learner.stats.transitionsUsed).toBe(32);
    // 80 read, the newest 32 learned from, the 48 older ones dropped; at 0.1% duty the next update waits
    store.appendExperience({ eap: 0, transitions: experience(w, 1, 32, rng) });
    expect(await learner.poll()).toBe(false);
    expect(learner.stats.transitionsRead).toBe(112);
    learner.dispose();
  });

  it('reloading the actor (a discarded update, a new stored version) leaves no tensor behind', () => {
    const w = initActorWeights(D, A, 5);
    const core = new LearnerCore(
      {
        obsDim: D,
        numActions: A,
        head: 'relu1',
        targetBlock: null,
        lr: 1e-3,
        entropyCoef: 0.01,
        targetKl: 0.02,
        warmupCriticSteps: 2,
        epochs: 1,
        seed: 1,
      },
      w,
      null,
    );
    const before = tf.memory().numTensors;
    for (let i = 0; i < 3; i++) core.setActor(w);
    expect(tf.memory().numTensors).toBe(before);
    core.dispose();
  });

  it('logs once and does not learn when the stored weights are not an actor of the scenario', async () => {
    registry.publishWeights([{ shape: [3, 2], data: new Float32Array(6) }]);
    const lines: string[] = [];
    const learner = learnerWith({ batch: 8, log: (l) => lines.push(l) });
    await learner.start();
    learner.stop();
    expect(learner.weightVersion).toBeNull();
    await learner.poll();
    await learner.poll();
    expect(lines.filter((l) => l.includes('not a tiny actor'))).toHaveLength(1);
    learner.dispose();
  });
});
