import * as fs from 'fs';
import * as path from 'path';
import type { Request } from '../../../../shared/domain';
import { loadScenario, type Scenario } from '../../../../shared/scenario';
import { loadTrace } from '../../../../training/workload/alibaba';
import { CALIBRATION, SYNTHETIC, generateSynthetic, sampleQuantile, type Calibration } from '../../../../training/workload/synthetic';
import { measure } from '../../../../scripts/prepare-workload';

const tiny = loadScenario('tiny');
const kais = loadScenario('kais');
const PATTERNS = ['p1', 'p2', 'p3', 'p4', 'mixed'] as const;

function problems(reqs: Request[], s: Scenario, durationS: number): string | null {
  for (let i = 0; i < reqs.length; i++) {
    const r = reqs[i];
    const ok =
      r.id === i &&
      (i === 0 || r.arrivalS >= reqs[i - 1].arrivalS) &&
      r.arrivalS >= 0 &&
      r.arrivalS < durationS &&
      r.deadlineS > r.arrivalS &&
      r.workCoreS > 0 &&
      Number.isFinite(r.workCoreS) &&
      r.inputMB >= 0.05 &&
      r.inputMB <= 5 &&
      Number.isInteger(r.service) &&
      r.service >= 0 &&
      r.service < s.services.length &&
      Number.isInteger(r.eap) &&
      r.eap >= 0 &&
      r.eap < s.eaps.length;
    if (!ok) return `request ${i} is invalid: ${JSON.stringify(r)}`;
  }
  return null;
}

function medianOf(xs: number[]): number {
  const a = [...xs].sort((x, y) => x - y);
  return a[Math.floor(a.length / 2)];
}

const frameS = (s: Scenario) => s.slotS * s.slotsPerFrame;
const periodS = (s: Scenario) => SYNTHETIC.periodFrames * frameS(s);

/** Services above the median score, as the generator defines them. */
function heavySet(scores: number[]): Set<number> {
  const med = medianOf(scores.length % 2 ? scores : [...scores]);
  const sorted = [...scores].sort((a, b) => a - b);
  const m = scores.length % 2 ? med : (sorted[scores.length / 2 - 1] + sorted[scores.length / 2]) / 2;
  return new Set(scores.flatMap((x, w) => (x > m ? [w] : [])));
}

/** Share of requests of `heavy` services among those whose phase sin(2 pi t / T) is positive / negative. */
function shareByPhase(
  reqs: Request[],
  T: number,
  heavy: Set<number>,
): { peak: number; trough: number; peakCount: number; troughCount: number } {
  let pc = 0;
  let ph = 0;
  let tc = 0;
  let th = 0;
  for (const r of reqs) {
    const up = Math.sin((2 * Math.PI * r.arrivalS) / T) > 0;
    if (up) {
      pc++;
      if (heavy.has(r.service)) ph++;
    } else {
      tc++;
      if (heavy.has(r.service)) th++;
    }
  }
  return { peak: ph / pc, trough: th / tc, peakCount: pc, troughCount: tc };
}

/** Share of consecutive requests with the same service and eAP: high when jobs arrive in bursts. */
function sameNeighbourShare(reqs: Request[]): number {
  let same = 0;
  for (let i = 1; i < reqs.length; i++) if (reqs[i].service === reqs[i - 1].service && reqs[i].eap === reqs[i - 1].eap) same++;
  return same / (reqs.length - 1);
}

