/**
 * The regime guard (shared/dispatch/guard.ts): hysteresis of one eAP's state, option checks, and
 * the guarded policy in the simulator (tiny scenario, real episodes): idle at light load, where it
 * must decide exactly as the learned policy does, and taking over in overload.
 */
import {
  DEFAULT_GUARD,
  GuardedDispatch,
  guardOptionsProblem,
  RegimeGuard,
  type GuardSwitch,
  type RegimeGuardOptions,
} from '../../../shared/dispatch/guard';
import { loadScenario } from '../../../shared/scenario';
import { makeDispatch, makeOrchestration } from '../../../training/baselines/registry';
import { runEpisode } from '../../../training/jobs/rollout';
import { buildRequests } from '../../../training/workload';

const OPTS: RegimeGuardOptions = { fallback: 'round-robin', enter: 0.5, exit: 0.2, halfLife: 4, minDwell: 3 };

describe('RegimeGuard', () => {
  it('switches to the fallback once the late share reaches enter, stays between exit and enter, and comes back at exit', () => {
    const g = new RegimeGuard(OPTS, 2);
    const switches: GuardSwitch[] = [];
    const feed = (late: boolean) => {
      const s = g.observe(late);
      if (s) switches.push(s);
      return s;
    };
    for (let i = 0; i < 20; i++) {
      const before = g.lateShare;
      feed(true);
      expect(g.lateShare).toBeGreaterThan(before);
      if (g.fallback) break;
    }
    expect(g.fallback).toBe(true);
    expect(switches).toHaveLength(1);
    expect(switches[0]).toMatchObject({ eap: 2, fallback: true });
    expect(switches[0].lateShare).toBeGreaterThanOrEqual(OPTS.enter);
    // on time again: the share falls, and the guard holds the fallback until it reaches exit
    while (g.lateShare > OPTS.exit) {
      expect(g.fallback).toBe(true);
      feed(false);
    }
    expect(g.fallback).toBe(false);
    expect(switches).toHaveLength(2);
    expect(switches[1].lateShare).toBeLessThanOrEqual(OPTS.exit);
  });

  it('never switches twice within minDwell decisions, however the signal moves', () => {
    const g = new RegimeGuard({ ...OPTS, halfLife: 0.1, minDwell: 5 }, 0);
    const at: number[] = [];
    for (let i = 0; i < 60; i++) {
      const s = g.observe(i % 2 === 0);
      if (s) at.push(s.decision);
    }
    expect(at.length).toBeGreaterThan(2);
    for (let k = 1; k < at.length; k++) expect(at[k] - at[k - 1]).toBeGreaterThanOrEqual(5);
  });

  it('with a middle level: learned -> mid at mid.enter -> top at enter, and down again through mid.exit and exit', () => {
    const g = new RegimeGuard({ ...OPTS, enter: 0.6, exit: 0.4, mid: { fallback: 'lec', enter: 0.2, exit: 0.1 } }, 1);
    const levels: number[] = [];
    const feed = (late: boolean, until: (x: number) => boolean) => {
      for (let i = 0; i < 200 && !until(g.lateShare); i++) {
        const s = g.observe(late);
        if (s) {
          levels.push(s.level);
          expect(s.fallback).toBe(s.level > 0);
        }
      }
    };
    feed(true, () => g.level === 2);
    expect(levels).toEqual([1, 2]);
    feed(false, () => g.level === 0);
    expect(levels).toEqual([1, 2, 1, 0]);
    expect(g.lateShare).toBeLessThanOrEqual(0.1);
  });

  it('a spreading share: 0 up to spread.from, linear to spread.max at spread.to, max above; decider draws against it', () => {
    const g = new RegimeGuard(
      { ...OPTS, enter: 1, exit: 0.9, halfLife: 1, spread: { fallback: 'round-robin', from: 0.2, to: 0.6, max: 0.5 } },
      0,
    );
    const at = (late: boolean) => {
      g.observe(late);
      return g.spreadShare;
    };
    expect(at(false)).toBe(0);
    expect(g.decider(0)).toBe(0);
    // half-life 1: the share halves towards each signal, 0 -> 0.5 -> 0.75 -> 0.875
    expect(at(true)).toBeCloseTo((0.5 * (0.5 - 0.2)) / 0.4, 12);
    expect(g.decider(0.37)).toBe(3);
    expect(g.decider(0.38)).toBe(0);
    expect(at(true)).toBe(0.5);
    expect(at(true)).toBe(0.5);
    expect(g.level).toBe(0); // the levels do not move: enter 1 is never reached
    expect(g.decider(0.49)).toBe(3);
    expect(g.decider(0.5)).toBe(0);
    expect(new RegimeGuard(OPTS, 0).spreadShare).toBe(0);
  });

  it.each([
    [{ spread: { fallback: 'round-robin', from: 0.4, to: 0.4, max: 1 } }, /^spread.to must be in \(spread.from=0.4, 1\]/],
    [{ spread: { fallback: 'round-robin', from: -0.1, to: 0.4, max: 1 } }, /^spread.from must be in \[0, 1\)/],
    [{ spread: { fallback: 'round-robin', from: 0.1, to: 0.4, max: 0 } }, /^spread.max must be in \(0, 1\]/],
    [{ spread: { fallback: 'greedy', from: 0.1, to: 0.4, max: 1 } }, /^spread.fallback must be one of/],
    [{ mid: { fallback: 'lec', enter: 0.6, exit: 0.1 } }, /^mid.enter must be in \(0, enter=0.5\)/],
    [{ mid: { fallback: 'lec', enter: 0.3, exit: 0.3 } }, /^mid.exit must be in \[0, mid.enter=0.3\)/],
    [{ enter: 0 }, /^enter must be in \(0, 1\]/],
    [{ enter: 1.5 }, /^enter must be in \(0, 1\]/],
    [{ exit: 0.5 }, /^exit must be in \[0, enter=0.5\)/],
    [{ exit: -0.1 }, /^exit must be/],
    [{ halfLife: 0 }, /^halfLife must be a positive/],
    [{ minDwell: 1.5 }, /^minDwell must be an integer/],
    [{ fallback: 'cmmac' }, /^fallback must be one of round-robin, lec, p2c, jsq/],
  ])('refuses %j', (bad, problem) => {
    const o = { ...OPTS, ...bad } as RegimeGuardOptions;
    expect(guardOptionsProblem(o)).toMatch(problem);
    expect(() => new RegimeGuard(o, 0)).toThrow(RangeError);
  });

  it('accepts the shipped defaults', () => {
    expect(guardOptionsProblem(DEFAULT_GUARD)).toBeNull();
  });
});

