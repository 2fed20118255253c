import { NodeHealth, type HealthEvent } from '../../../../agent/filters/node-health';
import { DETECT_DEVICE_FILTER_OPTIONS } from '../../../../agent/filters/device-filter';
import { NodeTelemetryModel } from '../../../../shared/node-telemetry';
import { Rng } from '../../../../shared/rng';

/** Three nodes of one shape with the simulator's telemetry model; node 1 says nothing. */
function setup() {
  const events: HealthEvent[] = [];
  const h = new NodeHealth(['4/8', '4/8', '4/8'], [0, 0, 0], {}, (e) => events.push(e));
  const model = new NodeTelemetryModel(3, 1, new Rng(5));
  const x = new Float64Array(4);
  let t = 0;
  const step = (abnormal0: boolean) => {
    t++;
    for (const n of [0, 2]) {
      model.sample(n, n === 0 && abnormal0, 0.4, 0.5, x);
      h.sample(n, x, t);
    }
  };
  return { h, events, step };
}

describe('NodeHealth', () => {
  it('waits for every reporting node, and a silent node does not hold up the baselines', () => {
    const { h, step } = setup();
    for (let i = 0; i < 40; i++) step(false);
    expect(h.started).toBe(false); // node 1 has not reported
    h.silent(1);
    expect(h.started).toBe(true);
    expect(h.excluded(1)).toBe(false); // its device filter never excludes it
  });

  it('gives a node that was silent at the start a filter once it sends historySamples samples (a late join), and it can then be excluded', () => {
    const { h, events, step } = setup();
    h.silent(1);
    for (let i = 0; i < 36; i++) step(false);
    expect(h.started).toBe(true);
    const model = new NodeTelemetryModel(3, 1, new Rng(9));
    const x = new Float64Array(4);
    let t = 100;
    const late = (abnormal: boolean) => {
      model.sample(1, abnormal, 0.4, 0.5, x);
      h.sample(1, x, ++t);
    };
    for (let i = 0; i < 35; i++) late(false);
    expect(h.verdict(1)).toBeUndefined(); // 35 samples: still collecting
    late(false);
    late(false);
    expect(h.verdict(1)).toBeDefined(); // the 37th sample is judged on the others' baseline
    for (let i = 0; i < 60; i++) late(false);
    expect(h.excluded(1)).toBe(false);
    for (let i = 0; i < 20 && !h.excluded(1); i++) late(true);
    expect(h.excluded(1)).toBe(true);
    expect(events.at(-1)).toMatchObject({ node: 1, kind: 'exclude' });
  });

  it('excludes a node on abnormal telemetry with an event naming the rule, and re-admits it after healthy windows', () => {
    const { h, events, step } = setup();
    h.silent(1);
    for (let i = 0; i < 36; i++) step(false);
    expect(h.started).toBe(true);
    for (let i = 0; i < 60; i++) step(false);
    expect(h.excluded(0) || h.excluded(2)).toBe(false);
    let firstOut = -1;
    for (let i = 0; i < 20 && firstOut < 0; i++) {
      step(true);
      if (h.excluded(0)) firstOut = i;
    }
    expect(firstOut).toBeGreaterThanOrEqual(0);
    expect(h.excluded(2)).toBe(false);
    const out = events.find((e) => e.kind === 'exclude')!;
    expect(out).toMatchObject({ node: 0 });
    expect(out.rule).toMatch(/^device:/);
    expect(h.excludedNow()).toEqual([{ node: 0, rule: out.rule }]);
    // re-admitted after 5 'healthy' verdicts since the last 'faulty' ('ambiguous' ones neither count nor reset, as in the simulator)
    for (let i = 0; i < 200 && h.excluded(0); i++) step(false);
    expect(h.excluded(0)).toBe(false);
    expect(events.at(-1)).toMatchObject({ node: 0, kind: 'readmit', rule: 'device:healthy' });
  });

  it('isolates on QoS and re-admits after the isolation and healthy period', () => {
    const { h, events } = setup();
    h.observe(2, { requests: 20, successRate: 0.1, latencyMs: 5 }, 10);
    expect(h.excluded(2)).toBe(true);
    expect(events.at(-1)).toMatchObject({ node: 2, kind: 'isolate', rule: 'qos:success-rate' });
    h.tick(10 + 30);
    expect(h.excluded(2)).toBe(true); // 30 s isolation over, but no 60 s without a bad observation yet
    h.tick(10 + 61);
    expect(h.excluded(2)).toBe(false);
    expect(events.at(-1)).toMatchObject({ node: 2, kind: 'readmit', rule: 'qos:healthy-period' });
  });

  it('excludes a stale node only when it has a filter, under the eAP cap, and re-admits it by healthy windows', () => {
    const { h, events, step } = setup();
    h.silent(1);
    expect(h.stale(0, 36, 1)).toBe(false); // before the start nobody has a filter: not judged
    for (let i = 0; i < 40; i++) step(false);
    expect(h.stale(1, 36, 50)).toBe(false); // node 1 never reported: no filter, stays in
    expect(h.stale(7, 36, 50)).toBe(false); // no such node
    expect(h.excluded(1)).toBe(false);
    expect(h.stale(0, 36, 50)).toBe(true);
    expect(h.excludedNow()).toEqual([{ node: 0, rule: 'device:stale' }]);
    expect(events.at(-1)).toMatchObject({ node: 0, kind: 'exclude', rule: 'device:stale', reason: 'no new telemetry sample in 36 polls' });
    expect(h.stale(2, 36, 51)).toBe(false); // eAP 0's cap (1 of 3) is reached: node 2 stays in, said once
    expect(events.at(-1)).toMatchObject({ node: 2, kind: 'suppressed', rule: 'device:cap' });
    expect(h.stale(0, 72, 52)).toBe(true); // already out: no second event
    expect(events.filter((e) => e.kind === 'exclude')).toHaveLength(1);
    for (let i = 0; i < 20 && h.excluded(0); i++) step(false); // its samples flow again
    expect(h.excluded(0)).toBe(false);
    expect(events.at(-1)).toMatchObject({ node: 0, kind: 'readmit', rule: 'device:healthy' });
  });

  it('holds out at most half of the nodes of an eAP, and says so for the ones it keeps', () => {
    const events: HealthEvent[] = [];
    const h = new NodeHealth(['a', 'a', 'a', 'a'], [0, 0, 0, 0], {}, (e) => events.push(e));
    const model = new NodeTelemetryModel(4, 1, new Rng(9));
    const x = new Float64Array(4);
    const step = (bad: (n: number) => boolean) => {
      for (let n = 0; n < 4; n++) {
        model.sample(n, bad(n), 0.4, 0.5, x);
        h.sample(n, x, 0);
      }
    };
    for (let i = 0; i < 40; i++) step(() => false);
    for (let i = 0; i < 30; i++) step((n) => n < 3); // three of four nodes go bad
    const out = [0, 1, 2, 3].filter((n) => h.excluded(n));
    expect(out.length).toBe(2); // cap: floor(0.5 x 4)
    expect(h.excluded(3)).toBe(false);
    const kept = events.filter((e) => e.kind === 'suppressed');
    expect(kept.length).toBeGreaterThanOrEqual(1);
    expect(kept[0].rule).toBe('device:cap');
    expect(kept[0].reason).toMatch(/already has 2 of its 4 nodes out \(cap 2\)$/);
    expect(() => new NodeHealth(['a'], [0], { maxExcludedShare: 0 })).toThrow(/maxExcludedShare/);
  });

  it('re-admits a node after readmitQuietS without a faulty window, though it idles (ambiguous) while held out', () => {
    const run = (readmitQuietS: number) => {
      const events: HealthEvent[] = [];
      const h = new NodeHealth(['4/8', '4/8', '4/8'], [0, 0, 0], { readmitQuietS }, (e) => events.push(e));
      h.silent(1);
      const model = new NodeTelemetryModel(3, 1, new Rng(5));
      const x = new Float64Array(4);
      let t = 0;
      const step = (mode: 'ok' | 'bad' | 'idle') => {
        t++;
        for (const n of [0, 2]) {
          model.sample(n, n === 0 && mode === 'bad', n === 0 && mode === 'idle' ? 0.02 : 0.4, 0.5, x);
          h.sample(n, x, t);
        }
      };
      for (let i = 0; i < 100; i++) step('ok');
      for (let i = 0; i < 30; i++) step('bad'); // excluded, faulty throughout
      let lastFaulty = 0;
      const seen = new Set<string>();
      for (let i = 0; i < 90; i++) {
        step('idle'); // recovered, but held out it gets no work: CPU 2% against 40% before
        if (h.verdict(0) === 'faulty') lastFaulty = t;
        if (h.excluded(0)) seen.add(h.verdict(0)!);
      }
      return { h, events, lastFaulty, seen };
    };
    const never = run(Infinity);
    expect(never.h.excluded(0)).toBe(true);
    expect(never.seen.has('healthy')).toBe(false); // 5 healthy windows never come
    const quiet = run(30);
    expect(quiet.h.excluded(0)).toBe(false);
    const back = quiet.events.find((e) => e.kind === 'readmit')!;
    expect(back).toMatchObject({ node: 0, rule: 'device:quiet' });
    expect(back.timeS).toBe(quiet.lastFaulty + 30);
    expect(() => new NodeHealth(['a'], [0], { readmitQuietS: 0 })).toThrow(/readmitQuietS/);
  });

  describe('re-baselining from recent samples', () => {
    /** A node alone in its shape whose memory level grows 0.4 -> 0.6 over 15 minutes (a placement change, healthy). */
    const drift = (rebaselineEvery: number, second = false) => {
      const h = new NodeHealth(['4/8'], [0], { rebaselineEvery, second: second ? {} : null });
      const model = new NodeTelemetryModel(1, 1, new Rng(7));
      const x = new Float64Array(4);
      const last: Record<string, number> = {};
      for (let t = 0; t < 1800; t++) {
        model.sample(0, false, 0.3, 0.4 + 0.2 * Math.min(1, Math.max(0, (t - 36) / 900)), x);
        h.sample(0, x, t);
        if (t >= 1500) last[h.verdict(0)!] = (last[h.verdict(0)!] ?? 0) + 1;
      }
      return { h, last };
    };

    it('keeps a node whose level drifts slowly while it looks healthy in service (a fixed baseline excludes it, and never calls it healthy again)', () => {
      const fixed = drift(Infinity);
      expect(fixed.h.rebaselines).toBe(0);
      expect(fixed.h.eventCounts().exclude).toBeGreaterThan(0);
      expect(fixed.last.healthy ?? 0).toBe(0);
      const rebuilt = drift(60);
      expect(rebuilt.h.rebaselines).toBeGreaterThan(20);
      expect(rebuilt.h.excluded(0)).toBe(false);
      expect(rebuilt.h.eventCounts().exclude).toBe(0);
      expect(rebuilt.last.healthy).toBeGreaterThan(250); // of the last 300 verdicts
      // the L2 stage (on by default) is fitted on the same recent samples; a drift can still take
      // the newest windows past its calibration for a moment: brief device:l2 exclusions only, the
      // node in service at the end (docs/detect.md "Live")
      const withL2 = drift(60, true);
      expect(withL2.h.second.fits).toBeGreaterThan(0);
      expect(withL2.h.excluded(0)).toBe(false);
      expect(Object.keys(withL2.h.exclusionsByRule).filter((r) => r !== 'device:l2')).toEqual([]);
    });

    it("does not learn from a node it holds out: the shape's baseline stays that of its healthy nodes", () => {
      // node 2's baseline (the shape's, rebuilt every 60 s) after 900 s with node 0 abnormal and held out,
      // against the same run with node 0 healthy throughout
      const scaleOf = (bad: boolean) => {
        const { h, step } = setup();
        h.silent(1);
        for (let i = 0; i < 100; i++) step(false);
        for (let i = 0; i < 900; i++) step(bad);
        expect(h.rebaselines).toBeGreaterThanOrEqual(7);
        expect(h.excluded(0)).toBe(bad);
        expect(h.excluded(2)).toBe(false);
        const f = (h as unknown as { filters: { baseline: { scale: Float64Array } }[] }).filters[2];
        return Array.from(f.baseline.scale);
      };
      const healthy = scaleOf(false);
      const withBad = scaleOf(true);
      // node 0's wild samples, pooled in, would multiply the per-metric scale
      withBad.forEach((v, d) => expect(v).toBeLessThan(1.5 * healthy[d]));
    });

    it('rejects bad settings, naming them', () => {
      expect(() => new NodeHealth(['a'], [0], { rebaselineEvery: 0 })).toThrow(/rebaselineEvery/);
      expect(() => new NodeHealth(['a'], [0], { recentSamples: 20 })).toThrow(/recentSamples/);
    });
  });

  describe('the learned stage (windows for the orchestrator, verdicts back)', () => {
    /** Node 0 turns abnormal at step 80; the correlation rule is off, so its bad windows are 'ambiguous', never 'faulty'. */
    function run(steps: number) {
      const events: HealthEvent[] = [];
      const h = new NodeHealth(
        ['4/8', '4/8', '2/4'],
        [0, 0, 1],
        { rules: { ...DETECT_DEVICE_FILTER_OPTIONS, thetaR: 1e9 }, windows: { sampleHealthy: (n) => n !== 2 } },
        (e) => events.push(e),
      );
      const model = new NodeTelemetryModel(3, 1, new Rng(11));
      const fed: number[][][] = [[], [], []];
      const said: string[][] = [[], [], []];
      const x = new Float64Array(4);
      for (let t = 0; t < steps; t++) {
        for (let n = 0; n < 3; n++) {
          model.sample(n, n === 0 && t >= 80, 0.4, 0.5, x);
          fed[n].push(Array.from(x));
          h.sample(n, x, t);
          said[n].push(String(h.verdict(n)));
        }
      }
      return { h, events, fed, said };
    }

    it('queues every ambiguous window and one in healthyEvery healthy windows of the sampled nodes, with the raw values', () => {
      const { h, fed, said } = run(120);
      const count = (n: number, v: string) => said[n].filter((s) => s === v).length;
      const ws = h.takeWindows();
      expect(h.takeWindows()).toEqual([]); // taken
      const amb = ws.filter((w) => w.kind === 'ambiguous');
      expect(amb.length).toBe(h.verdicts.ambiguous);
      expect(amb.length).toBeGreaterThan(0);
      for (const n of [0, 1, 2]) expect(amb.filter((w) => w.node === n).length).toBe(count(n, 'ambiguous'));
      expect(count(0, 'ambiguous')).toBeGreaterThan(count(1, 'ambiguous'));
      const healthy = ws.filter((w) => w.kind === 'train');
      expect(healthy.some((w) => w.node === 2)).toBe(false); // not sampled by this agent
      expect(healthy.filter((w) => w.node === 1).length).toBe(Math.floor(count(1, 'healthy') / 3));
      // ids increase per node; shape, size and values: the last 12 samples, oldest first
      for (const n of [0, 1]) {
        const ids = ws.filter((w) => w.node === n).map((w) => w.id);
        expect(ids).toEqual([...ids].sort((a, b) => a - b));
      }
      const w = healthy.find((v) => v.node === 1)!;
      expect(w).toMatchObject({ shape: '4/8', steps: 12, dims: 4 });
      // node 1's first sampled window ends at its 3rd healthy verdict
      let end = -1;
      for (let t = 0, k = 0; t < said[1].length && end < 0; t++) if (said[1][t] === 'healthy' && ++k === 3) end = t;
      expect(Array.from(w.values)).toEqual(Array.from(new Float32Array(fed[1].slice(end - 11, end + 1).flat())));
    });

    it('an anomalous verdict excludes a node that still looks ambiguous (rule device:learned); a stale or normal one changes nothing', () => {
      const { h, events } = run(120);
      const amb = h.takeWindows().filter((w) => w.kind === 'ambiguous');
      expect(h.verdict(0)).toBe('ambiguous');
      h.learnedVerdict(1, 5, true, 3, 120); // node 1's latest window is healthy: stale
      h.learnedVerdict(0, amb[0].id, false, -0.5, 120);
      expect(h.excluded(0) || h.excluded(1)).toBe(false);
      expect(h.learned).toMatchObject({ stale: 1, normal: 1, anomalous: 0 });
      // learnedRun (5) anomalous verdicts in a row; a normal one in between starts the count again
      for (let k = 0; k < 4; k++) h.learnedVerdict(0, amb.at(-1)!.id, true, 2.5, 120);
      h.learnedVerdict(0, amb.at(-1)!.id, false, -1, 120);
      for (let k = 0; k < 4; k++) h.learnedVerdict(0, amb.at(-1)!.id, true, 2.5, 120);
      expect(h.excluded(0)).toBe(false);
      h.learnedVerdict(0, amb.at(-1)!.id, true, 2.5, 120);
      expect(h.excluded(0)).toBe(true);
      expect(h.excludedNow()).toEqual([{ node: 0, rule: 'device:learned' }]);
      expect(events.at(-1)).toMatchObject({ node: 0, kind: 'exclude', rule: 'device:learned' });
      expect(events.at(-1)!.reason).toMatch(/learned detector scored window \d+ 2\.50/);
      h.learnedVerdict(99, 1, true, 1, 120); // unknown node: ignored
      expect(h.learned.anomalous).toBe(9);
    });

    it('keeps at most maxPending windows, dropping the oldest', () => {
      const h = new NodeHealth(['a'], [0], { rules: { ...DETECT_DEVICE_FILTER_OPTIONS }, windows: { healthyEvery: 1, maxPending: 5 } });
      const model = new NodeTelemetryModel(1, 1, new Rng(3));
      const x = new Float64Array(4);
      for (let t = 0; t < 36 + 11 + 20; t++) {
        model.sample(0, false, 0.4, 0.5, x);
        h.sample(0, x, t);
      }
      const ws = h.takeWindows();
      expect(ws.length).toBe(5);
      expect(h.learned.dropped).toBe(h.learned.trainSent + h.learned.ambiguousSent - 5);
      expect(ws.at(-1)!.id).toBe(h.learned.trainSent + h.learned.ambiguousSent);
    });

    it('sends nothing when off (the simulator)', () => {
      const h = new NodeHealth(['a'], [0]);
      const model = new NodeTelemetryModel(1, 1, new Rng(3));
      const x = new Float64Array(4);
      for (let t = 0; t < 80; t++) {
        model.sample(0, false, 0.4, 0.5, x);
        h.sample(0, x, t);
      }
      expect(h.takeWindows()).toEqual([]);
    });
  });
});

