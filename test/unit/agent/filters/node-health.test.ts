import { NodeHealth, type HealthEvent } from '../../../../agent/filters/node-health';
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
});
