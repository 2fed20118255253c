import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import * as zlib from 'zlib';
import {
  LOMO_GRID,
  averagePrecision,
  countConfusion,
  lomoBetter,
  lomoGuard,
  lomoObjective,
  metricsOf,
  readInput,
  runDetect,
  runLearned,
  runLomo,
  windowLabels,
  type DetectOptions,
  type GridCounts,
} from '../../../../training/jobs/detect';
import { UsageError } from '../../../../shared/errors';
import { Rng } from '../../../../shared/rng';
import { loadBackend } from '../../../../shared/tf-backend';
import { tmpDir } from '../../../support/tmp';

const ROOT = path.resolve(__dirname, '../../../..');
const DATA = path.resolve(ROOT, '../shared/data/anomaly');

/** A synthetic SMD-style folder: 3 metrics, an incident of wild values in test rows 300-340. */
function makeSmdFolder(opts: { gz?: boolean; badRow?: string; shortLabels?: boolean } = {}): string {
  const dir = tmpDir('kais-detect-');
  for (const sub of ['train', 'test', 'test_label']) fs.mkdirSync(path.join(dir, sub));
  const rng = new Rng(42);
  const rows = (n: number, incident: boolean): string[] => {
    const out: string[] = [];
    let load = 0;
    for (let r = 0; r < n; r++) {
      load = 0.9 * load + 0.3 * rng.normal();
      const wild = incident && r >= 300 && r < 340;
      out.push([0, 1, 2].map((d) => (0.5 + 0.1 * load + 0.02 * rng.normal() + (wild ? (d - 1) * rng.normal() : 0)).toFixed(4)).join(','));
    }
    return out;
  };
  const train = rows(600, false);
  const test = rows(500, true);
  if (opts.badRow) test[7] = opts.badRow;
  const write = (f: string, text: string): void => fs.writeFileSync(f + (opts.gz ? '.gz' : ''), opts.gz ? zlib.gzipSync(text) : text);
  write(path.join(dir, 'train', 'node-a.csv'), train.join('\n') + '\n');
  write(path.join(dir, 'test', 'node-a.csv'), test.join('\n') + '\n');
  const labels = test.map((_, r) => (r >= 300 && r < 340 ? '1' : '0'));
  fs.writeFileSync(path.join(dir, 'test_label', 'node-a.txt'), (opts.shortLabels ? labels.slice(0, 450) : labels).join('\n') + '\n');
  return dir;
}

function options(input: string, extra: Partial<DetectOptions> = {}): DetectOptions {
  return {
    input,
    json: true,
    windowLabel: 'any',
    seed: 1,
    rules: {},
    learned: { steps: 8, hidden: 8, latent: 3, feature: 8, batchSize: 32 },
    maxTrainWindows: 300,
    ...extra,
  };
}