describe('NodeHealth after a placement change', () => {
  /**
   * Nodes 0 and 1 of one shape; from sample 100 node 0's reserved memory and load step up (replicas
   * added); `markAt`: when the placement change is noted (null: never); `breakAt`: node 0 turns abnormal.
   */
  function run(markAt: number | null, breakAt = Infinity) {
    const events: HealthEvent[] = [];
    const h = new NodeHealth(['4/8', '4/8'], [0, 0], {}, (e) => events.push(e));
    const model = new NodeTelemetryModel(2, 1, new Rng(11));
    const x = new Float64Array(4);
    for (let t = 1; t <= 200; t++) {
      if (t === markAt) h.placementChanged([0]);
      for (const n of [0, 1]) {
        const after = n === 0 && t >= 100;
        model.sample(n, n === 0 && t >= breakAt, after ? 0.7 : 0.4, after ? 0.9 : 0.3, x);
        h.sample(n, x, t);
      }
    }
    return { h, out: events.filter((e) => e.kind === 'exclude') };
  }

  it('a step the change makes excludes the node when unmarked, not when the change is marked (also a sample or three early)', () => {
    const unmarked = run(null);
    expect(unmarked.out.map((e) => [e.node, e.rule])).toEqual([[0, 'device:faulty']]);
    expect(unmarked.out[0].timeS).toBeGreaterThanOrEqual(100);
    expect(unmarked.out[0].timeS).toBeLessThan(112); // a window holding the step
    for (const markAt of [100, 99, 97]) {
      const marked = run(markAt);
      expect({ markAt, out: marked.out }).toEqual({ markAt, out: [] });
      expect(marked.h.placementBreaks).toBe(1);
    }
    // a node named twice in one change (two orders on it) is one break, as one placement frame makes
    const twice = new NodeHealth(['4/8', '4/8'], [0, 0]);
    const x = new Float64Array(4);
    const model = new NodeTelemetryModel(2, 1, new Rng(11));
    for (let t = 1; t <= 60; t++) {
      for (const n of [0, 1]) {
        model.sample(n, false, 0.4, 0.3, x);
        twice.sample(n, x, t);
      }
    }
    twice.placementChanged([1, 0, 1]);
    expect(twice.placementBreaks).toBe(2);
  });

  it('a node that breaks with the change is still excluded, within a window of its first abnormal sample', () => {
    const r = run(100, 100);
    expect(r.out.map((e) => e.node)).toEqual([0]);
    expect(r.out[0].timeS).toBeLessThan(112);
    // at most a few samples after the unmarked run (here the step itself was part of the evidence there: 100 vs 102)
    const unmarked = run(null, 100).out[0].timeS;
    expect(r.out[0].timeS - unmarked).toBeGreaterThanOrEqual(0);
    expect(r.out[0].timeS - unmarked).toBeLessThanOrEqual(3);
  });

  it('marks no node without a filter yet, nor one it does not have', () => {
    const h = new NodeHealth(['4/8'], [0]);
    h.placementChanged([0]); // still collecting its history
    h.placementChanged([-1, 3, 0.5]);
    expect(h.placementBreaks).toBe(0);
  });
});
