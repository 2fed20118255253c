/**
 * The canary's statistical rule (orchestrator/canary.ts canaryDecision) on counts where the answer
 * is known, and the rollout's bookkeeping on a fake registry and clock.
 */
import {
  canaryConfigProblem,
  canaryDecision,
  canaryEaps,
  canaryGroup,
  clusterDiffVariance,
  CanaryRollout,
  type CanaryRolloutOptions,
  DEFAULT_CANARY,
  normalQuantile,
  type CanaryConfig,
  type Outcomes,
} from '../../../orchestrator/canary';
import type { NodeSample, WeightsBody } from '../../../shared/protocol/envelope';

/** `n` requests of which a share `rate` in time, the rest refused. */
const group = (n: number, rate: number): Outcomes => {
  const x = Math.round(n * rate);
  return { requests: n, inDeadline: x, late: 0, refused: n - x };
};
const rule = { margin: 0.03, alpha: 0.05, minRequests: 300, maxWindows: 4 };

describe('canaryDecision', () => {
  it('waits while either group has fewer requests than minRequests', () => {
    const d = canaryDecision({ canary: group(299, 0.1), control: group(5000, 0.9), baseline: null }, rule, 1);
    expect(d.decision).toBe('wait');
    expect(d.reason).toMatch(/too few requests/);
  });

  it('rolls back a canary far below the control at the first window', () => {
    const d = canaryDecision({ canary: group(1000, 0.5), control: group(1500, 0.8), baseline: null }, rule, 1);
    expect(d.decision).toBe('rollback');
    expect(d.z).toBeLessThan(-d.critical);
    expect(d.reason).toMatch(/worse than the control by more than the margin/);
  });

  it('promotes a canary level with the control once the counts are large enough', () => {
    const d = canaryDecision({ canary: group(5000, 0.8), control: group(7500, 0.8), baseline: null }, rule, 1);
    expect(d.decision).toBe('promote');
    expect(d.z).toBeGreaterThan(d.critical);
  });

  it('waits for more samples when a small loss is neither shown within nor beyond the margin', () => {
    // d = -0.02, se ~ 0.018: z = 0.56, between -2.24 and 2.24
    const d = canaryDecision({ canary: group(1000, 0.78), control: group(1000, 0.8), baseline: null }, rule, 1);
    expect(d.decision).toBe('wait');
    expect(d.diff).toBeCloseTo(-0.02, 6);
    // the same counts at the last window: decided on the estimate (within the margin: promote)
    expect(canaryDecision({ canary: group(1000, 0.78), control: group(1000, 0.8), baseline: null }, rule, 4).decision).toBe('promote');
    // beyond the margin on the estimate, not significantly: rolled back at the last window
    const last = canaryDecision({ canary: group(1000, 0.76), control: group(1000, 0.8), baseline: null }, rule, 4);
    expect(last.decision).toBe('rollback');
    expect(last.reason).toMatch(/undecided after 4 windows, the estimate is beyond the margin/);
  });

  it('rolls back at the last window when the canary was never measured', () => {
    const d = canaryDecision({ canary: group(10, 0.9), control: group(5000, 0.8), baseline: null }, rule, 4);
    expect(d.decision).toBe('rollback');
    expect(d.reason).toMatch(/never published to every eAP unmeasured/);
  });

  it('takes out the difference the groups had before the start (difference in differences)', () => {
    // canary eAPs are weaker eAPs: 0.70 against 0.80 before and after; the version changed nothing
    const now = { canary: group(4000, 0.7), control: group(6000, 0.8) };
    expect(canaryDecision({ ...now, baseline: null }, rule, 1).decision).toBe('rollback');
    const withBase = canaryDecision({ ...now, baseline: { canary: group(12000, 0.7), control: group(18000, 0.8) } }, rule, 1);
    expect(withBase.usedBaseline).toBe(true);
    expect(withBase.diff).toBeCloseTo(0, 6);
    expect(withBase.decision).toBe('promote');
    // a baseline below minRequests per group is not used (and the reason says so)
    const thin = canaryDecision({ ...now, baseline: { canary: group(100, 0.7), control: group(18000, 0.8) } }, rule, 1);
    expect(thin.usedBaseline).toBe(false);
    expect(thin.reason).toMatch(/no baseline/);
  });

  it('never divides by a zero variance (every request in time in both groups)', () => {
    const d = canaryDecision({ canary: group(1000, 1), control: group(1000, 1), baseline: null }, rule, 1);
    expect(Number.isFinite(d.z)).toBe(true);
    expect(d.decision).toBe('promote');
  });

  it('widens se by the per-second spread of the difference when requests fail together (waits where the binomial alone rolls back)', () => {
    // d = -0.06 on 3000 requests each: binomial se 0.011, z -2.8: rolled back
    const now = { canary: group(3000, 0.74), control: group(3000, 0.8), baseline: null };
    expect(canaryDecision(now, rule, 1).decision).toBe('rollback');
    // the same counts with a difference that swings from second to second (variance 8e-4): se 0.028, z -1.1
    const spread = canaryDecision({ ...now, diffVar: 8e-4 }, rule, 1);
    expect(spread.se).toBeCloseTo(Math.sqrt(8e-4), 6);
    expect(spread.decision).toBe('wait');
    // a spread below the binomial changes nothing
    expect(canaryDecision({ ...now, diffVar: 1e-9 }, rule, 1).se).toBeCloseTo(canaryDecision(now, rule, 1).se, 12);
  });

  it('clusterDiffVariance: 0 when both rates hold every second, swings both groups share cancel, undefined below 3 seconds', () => {
    const steady = [
      { nc: 100, xc: 80, nk: 150, xk: 120 },
      { nc: 50, xc: 40, nk: 300, xk: 240 },
      { nc: 200, xc: 160, nk: 100, xk: 80 },
    ];
    expect(clusterDiffVariance(steady)).toBeCloseTo(0, 12);
    // both groups swing together (a slow second for everyone): residuals cancel
    const shared = [
      { nc: 100, xc: 90, nk: 100, xk: 90 },
      { nc: 100, xc: 10, nk: 100, xk: 10 },
      { nc: 100, xc: 50, nk: 100, xk: 50 },
    ];
    expect(clusterDiffVariance(shared)).toBeCloseTo(0, 12);
    // the canary alone swings: p_c = 0.5, residuals 0.4/3, -0.4/3, 0 -> 3/2 x 2 x (0.4/3)^2
    const own = [
      { nc: 100, xc: 90, nk: 100, xk: 50 },
      { nc: 100, xc: 10, nk: 100, xk: 50 },
      { nc: 100, xc: 50, nk: 100, xk: 50 },
    ];
    expect(clusterDiffVariance(own)).toBeCloseTo(1.5 * 2 * (0.4 / 3) ** 2, 12);
    expect(clusterDiffVariance(own.slice(0, 2))).toBeUndefined();
  });

  it('clusterDiffVariance with lagS: neighbouring seconds that swing apart lower it, seconds that fail together raise it (truncated kernel)', () => {
    // the canary alone swings, up then down: residuals 0.4/3, -0.4/3, 0; lag 1 adds 2 x (-(0.4/3)^2): the swings cancel
    const apart = [
      { nc: 100, xc: 90, nk: 100, xk: 50 },
      { nc: 100, xc: 10, nk: 100, xk: 50 },
      { nc: 100, xc: 50, nk: 100, xk: 50 },
    ];
    expect(clusterDiffVariance(apart, 0)).toBeCloseTo(1.5 * 2 * (0.4 / 3) ** 2, 12);
    expect(clusterDiffVariance(apart, 1)).toBeCloseTo(0, 12);
    // two good seconds, then two bad ones: residuals .1, .1, -.1, -.1; lag 1 adds 2 x 0.01
    const together = [
      { nc: 100, xc: 90, nk: 100, xk: 50 },
      { nc: 100, xc: 90, nk: 100, xk: 50 },
      { nc: 100, xc: 10, nk: 100, xk: 50 },
      { nc: 100, xc: 10, nk: 100, xk: 50 },
    ];
    expect(clusterDiffVariance(together, 0)).toBeCloseTo((4 / 3) * 0.04, 12);
    expect(clusterDiffVariance(together, 1)).toBeCloseTo((4 / 3) * 0.06, 12);
    // lag 2 adds 2 x (-0.01 - 0.01), lag 3 2 x (-0.01): floored at 0; a lag longer than the seconds uses the lags there are
    expect(clusterDiffVariance(together, 2)).toBeCloseTo((4 / 3) * 0.02, 12);
    expect(clusterDiffVariance(together, 30)).toBe(0);
  });

  it('uses the one-sided quantile of alpha split over the windows (Bonferroni)', () => {
    expect(normalQuantile(0.975)).toBeCloseTo(1.959964, 5);
    expect(normalQuantile(0.0125)).toBeCloseTo(-2.241403, 5);
    expect(canaryDecision({ canary: group(1000, 0.8), control: group(1000, 0.8), baseline: null }, rule, 1).critical).toBeCloseTo(
      2.241403,
      5,
    );
  });
});

