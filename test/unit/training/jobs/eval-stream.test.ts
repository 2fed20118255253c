/**
 * runEval on the request stream: the oracle line is left out, with its reason, above the request
 * count it can hold (ORACLE_MAX_REQUESTS), and the episodes do not change.
 */
import { formatTable, runEval, type EvalArgs } from '../../../../training/jobs/eval';

const base: EvalArgs = {
  scenario: 'tiny',
  workload: 'p4',
  policies: 'jsq/static,lec/hpa',
  frames: 2,
  seed: 3,
  load: 1,
  json: true,
  dequeue: 'edf',
  faultRate: 0,
  faultDurationS: 60,
  timing: false,
  filters: false,
};

describe('runEval and the oracle', () => {
  it('leaves the oracle out above oracleMaxRequests, says why, and runs the same episodes', () => {
    const full = runEval(base);
    expect(full.oracle).not.toBeNull();
    expect(full).not.toHaveProperty('oracleSkipped');
    const skipped = runEval({ ...base, oracleMaxRequests: 10 });
    expect(skipped.oracle).toBeNull();
    expect(skipped.oracleSkipped).toMatch(/^\d+ requests, more than 10: /);
    expect(skipped.results).toEqual(full.results);
    expect(formatTable(skipped)).toMatch(/oracle \(upper bound\) {2}- {2}\(not computed: \d+ requests, more than 10/);
    expect(formatTable(full)).toMatch(/oracle \(upper bound\) {2}\d\.\d{3}/);
  });
});

describe('runEval --filters --detector l2', () => {
  it("runs the agent's L2 second stage beside the rules, says so, and changes what the filters hold out", () => {
    const a: EvalArgs = { ...base, policies: 'lec/static', frames: 60, faultRate: 2, faultDurationS: 30, filters: true };
    const rules = runEval(a);
    const both = runEval({ ...a, detector: 'l2' });
    expect(rules).not.toHaveProperty('detector');
    expect(both.detector).toBe('l2');
    expect(both.filters).toBe(true);
    const [r, b] = [rules.results[0], both.results[0]];
    expect(r.arrived).toBe(b.arrived);
    // the second stage only adds exclusions (rule device:l2): it never holds out less healthy node-time
    expect(b.falseExclusionRate!).toBeGreaterThanOrEqual(r.falseExclusionRate!);
    expect([b.falseExclusionRate, b.lostToFailedNodes, b.throughputRate]).not.toEqual([
      r.falseExclusionRate,
      r.lostToFailedNodes,
      r.throughputRate,
    ]);
    expect(runEval({ ...a, detector: 'l2' })).toEqual(both); // same seed, same numbers
  });
});