describe('GuardedDispatch in the simulator', () => {
  const tiny = loadScenario('tiny');
  const frames = 2;
  const run = (load: number, dispatch: ReturnType<typeof makeDispatch>) => {
    const durationS = frames * tiny.slotsPerFrame * tiny.slotS;
    const requests = buildRequests({ scenario: tiny, workload: 'p4', tracePath: null, seed: 3, load, durationS });
    return runEpisode({
      scenario: tiny,
      requests,
      frames,
      seed: 3,
      dispatch,
      orchestration: makeOrchestration('hpa', tiny),
      nodeDequeue: 'edf',
    });
  };
  // lec stands in for the learned policy (no model ships for tiny); greedy as the fallback; two levels
  const guarded = (o: Partial<RegimeGuardOptions>, seen: GuardSwitch[]) =>
    new GuardedDispatch(
      makeDispatch('lec', tiny),
      makeDispatch('greedy', tiny),
      { ...DEFAULT_GUARD, mid: null, ...o },
      (s) => seen.push(s),
      null,
      o.spread ? makeDispatch(o.spread.fallback, tiny) : null,
    );

  it('with a threshold the late share never reaches, decides exactly as the learned policy does', () => {
    const seen: GuardSwitch[] = [];
    const g = guarded({ enter: 1, exit: 0.9 }, seen);
    const a = run(3, g);
    const b = run(3, makeDispatch('lec', tiny));
    expect(g.decisions).toBeGreaterThan(100);
    expect(g.fallbackDecisions).toBe(0);
    expect(seen).toHaveLength(0);
    expect(a.throughputRate).toBe(b.throughputRate);
    expect(g.name).toBe('lec+guard');
  });

  it('in overload hands decisions to the fallback and reports every switch', () => {
    const seen: GuardSwitch[] = [];
    const g = guarded({ enter: 0.05, exit: 0.01, halfLife: 5, minDwell: 5 }, seen);
    const a = run(3, g);
    const b = run(3, makeDispatch('lec', tiny));
    expect(g.lateDecisions).toBeGreaterThan(0);
    expect(g.fallbackDecisions).toBeGreaterThan(0);
    expect(seen.length).toBe(g.switches);
    expect(seen[0].fallback).toBe(true);
    // a switch per eAP alternates direction
    for (let e = 0; e < 4; e++) {
      const mine = seen.filter((s) => s.eap === e);
      mine.forEach((s, k) => expect(s.fallback).toBe(k % 2 === 0));
    }
    expect(a.throughputRate).not.toBe(b.throughputRate);
  });

  it('with a spreading share: round-robin takes requests as the late share rises, the levels never switch, same seed same numbers', () => {
    const spread = { fallback: 'round-robin' as const, from: 0.02, to: 0.1, max: 0.6 };
    const seen: GuardSwitch[] = [];
    const g = guarded({ enter: 1, exit: 0.9, halfLife: 5, spread }, seen);
    const a = run(3, g);
    expect(seen).toHaveLength(0);
    expect(g.lateDecisions).toBeGreaterThan(0);
    expect(g.spreadDecisions).toBeGreaterThan(0);
    expect(g.spreadDecisions).toBe(g.fallbackDecisions);
    expect(g.spreadDecisions).toBeLessThanOrEqual(0.6 * g.decisions);
    expect(a.throughputRate).not.toBe(run(3, makeDispatch('lec', tiny)).throughputRate);
    const again = guarded({ enter: 1, exit: 0.9, halfLife: 5, spread }, []);
    expect(run(3, again)).toEqual(a);
    expect(again.spreadDecisions).toBe(g.spreadDecisions);
    // a range the late share never reaches: exactly the learned policy
    const idle = guarded({ enter: 1, exit: 0.9, spread: { ...spread, from: 0.98, to: 0.99 } }, []);
    expect(run(3, idle).throughputRate).toBe(run(3, makeDispatch('lec', tiny)).throughputRate);
    expect(idle.spreadDecisions).toBe(0);
  });

  it('refuses a spreading share without its policy', () => {
    const o = { ...DEFAULT_GUARD, spread: { fallback: 'round-robin' as const, from: 0.2, to: 0.4, max: 1 } };
    expect(
      () => new GuardedDispatch(makeDispatch('lec', tiny), makeDispatch('greedy', tiny), o, undefined, makeDispatch('lec', tiny)),
    ).toThrow(/o.spread needs its policy/);
  });
});
