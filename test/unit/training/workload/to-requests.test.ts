import * as fs from 'fs';
import * as path from 'path';
import type { Request } from '../../../../shared/domain';
import { loadScenario, type Scenario } from '../../../../shared/scenario';
import { loadTrace, type TraceRow } from '../../../../training/workload/alibaba';
import { UsageError } from '../../../../shared/errors';
import { toRequests, traceTaskCoreS } from '../../../../training/workload/to-requests';
import { windowRequests } from '../../../../training/workload/window';

const tiny = loadScenario('tiny');
const kais = loadScenario('kais');

/** Made-up rows: `jobs` jobs of 1..6 tasks, job starts spread unevenly over `spanS` trace seconds. */
function madeUpRows(jobs: number, spanS: number, t0 = 0): TraceRow[] {
  const rows: TraceRow[] = [];
  for (let j = 0; j < jobs; j++) {
    const start = t0 + Math.floor(spanS * Math.pow(j / jobs, 1.5));
    const tasks = 1 + (j % 6);
    for (let k = 0; k < tasks; k++) {
      rows.push({
        arrivalS: start + (k % 2),
        endS: j % 17 === 0 ? null : start + 5 + ((j * 13 + k * 7) % 400),
        jobId: String(j),
        taskId: `${j}_${k}`,
        instances: 1 + k,
        status: j % 11 === 0 ? 'Failed' : 'Terminated',
        planCpu: j % 13 === 0 ? null : k % 3 === 0 ? 100 : 50,
        planMem: 0.01,
      });
    }
  }
  // unsorted, as in the real files
  return rows.reverse();
}

/** First problem of a request list, or null: one expect per list keeps the tests fast. */
function firstProblem(reqs: Request[], s: Scenario, durationS: number): string | null {
  for (let i = 0; i < reqs.length; i++) {
    const r = reqs[i];
    const bad = (why: string) => `request ${i} ${why}: ${JSON.stringify(r)}`;
    if (r.id !== i) return bad('has a wrong id');
    if (i > 0 && r.arrivalS < reqs[i - 1].arrivalS) return bad('is out of order');
    if (!(r.arrivalS >= 0 && r.arrivalS < durationS)) return bad('arrives outside [0, durationS)');
    if (!(r.deadlineS > r.arrivalS)) return bad('has a deadline before its arrival');
    if (!(r.workCoreS > 0 && Number.isFinite(r.workCoreS))) return bad('has no work');
    if (!(r.inputMB >= 0.05 && r.inputMB <= 5)) return bad('has an input size out of [0.05, 5]');
    if (!(Number.isInteger(r.service) && r.service >= 0 && r.service < s.services.length)) return bad('has a bad service');
    if (!(Number.isInteger(r.eap) && r.eap >= 0 && r.eap < s.eaps.length)) return bad('has a bad eAP');
  }
  return null;
}

function expectValid(reqs: Request[], s: Scenario, durationS: number): void {
  expect(firstProblem(reqs, s, durationS)).toBeNull();
}

/** Requests as one string: comparing 100k objects with toEqual is slow. */
function fingerprint(reqs: Request[]): string {
  return JSON.stringify(reqs);
}

function medianOf(xs: number[]): number {
  const a = [...xs].sort((x, y) => x - y);
  return a[Math.floor(a.length / 2)];
}