describe('leave-one-out selection objective', () => {
  const grid = (tp: number, fp: number, decided: number): GridCounts => {
    const c = { tp, fp, fn: 10, tpPa: tp + 10, fpPa: fp, fnPa: 0 };
    return { rules: { ...c }, learned: { ...c }, two: { ...c }, decided, windows: 100 };
  };
  it('penalises the worst tuning entity, not the pooled one', () => {
    // pooled rules precision 0.93 in both; in the second, one entity's 20 flags are 50% false
    const even = lomoObjective([grid(90, 7, 90), grid(10, 1, 90)]);
    const skewed = lomoObjective([grid(90, 0, 90), grid(10, 10, 90)]);
    expect(skewed).toBeLessThan(even - 1);
    // an entity that the rules leave mostly ambiguous costs too, even when the pooled share is fine
    expect(lomoObjective([grid(90, 7, 100), grid(10, 1, 40)])).toBeLessThan(lomoObjective([grid(90, 7, 70), grid(10, 1, 70)]) - 0.5);
    // entities with fewer than LOMO_MIN_FLAGS flags do not set the worst precision
    expect(lomoObjective([grid(90, 7, 90), grid(1, 2, 90)])).toBeGreaterThan(lomoObjective([grid(90, 7, 90), grid(10, 20, 90)]));
  });

  it('penalises a tuning entity where the combination loses what one stage had (issue 20)', () => {
    const c = (tp: number, fp: number, fn: number) => ({ tp, fp, fn, tpPa: tp, fpPa: fp, fnPa: fn });
    const entity = (twoTp: number): GridCounts => ({
      rules: c(5, 0, 95),
      learned: c(60, 20, 40),
      two: c(twoTp, 10, 100 - twoTp),
      decided: 90,
      windows: 1000,
    });
    // the learned stage alone has F1 0.6 on both; the combination keeps it on one, halves it on the other
    expect(lomoObjective([entity(60), entity(25)])).toBeLessThan(lomoObjective([entity(60), entity(55)]) - 0.5);
  });

  it('guards first: a setting whose combination loses to one of its stages on a tuning entity is not chosen over one that loses on none', () => {
    const c = (tp: number, fp: number, fn: number) => ({ tp, fp, fn, tpPa: tp, fpPa: fp, fnPa: fn });
    const entity = (twoTp: number, twoFp: number): GridCounts => ({
      rules: c(5, 0, 95),
      learned: c(60, 20, 40),
      two: c(twoTp, twoFp, 100 - twoTp),
      decided: 900,
      windows: 1000,
    });
    // learned F1 0.6667 on every entity; twoStage (62, 20): 0.6813 (ratio > 1, capped at 1); (58, 22): 0.6444 (0.967); (50, 40): 0.5263 (0.789)
    expect(lomoGuard([entity(62, 20), entity(62, 20)])).toBe(1);
    expect(lomoGuard([entity(62, 20), entity(58, 22)])).toBeCloseTo(0.6444 / 0.6667, 4);
    expect(lomoGuard([entity(58, 22), entity(50, 40)])).toBeCloseTo(0.5263 / 0.6667, 4);
    // 'risky' has the higher objective (its worst ratio, 0.967, is above the 0.95 penalty's line), but 'safe' loses nowhere
    const safe = [entity(62, 20), entity(61, 20)];
    const risky = [entity(90, 20), entity(58, 22)];
    const key = (t: GridCounts[]) => ({ guard: lomoGuard(t), objective: lomoObjective(t) });
    expect(lomoGuard(safe)).toBe(1);
    expect(lomoObjective(risky)).toBeGreaterThan(lomoObjective(safe) + 0.1);
    expect(lomoBetter(key(safe), key(risky))).toBe(true);
    expect(lomoBetter(key(risky), key(safe))).toBe(false);
    // equal guards: the objective decides
    expect(lomoBetter({ guard: 1, objective: 0.8 }, { guard: 1, objective: 0.7 })).toBe(true);
    expect(lomoBetter({ guard: 1, objective: 0.7 }, { guard: 1, objective: 0.7 })).toBe(false);
  });
});

describe('average precision (the threshold-free measure)', () => {
  it('is 1 for a perfect ranking, the positive share for a constant score, and takes ties together', () => {
    expect(averagePrecision([0, 1, 0, 1], [0.1, 0.9, 0.2, 0.8])).toBeCloseTo(1, 12);
    expect(averagePrecision([0, 1, 0, 0], [3, 3, 3, 3])).toBeCloseTo(0.25, 12);
    // sklearn average_precision_score([1,0,1,0,0], [0.9,0.8,0.7,0.2,0.2]) = (1/2)(1) + (1/2)(2/3)
    expect(averagePrecision([1, 0, 1, 0, 0], [0.9, 0.8, 0.7, 0.2, 0.2])).toBeCloseTo(0.5 + 1 / 3, 12);
    expect(averagePrecision([0, 0], [1, 2])).toBe(0);
    // -Infinity and +Infinity (the fused score's hard verdicts) rank like any score
    expect(averagePrecision([1, 0, 0], [Infinity, 0, -Infinity])).toBeCloseTo(1, 12);
  });
});

describe('point-adjusted and plain confusion counts', () => {
  it('counts a whole anomalous run as detected when one window in it is flagged', () => {
    const c = countConfusion([0, 1, 1, 1, 0, 1, 1, 0], [1, 0, 1, 0, 0, 0, 0, 0]);
    expect(c).toEqual({ tp: 1, fp: 1, fn: 4, tpPa: 3, fpPa: 1, fnPa: 2 });
    const m = metricsOf(c);
    expect(m.precision).toBe(0.5);
    expect(m.f1).toBeCloseTo(2 / 7, 4);
    expect(m.f1PointAdjusted).toBeCloseTo(6 / 9, 4);
  });
});

