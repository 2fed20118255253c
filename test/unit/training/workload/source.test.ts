import type { Request } from '../../../../shared/domain';
import { Rng } from '../../../../shared/rng';
import { loadScenario } from '../../../../shared/scenario';
import type { TraceRow } from '../../../../training/workload/alibaba';
import { buildRequests, openWorkload } from '../../../../training/workload';
import { TaskHeap, arraySource, drain, median, shapedSource, streamMedian, type TaskSink } from '../../../../training/workload/source';
import { generateSynthetic, syntheticSource } from '../../../../training/workload/synthetic';
import { shaper, toRequests, traceSource } from '../../../../training/workload/to-requests';

const tiny = loadScenario('tiny');
const small = loadScenario('small');

/** Requests as one string (exact doubles: JSON prints the shortest round-trip form). */
const fp = (reqs: Request[]): string => JSON.stringify(reqs);

function readAll(src: { open(): { next(): Request | null } }): Request[] {
  const out: Request[] = [];
  const rd = src.open();
  for (let r = rd.next(); r !== null; r = rd.next()) out.push(r);
  return out;
}

describe('streamMedian', () => {
  const cases: Record<string, number[]> = {
    odd: [5, 1, 4, 2, 3],
    even: [0.3, 0.1, 0.4, 0.2],
    one: [7.5],
    'atoms and ties': Array.from({ length: 301 }, (_, i) => (i % 3 === 0 ? 2.5 : i % 5 === 0 ? 2.5000000000000004 : 1 + i / 1000)),
    'negative, zero and positive': Array.from({ length: 200 }, (_, i) => Math.sin(i) * 10 ** ((i % 7) - 3)).concat([0, -0, 0]),
  };
  const rng = new Rng(3);
  cases['random lognormal'] = Array.from({ length: 2001 }, () => Math.exp(3 * rng.normal()));
  cases['random, even count'] = Array.from({ length: 2000 }, () => rng.next() * 1e-3);

  it.each(Object.entries(cases))('is the exact median of %s, whatever the collecting limit', (_, xs) => {
    for (const collectMax of [0, 1, 7, 64, 1 << 20]) {
      let passes = 0;
      const r = streamMedian((visit) => {
        passes++;
        for (const x of xs) visit(x);
      }, collectMax);
      expect(r.count).toBe(xs.length);
      expect(Object.is(r.median, median(xs)) || r.median === median(xs)).toBe(true);
      expect(passes).toBeLessThanOrEqual(collectMax >= xs.length ? 1 : 9);
    }
  });

  it('takes two passes in the usual large case: a histogram, then the middle bucket (both middle ranks)', () => {
    const rng = new Rng(8);
    const xs = Array.from({ length: 4000 }, () => Math.exp(2 * rng.normal()));
    let passes = 0;
    const r = streamMedian((visit) => {
      passes++;
      for (const x of xs) visit(x);
    }, 100);
    expect(r.median).toBe(median(xs));
    expect(passes).toBe(2);
  });

  it('gives NaN for nothing', () => {
    expect(streamMedian(() => {})).toEqual({ count: 0, median: NaN });
  });
});

describe('TaskHeap', () => {
  it('hands tasks out by arrival, push order breaking ties, and keeps only [0, durationS)', () => {
    const h = new TaskHeap(10);
    const pushed: [number, number][] = [];
    const rng = new Rng(9);
    for (let k = 0; k < 500; k++) {
      const t = Math.floor(rng.next() * 24) / 2 - 1; // -1 .. 10.5 with many ties
      h.push(t, k, 0, 1);
      if (t >= 0 && t < 10) pushed.push([t, k]);
    }
    pushed.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    const got: [number, number][] = [];
    while (h.size > 0) {
      h.pop();
      got.push([h.arrivalS, h.service]);
    }
    expect(got).toEqual(pushed);
    expect(h.fresh).toBe(500);
  });
});

