import * as tf from '@tensorflow/tfjs';
import { Rng } from '../../../../shared/rng';
import { ActorNet } from '../../../../shared/nets/actor';
import { ValueNet } from '../../../../shared/nets/value';
import { RolloutBuffer } from '../../../../critic/cmmac/buffer';
import { CmmacLearner } from '../../../../critic/cmmac/learner';

const OBS = 6;
const A = 3;
const S = 4;
/** Small hidden layers keep the test fast; the layer sizes are tested in nets.test.ts. */
const SMALL = [32, 16];

/** A bandit: one decision per slot, all targets valid, reward 1 for target 0 and 0 otherwise. */
function fillBandit(buf: RolloutBuffer, rng: Rng, actor: ActorNet, slots: number): void {
  buf.clear();
  const obs = new Float32Array(OBS).fill(0.5);
  const mask = new Uint8Array(A).fill(1);
  const state = new Float32Array(S).fill(0.1);
  const pi = tf.tidy(() => actor.policy(tf.tensor2d(obs, [1, OBS]), tf.ones([1, A])).dataSync() as Float32Array);
  for (let t = 0; t < slots; t++) {
    buf.beginSlot(state);
    let r = rng.next();
    let a = 0;
    while (a < A - 1 && (r -= pi[a]) >= 0) a++;
    buf.record(obs, mask, a, Math.log(pi[a]), 0);
    buf.addReward(a === 0 ? 1 : 0);
  }
  buf.finish(state);
}

function probOf0(actor: ActorNet): number {
  return tf.tidy(() => (actor.policy(tf.fill([1, OBS], 0.5), tf.ones([1, A])).dataSync() as Float32Array)[0]);
}

