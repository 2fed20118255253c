import { L2Model, L2Stream } from '../../../../agent/filters/l2-stage';
import { NodeHealth, type HealthEvent } from '../../../../agent/filters/node-health';
import { BaselineDetector } from '../../../../critic/detector/baselines';
import { NodeTelemetryModel } from '../../../../shared/node-telemetry';
import { Rng } from '../../../../shared/rng';

const D = 5;
const T = 12;

function rows(n: number, seed: number): Float64Array {
  const rng = new Rng(seed);
  const out = new Float64Array(n * D);
  let load = 0;
  for (let r = 0; r < n; r++) {
    load = 0.9 * load + 0.3 * rng.normal();
    for (let d = 0; d < D; d++) out[r * D + d] = (d + 1) * (0.5 + 0.1 * load + 0.02 * rng.normal()) + (d === 4 ? 3 : 0);
  }
  return out;
}

describe('L2 stage (the live second stage)', () => {
  it("scores like kais detect's L2 baseline: same fit, same calibration, same normalised window scores, streamed", () => {
    const train = rows(1000, 1);
    const fitRows = 800;
    const det = new BaselineDetector('l2', train, D, T, fitRows);
    const model = new L2Model(train.subarray(0, fitRows * D), [train.subarray(fitRows * D)], D);
    const test = rows(300, 2);
    for (let r = 100; r < 110; r++) test[r * D + 2] += 3; // an incident the score must see
    const expected = det.score(test);
    const stream = new L2Stream(D, T);
    const got: number[] = [];
    for (let r = 0; r < 300; r++) {
      const s = stream.push(test.subarray(r * D, (r + 1) * D), model);
      if (r < T - 1) expect(s).toBeNaN();
      else got.push(s);
    }
    expect(got.length).toBe(expected.length);
    got.forEach((s, k) => expect(s).toBeCloseTo(expected[k], 4));
    expect(Math.max(...got.slice(100 - T + 1, 110))).toBeGreaterThan(1);
    expect(got.filter((s) => s > 0).length).toBeLessThan(0.2 * got.length);
  });

  it('scores nothing without a model, and a new model scores the window it already holds', () => {
    const train = rows(500, 3);
    const model = new L2Model(train.subarray(0, 400 * D), [train.subarray(400 * D)], D);
    const stream = new L2Stream(D, T);
    for (let r = 0; r < 20; r++) expect(stream.push(train.subarray(r * D, (r + 1) * D), null)).toBeNaN();
    expect(stream.push(train.subarray(20 * D, 21 * D), model)).not.toBeNaN();
    expect(() => new L2Model(train.subarray(0, 400 * D), [train.subarray(0, 5 * D)], D)).toThrow(/calibration window/);
  });

  describe('in NodeHealth', () => {
    // rules that never fire: what excludes here is the second stage alone
    const silentRules = { thetaV: 1e6, thetaM: 1e6, thetaR: 3, thetaS: Infinity };
    function run(second: boolean) {
      const events: HealthEvent[] = [];
      const h = new NodeHealth(['4/8', '4/8', '4/8'], [0, 0, 0], { rules: silentRules, second: second ? {} : null }, (e) => events.push(e));
      const model = new NodeTelemetryModel(3, 1, new Rng(7));
      const x = new Float64Array(4);
      let t = 0;
      const step = (shift0: number) => {
        t++;
        for (const n of [0, 1, 2]) {
          model.sample(n, false, 0.4, 0.5, x);
          if (n === 0) x[1] = Math.min(1, x[1] + shift0); // memory jumps on node 0
          h.sample(n, x, t);
        }
      };
      for (let i = 0; i < 600; i++) step(0);
      const outBefore = events.filter((e) => e.kind === 'exclude').length;
      for (let i = 0; i < 30; i++) step(0.3);
      return { h, events, outBefore };
    }

    it('excludes a node after secondRun windows the L2 stage scores above the live eta (rule device:l2); off, nothing', () => {
      const on = run(true);
      expect(on.h.second.fits).toBeGreaterThan(0);
      expect(on.h.second.scored).toBeGreaterThan(0);
      expect(on.outBefore).toBe(0);
      const out = on.events.filter((e) => e.kind === 'exclude');
      expect(out.map((e) => [e.node, e.rule])).toEqual([[0, 'device:l2']]);
      expect(on.h.excluded(0)).toBe(true);
      expect(on.h.secondScore(0)).toBeGreaterThan(1);
      const off = run(false);
      expect(off.h.second.fits).toBe(0);
      expect(off.events.filter((e) => e.kind === 'exclude')).toEqual([]);
      expect(off.h.excluded(0)).toBe(false);
    });
  });
});