describe('canary config and eAPs', () => {
  it('names the field of a value out of range', () => {
    const bad: [Partial<CanaryConfig>, string][] = [
      [{ share: 1 }, 'share'],
      [{ share: 0 }, 'share'],
      [{ windowS: 0 }, 'windowS'],
      [{ maxWindows: 1.5 }, 'maxWindows'],
      [{ margin: -0.1 }, 'margin'],
      [{ alpha: 0.9 }, 'alpha'],
      [{ minRequests: 0 }, 'minRequests'],
      [{ settleS: -1 }, 'settleS'],
      [{ baselineS: Number.NaN }, 'baselineS'],
      [{ lagS: 1.5 }, 'lagS'],
      [{ lagS: 31 }, 'lagS'],
    ];
    for (const [patch, field] of bad) expect(canaryConfigProblem({ ...DEFAULT_CANARY, ...patch })?.field).toBe(field);
    expect(canaryConfigProblem(DEFAULT_CANARY)).toBeNull();
  });

  it('takes at least one eAP and leaves at least one as the control', () => {
    expect(canaryEaps(0.4, 5)).toEqual([0, 1]);
    expect(canaryEaps(0.01, 5)).toEqual([0]);
    expect(canaryEaps(0.99, 2)).toEqual([0]);
  });

  it('the group of each canary: the first eAPs every time, the next ones in turn (rotate), or the listed ones', () => {
    const first = { share: 0.4, eaps: 'first' as const };
    expect([0, 1, 2].map((r) => canaryGroup(first, 5, r))).toEqual([
      [0, 1],
      [0, 1],
      [0, 1],
    ]);
    const rotate = { share: 0.4, eaps: 'rotate' as const };
    const groups = [0, 1, 2, 3].map((r) => canaryGroup(rotate, 5, r));
    expect(groups).toEqual([
      [0, 1],
      [2, 3],
      [0, 4],
      [1, 2],
    ]);
    // within three canaries every eAP has been in one, and none is ever left without a control
    expect(new Set(groups.slice(0, 3).flat()).size).toBe(5);
    expect(canaryGroup({ share: 0.99, eaps: 'rotate' }, 2, 1)).toEqual([1]);
    expect(canaryGroup({ share: 0.4, eaps: [4, 2] }, 5, 7)).toEqual([2, 4]);
  });

  it('names the eaps field when it is not "first", "rotate" or a list of distinct eAPs that leaves a control', () => {
    const problem = (eaps: unknown, n?: number) => canaryConfigProblem({ ...DEFAULT_CANARY, eaps: eaps as CanaryConfig['eaps'] }, n);
    expect(problem('rotate', 5)).toBeNull();
    expect(problem([3], 5)).toBeNull();
    expect(problem('some')).toEqual({ field: 'eaps', why: 'must be "first", "rotate" or a list of eAP ids, got "some"' });
    expect(problem([])).toEqual({ field: 'eaps', why: 'must name at least one eAP' });
    expect(problem([0, 1.5])?.why).toBe('must list eAP ids (integers from 0), got 1.5');
    expect(problem([2, 2])?.why).toBe('names an eAP twice: [2,2]');
    expect(problem([0, 5], 5)?.why).toBe("names eAP 5, but the scenario's eAPs are 0-4");
    expect(problem([0, 1], 2)?.why).toBe('must leave at least one eAP as the control, got all 2');
    expect(problem([0, 1])).toBeNull(); // without the scenario, only the shape is checked
  });
});

