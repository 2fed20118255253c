import { QosIsolation, combineHealth } from '../../../../agent/filters/qos-isolation';

const good = { requests: 100, successRate: 0.99, latencyMs: 50 };
const failing = { requests: 100, successRate: 0.5, latencyMs: 50 };
const slow = { requests: 100, successRate: 1, latencyMs: 5000 };

describe('QosIsolation', () => {
  const tenNodes = Array.from({ length: 10 }, () => 0);

  it('isolates a node whose success rate drops, with an event naming the rule and metrics', () => {
    const q = new QosIsolation(tenNodes);
    const ev = q.observe(3, failing, 100);
    expect(q.isIsolated(3)).toBe(true);
    expect(ev).toHaveLength(1);
    expect(ev[0]).toMatchObject({ kind: 'isolate', rule: 'success-rate', node: 3, eap: 0, isolationS: 30 });
    expect(ev[0].reason).toMatch(/success rate 0\.500 < 0\.9/);
  });

  it('isolates on latency too', () => {
    const q = new QosIsolation(tenNodes);
    expect(q.observe(1, slow, 0)[0]).toMatchObject({ kind: 'isolate', rule: 'latency' });
  });

  it('does not judge an observation with too few requests alone', () => {
    const q = new QosIsolation(tenNodes);
    expect(q.observe(1, { requests: 3, successRate: 0, latencyMs: 1e6 }, 0)).toEqual([]);
    expect(q.isIsolated(1)).toBe(false);
  });

  it('pools low-rate observations until they hold minRequests: a node failing every request at 5 a second is isolated', () => {
    const q = new QosIsolation(tenNodes);
    const fiveFailing = { requests: 5, successRate: 0, latencyMs: 40 };
    expect(q.observe(2, fiveFailing, 0)).toEqual([]);
    const ev = q.observe(2, fiveFailing, 1);
    expect(ev[0]).toMatchObject({
      kind: 'isolate',
      rule: 'success-rate',
      node: 2,
      metrics: { requests: 10, successRate: 0, latencyMs: 40 },
    });
    // a healthy low-rate node is not: 4 of 5 and 5 of 5 served pool to 0.9, not below it
    expect(q.observe(3, { requests: 5, successRate: 0.8, latencyMs: 40 }, 0)).toEqual([]);
    expect(q.observe(3, { requests: 5, successRate: 1, latencyMs: 40 }, 1)).toEqual([]);
    expect(q.isIsolated(3)).toBe(false);
  });

  it('drops pooled observations older than poolS', () => {
    const q = new QosIsolation(tenNodes, { poolS: 30 });
    expect(q.observe(4, { requests: 9, successRate: 0, latencyMs: 40 }, 0)).toEqual([]);
    // 31 s later: the old 9 are gone, one failed request alone is not judged
    expect(q.observe(4, { requests: 1, successRate: 0, latencyMs: 40 }, 31)).toEqual([]);
    expect(q.isIsolated(4)).toBe(false);
    expect(q.observe(4, { requests: 9, successRate: 0, latencyMs: 40 }, 32)[0]).toMatchObject({
      kind: 'isolate',
      metrics: { requests: 10 },
    });
  });

  it('re-admits after the isolation time and a healthy period, with an event', () => {
    const q = new QosIsolation(tenNodes, { healthyPeriodS: 60 });
    q.observe(2, failing, 0);
    expect(q.tick(30)).toEqual([]); // isolation over but not yet 60 s healthy
    q.observe(2, good, 40);
    const ev = q.tick(60);
    expect(ev).toEqual([expect.objectContaining({ kind: 'readmit', rule: 'healthy-period', node: 2 })]);
    expect(q.isIsolated(2)).toBe(false);
  });

  it('restarts the healthy period on a bad observation while isolated', () => {
    const q = new QosIsolation(tenNodes, { healthyPeriodS: 60 });
    q.observe(2, failing, 0);
    q.observe(2, failing, 50);
    expect(q.tick(100)).toEqual([]);
    expect(q.tick(110)).toHaveLength(1);
  });

  it('grows the isolation time with each repeat, up to the cap', () => {
    const q = new QosIsolation(tenNodes, { healthyPeriodS: 0, baseIsolationS: 30, maxIsolationS: 80 });
    const times: number[] = [];
    let now = 0;
    for (let i = 0; i < 4; i++) {
      const ev = q.observe(5, failing, now);
      times.push(ev[0].isolationS!);
      now += 1000;
      q.tick(now);
    }
    expect(times).toEqual([30, 60, 80, 80]);
  });

  it('never isolates more than the share of an eAP, keeping the least healthy out', () => {
    const q = new QosIsolation(tenNodes); // 10% of 10 = 1 node
    q.observe(0, { requests: 100, successRate: 0.8, latencyMs: 10 }, 0);
    const suppressed = q.observe(1, { requests: 100, successRate: 0.85, latencyMs: 10 }, 1);
    expect(suppressed[0]).toMatchObject({ kind: 'suppressed', rule: 'cap' });
    expect(q.isIsolated(1)).toBe(false);
    const swap = q.observe(2, { requests: 100, successRate: 0.1, latencyMs: 10 }, 2);
    expect(swap.map((e) => e.kind)).toEqual(['readmit', 'isolate']);
    expect(q.isolatedMask()).toEqual([false, false, true, false, false, false, false, false, false, false]);
  });

  it('applies the cap per eAP and allows at least one node on a small eAP', () => {
    const q = new QosIsolation([0, 0, 0, 1, 1, 1]);
    q.observe(0, failing, 0);
    q.observe(3, failing, 0);
    expect(q.isolatedMask()).toEqual([true, false, false, true, false, false]);
  });

  it('rejects bad options by name', () => {
    expect(() => new QosIsolation(tenNodes, { maxIsolatedShare: 2 })).toThrow(/maxIsolatedShare/);
    expect(() => new QosIsolation(tenNodes, { baseIsolationS: -1 })).toThrow(/baseIsolationS/);
  });
});

describe('combineHealth', () => {
  it('masks faulty nodes, lets the learned verdict decide ambiguous ones, and masks isolated nodes', () => {
    const q = new QosIsolation([0, 0, 0, 0, 0, 0]);
    q.observe(5, failing, 0);
    const h = combineHealth(6, {
      device: ['healthy', 'faulty', 'ambiguous', 'ambiguous', 'warming', 'healthy'],
      learnedAnomalous: [true, undefined, true, false, undefined, undefined],
      qos: q,
    });
    expect(h).toEqual([true, false, false, true, true, false]);
  });

  it('keeps an ambiguous node without a learned verdict unless told to exclude it', () => {
    expect(combineHealth(1, { device: ['ambiguous'] })).toEqual([true]);
    expect(combineHealth(1, { device: ['ambiguous'] }, undefined, 'exclude')).toEqual([false]);
  });

  it('writes into the given array and treats missing inputs as healthy', () => {
    const out = [false, false];
    expect(combineHealth(2, {}, out)).toBe(out);
    expect(out).toEqual([true, true]);
  });
});