describe('window labels', () => {
  it('derive from the T rows each window covers (any row, or the last row)', () => {
    const rows = Uint8Array.from([0, 0, 1, 0, 0, 0]);
    expect(Array.from(windowLabels(rows, 3, 'any'))).toEqual([1, 1, 1, 0]);
    expect(Array.from(windowLabels(rows, 3, 'last'))).toEqual([1, 0, 0, 0]);
  });
});

describe('reading detect input', () => {
  it('reads .csv and .csv.gz folders alike', () => {
    const a = readInput(makeSmdFolder());
    const b = readInput(makeSmdFolder({ gz: true }));
    expect(a[0].cols).toBe(3);
    expect(Array.from(b[0].test)).toEqual(Array.from(a[0].test));
  });

  it('names the folder when it is missing', () => {
    expect(() => readInput('/no/such/folder')).toThrow(/no such folder/);
  });

  it('names the file and line of a row with a different width', () => {
    const dir = makeSmdFolder({ badRow: '0.1,0.2' });
    expect(() => readInput(dir)).toThrow(UsageError);
    expect(() => readInput(dir)).toThrow(/node-a\.csv:8: 2 values, expected 3/);
  });

  it('names the file and line of a non-numeric value', () => {
    expect(() => readInput(makeSmdFolder({ badRow: '0.1,abc,0.3' }))).toThrow(/node-a\.csv:8: value 2 is not a number/);
  });

  it('names the label file when it is shorter than the test file', () => {
    expect(() => readInput(makeSmdFolder({ shortLabels: true }))).toThrow(/node-a\.txt:451: label file ends after 450 lines/);
  });

  it('--entities: an unknown name is refused even when another is known (it was ignored)', () => {
    const dir = makeSmdFolder();
    expect(() => readInput(dir, ['node-a', 'nosuch'])).toThrow(UsageError);
    expect(() => readInput(dir, ['node-a', 'nosuch'])).toThrow(`--entities: no entity named "nosuch" in ${dir} (it has node-a)`);
    expect(readInput(dir, ['node-a']).map((e) => e.name)).toEqual(['node-a']);
  });
});

/** A NAB-style folder: `data/cat/<name>.csv` of `rows` rows (5-minute steps from 2014-01-01) and `labels` as combined_windows.json. */
function makeNabFolder(labels: unknown, opts: { rows?: number; names?: string[] } = {}): string {
  const dir = tmpDir('kais-nab-');
  fs.mkdirSync(path.join(dir, 'data', 'cat'), { recursive: true });
  fs.mkdirSync(path.join(dir, 'labels'));
  const start = Date.parse('2014-01-01T00:00:00Z');
  const lines = ['timestamp,value'];
  for (let i = 0; i < (opts.rows ?? 200); i++)
    lines.push(`${new Date(start + i * 300_000).toISOString().replace('T', ' ').slice(0, 19)},${(50 + Math.sin(i)).toFixed(3)}`);
  for (const name of opts.names ?? ['a']) fs.writeFileSync(path.join(dir, 'data', 'cat', `${name}.csv`), lines.join('\n') + '\n');
  fs.writeFileSync(path.join(dir, 'labels', 'combined_windows.json'), typeof labels === 'string' ? labels : JSON.stringify(labels));
  return dir;
}