describe('generateSynthetic', () => {
  it.each(PATTERNS)('%s: same seed gives identical requests, another seed different ones', (pattern) => {
    const a = generateSynthetic({ scenario: tiny, pattern, seed: 11, load: 1, durationS: 300 });
    const b = generateSynthetic({ scenario: tiny, pattern, seed: 11, load: 1, durationS: 300 });
    const c = generateSynthetic({ scenario: tiny, pattern, seed: 12, load: 1, durationS: 300 });
    expect(JSON.stringify(a)).toBe(JSON.stringify(b));
    expect(JSON.stringify(a)).not.toBe(JSON.stringify(c));
  });

  it.each(PATTERNS)('%s: every request is valid', (pattern) => {
    expect(problems(generateSynthetic({ scenario: kais, pattern, seed: 1, load: 1, durationS: 200 }), kais, 200)).toBeNull();
  });

  it.each(PATTERNS)('%s: the mean rate is within 10%% of ratePerS x load', (pattern) => {
    for (const [s, load, durationS] of [
      [tiny, 1, 2000],
      [kais, 2, 200],
    ] as const) {
      const reqs = generateSynthetic({ scenario: s, pattern, seed: 2, load, durationS });
      expect(Math.abs(reqs.length / durationS / (s.workload.ratePerS * load) - 1)).toBeLessThan(0.1);
    }
  });

  it.each(PATTERNS)('%s: the median request works about 0.12 core-s x workScale', (pattern) => {
    const reqs = generateSynthetic({ scenario: kais, pattern, seed: 3, load: 1, durationS: 100 });
    expect(medianOf(reqs.map((r) => r.workCoreS / kais.services[r.service].workScale))).toBeCloseTo(0.12, 2);
  });

  it('p1: the arrival rate and the share of CPU-heavy services rise and fall together', () => {
    const reqs = generateSynthetic({ scenario: kais, pattern: 'p1', seed: 4, load: 1, durationS: 4 * periodS(kais) });
    const cpuHeavy = heavySet(kais.services.map((s) => s.cpuCores * s.workScale));
    const memHeavy = heavySet(kais.services.map((s) => s.memGB));
    const cpu = shareByPhase(reqs, periodS(kais), cpuHeavy);
    expect(cpu.peakCount / cpu.troughCount).toBeGreaterThan(1.6); // (1 + 2a/pi) / (1 - 2a/pi) = 1.93 for a = 0.5
    expect(cpu.peak - cpu.trough).toBeGreaterThan(0.2);
    const mem = shareByPhase(reqs, periodS(kais), memHeavy);
    expect(Math.abs(mem.peak - mem.trough)).toBeLessThan(cpu.peak - cpu.trough);
  });

  it('p2: the share of memory-heavy services oscillates', () => {
    const reqs = generateSynthetic({ scenario: kais, pattern: 'p2', seed: 4, load: 1, durationS: 4 * periodS(kais) });
    const mem = shareByPhase(reqs, periodS(kais), heavySet(kais.services.map((s) => s.memGB)));
    expect(mem.peakCount / mem.troughCount).toBeGreaterThan(1.6);
    expect(mem.peak - mem.trough).toBeGreaterThan(0.2);
  });

  it('p3: oscillates at twice the frequency of p1', () => {
    const T = periodS(kais);
    const reqs = generateSynthetic({ scenario: kais, pattern: 'p3', seed: 4, load: 1, durationS: 4 * T });
    const cpuHeavy = heavySet(kais.services.map((s) => s.cpuCores * s.workScale));
    const half = shareByPhase(reqs, T / 2, cpuHeavy);
    expect(half.peakCount / half.troughCount).toBeGreaterThan(1.6);
    expect(half.peak - half.trough).toBeGreaterThan(0.2);
    const full = shareByPhase(reqs, T, cpuHeavy);
    expect(Math.abs(full.peakCount / full.troughCount - 1)).toBeLessThan(0.1);
  });

  it('p4: tasks of a job arrive in bursts of one service at one eAP', () => {
    const p4 = generateSynthetic({ scenario: kais, pattern: 'p4', seed: 5, load: 1, durationS: 100 });
    const p1 = generateSynthetic({ scenario: kais, pattern: 'p1', seed: 5, load: 1, durationS: 100 });
    expect(sameNeighbourShare(p4)).toBeGreaterThan(0.4);
    expect(sameNeighbourShare(p1)).toBeLessThan(0.1);
  });

  it('p4: per-window counts are burstier than a Poisson process', () => {
    const reqs = generateSynthetic({ scenario: tiny, pattern: 'p4', seed: 6, load: 1, durationS: 4000 });
    const winS = CALIBRATION.arrivals.perMinuteMeanTasks / tiny.workload.ratePerS;
    const counts = new Array(Math.floor(4000 / winS)).fill(0);
    for (const r of reqs) if (r.arrivalS < counts.length * winS) counts[Math.floor(r.arrivalS / winS)]++;
    const mean = counts.reduce((a, b) => a + b, 0) / counts.length;
    const cv = Math.sqrt(counts.reduce((a, b) => a + (b - mean) ** 2, 0) / counts.length) / mean;
    expect(cv).toBeGreaterThan(2 / Math.sqrt(mean)); // Poisson: 1 / sqrt(mean)
    expect(Math.abs(cv / CALIBRATION.arrivals.perMinuteCv - 1)).toBeLessThan(0.35);
  });

  it('mixed: runs p1, p2, p3, p4 in turn, segments of 2 periods', () => {
    const segS = SYNTHETIC.mixedSegmentPeriods * periodS(kais);
    const reqs = generateSynthetic({ scenario: kais, pattern: 'mixed', seed: 7, load: 1, durationS: 4 * segS });
    const seg = (k: number) => reqs.filter((r) => r.arrivalS >= k * segS && r.arrivalS < (k + 1) * segS);
    expect(sameNeighbourShare(seg(0))).toBeLessThan(0.1);
    expect(sameNeighbourShare(seg(3))).toBeGreaterThan(0.4);
    const cpuHeavy = heavySet(kais.services.map((s) => s.cpuCores * s.workScale));
    const memHeavy = heavySet(kais.services.map((s) => s.memGB));
    const p1 = shareByPhase(seg(0), periodS(kais), cpuHeavy);
    const p2 = shareByPhase(seg(1), periodS(kais), memHeavy);
    const p3 = shareByPhase(seg(2), periodS(kais) / 2, cpuHeavy);
    for (const x of [p1, p2, p3]) expect(x.peak - x.trough).toBeGreaterThan(0.2);
  });

  it('uses the calibration it is given', () => {
    const single: Calibration = { ...CALIBRATION, tasksPerJob: { p: [0, 1], v: [1, 1], mean: 1 } };
    const reqs = generateSynthetic({ scenario: kais, pattern: 'p4', seed: 5, load: 1, durationS: 100, calibration: single });
    expect(sameNeighbourShare(reqs)).toBeLessThan(0.1);
  });

  it('returns no requests at rate 0', () => {
    const idle = { ...tiny, workload: { ...tiny.workload, ratePerS: 0 } };
    expect(generateSynthetic({ scenario: idle, pattern: 'p4', seed: 1, load: 1, durationS: 100 })).toEqual([]);
  });
});

