import { DeviceFilter, baselineFromHistory, baselineFromWindow, scoreWindow, type Verdict } from '../../../../agent/filters/device-filter';
import { Rng } from '../../../../shared/rng';

const N = 4;
const T = 12;

/** Correlated healthy metrics: a shared load factor plus noise, each on its own scale. */
function healthyRows(rows: number, seed = 1, scales = [1, 100, 0.01, 5000]): Float64Array {
  const rng = new Rng(seed);
  const out = new Float64Array(rows * N);
  let load = 0;
  for (let r = 0; r < rows; r++) {
    load = 0.9 * load + rng.normal() * 0.3;
    for (let n = 0; n < N; n++) out[r * N + n] = scales[n] * (0.5 + 0.1 * load + 0.02 * rng.normal());
  }
  return out;
}

function rowsOf(data: Float64Array): number[][] {
  const out: number[][] = [];
  for (let r = 0; r < data.length / N; r++) out.push(Array.from(data.subarray(r * N, (r + 1) * N)));
  return out;
}

describe('DeviceFilter', () => {
  const history = healthyRows(2000);
  const baseline = baselineFromHistory(history, N);

  it('reads a marked step (a placement change) as neither variance nor correlation; an unmarked one as a fault', () => {
    // healthy samples, then metric 1 steps up by 10 of its history's standard deviations at sample 36
    const rows = rowsOf(healthyRows(48, 23));
    for (let r = 36; r < 48; r++) rows[r][1] += 10 * baseline.scale[1];
    const judge = (mark: number | null) => {
      const f = new DeviceFilter(baseline, { beta: 0.25 });
      const seen: { verdict: Verdict; share: number }[] = [];
      rows.forEach((x, r) => {
        if (r === mark) f.markBreak();
        const verdict = f.push(x);
        if (r >= 36) seen.push({ verdict, share: f.varianceShare });
      });
      return seen;
    };
    const unmarked = judge(null);
    expect(unmarked.some((w) => w.verdict !== 'healthy')).toBe(true);
    // marked at the step, or up to 3 samples before it (the sample read after a change can predate it)
    for (const mark of [36, 35, 33]) {
      const marked = judge(mark);
      // while the step is inside the window, no metric's variance differs
      expect({ mark, shares: marked.slice(0, 11).map((w) => w.share) }).toEqual({ mark, shares: new Array(11).fill(0) });
    }
    expect(unmarked.slice(0, 11).some((w) => w.share > 0)).toBe(true);
    // a break on the stepping metric alone does the same; one on other metrics leaves the step's variance as it was
    const onDims = (dims: number[]) => {
      const f = new DeviceFilter(baseline, { beta: 0.25 });
      return rows
        .map((x, r) => {
          if (r === 36) f.markBreak(dims);
          return { verdict: f.push(x), share: f.varianceShare };
        })
        .slice(36);
    };
    expect(
      onDims([1])
        .slice(0, 11)
        .map((w) => w.share),
    ).toEqual(new Array(11).fill(0));
    const others = onDims([0, 2]);
    expect(others.map((w) => w.share)).toEqual(unmarked.map((w) => w.share));
    expect(others.some((w) => w.verdict !== 'healthy')).toBe(true);
    expect(() => new DeviceFilter(baseline).markBreak([4])).toThrow(/no dimension 4/);
    // a reset forgets the mark: the step is judged as unmarked
    const f = new DeviceFilter(baseline, { beta: 0.25 });
    f.markBreak();
    f.reset();
    const again = rows.map((x) => ({ verdict: f.push(x), share: f.varianceShare })).slice(36);
    expect(again).toEqual(unmarked);
  });

  it('judges a node at its new level after a marked step, and still sees a level shift the mark does not explain', () => {
    // metric 1 steps up by 30 of its history's standard deviations at sample `stepAt`
    const levels = (mark: number | null, stepAt: number) => {
      const rows = rowsOf(healthyRows(100, 29));
      for (let r = stepAt; r < 100; r++) rows[r][1] += 30 * baseline.scale[1];
      const f = new DeviceFilter(baseline, { thetaM: 2 });
      return rows.map((x, r) => {
        if (r === mark) f.markBreak();
        f.push(x);
        return f.levelMax;
      });
    };
    const unmarked = levels(null, 36);
    expect(Math.min(...unmarked.slice(40))).toBeGreaterThan(2); // the new level stays beyond the history's
    const marked = levels(36, 36);
    expect(Math.max(...marked.slice(12))).toBeLessThan(2); // during the step and after it
    expect(Math.max(...levels(34, 36).slice(12))).toBeLessThan(2); // marked two samples early
    // a mark 24 samples before a shift of the node's own explains nothing
    expect(Math.min(...levels(36, 60).slice(64))).toBeGreaterThan(2);
  });

  it('sees a level shift that leaves the variance unchanged only with level evidence (thetaM)', () => {
    // the same healthy window, every metric moved up by 8 of its history's standard deviations
    const window = healthyRows(T, 21);
    const shifted = Float64Array.from(window, (v, i) => v + 8 * baseline.scale[i % N]);
    const off = scoreWindow(shifted, baseline);
    expect(off.varianceFired).toBe(scoreWindow(window, baseline).varianceFired);
    expect(off.levelMax).toBe(0);
    const on = scoreWindow(shifted, baseline, { thetaM: 2 });
    expect(on.levelMax).toBeGreaterThan(2);
    expect(on.varianceFired).toBe(true);
    expect(scoreWindow(window, baseline, { thetaM: 2 }).levelMax).toBeLessThan(2);
    expect(Array.from(baseline.levelTol!).every((x) => x >= 1 && Number.isFinite(x))).toBe(true);
  });

  it('keeps both-rules-fire windows ambiguous unless rule 1 also fires at faultyMargin x its thresholds', () => {
    const window = healthyRows(T, 23);
    const rng = new Rng(5);
    // decorrelate (rule 2) and move the level by ~3 history extremes (rule 1 at thetaM = 2, not at 2 x 2)
    const tol = baseline.levelTol!;
    const w = Float64Array.from(window, (v, i) => v + 3 * tol[i % N] * baseline.scale[i % N] + baseline.scale[i % N] * rng.normal());
    const plain = scoreWindow(w, baseline, { thetaM: 2, thetaV: 100 });
    expect(plain.varianceFired && plain.corrFired).toBe(true);
    expect(plain.verdict).toBe('faulty');
    const strict = scoreWindow(w, baseline, { thetaM: 2, thetaV: 100, faultyMargin: 2 });
    expect(strict.strongFired).toBe(false);
    expect(strict.verdict).toBe('ambiguous');
  });

  it('routes a window where one of many metrics spikes far beyond its own history to the learned stage (thetaS)', () => {
    // 20 metrics driven by one load factor: one metric jumping for 3 rows moves 1 of 20 (< beta),
    // and the correlations of the other 19 stay, so without thetaS the window is healthy
    const M = 20;
    const rows = (n: number, seed: number): Float64Array => {
      const rng = new Rng(seed);
      const out = new Float64Array(n * M);
      let load = 0;
      for (let r = 0; r < n; r++) {
        load = 0.9 * load + rng.normal() * 0.3;
        for (let m = 0; m < M; m++) out[r * M + m] = 0.5 + 0.1 * load + 0.02 * rng.normal();
      }
      return out;
    };
    const base = baselineFromHistory(rows(3000, 31), M);
    expect(Array.from(base.varTol!).every((x) => x >= 1 && Number.isFinite(x))).toBe(true);
    const quiet = rows(T, 33);
    const spiky = Float64Array.from(quiet);
    for (let r = 8; r < 11; r++) spiky[r * M + 3] += 30 * base.scale[3];
    const opts = { thetaV: 1, beta: 0.2, thetaM: 2, faultyMargin: 2 };
    expect(scoreWindow(spiky, base, opts).verdict).toBe('healthy');
    const on = scoreWindow(spiky, base, { ...opts, thetaS: 4 });
    expect(on.singleMax).toBeGreaterThan(4);
    expect(on.verdict).toBe('ambiguous');
    // a quiet window stays healthy, and the streaming filter gives the same verdicts
    expect(scoreWindow(quiet, base, { ...opts, thetaS: 4 }).verdict).toBe('healthy');
    const f = new DeviceFilter(base, { ...opts, thetaS: 4 });
    let v: Verdict = 'warming';
    for (let r = 0; r < T; r++) v = f.push(Array.from(spiky.subarray(r * M, (r + 1) * M)));
    expect(v).toBe('ambiguous');
    expect(f.singleMax).toBeCloseTo(on.singleMax, 9);
  });

  it('single-metric routing never adds a faulty verdict, and off (Infinity) changes nothing', () => {
    const rng = new Rng(8);
    const data = healthyRows(400, 17);
    for (let r = 200; r < 260; r++) for (let n = 0; n < N; n++) data[r * N + n] *= 1 + 0.8 * rng.normal();
    const run = (o: object): Verdict[] => {
      const f = new DeviceFilter(baseline, o);
      return rowsOf(data).map((s) => f.push(s));
    };
    const plain = run({ thetaM: 2, faultyMargin: 2 });
    expect(run({ thetaM: 2, faultyMargin: 2, thetaS: Infinity })).toEqual(plain);
    const routed = run({ thetaM: 2, faultyMargin: 2, thetaS: 2 });
    routed.forEach((v, i) => {
      if (v === 'faulty') expect(plain[i]).toBe('faulty');
      if (plain[i] !== 'healthy') expect(v).toBe(plain[i]);
    });
    expect(() => new DeviceFilter(baseline, { thetaS: 0 })).toThrow(/thetaS/);
  });

  it('warms up for T - 1 samples, then calls healthy data healthy most of the time and never faulty', () => {
    const f = new DeviceFilter(baseline);
    const verdicts: Verdict[] = rowsOf(healthyRows(600, 7)).map((s) => f.push(s));
    expect(verdicts.slice(0, T - 1).every((v) => v === 'warming')).toBe(true);
    const rest = verdicts.slice(T - 1);
    expect(rest.filter((v) => v === 'healthy').length / rest.length).toBeGreaterThan(0.8);
    expect(rest.filter((v) => v === 'faulty').length).toBe(0);
  });

  it('calls a node faulty when its metrics go wild and decorrelate', () => {
    const f = new DeviceFilter(baseline);
    const rng = new Rng(3);
    for (const s of rowsOf(healthyRows(30, 9))) f.push(s);
    const scales = [1, 100, 0.01, 5000];
    let last: Verdict = 'warming';
    for (let i = 0; i < T; i++) last = f.push(scales.map((s) => s * (0.5 + 0.6 * rng.normal())));
    expect(last).toBe('faulty');
  });

  it('is scale-free: multiplying a metric and its history by 1000 changes nothing', () => {
    const scaled = Float64Array.from(history, (v, i) => (i % N === 1 ? v * 1000 : v));
    const window = healthyRows(T, 11);
    const scaledWindow = Float64Array.from(window, (v, i) => (i % N === 1 ? v * 1000 : v));
    const a = scoreWindow(window, baseline);
    const b = scoreWindow(scaledWindow, baselineFromHistory(scaled, N));
    expect(b.varianceShare).toBeCloseTo(a.varianceShare, 9);
    expect(b.corrDistance).toBeCloseTo(a.corrDistance, 9);
  });

  it('never lets constant columns or non-finite samples produce NaN', () => {
    const flat = Float64Array.from(history, (v, i) => (i % N === 2 ? 7 : v)); // column 2 constant
    const b = baselineFromHistory(flat, N);
    expect([...b.scale, ...b.variance, ...b.corr].every(Number.isFinite)).toBe(true);
    const f = new DeviceFilter(b);
    const rows = rowsOf(healthyRows(40, 5));
    for (const [i, s] of rows.entries()) {
      s[2] = 7;
      if (i === 20) s[0] = NaN;
      if (i === 21) s[3] = Infinity;
      f.push(s);
      expect(Number.isFinite(f.varianceShare)).toBe(true);
      expect(Number.isFinite(f.corrDistance)).toBe(true);
    }
    const allFlat = scoreWindow(new Float64Array(T * N).fill(1), b);
    expect(Number.isFinite(allFlat.corrDistance)).toBe(true);
  });

  it('gives the same verdicts through the class and the pure window function', () => {
    const f = new DeviceFilter(baseline, { refreshRate: 0 });
    const data = healthyRows(200, 21);
    for (let r = 0; r < 200; r++) {
      const v = f.push(data.subarray(r * N, (r + 1) * N));
      if (r >= T - 1) expect(scoreWindow(data.subarray((r - T + 1) * N, (r + 1) * N), baseline).verdict).toBe(v);
    }
  });

  it('computes the correlation rule like a plain Pearson reference, in the T = 12 fast path and the general one', () => {
    const W = 9; // several dims, one of them flat, on a ring read from every start
    const rng = new Rng(5);
    for (const TT of [12, 10]) {
      const hist = Float64Array.from({ length: 600 * W }, (_, i) => (i % W === 3 ? 7 : rng.normal() * (1 + (i % W))));
      const b = baselineFromHistory(hist, W, { windowSize: TT });
      const f = new DeviceFilter(b, { windowSize: TT, refreshRate: 0 });
      const data = Float64Array.from({ length: 40 * W }, (_, i) => (i % W === 3 ? 7 : rng.normal() + (i % 5)));
      for (let r = 0; r < 40; r++) {
        f.push(data.subarray(r * W, (r + 1) * W));
        if (r < TT - 1) continue;
        // reference: the RMS change of the off-diagonal Pearson correlations, flat dims correlating 0
        const rows = (d: number): number[] => Array.from({ length: TT }, (_, t) => data[(r - TT + 1 + t) * W + d]);
        let sum2 = 0;
        for (let i = 0; i < W; i++)
          for (let j = i + 1; j < W; j++) {
            const x = rows(i);
            const y = rows(j);
            const mx = x.reduce((a, v) => a + v, 0) / TT;
            const my = y.reduce((a, v) => a + v, 0) / TT;
            const sxy = x.reduce((a, v, t) => a + (v - mx) * (y[t] - my), 0);
            const sxx = x.reduce((a, v) => a + (v - mx) ** 2, 0);
            const syy = y.reduce((a, v) => a + (v - my) ** 2, 0);
            const flat = (s: number, d: number): boolean => Math.sqrt(s / TT) / b.scale[d] < 0.05;
            const rr = flat(sxx, i) || flat(syy, j) ? 0 : sxy / Math.sqrt(sxx * syy);
            sum2 += (rr - b.corr[i * W + j]) ** 2;
          }
        expect(f.corrDistance).toBeCloseTo(Math.sqrt((2 * sum2) / (W * (W - 1))), 10);
      }
    }
  });

  it('is ambiguous when exactly one rule fires, and both thresholds are configurable', () => {
    const w = healthyRows(T, 13);
    const s = scoreWindow(w, baseline, { thetaV: 1e9, thetaR: 0 });
    expect(s.varianceFired).toBe(false);
    expect(s.corrFired).toBe(true);
    expect(s.verdict).toBe('ambiguous');
    expect(scoreWindow(w, baseline, { thetaV: -1 + 1, beta: 1e-9, thetaR: 0 }).verdict).toBe('faulty');
  });

  it('refreshes its baseline only from healthy windows', () => {
    const f = new DeviceFilter(baseline, { refreshRate: 0.5 });
    const before = Float64Array.from(f.baseline.variance);
    const rng = new Rng(4);
    for (let i = 0; i < 40; i++) f.push([rng.normal() * 5, rng.normal() * 500, rng.normal(), rng.normal() * 9000]);
    expect(Array.from(f.baseline.variance)).toEqual(Array.from(before));
    for (const s of rowsOf(healthyRows(100, 8))) f.push(s);
    expect(Array.from(f.baseline.variance)).not.toEqual(Array.from(before));
  });

  it('tracks the median healthy window variance, not the mean (a rare burst cannot inflate it)', () => {
    // one metric, thresholds that call every window healthy: the refresh sees all of them
    const hist = Float64Array.from({ length: 600 }, (_, i) => Math.sin(i) * 0.1);
    const b1 = baselineFromHistory(hist, 1);
    const f = new DeviceFilter(b1, { refreshRate: 0.05, thetaV: 1e9, thetaR: 1e9 });
    const rng = new Rng(5);
    // quiet samples with a burst every 60th: a fifth of the windows hold one, so the mean window
    // variance is hundreds of times the median; an EMA would climb to the mean
    const windowVars: number[] = [];
    const ring: number[] = [];
    for (let i = 0; i < 3000; i++) {
      const x = i % 60 === 0 ? 3 * rng.normal() : 0.01 * rng.normal();
      ring.push(x);
      if (ring.length > T) ring.shift();
      expect(f.push([x])).not.toBe('faulty');
      if (ring.length === T) {
        const m = ring.reduce((a, v) => a + v, 0) / T;
        windowVars.push(ring.reduce((a, v) => a + (v - m) ** 2, 0) / T / b1.scale[0] ** 2);
      }
    }
    const sorted = windowVars.slice(1000).sort((a, c) => a - c);
    const median = sorted[sorted.length >> 1];
    const mean = sorted.reduce((a, v) => a + v, 0) / sorted.length;
    expect(f.baseline.variance[0]).toBeGreaterThan(0.5 * median);
    expect(f.baseline.variance[0]).toBeLessThan(2 * median);
    expect(f.baseline.variance[0]).toBeLessThan(0.5 * mean);
  });

  it('accepts a single healthy window as the baseline (Sentinel literal)', () => {
    const b = baselineFromWindow(healthyRows(T, 2), N);
    expect(b.variance.length).toBe(N);
    expect(b.corr.length).toBe(N * N);
  });

  it('swaps its baseline in place (setBaseline): the window stays, a baseline of other dims is refused', () => {
    const f = new DeviceFilter(baseline);
    const rows = rowsOf(healthyRows(T, 21));
    for (const r of rows) f.push(r);
    // a baseline from data 10x larger: the same window is now far from its level and no longer healthy
    const big = baselineFromHistory(healthyRows(2000, 1, [10, 1000, 0.1, 50000]), N, { thetaM: 2 });
    const g = new DeviceFilter(baseline, { thetaM: 2 });
    for (const r of rows) g.push(r);
    expect(g.push(rows[0])).not.toBe('warming');
    g.setBaseline(big);
    expect(g.baseline.level![0]).toBeCloseTo(big.level![0], 9);
    expect(g.push(rows[1])).not.toBe('healthy'); // scored at once: the window was kept
    big.level![0] = -1; // the filter holds a copy
    expect(g.baseline.level![0]).not.toBe(-1);
    expect(() => f.setBaseline(baselineFromHistory(healthyRows(100).subarray(0, 50 * 2), 2))).toThrow(/expected 4 dims, got 2/);
  });

  it('rejects bad options and sample widths, naming them', () => {
    expect(() => new DeviceFilter(baseline, { thetaV: NaN })).toThrow(/thetaV/);
    expect(() => new DeviceFilter(baseline, { windowSize: 1 })).toThrow(/windowSize/);
    expect(() => new DeviceFilter(baseline).push([1, 2])).toThrow(/expected 4 metrics/);
  });

  it('costs microseconds per sample', () => {
    const f = new DeviceFilter(baseline);
    const data = healthyRows(20000, 17);
    const t0 = process.hrtime.bigint();
    for (let r = 0; r < 20000; r++) f.push(data.subarray(r * N, (r + 1) * N));
    const us = Number(process.hrtime.bigint() - t0) / 1e3 / 20000;
    expect(us).toBeLessThan(50); // generous for CI; the bench figure is the real check
  });
});