describe('reading a NAB-style folder', () => {
  const labelsOf = (dir: string): string => path.join(dir, 'labels', 'combined_windows.json');
  /** The UsageError readInput throws on `dir` (fails when it returns or throws anything else). */
  const refusal = (dir: string, only?: string[]): string => {
    try {
      readInput(dir, only);
    } catch (e) {
      expect(e).toBeInstanceOf(UsageError);
      return (e as Error).message;
    }
    throw new Error('readInput did not refuse');
  };

  it('labels the rows inside a window and the others not', () => {
    const [e] = readInput(makeNabFolder({ 'cat/a.csv': [['2014-01-01 10:00:00.000000', '2014-01-01 10:10:00.000000']] }));
    // rows 120, 121, 122 (5-minute steps) are in the window; the first 30 rows (15%) are history
    expect(e.name).toBe('cat/a');
    expect(Array.from(e.labels).flatMap((x, i) => (x ? [i + 30] : []))).toEqual([120, 121, 122]);
  });

  it.each([
    ['null', /combined_windows\.json: expected an object mapping each data file .* to a list of \[start, end\] timestamp pairs, got null$/],
    ['[]', /combined_windows\.json: expected an object .*, got \[\]$/],
    ['5', /combined_windows\.json: expected an object .*, got 5$/],
    ['{"cat/a.csv": null}', /combined_windows\.json: "cat\/a\.csv": expected a list of \[start, end\] timestamp pairs, got null$/],
    ['{"cat/a.csv": "x"}', /combined_windows\.json: "cat\/a\.csv": expected a list of \[start, end\] timestamp pairs, got "x"$/],
    [
      '{"cat/a.csv": [[1, 2]]}',
      /combined_windows\.json: "cat\/a\.csv": window 1: expected a \[start, end\] pair of timestamp strings, got \[1,2\]$/,
    ],
    ['{"cat/a.csv": [["2014-01-01 00:10:00"]]}', /"cat\/a\.csv": window 1: expected a \[start, end\] pair of timestamp strings/],
    ['{"cat/a.csv": [null]}', /"cat\/a\.csv": window 1: expected a \[start, end\] pair of timestamp strings, got null$/],
  ])('refuses a label file holding %s, naming the file, the key and the shape expected', (text, re) => {
    const dir = makeNabFolder(text);
    const m = refusal(dir);
    expect(m.startsWith(labelsOf(dir))).toBe(true);
    expect(m).toMatch(re);
  });

  it('refuses a window whose timestamps do not parse, or that ends before it starts (they labelled every row normal)', () => {
    const dir = makeNabFolder({ 'cat/a.csv': [['garbage', 'nope']] });
    expect(refusal(dir)).toBe(`${labelsOf(dir)}: "cat/a.csv": window 1: bad timestamp "garbage"`);
    const late = makeNabFolder({
      'cat/a.csv': [
        ['2014-01-01 10:00:00', '2014-01-01 10:10:00'],
        ['2014-01-01 12:00:00', 'nope'],
      ],
    });
    expect(refusal(late)).toBe(`${labelsOf(late)}: "cat/a.csv": window 2: bad timestamp "nope"`);
    const back = makeNabFolder({ 'cat/a.csv': [['2014-01-01 10:10:00', '2014-01-01 10:00:00']] });
    expect(refusal(back)).toMatch(/"cat\/a\.csv": window 1: ends \(2014-01-01 10:00:00\) before it starts \(2014-01-01 10:10:00\)$/);
  });

  it('refuses a series too short for its history and one window, naming the file and the minimum (was a RangeError)', () => {
    for (const rows of [1, 3, 24, 35]) {
      const dir = makeNabFolder({ 'cat/a.csv': [] }, { rows });
      expect(refusal(dir)).toBe(
        `${path.join(dir, 'data', 'cat', 'a.csv')}: ${rows} data rows, need at least 36 (24 rows of history, then a 12-row window to score)`,
      );
    }
    expect(readInput(makeNabFolder({ 'cat/a.csv': [] }, { rows: 36 }))[0].labels.length).toBe(12);
    // a longer window needs more rows
    expect(() => readInput(makeNabFolder({ 'cat/a.csv': [] }, { rows: 36 }), undefined, 20)).toThrow(/36 data rows, need at least 44/);
  });

  it('--entities: every name must be a series of the folder (an unknown one was ignored when another was known)', () => {
    const dir = makeNabFolder({ 'cat/a.csv': [], 'cat/m1.csv': [], 'cat/gone.csv': [] }, { names: ['a', 'm1'] });
    expect(refusal(dir, ['m1', 'nosuch'])).toBe(`--entities: no entity named "nosuch" in ${dir} (it has cat/a, cat/m1)`);
    expect(refusal(dir, ['nosuch'])).toMatch(/^--entities: no entity named "nosuch"/);
    // listed in the labels but without a data file: not an entity of this folder
    expect(refusal(dir, ['gone'])).toMatch(/^--entities: no entity named "gone"/);
    expect(refusal(dir, ['m1', ''])).toMatch(/^--entities: no entity named ""/);
    // the full name and the file stem both name a series
    expect(readInput(dir, ['m1']).map((e) => e.name)).toEqual(['cat/m1']);
    expect(readInput(dir, ['cat/a', 'm1']).map((e) => e.name)).toEqual(['cat/a', 'cat/m1']);
  });
});

