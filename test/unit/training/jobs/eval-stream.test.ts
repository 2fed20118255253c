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
