/**
 * Per-request credit (CmmacLearner.updateRequests): a decision is scored by its own request's
 * outcome, the critic fits per-slot mean outcomes, PPO-clipped steps stop at the KL guard.
 */
import * as tf from '@tensorflow/tfjs';
import { Rng } from '../../../../shared/rng';
import { ActorNet } from '../../../../shared/nets/actor';
import { ValueNet } from '../../../../shared/nets/value';
import { RolloutBuffer } from '../../../../critic/cmmac/buffer';
import { CmmacLearner } from '../../../../critic/cmmac/learner';

const OBS = 6;
const A = 3;
const S = 4;
const SMALL = [32, 16];

/**
 * Four decisions per slot; the team reward of the slot is pure noise (it cannot tell the decisions
 * apart), each request's own outcome is 1 for target 0 and 0 otherwise.
 */
function fill(buf: RolloutBuffer, rng: Rng, actor: ActorNet, slots: number): Float32Array {
  buf.clear();
  const obs = new Float32Array(OBS).fill(0.5);
  const mask = new Uint8Array(A).fill(1);
  const state = new Float32Array(S).fill(0.1);
  const pi = tf.tidy(() => actor.policy(tf.tensor2d(obs, [1, OBS]), tf.ones([1, A])).dataSync() as Float32Array);
  const outcome: number[] = [];
  let id = 0;
  for (let t = 0; t < slots; t++) {
    buf.beginSlot(state);
    const ids: number[] = [];
    for (let j = 0; j < 4; j++) {
      let r = rng.next();
      let a = 0;
      while (a < A - 1 && (r -= pi[a]) >= 0) a++;
      buf.record(obs, mask, a, Math.log(pi[a]), j);
      ids.push(id++);
      outcome.push(a === 0 ? 1 : 0);
    }
    buf.tagRequests(ids);
    buf.addReward(rng.next() * 4);
  }
  buf.finish(state);
  return Float32Array.from(outcome);
}

function probOf0(actor: ActorNet): number {
  return tf.tidy(() => (actor.policy(tf.fill([1, OBS], 0.5), tf.ones([1, A])).dataSync() as Float32Array)[0]);
}

describe('cMMAC learner, per-request credit', () => {
  beforeAll(async () => {
    await tf.setBackend('cpu');
  });

  it('raises the probability of the target whose requests make their deadline, under a noise team reward', () => {
    const actor = new ActorNet(OBS, A, new Rng(5), SMALL, 'softplus1');
    const critic = new ValueNet(S, new Rng(6), SMALL);
    const learner = new CmmacLearner(actor, critic, new Rng(7), { minibatch: 64, lr: 3e-3, entropyCoef: 0.01 });
    const buf = new RolloutBuffer(OBS, A, S);
    const rng = new Rng(8);
    const p0 = probOf0(actor);
    for (let i = 0; i < 60; i++) learner.updateRequests(buf, fill(buf, rng, actor, 16), { targetKl: 1 });
    expect(probOf0(actor)).toBeGreaterThan(p0 + 0.2);
    learner.dispose();
    actor.dispose();
    critic.dispose();
  });

  it('leaves unresolved decisions out, fits V to the mean outcome, stops at the KL guard, and leaks no tensors', () => {
    const actor = new ActorNet(OBS, A, new Rng(1), SMALL, 'softplus1');
    const critic = new ValueNet(S, new Rng(2), SMALL);
    const learner = new CmmacLearner(actor, critic, new Rng(3), { minibatch: 16, lr: 3e-3, entropyCoef: 0.01, criticSteps: 50 });
    const buf = new RolloutBuffer(OBS, A, S);
    const rng = new Rng(4);
    const out = fill(buf, rng, actor, 8);
    out.fill(Number.NaN, 0, 4); // slot 0 unresolved
    const before = tf.memory().numTensors;
    for (let i = 0; i < 5; i++) learner.updateRequests(buf, out, { epochs: 3, targetKl: 1 });
    expect(tf.memory().numTensors).toBe(before);
    let mean = 0;
    let n = 0;
    for (let k = 4; k < buf.n; k++) {
      mean += out[k];
      n++;
    }
    const v = tf.tidy(() => (critic.value(tf.fill([1, S], 0.1)).dataSync() as Float32Array)[0]);
    expect(Math.abs(v - mean / n)).toBeLessThan(0.1);
    const st = learner.updateRequests(buf, out, { epochs: 50, targetKl: 1e-9 });
    expect(st.epochsDone).toBe(1);
    const all = learner.updateRequests(buf, new Float32Array(buf.n).fill(Number.NaN));
    expect(all.epochsDone).toBe(0);
    learner.dispose();
    actor.dispose();
    critic.dispose();
  });
});