describe('request sources', () => {
  it.each(['p1', 'p2', 'p3', 'p4', 'mixed'] as const)('%s: every reader gives the requests of generateSynthetic', (pattern) => {
    const opts = { scenario: small, pattern, seed: 4, load: 1.5, durationS: 120 };
    const want = fp(generateSynthetic(opts));
    const src = syntheticSource(opts);
    expect(src.count).toBe(JSON.parse(want).length);
    const a = src.open();
    const b = src.open();
    const ra: Request[] = [];
    const rb: Request[] = [];
    // two readers interleaved: independent
    for (;;) {
      const x = a.next();
      const y = b.next();
      if (x) ra.push(x);
      if (y) rb.push(y);
      if (!x && !y) break;
    }
    expect(fp(ra)).toBe(want);
    expect(fp(rb)).toBe(want);
    expect(a.next()).toBeNull();
  });

  it('radix selection of the median (large runs) shapes the same requests as sorting', () => {
    const opts = { scenario: tiny, seed: 2, durationS: 400 };
    const gen = (sink: TaskSink): Iterator<number, void, void> =>
      (function* () {
        const rng = new Rng(5);
        let t = 0;
        for (;;) {
          t += rng.exp(20);
          if (t >= 410) return;
          // bursts of 3 tasks spread over 2 s, core-seconds with atoms
          for (let j = 0; j < 3; j++) sink.push(t + 2 * rng.next(), rng.int(4), 0, rng.next() < 0.3 ? 1 : 0.5 + 20 * rng.next());
          if (sink.fresh >= 16) yield t;
        }
      })();
    const sorted = readAll(shapedSource(gen, { durationS: opts.durationS, shaper: shaper({ ...opts, scenario: tiny }) }));
    const radix = readAll(shapedSource(gen, { durationS: opts.durationS, shaper: shaper({ ...opts, scenario: tiny }), collectMax: 10 }));
    expect(sorted.length).toBeGreaterThan(20000);
    expect(fp(radix)).toBe(fp(sorted));
    for (let i = 1; i < sorted.length; i++) if (sorted[i].arrivalS < sorted[i - 1].arrivalS) throw new Error(`out of order at ${i}`);
  });

  it('trace replay: the source gives the requests of toRequests, wrap-around notice once', () => {
    const rows: TraceRow[] = [];
    for (let j = 0; j < 400; j++) {
      for (let k = 0; k < 1 + (j % 5); k++) {
        rows.push({
          arrivalS: 1000 + Math.floor(j * 1.7) + (k % 2),
          endS: j % 9 === 0 ? null : 1000 + j * 2 + 30 + k,
          jobId: `j${j}`,
          taskId: `t${k}`,
          instances: 1,
          status: 'Terminated',
          planCpu: j % 7 === 0 ? null : 50 + 50 * (k % 3),
          planMem: 0.01,
        });
      }
    }
    const lines: string[] = [];
    const opts = { scenario: small, seed: 3, load: 2, durationS: 40, warn: (l: string) => lines.push(l) };
    const want = fp(toRequests(rows.slice().reverse(), opts));
    expect(lines).toHaveLength(1); // 1200 rows, 7600 wanted: replayed
    const src = traceSource(rows.slice().reverse(), opts);
    expect(lines).toHaveLength(2);
    expect(fp(readAll(src))).toBe(want);
    expect(fp(readAll(src))).toBe(want);
    expect(src.count).toBe(JSON.parse(want).length);
  });

  it('openWorkload and buildRequests agree; arraySource and drain round-trip', () => {
    const opts = { scenario: tiny, workload: 'p4' as const, seed: 8, load: 1, durationS: 300 };
    const arr = buildRequests(opts);
    expect(fp(drain(openWorkload(opts)))).toBe(fp(arr));
    expect(drain(arraySource(arr))).toEqual(arr);
    expect(openWorkload({ ...opts, durationS: 0 }).count).toBe(0);
    expect(
      openWorkload({ ...opts, durationS: 0 })
        .open()
        .next(),
    ).toBeNull();
  });
});