describe('toRequests', () => {
  const rows = madeUpRows(2000, 20000);
  const opts = { scenario: kais, seed: 7, load: 1, durationS: 20 };

  it('gives valid requests sorted by arrival with dense ids', () => {
    expectValid(toRequests(rows, opts), kais, 20);
  });

  it('arrives at exactly ratePerS x load when the window has enough rows', () => {
    expect(toRequests(rows, opts)).toHaveLength(kais.workload.ratePerS * 20);
    expect(toRequests(rows, { ...opts, load: 0.5 })).toHaveLength(kais.workload.ratePerS * 0.5 * 20);
  });

  it('gives the same requests for the same seed and different ones for another seed', () => {
    expect(fingerprint(toRequests(rows, opts))).toBe(fingerprint(toRequests(rows, opts)));
    expect(fingerprint(toRequests(rows, { ...opts, seed: 8 }))).not.toBe(fingerprint(toRequests(rows, opts)));
  });

  it('starts the replay at the window first arrival, whatever its absolute time', () => {
    const later = rows.map((r) => ({ ...r, arrivalS: r.arrivalS + 123456, endS: r.endS === null ? null : r.endS + 123456 }));
    expect(fingerprint(toRequests(later, opts))).toBe(fingerprint(toRequests(rows, opts)));
  });

  it('does not depend on the order of the rows', () => {
    const shuffled = [...rows].sort((a, b) => (a.taskId < b.taskId ? -1 : 1));
    const key = (r: Request) => `${r.service}/${r.eap}/${r.workCoreS}`;
    expect(toRequests(shuffled, opts).map(key).sort()).toEqual(toRequests(rows, opts).map(key).sort());
  });

  it('sends all tasks of one job to one service and one eAP', () => {
    const one = madeUpRows(1, 10).map((r) => ({ ...r, jobId: 'job-42' }));
    const reqs = toRequests(one, { ...opts, scenario: kais, durationS: 0.02 });
    expect(reqs.length).toBeGreaterThan(0);
    expect(new Set(reqs.map((r) => r.service)).size).toBe(1);
    expect(new Set(reqs.map((r) => r.eap)).size).toBe(1);
  });

  it('spreads jobs over all services and eAPs', () => {
    const reqs = toRequests(rows, opts);
    expect(new Set(reqs.map((r) => r.service)).size).toBe(kais.services.length);
    expect(new Set(reqs.map((r) => r.eap)).size).toBe(kais.eaps.length);
  });

  it('scales work so the median request works 0.12 core-s x workScale', () => {
    const reqs = toRequests(rows, opts);
    const norm = reqs.map((r) => r.workCoreS / kais.services[r.service].workScale);
    expect(medianOf(norm)).toBeCloseTo(0.12, 1);
    expect(Math.min(...norm)).toBeGreaterThanOrEqual(0.12 * 0.2 - 1e-12);
    expect(Math.max(...norm)).toBeLessThanOrEqual(0.12 * 5 + 1e-12);
  });

  it('sets deadlines from base, slack, work and a jitter in [0.75, 1.25]', () => {
    const w = kais.workload;
    const jitters = toRequests(rows, opts).map((r) => {
      const nominal = (w.deadlineSlack * r.workCoreS) / kais.services[r.service].cpuCores;
      return (r.deadlineS - r.arrivalS - w.deadlineBaseS) / nominal;
    });
    expect(Math.min(...jitters)).toBeGreaterThanOrEqual(0.75 - 1e-9);
    expect(Math.max(...jitters)).toBeLessThanOrEqual(1.25 + 1e-9);
    expect(Math.min(...jitters)).toBeLessThan(0.76);
    expect(Math.max(...jitters)).toBeGreaterThan(1.24);
  });

  it('imputes a missing end time and plan_cpu from the medians of the window', () => {
    const r = (endS: number | null, planCpu: number | null): TraceRow => ({
      arrivalS: 0,
      endS,
      jobId: '1',
      taskId: 't',
      instances: 1,
      status: 'Running',
      planCpu,
      planMem: null,
    });
    const core = traceTaskCoreS([r(10, 50), r(30, 100), r(20, 50), r(null, null)]);
    expect(Array.from(core)).toEqual([5, 30, 10, 10]); // median duration 20 s, median plan_cpu 50
  });

  it('replays a short window again and says so once', () => {
    const short = madeUpRows(40, 300);
    const lines: string[] = [];
    const reqs = toRequests(short, { scenario: tiny, seed: 1, load: 1, durationS: 100, warn: (l) => lines.push(l) });
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/replayed [0-9.]+ times to fill 100 s/);
    expect(reqs.length).toBeGreaterThan(0.97 * tiny.workload.ratePerS * 100);
    expect(reqs.length).toBeLessThanOrEqual(tiny.workload.ratePerS * 100);
    expectValid(reqs, tiny, 100);
  });

  it('is quiet when the window is long enough', () => {
    const lines: string[] = [];
    // 6,996 tasks of made-up trace: 13.4 s at kais's 521 requests/s, so 12 s need no replay
    toRequests(rows, { ...opts, durationS: 12, warn: (l) => lines.push(l) });
    expect(lines).toEqual([]);
  });
});