describe('cMMAC learner', () => {
  beforeAll(async () => {
    await tf.setBackend('cpu');
  });

  it('keeps the tensor count flat over 100 updates', () => {
    const actor = new ActorNet(OBS, A, new Rng(1), SMALL);
    const critic = new ValueNet(S, new Rng(2), SMALL);
    const learner = new CmmacLearner(actor, critic, new Rng(3), { minibatch: 16, lr: 5e-4, entropyCoef: 0.01 });
    const buf = new RolloutBuffer(OBS, A, S);
    const rng = new Rng(4);
    fillBandit(buf, rng, actor, 40);
    learner.update(buf); // first update creates nothing lazily, but warm up anyway
    const before = tf.memory().numTensors;
    for (let i = 0; i < 100; i++) {
      fillBandit(buf, rng, actor, 40);
      learner.update(buf);
      learner.imitate(buf, 1);
      learner.fitCritic(buf);
    }
    expect(tf.memory().numTensors).toBe(before);
    learner.dispose();
    actor.dispose();
    critic.dispose();
  });

  // With the paper's ReLU+1 head this failed at 85b7099 (the probability stayed at exactly 1/3: every
  // head unit was negative on this input, q = 1 everywhere, zero gradient; see the next test). Training
  // uses the softplus head, which keeps a gradient.
  it('raises the probability of the action that earns the reward', () => {
    const actor = new ActorNet(OBS, A, new Rng(5), SMALL, 'softplus1');
    const critic = new ValueNet(S, new Rng(6), SMALL);
    const learner = new CmmacLearner(actor, critic, new Rng(7), { minibatch: 64, gamma: 0, lr: 3e-3, entropyCoef: 0.01 });
    const buf = new RolloutBuffer(OBS, A, S);
    const rng = new Rng(8);
    const p0 = probOf0(actor);
    // 100 updates: +0.43 from p0 = 0.30 (+0.60 after 200, which took 9 s alone, 30 s in the suite)
    for (let i = 0; i < 100; i++) {
      fillBandit(buf, rng, actor, 64);
      learner.update(buf);
    }
    expect(probOf0(actor)).toBeGreaterThan(p0 + 0.2);
    learner.dispose();
    actor.dispose();
    critic.dispose();
  });

  it('cannot move a ReLU+1 head whose units are all negative, which is why training uses the softplus head', () => {
    const actor = new ActorNet(OBS, A, new Rng(5), SMALL, 'relu1');
    const critic = new ValueNet(S, new Rng(6), SMALL);
    const w = actor.getWeights().arrays;
    w[w.length - 1] = new Float32Array(A).fill(-100); // head biases far below zero: every unit dead
    actor.setWeights(w);
    const learner = new CmmacLearner(actor, critic, new Rng(7), { minibatch: 64, gamma: 0, lr: 3e-3, entropyCoef: 0.01 });
    const buf = new RolloutBuffer(OBS, A, S);
    const rng = new Rng(8);
    for (let i = 0; i < 10; i++) {
      fillBandit(buf, rng, actor, 64);
      learner.update(buf);
    }
    expect(probOf0(actor)).toBeCloseTo(1 / 3, 6);
    learner.dispose();
    actor.dispose();
    critic.dispose();
  });

  it('fits the critic to the discounted team reward', () => {
    const actor = new ActorNet(OBS, A, new Rng(9), SMALL);
    const critic = new ValueNet(S, new Rng(10), SMALL);
    const learner = new CmmacLearner(actor, critic, new Rng(11), { gamma: 0.5, lr: 3e-3, entropyCoef: 0.01, criticSteps: 20 });
    const buf = new RolloutBuffer(OBS, A, S);
    const state = new Float32Array(S).fill(0.3);
    for (let i = 0; i < 30; i++) {
      buf.clear();
      for (let t = 0; t < 8; t++) {
        buf.beginSlot(state);
        buf.record(new Float32Array(OBS), new Uint8Array(A).fill(1), 0, 0, 0);
        buf.addReward(1);
      }
      buf.finish(state);
      learner.update(buf);
    }
    // fixed point of V = 1 + 0.5 V
    const v = tf.tidy(() => (critic.value(tf.tensor2d(state, [1, S])).dataSync() as Float32Array)[0]);
    expect(v).toBeCloseTo(2, 0);
    learner.dispose();
    actor.dispose();
    critic.dispose();
  });

  it('sums later TD errors into the advantage with GAE lambda and keeps the one-step TD error at lambda 0', () => {
    const stats = (lam: number) => {
      const actor = new ActorNet(OBS, A, new Rng(20), SMALL, 'softplus1');
      const critic = new ValueNet(S, new Rng(21), SMALL);
      // V = 0 everywhere: then delta_t = U_t and the advantages are plain (discounted) reward sums
      const w = critic.getWeights().arrays.map((a) => new Float32Array(a.length));
      critic.setWeights(w);
      const learner = new CmmacLearner(actor, critic, new Rng(22), {
        lr: 5e-4,
        entropyCoef: 0.01,
        gamma: 0.5,
        gaeLambda: lam,
        criticSteps: 0,
      });
      const buf = new RolloutBuffer(OBS, A, S);
      const state = new Float32Array(S);
      for (const u of [0, 0, 4]) {
        buf.beginSlot(state);
        buf.record(new Float32Array(OBS), new Uint8Array(A).fill(1), 0, 0, 0);
        buf.addReward(u);
      }
      buf.finish(state);
      const st = learner.update(buf);
      learner.dispose();
      actor.dispose();
      critic.dispose();
      return st.advMean;
    };
    expect(stats(0)).toBeCloseTo(4 / 3, 5); // advantages [0, 0, 4]
    expect(stats(1)).toBeCloseTo((1 + 2 + 4) / 3, 5); // [0.25 * 4, 0.5 * 4, 4]
  });

  it('restores the optimiser state exactly, so a resumed learner takes the same steps', () => {
    const mk = () => {
      const actor = new ActorNet(OBS, A, new Rng(12), SMALL);
      const critic = new ValueNet(S, new Rng(13), SMALL);
      return { actor, critic, learner: new CmmacLearner(actor, critic, new Rng(14), { minibatch: 8, lr: 5e-4, entropyCoef: 0.01 }) };
    };
    const a = mk();
    const buf = new RolloutBuffer(OBS, A, S);
    fillBandit(buf, new Rng(15), a.actor, 20);
    a.learner.update(buf);
    const b = mk();
    b.actor.setWeights(a.actor.getWeights().arrays);
    b.critic.setWeights(a.critic.getWeights().arrays);
    b.learner.setState(a.learner.getState());
    // same shuffling stream for the next update
    const ra = new Rng(16);
    const rb = new Rng(16);
    (a.learner as unknown as { rng: Rng }).rng = ra;
    (b.learner as unknown as { rng: Rng }).rng = rb;
    a.learner.update(buf);
    b.learner.update(buf);
    expect(b.actor.getWeights().arrays).toEqual(a.actor.getWeights().arrays);
    expect(b.critic.getWeights().arrays).toEqual(a.critic.getWeights().arrays);
    for (const x of [a, b]) {
      x.learner.dispose();
      x.actor.dispose();
      x.critic.dispose();
    }
  });
});
