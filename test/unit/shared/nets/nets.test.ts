import * as tf from '@tensorflow/tfjs';
import { Rng } from '../../../../shared/rng';
import { ActorF32, ActorNet, actorShapes } from '../../../../shared/nets/actor';
import { ValueNet, criticShapes } from '../../../../shared/nets/value';

function randomObs(rng: Rng, rows: number, dim: number): Float32Array {
  const x = new Float32Array(rows * dim);
  for (let i = 0; i < x.length; i++) x[i] = rng.next() < 0.3 ? 0 : rng.uniform(-1, 2);
  return x;
}

describe('actor and critic networks', () => {
  beforeAll(async () => {
    await tf.setBackend('cpu');
  });

  it('has the journal layer sizes: actor 256-128-32 with a head per target, critic 256-128-64-32-1', () => {
    const actor = new ActorNet(20, 7, new Rng(1));
    const critic = new ValueNet(15, new Rng(2));
    expect(actor.getWeights().shapes).toEqual(actorShapes(20, 7));
    expect(actorShapes(20, 7)).toEqual([[20, 256], [256], [256, 128], [128], [128, 32], [32], [32, 7], [7]]);
    expect(critic.getWeights().shapes).toEqual(criticShapes(15));
    expect(criticShapes(15).filter((_, i) => i % 2 === 0)).toEqual([
      [15, 256],
      [256, 128],
      [128, 64],
      [64, 32],
      [32, 1],
    ]);
    actor.dispose();
    critic.dispose();
  });

  it('initialises the same weights from the same seed', () => {
    const a = new ActorNet(10, 4, new Rng(5));
    const b = new ActorNet(10, 4, new Rng(5));
    expect(a.getWeights().arrays).toEqual(b.getWeights().arrays);
    a.dispose();
    b.dispose();
  });

  it('gives scores of at least 1 and a masked policy that sums to 1 with zeros on invalid targets', () => {
    const actor = new ActorNet(12, 5, new Rng(3));
    const x = randomObs(new Rng(4), 6, 12);
    const mask = new Float32Array(30);
    for (let r = 0; r < 6; r++) {
      mask[r * 5 + 4] = 1;
      mask[r * 5 + (r % 4)] = 1;
    }
    const [q, pi] = tf.tidy(() => {
      const obs = tf.tensor2d(x, [6, 12]);
      return [actor.scores(obs).arraySync(), actor.policy(obs, tf.tensor2d(mask, [6, 5])).arraySync()];
    });
    for (const row of q) for (const v of row) expect(v).toBeGreaterThanOrEqual(1);
    pi.forEach((row, r) => {
      expect(row.reduce((s, v) => s + v, 0)).toBeCloseTo(1, 5);
      row.forEach((v, a) => (mask[r * 5 + a] ? expect(v).toBeGreaterThan(0) : expect(v).toBe(0)));
    });
    actor.dispose();
  });

  it('returns the true log-probability log(q_a / sum of valid q), not a log-softmax of probabilities', () => {
    const actor = new ActorNet(8, 4, new Rng(6));
    const x = randomObs(new Rng(7), 3, 8);
    const mask = Float32Array.from([1, 0, 1, 1, 0, 1, 0, 1, 1, 1, 1, 1]);
    const actions = Int32Array.from([2, 1, 0]);
    const out = tf.tidy(() => {
      const obs = tf.tensor2d(x, [3, 8]);
      const m = tf.tensor2d(mask, [3, 4]);
      const { logProb, entropy } = actor.logProbAndEntropy(obs, m, tf.tensor1d(actions, 'int32'));
      return { lp: logProb.arraySync(), h: entropy.arraySync(), pi: actor.policy(obs, m).arraySync() };
    });
    for (let r = 0; r < 3; r++) {
      expect(out.lp[r]).toBeCloseTo(Math.log(out.pi[r][actions[r]]), 5);
      const h = -out.pi[r].reduce((s, p) => s + (p > 0 ? p * Math.log(p) : 0), 0);
      expect(out.h[r]).toBeCloseTo(h, 5);
    }
    actor.dispose();
  });

  it('computes the same scores in the hand-written Float32Array forward pass as in tfjs', () => {
    const actor = new ActorNet(40, 9, new Rng(8));
    // non-zero biases too, so their handling is checked
    const w = actor.getWeights().arrays.map((a, i) => (i % 2 === 1 ? a.map((_, j) => 0.01 * ((j % 5) - 2)) : a));
    actor.setWeights(w);
    const x = randomObs(new Rng(9), 5, 40);
    const ref = tf.tidy(() => actor.scores(tf.tensor2d(x, [5, 40])).dataSync() as Float32Array);
    const fast = new ActorF32(40, 9, w).scores(x, 5);
    expect(fast.length).toBe(ref.length);
    for (let i = 0; i < ref.length; i++) expect(fast[i]).toBeCloseTo(ref[i], 4);
    actor.dispose();
  });

  it('computes the same softplus-head scores in both implementations, all above 1', () => {
    const actor = new ActorNet(30, 6, new Rng(13), [16, 8], 'softplus1');
    const x = randomObs(new Rng(14), 4, 30);
    const ref = tf.tidy(() => actor.scores(tf.tensor2d(x, [4, 30])).dataSync() as Float32Array);
    const fast = new ActorF32(30, 6, actor.getWeights().arrays, [16, 8], 'softplus1').scores(x, 4);
    for (let i = 0; i < ref.length; i++) {
      expect(fast[i]).toBeCloseTo(ref[i], 4);
      expect(fast[i]).toBeGreaterThan(1);
    }
    actor.dispose();
  });

  it('adds the shared target scorer identically in both implementations; a fresh one changes nothing', () => {
    // 3 targets of 4 features each at offset 2 of a 16-feature observation
    const block = { offset: 2, stride: 4, count: 3 };
    const plain = new ActorNet(16, 3, new Rng(21), [16, 8], 'softplus1');
    const scored = new ActorNet(16, 3, new Rng(21), [16, 8], 'softplus1', block);
    expect(scored.getWeights().shapes.slice(-4)).toEqual([[4, 16], [16], [16, 1], [1]]);
    const x = randomObs(new Rng(22), 5, 16);
    const p0 = tf.tidy(() => plain.scores(tf.tensor2d(x, [5, 16])).dataSync() as Float32Array);
    const s0 = tf.tidy(() => scored.scores(tf.tensor2d(x, [5, 16])).dataSync() as Float32Array);
    for (let i = 0; i < p0.length; i++) expect(s0[i]).toBeCloseTo(p0[i], 5);
    // non-zero scorer output layer: both implementations agree
    const w = scored.getWeights().arrays.map((a, i, all) => (i >= all.length - 2 ? a.map((_, j) => 0.3 * ((j % 3) - 1) + 0.05) : a));
    scored.setWeights(w);
    const ref = tf.tidy(() => scored.scores(tf.tensor2d(x, [5, 16])).dataSync() as Float32Array);
    const fast = new ActorF32(16, 3, w, [16, 8], 'softplus1', block);
    expect(fast.hasTargetScorer).toBe(true);
    const got = fast.scores(x, 5);
    let differs = false;
    for (let i = 0; i < ref.length; i++) {
      expect(got[i]).toBeCloseTo(ref[i], 4);
      differs ||= Math.abs(ref[i] - p0[i]) > 1e-3;
    }
    expect(differs).toBe(true);
    // an actor without the scorer's arrays still loads with a block given (older checkpoints)
    expect(new ActorF32(16, 3, plain.getWeights().arrays, [16, 8], 'softplus1', block).hasTargetScorer).toBe(false);
    expect(() => plain.setWeights(w)).toThrow(TypeError);
    plain.dispose();
    scored.dispose();
  });

  it('round-trips weights through getWeights and setWeights and refuses a wrong shape', () => {
    const a = new ActorNet(6, 3, new Rng(10));
    const b = new ActorNet(6, 3, new Rng(11));
    b.setWeights(a.getWeights().arrays);
    expect(b.getWeights().arrays).toEqual(a.getWeights().arrays);
    const bad = a.getWeights().arrays;
    bad[0] = new Float32Array(5);
    expect(() => b.setWeights(bad)).toThrow(/array 0 needs shape \[6, 256\]/);
    a.dispose();
    b.dispose();
  });

  it('gives the critic a linear output that can be negative', () => {
    const critic = new ValueNet(4, new Rng(12));
    const w = critic.getWeights().arrays;
    w[w.length - 1] = Float32Array.from([-3]);
    critic.setWeights(w);
    const v = tf.tidy(() => critic.value(tf.zeros([2, 4])).arraySync());
    expect(v).toEqual([-3, -3]);
    critic.dispose();
  });
});
