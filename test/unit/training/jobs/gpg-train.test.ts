/**
 * GPG training on the simulator (training/jobs/gpg-train.ts): rewards come from the frame after
 * each decision, and the same seed gives the same curve and the same net.
 */
import * as tf from '@tensorflow/tfjs';
import { loadScenario } from '../../../../shared/scenario';
import { gpgRewards, trainGpg, type GpgTrainOptions } from '../../../../training/jobs/gpg-train';

describe('GPG training', () => {
  afterEach(() => tf.disposeVariables());

  it('rewards a decision with the next frame: throughput rate minus operation and replica costs; the last decision has none', () => {
    const f = (arrived: number, done: number, ops: number, replicaS: number) => ({
      arrived,
      completedInTime: done,
      failed: arrived - done,
      scaleOps: ops,
      replicaS,
    });
    const frames = [f(10, 10, 0, 100), f(10, 8, 2, 250), f(0, 0, 1, 500)];
    expect(gpgRewards(frames, 3, 25, 0.01, 0.001)).toEqual([0.8 - 0.02 - 0.001 * 10, 0 - 0.01 - 0.001 * 20]);
  });

  it('same seed, same curve and same weights; another seed differs', () => {
    const o: GpgTrainOptions = {
      scenario: loadScenario('tiny'),
      dispatch: 'lec',
      workload: 'p4',
      load: 1,
      frames: 3,
      rollouts: 2,
      updates: 2,
      seed: 5,
      opCost: 0.002,
      replicaCost: 0,
      evalEvery: 0,
      evalSeeds: [],
      evalFrames: 2,
      net: { hidden: [8], headHidden: [16], embed: 4 },
    };
    const a = trainGpg(o);
    const wa = a.net.getWeights();
    const b = trainGpg(o);
    expect(b.curve).toEqual(a.curve);
    expect(b.net.getWeights()).toEqual(wa);
    const c = trainGpg({ ...o, seed: 6 });
    expect(c.net.getWeights()).not.toEqual(wa);
    expect(a.curve).toHaveLength(2);
    expect(a.curve.every((p) => p.throughput > 0 && p.throughput <= 1)).toBe(true);
  });
});