describe('runDetect', () => {
  beforeAll(async () => {
    await loadBackend();
  });

  it('reports every stage in the DESIGN.md shape and finds the injected incident', async () => {
    const { report } = await runDetect(options(makeSmdFolder()));
    expect(Object.keys(report)).toEqual([
      'input',
      'windows',
      'windowLabel',
      'stages',
      'rulesDecidedShare',
      'usPerWindow',
      'thresholds',
      'combination',
      'perEntity',
    ]);
    expect(Object.keys(report.stages)).toEqual(['rules', 'learned', 'pca', 'l2', 'twoStage']);
    for (const s of Object.values(report.stages)) expect(Object.keys(s)).toEqual(['precision', 'recall', 'f1', 'f1PointAdjusted', 'auprc']);
    // the report says how every threshold was chosen, and none from test labels
    expect(report.thresholds).toMatch(/held-out train windows/);
    // the incident is wild values: the simple baselines find it too
    expect(report.stages.l2.auprc!).toBeGreaterThan(0.5);
    expect(report.stages.pca.auprc!).toBeGreaterThan(0.5);
    expect(report.windows).toBe(500 - 11);
    expect(report.windowLabel).toBe('any');
    // the default combination (the union of the rules' and the l2 baseline's alarms) finds it; on
    // 600 train rows its 120 held-out rows give a coarse q99, so the false alarms are not checked here
    expect(report.combination).toEqual({ eta: 0.3, etaHealthy: 0.3, second: 'l2' });
    expect(report.stages.twoStage.recall).toBeGreaterThan(0.5);
    expect(report.stages.twoStage.auprc!).toBeGreaterThan(0.5);
    expect(report.rulesDecidedShare).toBeGreaterThan(0.5);
  });

  it('gives identical numbers on repeated runs with the same seed', async () => {
    const dir = makeSmdFolder();
    const a = await runDetect(options(dir));
    const b = await runDetect(options(dir));
    expect(b.report.stages).toEqual(a.report.stages);
    expect(b.report.rulesDecidedShare).toBe(a.report.rulesDecidedShare);
  });

  it('leave-one-out: one fold per entity, the setting chosen without the held-out labels', async () => {
    const dir = makeSmdFolder();
    for (const sub of ['train', 'test']) fs.copyFileSync(path.join(dir, sub, 'node-a.csv'), path.join(dir, sub, 'node-b.csv'));
    fs.copyFileSync(path.join(dir, 'test_label', 'node-a.txt'), path.join(dir, 'test_label', 'node-b.txt'));
    const r = await runLomo(options(dir));
    expect(r.folds.map((f) => f.heldOut)).toEqual(['node-a', 'node-b']);
    expect(r.pooled.windows).toBe(2 * (500 - 11));
    for (const f of r.folds) expect(f.stages.twoStage.f1PointAdjusted).toBeGreaterThan(0.5);
    // single-metric routing is part of the grid (off = Infinity or a multiple of the history extreme)
    for (const f of r.folds) expect(LOMO_GRID.thetaS).toContain(f.chosen.thetaS);
    // the grid's combination is the union of both stages' alarms (etaHealthy = eta) in every fold
    for (const f of r.folds) expect(f.chosen.etaHealthy).toBe(f.chosen.eta);
    // an explicit eta (--eta) replaces the grid's eta values
    const o = options(dir);
    const fixed = await runLomo({ ...o, learned: { ...o.learned, eta: 1 } });
    for (const f of fixed.folds) expect(f.chosen.eta).toBe(1);
    // every fold reports every stage with a threshold-free measure, and how the combination did
    for (const f of fixed.folds) {
      expect(Object.keys(f.stages)).toEqual(['rules', 'learned', 'pca', 'l2', 'twoStage']);
      for (const s of Object.values(f.stages)) expect(s.auprc).toBeGreaterThanOrEqual(0);
      expect(f.combinedVsBestStage).toBeGreaterThan(0);
    }
    // an explicit combination (--eta-healthy, --second) replaces the grid's
    const hard = await runLomo({ ...o, combination: { etaHealthy: Infinity, second: 'l2' } });
    for (const f of hard.folds) expect([f.chosen.etaHealthy, f.chosen.second]).toEqual([Infinity, 'l2']);
  });

  it('--centre: the learned stage sees windows centred on their own mean (a level shift of a test series does not move its scores)', async () => {
    const dir = makeSmdFolder();
    const [e] = readInput(dir);
    const plain = runLearned(e, options(dir)).scores;
    const centred = runLearned(e, options(dir, { centre: true })).scores;
    expect(centred.length).toBe(plain.length);
    expect(Array.from(centred)).not.toEqual(Array.from(plain));
    // the same test series one constant higher on every metric: same centred windows, same scores
    const shifted = { ...e, test: e.test.map((v) => v + 0.25) };
    const centredShifted = runLearned(shifted, options(dir, { centre: true })).scores;
    let maxDiff = 0;
    for (let k = 0; k < centred.length; k++) maxDiff = Math.max(maxDiff, Math.abs(centredShifted[k] - centred[k]));
    expect(maxDiff).toBeLessThan(1e-3);
    // without centring the same shift moves the scores
    const plainShifted = runLearned(shifted, options(dir)).scores;
    let plainDiff = 0;
    for (let k = 0; k < plain.length; k++) plainDiff = Math.max(plainDiff, Math.abs(plainShifted[k] - plain[k]));
    expect(plainDiff).toBeGreaterThan(0.1);
  });

  it('runs on a NAB-style folder, using the first 15% of each series as history', async () => {
    const dir = tmpDir('kais-nab-');
    fs.mkdirSync(path.join(dir, 'data', 'cat'), { recursive: true });
    fs.mkdirSync(path.join(dir, 'labels'));
    const rng = new Rng(3);
    const start = Date.parse('2014-01-01T00:00:00Z');
    const lines = ['timestamp,value'];
    for (let i = 0; i < 400; i++) {
      const ts = new Date(start + i * 300_000).toISOString().replace('T', ' ').slice(0, 19);
      lines.push(`${ts},${(50 + rng.normal() + (i > 300 && i < 320 ? 30 * rng.normal() : 0)).toFixed(3)}`);
    }
    fs.writeFileSync(path.join(dir, 'data', 'cat', 's.csv'), lines.join('\n') + '\n');
    const w = (i: number): string => new Date(start + i * 300_000).toISOString().replace('T', ' ').slice(0, 19) + '.000000';
    fs.writeFileSync(path.join(dir, 'labels', 'combined_windows.json'), JSON.stringify({ 'cat/s.csv': [[w(295), w(325)]] }));
    const { report } = await runDetect(options(dir, { dims: [0] }));
    expect(report.windows).toBe(400 - 60 - 11);
    expect(report.stages.learned.f1PointAdjusted).toBeGreaterThan(0);
  });
});

