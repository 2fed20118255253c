import * as tf from '@tensorflow/tfjs';
import { VgruDetector, quantile } from '../../../../critic/detector/vgru';
import { Rng } from '../../../../shared/rng';
import { loadBackend } from '../../../../shared/tf-backend';

const T = 12;
const D = 3;

/** Healthy windows: smooth sinusoids with a shared phase plus small noise, [count][T][D]. */
function windows(count: number, seed: number, anomalous = false): Float32Array {
  const rng = new Rng(seed);
  const out = new Float32Array(count * T * D);
  for (let k = 0; k < count; k++) {
    const phase = rng.uniform(0, 2 * Math.PI);
    for (let t = 0; t < T; t++) {
      for (let d = 0; d < D; d++) {
        let v = Math.sin(phase + t * 0.5 + d) + 0.05 * rng.normal();
        if (anomalous && t >= T - 4) v += (d % 2 ? -3 : 3) + rng.normal();
        out[(k * T + t) * D + d] = v;
      }
    }
  }
  return out;
}

const tiny = { hidden: 8, latent: 3, components: 2, feature: 8, steps: 30, batchSize: 32, learningRate: 0.01 };

describe('VgruDetector', () => {
  beforeAll(async () => {
    await loadBackend(); // a test is an entry point; library code never picks the backend
  });

  it('scores anomalous windows above healthy ones after a short training', () => {
    const det = new VgruDetector(D, T, tiny);
    try {
      const losses = det.fit(windows(300, 1), 300);
      expect(losses[losses.length - 1]).toBeLessThan(losses[0]);
      const healthy = det.score(windows(50, 2), 50);
      const bad = det.score(windows(50, 3, true), 50);
      const meanOf = (a: Float32Array): number => a.reduce((s, x) => s + x, 0) / a.length;
      expect(meanOf(bad)).toBeGreaterThan(meanOf(healthy) + 1);
      const flagged = det.isAnomalous(windows(50, 3, true), 50);
      expect(flagged.filter(Boolean).length).toBeGreaterThan(40);
    } finally {
      det.dispose();
    }
  });

  it("'maxDim' scores an incident in one of many dimensions higher than 'mean' does", () => {
    // 8 dims, the incident moves only dimension 0 in the last 4 steps
    const D8 = 8;
    const make = (count: number, seed: number, bad: boolean): Float32Array => {
      const rng = new Rng(seed);
      const out = new Float32Array(count * T * D8);
      for (let k = 0; k < count; k++) {
        const phase = rng.uniform(0, 2 * Math.PI);
        for (let t = 0; t < T; t++)
          for (let d = 0; d < D8; d++)
            out[(k * T + t) * D8 + d] = Math.sin(phase + t * 0.5 + d) + 0.05 * rng.normal() + (bad && d === 0 && t >= T - 4 ? 4 : 0);
      }
      return out;
    };
    const meanOf = (a: Float32Array): number => a.reduce((s, x) => s + x, 0) / a.length;
    const run = (scoreReduce: 'maxDim' | 'mean'): number => {
      const det = new VgruDetector(D8, T, { ...tiny, scoreReduce });
      try {
        det.fit(make(300, 1, false), 300);
        expect(det.scoreRawDims(make(3, 2, false), 3)).toHaveLength(3 * D8);
        return meanOf(det.score(make(50, 3, true), 50));
      } finally {
        det.dispose();
      }
    };
    const maxDim = run('maxDim');
    expect(maxDim).toBeGreaterThan(1);
    expect(maxDim).toBeGreaterThan(run('mean'));
    expect(() => new VgruDetector(D8, T, { scoreReduce: 'sum' as never })).toThrow(/scoreReduce/);
  });

  it('gives identical scores for the same seed', () => {
    const run = (): Float32Array => {
      const det = new VgruDetector(D, T, { ...tiny, steps: 10, seed: 5 });
      try {
        det.fit(windows(100, 1), 100);
        return det.scoreRaw(windows(10, 2), 10);
      } finally {
        det.dispose();
      }
    };
    expect(Array.from(run())).toEqual(Array.from(run()));
  });

  it('exports its weights as Float32Arrays that reproduce its scores in a fresh detector', () => {
    const a = new VgruDetector(D, T, { ...tiny, steps: 10 });
    const b = new VgruDetector(D, T, { ...tiny, seed: 99 });
    try {
      a.fit(windows(100, 1), 100);
      const ws = a.getWeights();
      expect(ws.every((w) => w instanceof Float32Array)).toBe(true);
      b.setWeights(ws);
      const x = windows(5, 4);
      expect(Array.from(b.score(x, 5))).toEqual(Array.from(a.score(x, 5)));
      expect(() => b.setWeights(ws.slice(1))).toThrow(/expected/);
    } finally {
      a.dispose();
      b.dispose();
    }
  });

  it('keeps the number of tensors flat over many scoring calls and frees everything on dispose', () => {
    const before = tf.memory().numTensors;
    const det = new VgruDetector(D, T, { ...tiny, steps: 5 });
    det.fit(windows(60, 1), 60);
    const x = windows(4, 2);
    det.score(x, 4);
    const after1 = tf.memory().numTensors;
    for (let i = 0; i < 100; i++) det.score(x, 4);
    expect(tf.memory().numTensors).toBe(after1);
    det.dispose();
    expect(tf.memory().numTensors).toBe(before);
  });

  it('rejects bad sizes by name', () => {
    expect(() => new VgruDetector(0, T)).toThrow(/dims/);
    expect(() => new VgruDetector(D, T, { hidden: 0 })).toThrow(/hidden/);
  });

  it('computes interpolated quantiles', () => {
    expect(quantile([0, 1, 2, 3, 4], 0.5)).toBe(2);
    expect(quantile([0, 10], 0.25)).toBe(2.5);
  });
});