describe('toRequests: one outlier time', () => {
  /** 500 tasks, one a trace second from t0 on, as `kais eval --trace` replays them. */
  const evenRows = (t0: number): TraceRow[] =>
    Array.from({ length: 500 }, (_, i) => ({
      arrivalS: t0 + i,
      endS: t0 + i + 30,
      jobId: String(1000 + (i % 19)),
      taskId: String(i),
      instances: 1,
      status: 'Terminated',
      planCpu: 50,
      planMem: 0.5,
    }));
  const outlier = (arrivalS: number): TraceRow => ({ ...evenRows(0)[0], arrivalS, endS: null, jobId: '99', taskId: 'x' });
  const run = (rows: TraceRow[]) => {
    const lines: string[] = [];
    // 60 s at 18 requests/s: every row is replayed (the window wraps: that notice is not looked at here)
    const reqs = toRequests(rows, { scenario: tiny, seed: 1, load: 1, durationS: 60, warn: (l) => lines.push(l), source: 'w.csv' });
    return { lines: lines.filter((l) => /gap/.test(l)), reqs };
  };

  it('refuses a gap longer than any trace (1e15 or -1e15 among times 0..499), naming the file and the times', () => {
    for (const t of [1e15, -1e15]) {
      expect(() => run([...evenRows(0), outlier(t)])).toThrow(UsageError);
      expect(() => run([...evenRows(0), outlier(t)])).toThrow(
        new RegExp(
          `^--trace: w\\.csv: a gap of \\d+ s without tasks between trace times ${t < 0 ? '-1000000000000000 and 0' : '499 and 1000000000000000'} .* longer than any Alibaba trace`,
        ),
      );
    }
  });

  it('warns, in one line, when one gap of an hour or more covers over half the span (a 0 among times 100000..100499)', () => {
    const { lines, reqs } = run([...evenRows(100000), outlier(0)]);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toBe(
      'kais: w.csv: a gap of 100000 s without tasks between trace times 0 and 100000 (rows replayed: 501, times 0 .. 100499) ' +
        'is 99.5% of their span: the replay compresses the other rows into 0.5% of the run (an outlier time?)',
    );
    expect(reqs.length).toBeGreaterThan(0);
  });

  it('is quiet about the same rows without the outlier, and about a short quiet stretch (under an hour)', () => {
    expect(run(evenRows(100000)).lines).toEqual([]);
    // 2,000 s of nothing between two bursts: over half the span, but a trace can be that quiet
    expect(run([...evenRows(0), ...evenRows(2500)]).lines).toEqual([]);
  });
});

const DATA = path.resolve(__dirname, '../../../../../shared/data/alibaba');
const d = fs.existsSync(DATA) ? describe : describe.skip;
if (!fs.existsSync(DATA)) console.warn(`skipping the real-trace tests: ${DATA} is absent`);

d('toRequests on the real Alibaba v2017 excerpt', () => {
  const rows = fs.existsSync(DATA) ? loadTrace(DATA).rows : [];
  const later = rows.filter((r) => r.arrivalS > 30000);

  it.each([
    ['the dev trace', () => rows, 600],
    ['a later window (create time > 30000)', () => later, 600],
    ['a short run of the later window', () => later, 30],
  ])('keeps the mean rate within 10%% of ratePerS x load on %s', (_name, get, durationS) => {
    for (const load of [1, 2.5]) {
      const reqs = toRequests(get(), { scenario: kais, seed: 3, load, durationS, warn: () => {} });
      const rate = reqs.length / durationS;
      expect(Math.abs(rate / (kais.workload.ratePerS * load) - 1)).toBeLessThan(0.1);
      // and over the first and second halves on their own, for the stress to be there all along
      const firstHalf = reqs.filter((r) => r.arrivalS < durationS / 2).length / (durationS / 2);
      expect(firstHalf / rate).toBeGreaterThan(0.5);
    }
  });

  it('gives valid requests with the median work at 0.12 core-s x workScale', () => {
    const reqs = toRequests(rows, { scenario: kais, seed: 1, load: 1, durationS: 300, warn: () => {} });
    expectValid(reqs, kais, 300);
    expect(medianOf(reqs.map((r) => r.workCoreS / kais.services[r.service].workScale))).toBeCloseTo(0.12, 2);
  });

  it('says nothing about gaps on the whole file, its prefixes, or the 25000 < t <= 30000 window', () => {
    const lines: string[] = [];
    const warn = (l: string) => lines.push(l);
    // the replayed rows are the first ratePerS x durationS by time: a few, some thousands, all (and the file again)
    for (const [scenario, durationS] of [
      [tiny, 3],
      [tiny, 60],
      [kais, 2],
      [tiny, 3500],
    ] as const)
      toRequests(rows, { scenario, seed: 1, load: 1, durationS, warn });
    const w = rows.filter((r) => r.arrivalS > 25000 && r.arrivalS <= 30000);
    for (const durationS of [5, 60]) toRequests(w, { scenario: kais, seed: 2, load: 1, durationS, warn });
    // a training window replayed from starts spread over it (rows before the start move after its end)
    for (const start of [25001, 26000, 27500, 29999])
      windowRequests({ scenario: tiny, trace: DATA, window: [25001, 30000], start, seed: 3, load: 1, durationS: 30, warn });
    expect(lines.filter((l) => /gap/.test(l))).toEqual([]);
  });

  it('gives the same requests for the same seed', () => {
    const a = toRequests(later, { scenario: tiny, seed: 5, load: 1, durationS: 200 });
    const b = toRequests(later, { scenario: tiny, seed: 5, load: 1, durationS: 200 });
    expect(fingerprint(a)).toBe(fingerprint(b));
  });
});