const smd = path.join(DATA, 'smd');
(fs.existsSync(smd) ? describe : describe.skip)(`on real SMD data (${smd}; skipped when absent)`, () => {
  it('runs one machine end to end with the Sentinel dimensions', async () => {
    await loadBackend();
    const { report } = await runDetect(options(smd, { entities: ['machine-3-3'], dims: [0, 5, 12, 19], maxTrainWindows: 500 }));
    expect(report.windows).toBeGreaterThan(20000);
    expect(report.usPerWindow.rules).toBeLessThan(50);
  });
});

const cli = path.join(ROOT, 'dist', 'kais.js');
(fs.existsSync(cli) ? describe : describe.skip)('kais detect on the command line (needs npx tsc first)', () => {
  const run = (...args: string[]): { status: number | null; stderr: string } => {
    const r = spawnSync(process.execPath, [cli, 'detect', ...args], { encoding: 'utf8' });
    return { status: r.status, stderr: r.stderr };
  };

  it('exits 2 with one line naming a missing folder', () => {
    const r = run('--input', '/no/such/folder');
    expect(r.status).toBe(2);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/\/no\/such\/folder/);
  });

  it('exits 2 with one line when test/ is a file, not a folder (it was a stack trace)', () => {
    const dir = makeSmdFolder();
    fs.rmSync(path.join(dir, 'test'), { recursive: true });
    fs.writeFileSync(path.join(dir, 'test'), '');
    const r = run('--input', dir);
    expect(r.status).toBe(2);
    expect(r.stderr.trim().split('\n')).toEqual([
      expect.stringMatching(/test: not a folder \(expected train\/, test\/, test_label\/ folders\)$/),
    ]);
  });

  it('exits 2 with one line naming --theta-s when it is not above 0', () => {
    const r = run('--input', makeSmdFolder(), '--theta-s', '0');
    expect(r.status).toBe(2);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/--theta-s: expected a number > 0.*got "0"/);
  });

  it('exits 2 with one line naming the file and line of a bad row', () => {
    const r = run('--input', makeSmdFolder({ badRow: 'x,y,z' }), '--json');
    expect(r.status).toBe(2);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/node-a\.csv:8:/);
  });
});