describe('CanaryRollout (fake registry and clock)', () => {
  let now = 0;
  const events: [string, string][] = [];
  const calls: string[] = [];
  let next = 2;
  const body = (): WeightsBody => ({ version: next++, checksum: 0, shapes: [[1]], tensors: [new Float32Array(1)] });
  const registry = {
    publishWeights: () => (calls.push('all'), body()),
    publishCanary: (_t: unknown, _h: unknown, eaps: readonly number[]) => (calls.push(`canary ${eaps.join(',')}`), body()),
    promoteCanary: () => void calls.push('promote'),
    restore: (good: number) => (calls.push(`restore ${good}`), body()),
  };
  const rejected: unknown[] = [];
  const store = { putCanaryState: () => undefined, putRejectedModel: (r: unknown) => void rejected.push(r) };
  // 4 windows (the default until session 54): the loops below give a verdict 1 + 4 x 10 s at most
  const config: CanaryConfig = { ...DEFAULT_CANARY, windowS: 10, maxWindows: 4, settleS: 1, baselineS: 0, minRequests: 100 };
  const tel = (n: number, rate: number): NodeSample[] => [
    { node: 0, ts: 0, cpu: 0, mem: 0, disk: 0, upBwMbps: 0, requests: n, succeeded: n, inDeadline: Math.round(n * rate), latencyMsSum: 0 },
  ];
  let rollout: CanaryRollout;
  const reloads: number[] = [];
  beforeEach(() => {
    now = 0;
    next = 2;
    events.length = 0;
    calls.length = 0;
    rejected.length = 0;
    reloads.length = 0;
    rollout = rolloutWith({
      onRolledBack: (b) => void reloads.push(b.version),
      onFinished: () => void calls.push(`finished (running: ${rollout.running?.version ?? 'none'})`),
    });
  });
  afterEach(() => rollout.dispose());

  /** A rollout over 5 eAPs on the fake registry, store and clock, good version 1, with `o` on top. */
  function rolloutWith(o: Partial<CanaryRolloutOptions>): CanaryRollout {
    return new CanaryRollout({
      config,
      numEaps: 5,
      registry,
      store,
      current: 1,
      event: (k, m) => void events.push([k, m]),
      now: () => now,
      ...o,
    });
  }

  /** One second of telemetry from every eAP of `r`: the canary eAPs (0, 1) at `c`, the others at `k`. */
  const second = (c: number, k: number, r: CanaryRollout = rollout) => {
    now += 1000;
    for (let e = 0; e < 5; e++) r.observe(e, tel(50, e < 2 ? c : k));
    r.tick();
  };

  it('rolls a bad version back at the first window, restores the good one and drops the one waiting', () => {
    expect(rollout.propose([], 'softplus1', 'test')?.version).toBe(2);
    expect(calls).toEqual(['canary 0,1']);
    expect(rollout.propose([], 'softplus1', 'next')).toBeNull(); // waits behind the canary
    rollout.applied(0, 2);
    rollout.applied(1, 2);
    for (let i = 0; i < 11 && rollout.running; i++) second(0.3, 0.8);
    expect(rollout.running).toBeNull();
    expect(calls).toEqual(['canary 0,1', 'restore 1', 'finished (running: none)']);
    expect(reloads).toEqual([3]);
    expect(rollout.goodVersion).toBe(3);
    expect(rollout.stats).toEqual({ started: 1, promoted: 0, rolledBack: 1, superseded: 1 });
    expect(rejected).toEqual([expect.objectContaining({ version: 2, basedOn: 1, source: 'canary' })]);
    expect(events.map((e) => e[0])).toEqual(['canary-start', 'canary-queued', 'canary-rollback']);
  });

  it('promotes a good version after its windows and starts the one waiting', () => {
    rollout.propose([], 'softplus1', 'test');
    rollout.propose([], 'softplus1', 'next');
    rollout.applied(0, 2);
    rollout.applied(1, 2);
    for (let i = 0; i < 41 && rollout.stats.promoted === 0; i++) second(0.8, 0.8);
    expect(rollout.stats.promoted).toBe(1);
    // the verdict ends the placement loop's hold before the waiting version starts (main.ts: resume)
    expect(calls).toEqual(['canary 0,1', 'promote', 'finished (running: none)', 'canary 0,1']);
    expect(rollout.running?.version).toBe(3);
    expect(rollout.goodVersion).toBe(2);
  });

  it('starts every canary with its whole baseline: after the start, and the version queued behind a canary after its verdict', () => {
    // a canary zone 20 points weaker than the control, whatever the version: only the baseline takes it out
    const r = rolloutWith({ config: { ...config, baselineS: 5 }, onFinished: () => void calls.push('finished') });
    try {
      second(0.6, 0.8, r);
      expect(r.propose([], 'softplus1', 'a')).toBeNull(); // 1 s after the start: 4 s to go
      expect(r.waiting).toEqual({ source: 'a', sinceMs: 1000, waitsFor: 'a baseline of 5 s with every eAP on the same version' });
      expect(events).toEqual([
        [
          'canary-baseline',
          'a version waits for a baseline of 5 s with every eAP on the same version before its canary: 1.0 s so far, since the orchestrator started',
        ],
      ]);
      for (let i = 0; i < 3; i++) second(0.6, 0.8, r);
      expect(calls).toEqual([]);
      second(0.6, 0.8, r);
      expect(calls).toEqual(['canary 0,1']);
      expect(r.running?.startedMs).toBe(5000);
      expect(r.evidence().baseline?.canary.requests).toBe(400); // eAPs 0 and 1, the 4 s of 50 requests it saw before the start
      r.applied(0, 2);
      r.applied(1, 2);
      expect(r.propose([], 'softplus1', 'b')).toBeNull(); // queued behind the canary
      for (let i = 0; i < 41 && r.stats.promoted === 0; i++) second(0.6, 0.8, r);
      expect(r.stats).toMatchObject({ promoted: 1, rolledBack: 0 });
      const promotedMs = now;
      // b waits settleS + baselineS after the verdict: the seconds before it had eAPs 0 and 1 on v2
      expect(calls).toEqual(['canary 0,1', 'promote', 'finished']);
      expect(r.waiting).toMatchObject({ source: 'b', sinceMs: promotedMs });
      expect(events.at(-1)).toEqual([
        'canary-baseline',
        'b version waits for a baseline of 5 s with every eAP on the same version before its canary: 0.0 s so far, since the last canary ended',
      ]);
      for (let i = 0; i < 5; i++) second(0.6, 0.8, r);
      expect(r.running).toBeNull();
      second(0.6, 0.8, r);
      expect(r.running).toMatchObject({ version: 3, startedMs: promotedMs + 6000 });
      // its baseline: the 5 s after the settle, every eAP on v2, the zone's 20 points in it
      const b = r.evidence().baseline!;
      expect(b.canary).toEqual({ requests: 500, inDeadline: 300, late: 200, refused: 0 });
      expect(b.control.inDeadline / b.control.requests).toBeCloseTo(0.8, 12);
      r.applied(0, 3);
      r.applied(1, 3);
      for (let i = 0; i < 41 && r.stats.promoted === 1; i++) second(0.6, 0.8, r);
      expect(r.stats).toMatchObject({ started: 2, promoted: 2, rolledBack: 0 });
    } finally {
      r.dispose();
    }
  });

  it('reports every judged window to onWindow, the verdict last', () => {
    const judged: [number, string][] = [];
    const r = rolloutWith({ onWindow: (d, w) => void judged.push([w, d.decision]) });
    try {
      r.propose([], 'softplus1', 'test');
      r.applied(0, 2);
      r.applied(1, 2);
      for (let i = 0; i < 41 && r.stats.promoted === 0; i++) second(0.8, 0.8, r);
      expect(r.stats.promoted).toBe(1);
      expect(judged.map((j) => j[0])).toEqual(judged.map((_, i) => i + 1));
      expect(judged.at(-1)?.[1]).toBe('promote');
      expect(judged.slice(0, -1).every((j) => j[1] === 'wait')).toBe(true);
    } finally {
      r.dispose();
    }
  });

  it('counts a canary eAP only once it applied the version', () => {
    rollout.propose([], 'softplus1', 'test');
    for (let i = 0; i < 5; i++) second(0.1, 0.8);
    expect(rollout.evidence().canary.requests).toBe(0);
    rollout.applied(0, 2);
    second(0.8, 0.8);
    second(0.8, 0.8);
    expect(rollout.evidence().canary.requests).toBe(100); // eAP 0 only, its frames from 1 s (settleS) after its ack
    for (let i = 0; i < 2; i++) second(0.8, 0.8);
    expect(rollout.evidence().diffVar).toBeCloseTo(0, 12); // every second at the same rates: no spread
  });

  describe('under the actor switch (mainActorSinceMs)', () => {
    let mainSince: number | null;
    let baselines: number;
    let switched: CanaryRollout;
    const base: CanaryConfig = { ...config, baselineS: 5 };
    beforeEach(() => {
      mainSince = null;
      baselines = 0;
      switched = rolloutWith({ config: base, mainActorSinceMs: () => mainSince, onBaselineStarted: () => void baselines++ });
    });
    afterEach(() => switched.dispose());
    const tick = (c: number, k: number) => second(c, k, switched);

    it('waits for a baseline under the main actor when the light one dispatches, and reads only that baseline', () => {
      for (let i = 0; i < 10; i++) tick(0.3, 0.8); // the light actor: the groups differ by 0.5
      expect(switched.propose([], 'softplus1', 'test')).toBeNull();
      expect(baselines).toBe(1);
      expect(switched.waiting).toEqual({ source: 'test', sinceMs: 10_000, waitsFor: 'a baseline under the main actor (6 s of it)' });
      expect(events).toEqual([
        [
          'canary-baseline',
          expect.stringMatching(
            /^test version waits for a baseline under the main actor \(6 s of it\) before its canary: the light actor dispatches now$/,
          ),
        ],
      ]);
      // the newest proposal replaces the waiting one
      expect(switched.propose([], 'softplus1', 'next')).toBeNull();
      expect(switched.stats.superseded).toBe(1);
      // still light: nothing starts
      for (let i = 0; i < 10; i++) tick(0.3, 0.8);
      expect(calls).toEqual([]);
      // the main actor from t = 20 s: both groups at 0.8; the canary starts after settleS + baselineS = 6 s of it
      mainSince = now;
      for (let i = 0; i < 5; i++) tick(0.8, 0.8);
      expect(calls).toEqual([]);
      tick(0.8, 0.8);
      expect(calls).toEqual(['canary 0,1']);
      expect(switched.waiting).toBeNull();
      expect(switched.running).toMatchObject({ version: 2, startedMs: 26_000 }); // 6 s after the main actor's start
      expect(events.map((e) => e[0])).toEqual(['canary-baseline', 'canary-start']);
      expect(events[1][1]).toMatch(/^next weights v2 to eAPs 0, 1 first/);
      // the baseline is the main actor's 5 settled seconds (21-26 s), not the light actor's difference before
      const b = switched.evidence().baseline!;
      expect(b.canary).toEqual({ requests: 500, inDeadline: 400, late: 100, refused: 0 });
      expect(b.control.inDeadline / b.control.requests).toBeCloseTo(0.8, 12);
    });

    it('starts at once when the main actor has dispatched for the whole baseline, and without the switch', () => {
      mainSince = -Infinity; // a model without the switch
      now = 5000; // the baseline's 5 s since the start
      expect(switched.propose([], 'softplus1', 'test')?.version).toBe(2);
      expect(switched.running?.startedMs).toBe(5000); // at once
      expect(baselines).toBe(0);
      expect(events.map((e) => e[0])).toEqual(['canary-start']);
    });

    it('waits out the rest of the baseline when the main actor dispatched for less than it', () => {
      mainSince = 0;
      now = 3000; // 3 s of the main actor, 6 s needed
      expect(switched.propose([], 'softplus1', 'test')).toBeNull();
      expect(events).toEqual([['canary-baseline', expect.stringMatching(/: the main actor has dispatched for 3\.0 s$/)]]);
      tick(0.8, 0.8);
      tick(0.8, 0.8);
      expect(calls).toEqual([]);
      tick(0.8, 0.8);
      expect(calls).toEqual(['canary 0,1']);
      expect(switched.running?.startedMs).toBe(6000); // settleS + baselineS after the main actor's start
    });
  });

  it("rotates the canary group: each canary the next eAPs, each verdict naming every eAP's rate", () => {
    const r = rolloutWith({ config: { ...config, eaps: 'rotate' } });
    /** One second of telemetry: the eAPs of the running canary at `c`, the others at `k`. */
    const tick = (c: number, k: number) => {
      now += 1000;
      const group = new Set(r.running?.eaps ?? []);
      for (let e = 0; e < 5; e++) r.observe(e, tel(50, group.has(e) ? c : k));
      r.tick();
    };
    r.propose([], 'softplus1', 'a');
    for (const e of r.running!.eaps) r.applied(e, 2);
    for (let i = 0; i < 41 && r.running; i++) tick(0.8, 0.8);
    r.propose([], 'softplus1', 'b');
    expect(r.running?.eaps).toEqual([2, 3]);
    for (const e of r.running!.eaps) r.applied(e, 3);
    for (let i = 0; i < 11 && r.running; i++) tick(0.3, 0.8);
    r.dispose();
    expect(calls).toEqual(['canary 0,1', 'promote', 'canary 2,3', 'restore 2']);
    expect(events.map((e) => e[0])).toEqual(['canary-start', 'canary-promote', 'canary-start', 'canary-rollback']);
    expect(events[2][1]).toMatch(/^b weights v3 to eAPs 2, 3 first/);
    // the rollback says which eAPs it rests on: the canary eAPs 2 and 3 at 0.3, the control 0, 1 and 4 at 0.8
    expect(events[3][1]).toMatch(
      /\(per eAP, in time of requests: canary 2 0\.300 of \d+, 3 0\.300 of \d+; control 0 0\.800 of \d+, 1 0\.800 of \d+, 4 0\.800 of \d+\)$/,
    );
    expect(events[1][1]).toMatch(/canary 0 0\.800 of \d+, 1 0\.800 of \d+; control 2 0\.800/);
  });

  it('a listed canary group: only those eAPs get the version first, and only they count as the canary', () => {
    const r = rolloutWith({ config: { ...config, eaps: [3] } });
    r.propose([], 'softplus1', 'test');
    expect(calls).toEqual(['canary 3']);
    r.applied(3, 2);
    for (let i = 0; i < 3; i++) {
      now += 1000;
      for (let e = 0; e < 5; e++) r.observe(e, tel(50, e === 3 ? 0.2 : 0.9));
    }
    const rows = r.perEap();
    r.dispose();
    expect(rows.map((x) => [x.eap, x.canary])).toEqual([
      [3, true],
      [0, false],
      [1, false],
      [2, false],
      [4, false],
    ]);
    // counted from 1 s (settleS) after the ack at 0 s (canary) and after the start (control): the frames at 1, 2 and 3 s
    expect(rows[0]).toMatchObject({ requests: 150, inDeadline: 30 });
    expect(rows[1]).toMatchObject({ requests: 150, inDeadline: 135 });
  });

  it('sends the first version to every eAP at once (nothing to compare with)', () => {
    const r = rolloutWith({ current: null });
    r.propose([], 'softplus1', 'test');
    r.dispose();
    expect(calls).toEqual(['all']);
    expect(events.map((e) => e[0])).toEqual(['canary-skip']);
  });
});