describe('sampleQuantile', () => {
  it('interpolates a quantile table, log-linearly when asked', () => {
    const t = { p: [0, 0.5, 1], v: [1, 100, 10000] };
    expect(sampleQuantile(t, 0, true)).toBe(1);
    expect(sampleQuantile(t, 0.25, true)).toBeCloseTo(10, 9);
    expect(sampleQuantile(t, 0.25, false)).toBeCloseTo(50.5, 9);
    expect(sampleQuantile(t, 0.75, true)).toBeCloseTo(1000, 6);
  });
});

describe('calibration.json', () => {
  it('holds figures, not trace rows', () => {
    expect(JSON.stringify(CALIBRATION).length).toBeLessThan(20000);
    expect(CALIBRATION.durationS.p[0]).toBe(0);
    expect(CALIBRATION.durationS.p[CALIBRATION.durationS.p.length - 1]).toBe(1);
    expect(CALIBRATION.arrivals.meanTaskRatePerS).toBeGreaterThan(0);
    expect(CALIBRATION.planCpu.shares.reduce((a, b) => a + b, 0)).toBeCloseTo(1, 4);
  });
});

const DATA = path.resolve(__dirname, '../../../../../shared/data/alibaba');
const d = fs.existsSync(DATA) ? describe : describe.skip;
if (!fs.existsSync(DATA)) console.warn(`skipping the calibration check: ${DATA} is absent`);

d('calibration.json against the real Alibaba v2017 excerpt', () => {
  it('is what scripts/prepare-workload.ts measures from it', () => {
    const measured = measure(loadTrace(path.join(DATA, 'v2017_batch_task.csv')).rows, CALIBRATION.source);
    expect(JSON.parse(JSON.stringify(measured))).toEqual(CALIBRATION);
  });

  it('has the task count and the duration median and p90 of the excerpt', () => {
    const q = (p: number) => CALIBRATION.durationS.v[CALIBRATION.durationS.p.indexOf(p)];
    expect(q(0.5)).toBeGreaterThan(10);
    expect(q(0.5)).toBeLessThan(60);
    expect(q(0.9)).toBeGreaterThan(300);
    expect(CALIBRATION.rows).toBe(56394);
  });
});
