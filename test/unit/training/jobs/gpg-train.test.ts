/**
 * GPG training on the simulator (training/jobs/gpg-train.ts): rewards come from the frame after
 * each decision, and the same seed gives the same curve and the same net; trace windows rotate
 * over updates, each at every load of the mix.
 */
import * as fs from 'fs';
import * as path from 'path';
import * as tf from '@tensorflow/tfjs';
import { loadScenario } from '../../../../shared/scenario';
import { gpgRewards, trainGpg, type GpgTrainOptions } from '../../../../training/jobs/gpg-train';
import { tmpDir } from '../../../support/tmp';

/** A small GPG on the tiny scenario under lec: 2 updates of 2 rollouts of 3 frames, no evaluation. */
function tinyOptions(): GpgTrainOptions {
  return {
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
}

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
    const o = tinyOptions();
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

  it("with a model's scaleIn every rollout and evaluation runs GPG then hpa's scale-in, as the model runs; same seed, same numbers", () => {
    const o: GpgTrainOptions = { ...tinyOptions(), updates: 1, evalEvery: 1, evalSeeds: [901], evalFrames: 4 };
    const alone = trainGpg(o);
    const under = { ...o, scaleIn: { rule: 'hpa' as const, targetUtilisation: 0.5 } };
    const a = trainGpg(under);
    // the evaluation's greedy GPG is the same net at update 0: the extra operations are the scale-in's removals
    expect(a.evals[0].gpgOps).toBeGreaterThan(alone.evals[0].gpgOps);
    expect(a.evals[0].hpa).toBe(alone.evals[0].hpa);
    // the sampled rollouts ran under it too: another return from the same draws
    expect(a.curve[0].meanReturn).not.toBe(alone.curve[0].meanReturn);
    const b = trainGpg(under);
    expect(b.curve).toEqual(a.curve);
    expect(b.evals).toEqual(a.evals);
    expect(b.net.getWeights()).toEqual(a.net.getWeights());
  });

  /** A made-up v2017 window (not trace rows): `jobs` jobs of 1..3 tasks, one every `gapS` trace seconds. */
  function madeUpWindow(name: string, jobs: number, gapS: number): string {
    const lines: string[] = [];
    let task = 0;
    for (let j = 0; j < jobs; j++) {
      const t = j * gapS;
      for (let k = 0; k <= j % 3; k++) lines.push(`${t},${t + 5 + 7 * k},${name}${j},${task++},1,Terminated,${50 + 25 * k},0.01`);
    }
    const dir = tmpDir('kais-gpg-trace-');
    const f = path.join(dir, `${name}.csv`);
    fs.writeFileSync(f, lines.join('\n') + '\n');
    return f;
  }

  it('trains on trace windows in turn, each at every load of the mix; evaluations replay their own window', () => {
    const a = madeUpWindow('a', 40, 3);
    const b = madeUpWindow('b', 15, 11);
    const ev = madeUpWindow('e', 30, 5);
    const o: GpgTrainOptions = {
      scenario: loadScenario('tiny'),
      dispatch: 'lec',
      workload: 'p4',
      load: 1,
      loads: [1, 1.5],
      frames: 2,
      rollouts: 2,
      updates: 4,
      seed: 5,
      opCost: 0.002,
      replicaCost: 0,
      evalEvery: 4,
      evalSeeds: [901],
      evalFrames: 2,
      net: { hidden: [8], headHidden: [16], embed: 4 },
      traces: [a, b],
      evalTrace: ev,
    };
    const lines: string[] = [];
    const r = trainGpg(o, (l) => lines.push(l));
    const schedule = lines.filter((l) => l.startsWith('u=')).map((l) => /load (\S+) trace (\S+)/.exec(l)!.slice(1));
    expect(schedule).toEqual([
      ['1', a],
      ['1.5', a],
      ['1', b],
      ['1.5', b],
    ]);
    // the windows are not the synthetic workload, and the evaluation window is its own
    const p4 = trainGpg({ ...o, traces: undefined, evalTrace: undefined });
    expect(r.curve.map((p) => p.throughput)).not.toEqual(p4.curve.map((p) => p.throughput));
    expect(r.evals.map((e) => e.hpa)).not.toEqual(p4.evals.map((e) => e.hpa));
    const otherEval = trainGpg({ ...o, evalTrace: b });
    expect(otherEval.curve).toEqual(r.curve);
    expect(otherEval.evals[0].hpa).not.toBe(r.evals[0].hpa);
  });
});
