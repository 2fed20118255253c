import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { UsageError } from '../../../../shared/errors';
import { loadScenario } from '../../../../shared/scenario';
import { DEFAULT_WORKLOAD, WORKLOAD_NAMES, buildRequests, type WorkloadName } from '../../../../training/workload';
import { tmpDir } from '../../../support/tmp';

const tiny = loadScenario('tiny');
const kais = loadScenario('kais');
const base = { scenario: tiny, workload: 'p4' as WorkloadName, seed: 1, load: 1, durationS: 50 };

/** A made-up v2017 file: 300 jobs of 1..4 tasks over about 3000 trace seconds. */
function madeUpTrace(): string {
  const lines: string[] = [];
  let task = 0;
  for (let j = 0; j < 300; j++) {
    const t = j * 10 + (j % 3);
    for (let k = 0; k <= j % 4; k++) lines.push(`${t},${t + 20 + k},${j},${task++},1,Terminated,${k ? 50 : 100},0.01`);
  }
  const dir = tmpDir('kais-wl-');
  fs.writeFileSync(path.join(dir, 'batch_task.csv'), lines.join('\n') + '\n');
  return dir;
}

describe('buildRequests', () => {
  it('knows the five workloads and defaults to p4', () => {
    expect(WORKLOAD_NAMES).toEqual(['p1', 'p2', 'p3', 'p4', 'mixed']);
    expect(DEFAULT_WORKLOAD).toBe('p4');
  });

  it.each([-1, 0, NaN, Infinity])('rejects --load %p with a usage error', (load) => {
    expect(() => buildRequests({ ...base, load })).toThrow(UsageError);
    expect(() => buildRequests({ ...base, load })).toThrow(`--load: must be a positive number, got ${load}`);
  });

  it('rejects an unknown workload, naming --workload and the valid names', () => {
    const call = () => buildRequests({ ...base, workload: 'p5' as WorkloadName });
    expect(call).toThrow(UsageError);
    expect(call).toThrow('--workload: unknown workload "p5" (valid: p1, p2, p3, p4, mixed)');
  });

  it('builds each synthetic workload at the scenario rate', () => {
    for (const workload of WORKLOAD_NAMES) {
      // two whole periods of the periodic patterns (4 frames each)
      const reqs = buildRequests({ ...base, workload, durationS: 200 });
      expect(reqs.length).toBeGreaterThan(0.8 * tiny.workload.ratePerS * 200);
      expect(reqs.length).toBeLessThan(1.2 * tiny.workload.ratePerS * 200);
    }
  });

  it('replays the trace when one is given, whatever the workload', () => {
    const dir = madeUpTrace();
    const lines: string[] = [];
    // the made-up trace's 750 tasks fill 40 s at tiny's rate without a replay
    const a = buildRequests({ ...base, durationS: 40, workload: 'p1', tracePath: dir, warn: (l) => lines.push(l) });
    const b = buildRequests({ ...base, durationS: 40, workload: 'mixed', tracePath: dir });
    expect(a).toHaveLength(tiny.workload.ratePerS * 40);
    expect(JSON.stringify(a)).toBe(JSON.stringify(b));
    expect(lines).toEqual([]);
  });

  it('multiplies the arrival rate by --load', () => {
    const dir = madeUpTrace();
    expect(buildRequests({ ...base, tracePath: dir, load: 2 })).toHaveLength(2 * tiny.workload.ratePerS * 50);
  });

  it('passes a usage error for a missing trace through', () => {
    const p = path.join(os.tmpdir(), 'kais-missing', 'trace.csv');
    expect(() => buildRequests({ ...base, tracePath: p })).toThrow(UsageError);
    expect(() => buildRequests({ ...base, tracePath: p })).toThrow(p);
  });

  it('builds 100k requests quickly (a regression guard, not a benchmark)', () => {
    const start = process.hrtime.bigint();
    const reqs = buildRequests({ scenario: kais, workload: 'mixed', seed: 1, load: 1, durationS: 100000 / kais.workload.ratePerS });
    const ms = Number(process.hrtime.bigint() - start) / 1e6;
    expect(reqs.length).toBeGreaterThan(90000);
    expect(ms).toBeLessThan(3000);
  });
});
