/**
 * `kais detect --input <dir> [--dims 0,5,12,19] [--json] [--centre]`: measures the device anomaly filters
 * (DESIGN.md §4 and §6) on labelled metric series.
 *
 * Inputs
 * - SMD-style folder (SMD, ASD): `train/<entity>.csv[.gz]`, `test/<entity>.csv[.gz]`,
 *   `test_label/<entity>.txt|.csv` (one 0/1 per test row; extra lines are ignored, fewer is an
 *   error). Rows are comma-separated numbers, no header, all of one width per file.
 * - NAB folder (the folder holding `data/<category>/*.csv` and `labels/combined_windows.json`):
 *   each series is one entity with one metric (`value`). NAB has no train split, so the first 15%
 *   of each series (NAB's own "probationary period") is the healthy history the baseline and the
 *   learned detector are fitted on, and the remaining 85% is scored. A row is labelled anomalous
 *   when its timestamp lies inside one of the file's combined_windows.
 *
 * Per entity: the rule filter (agent/filters/device-filter.ts) gets its baseline from the train
 * rows of the `--dims` columns (default: all) and streams over the test rows exactly as the agent
 * would (one push per row); the learned detector (critic/detector/vgru.ts) trains on windows of
 * the train rows (all columns that are not constant in train) and scores every test window.
 *
 * Windows: one per test row from row T-1 on (the window of the T rows ending there).
 * Window label (`--window-label`): 'any' (default) = 1 when any of its T rows is labelled 1 (a
 * window that overlaps an incident is a window a dispatcher should avoid); 'last' = the label of
 * its last row. The JSON names the one used.
 * Stages: rules = flagged when both rules fire ('faulty'; 'ambiguous' stays in service without the
 * learned stage, as in combineHealth); learned = normalised score > eta on every window;
 * twoStage = faulty -> 1, healthy -> 0, ambiguous -> learned. Precision, recall and F1 are pooled
 * over entities (sums of TP, FP, FN); point-adjusted: within each contiguous run of anomalous
 * windows of an entity, one flagged window counts the whole run as detected (the usual SMD
 * practice, which inflates F1: both are reported). `rulesDecidedShare` = (healthy + faulty) /
 * windows. `usPerWindow.rules` = wall time of DeviceFilter.push per window; `.learned` = wall time
 * of batched scoring per window.
 * Deterministic: all randomness comes from shared/rng.ts seeded by --seed and the entity name.
 */
import * as fs from 'fs';
import * as path from 'path';
import * as zlib from 'zlib';
import type { Argv, CommandModule } from 'yargs';
import { UsageError } from '../../shared/errors';
import { namingFlags, opt, Problem, resolveOptions, yargsOptions } from '../../shared/config';
import { hashString } from '../../shared/rng';
import { round } from '../../shared/round';
import { loadBackend } from '../../shared/tf-backend';
import {
  DETECT_DEVICE_FILTER_OPTIONS,
  DeviceFilter,
  baselineFromHistory,
  type DeviceFilterOptions,
  type Verdict,
} from '../../agent/filters/device-filter';
import { DETECT_ETA, VgruDetector, type VgruOptions } from '../../critic/detector/vgru';
import { centreWindows } from '../../critic/detector/pools';
import { BaselineDetector, type BaselineKind } from '../../critic/detector/baselines';
import { DETECT_STAGE_COMBINATION, fusedScore, type StageCombination } from '../../agent/filters/stage-combination';

// ---------------------------------------------------------------- OPTIONS

export interface DetectOptions {
  input: string;
  dims?: number[];
  json: boolean;
  windowLabel: 'any' | 'last';
  seed: number;
  entities?: string[];
  rules: Partial<DeviceFilterOptions>;
  learned: Partial<VgruOptions>;
  /** Cap on learned training windows per entity. */
  maxTrainWindows: number;
  /**
   * Centre every learned-stage window (train and test) on its own per-metric mean before the VGRU
   * sees it (`centreWindows` of critic/detector/pools.ts, as the live detector does). Default false.
   */
  centre?: boolean;
  /** How the stages combine (agent/filters/stage-combination.ts); default DETECT_STAGE_COMBINATION with o.learned.eta. */
  combination?: Partial<StageCombination>;
}

export interface Entity {
  name: string;
  /** Row-major [trainRows][cols]. */
  train: Float64Array;
  test: Float64Array;
  cols: number;
  labels: Uint8Array; // [testRows]
}

export interface StageMetrics {
  precision: number;
  recall: number;
  f1: number;
  f1PointAdjusted: number;
  /** Area under the precision-recall curve of the stage's score (average precision; threshold-free). */
  auprc?: number;
}

/** The stages every report has: the two filter stages, two simple baselines, their combination. */
export type StageName = 'rules' | 'learned' | 'pca' | 'l2' | 'twoStage';
export const STAGES: readonly StageName[] = ['rules', 'learned', 'pca', 'l2', 'twoStage'];
export type StageSet = Record<StageName, StageMetrics>;

export interface DetectReport {
  input: string;
  windows: number;
  windowLabel: string;
  stages: StageSet;
  rulesDecidedShare: number;
  usPerWindow: { rules: number; learned: number };
  /** How every threshold was chosen (no test label enters any of them). */
  thresholds: string;
  combination: StageCombination;
  perEntity?: EntitySummary[];
}

/** The thresholding rule, as the report states it. */
export const THRESHOLD_RULE =
  'rules: fixed settings (DETECT_DEVICE_FILTER_OPTIONS or the --lomo choice on the other machines); learned, pca, l2: ' +
  "score normalised per machine by the median and 99% quantile of its own held-out train windows (the last 20% of the unlabelled train half, never fitted on), anomalous above eta; twoStage: faulty, or learned > eta where ambiguous, or learned > etaHealthy where the rules say healthy; auprc: average precision of each stage's score (rules: healthy < ambiguous < faulty)";

const NAB_PROBATION = 0.15;

/**
 * The rule settings `kais detect` uses unless told otherwise: DETECT_DEVICE_FILTER_OPTIONS of
 * agent/filters/device-filter.ts (chosen on the 5 dev SMD machines, docs/detect.md; thetaR is
 * Sentinel's 0.4), the same object the simulator's telemetry loop uses. With all of a machine's ~33
 * live SMD columns, beta = 0.2 means "at least 7 metrics differ". The library defaults
 * (DEFAULT_DEVICE_FILTER_OPTIONS) stay Sentinel's literal ones.
 */
export const DETECT_RULE_DEFAULTS: Readonly<Partial<DeviceFilterOptions>> = DETECT_DEVICE_FILTER_OPTIONS;
/** Learned threshold on the normalised score used by `kais detect` (and the live detector). */
export { DETECT_ETA } from '../../critic/detector/vgru';

// ---------------------------------------------------------------- READ

function readText(file: string): string {
  let buf: Buffer;
  try {
    buf = fs.readFileSync(file);
  } catch (e) {
    throw new UsageError(`${file}: cannot read (${(e as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  if (file.endsWith('.gz')) {
    try {
      buf = zlib.gunzipSync(buf);
    } catch {
      throw new UsageError(`${file}: not a valid gzip file`);
    }
  }
  return buf.toString('utf8');
}

function lines(text: string): string[] {
  const ls = text.split(/\r?\n/);
  while (ls.length > 0 && ls[ls.length - 1].trim() === '') ls.pop();
  return ls;
}

/** Parses a headerless numeric CSV; throws UsageError naming file and 1-based line. */
export function parseMatrix(file: string, text: string): { rows: number; cols: number; data: Float64Array } {
  const ls = lines(text);
  if (ls.length === 0) throw new UsageError(`${file}: empty file`);
  const cols = ls[0].split(',').length;
  const data = new Float64Array(ls.length * cols);
  for (let r = 0; r < ls.length; r++) {
    const cells = ls[r].split(',');
    if (cells.length !== cols) throw new UsageError(`${file}:${r + 1}: ${cells.length} values, expected ${cols} like line 1`);
    for (let c = 0; c < cols; c++) {
      const s = cells[c].trim();
      const v = Number(s);
      if (s === '' || !Number.isFinite(v))
        throw new UsageError(`${file}:${r + 1}: value ${c + 1} is not a number: ${JSON.stringify(cells[c].slice(0, 20))}`);
      data[r * cols + c] = v;
    }
  }
  return { rows: ls.length, cols, data };
}

function findFile(dir: string, stem: string, exts: string[]): string | null {
  for (const e of exts) {
    const f = path.join(dir, stem + e);
    if (fs.existsSync(f)) return f;
  }
  return null;
}

function readSmdStyle(input: string, only?: string[]): Entity[] {
  for (const sub of ['train', 'test', 'test_label']) {
    const st = fs.statSync(path.join(input, sub), { throwIfNoEntry: false });
    if (!st) throw new UsageError(`${path.join(input, sub)}: missing folder (expected train/, test/, test_label/)`);
    if (!st.isDirectory()) throw new UsageError(`${path.join(input, sub)}: not a folder (expected train/, test/, test_label/ folders)`);
  }
  const all = fs
    .readdirSync(path.join(input, 'test'))
    .filter((f) => /\.csv(\.gz)?$/.test(f))
    .map((f) => f.replace(/\.csv(\.gz)?$/, ''))
    .sort();
  checkEntityNames(input, all, only, (n) => [n]);
  const stems = all.filter((s) => !only || only.includes(s));
  if (stems.length === 0)
    throw new UsageError(`${path.join(input, 'test')}: no .csv or .csv.gz files${only ? ` matching --entities` : ''}`);
  return stems.map((name) => {
    const testFile = findFile(path.join(input, 'test'), name, ['.csv', '.csv.gz'])!;
    const trainFile = findFile(path.join(input, 'train'), name, ['.csv', '.csv.gz']);
    if (!trainFile) throw new UsageError(`${path.join(input, 'train', name + '.csv')}: missing (test/ has ${name})`);
    const labelFile = findFile(path.join(input, 'test_label'), name, ['.txt', '.csv', '.txt.gz', '.csv.gz']);
    if (!labelFile) throw new UsageError(`${path.join(input, 'test_label', name + '.txt')}: missing (test/ has ${name})`);
    const train = parseMatrix(trainFile, readText(trainFile));
    const test = parseMatrix(testFile, readText(testFile));
    if (train.cols !== test.cols) throw new UsageError(`${testFile}:1: ${test.cols} columns but ${trainFile} has ${train.cols}`);
    const ls = lines(readText(labelFile));
    if (ls.length < test.rows)
      throw new UsageError(`${labelFile}:${ls.length + 1}: label file ends after ${ls.length} lines but ${testFile} has ${test.rows} rows`);
    const labels = new Uint8Array(test.rows);
    for (let i = 0; i < test.rows; i++) {
      const v = Number(ls[i].trim());
      if (!Number.isFinite(v) || ls[i].trim() === '')
        throw new UsageError(`${labelFile}:${i + 1}: label is not a number: ${JSON.stringify(ls[i].slice(0, 20))}`);
      labels[i] = v > 0 ? 1 : 0;
    }
    return { name, train: train.data, test: test.data, cols: test.cols, labels };
  });
}

function parseTime(s: string): number {
  const t = Date.parse(s.trim().replace(' ', 'T') + (s.includes('Z') ? '' : 'Z'));
  return t;
}

/** A value of a label file, short, for an error message. */
function shown(v: unknown): string {
  const s = v === undefined ? 'nothing' : JSON.stringify(v);
  return s.length > 40 ? `${s.slice(0, 40)}...` : s;
}

/**
 * Every name of `only` (--entities) must name an entity of `all`; `namesOf` gives the names an
 * entity answers to. Throws UsageError naming the first unknown one.
 */
function checkEntityNames(input: string, all: string[], only: string[] | undefined, namesOf: (entity: string) => string[]): void {
  if (!only) return;
  const known = new Set(all.flatMap(namesOf));
  const unknown = only.find((n) => !known.has(n));
  if (unknown === undefined) return;
  const list = all.length > 8 ? `${all.slice(0, 8).join(', ')}, ...` : all.join(', ');
  throw new UsageError(`--entities: no entity named ${JSON.stringify(unknown)} in ${input} (it has ${all.length ? list : 'none'})`);
}

/** Shape of combined_windows.json, as the error messages state it. */
const NAB_LABELS_SHAPE = 'an object mapping each data file ("<category>/<name>.csv") to a list of [start, end] timestamp pairs';

/**
 * Reads `labels/combined_windows.json`: every key's windows as [start, end] in ms. Throws UsageError
 * naming the file, the key and what is wrong (not an object, not a list of pairs, a timestamp that
 * does not parse, a window that ends before it starts).
 */
function readNabWindows(labelsFile: string): Map<string, [number, number][]> {
  let raw: unknown;
  try {
    raw = JSON.parse(readText(labelsFile));
  } catch (e) {
    if (e instanceof UsageError) throw e;
    throw new UsageError(`${labelsFile}:1: not valid JSON`);
  }
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw))
    throw new UsageError(`${labelsFile}: expected ${NAB_LABELS_SHAPE}, got ${shown(raw)}`);
  const out = new Map<string, [number, number][]>();
  for (const [key, wins] of Object.entries(raw as Record<string, unknown>)) {
    const at = `${labelsFile}: ${JSON.stringify(key)}`;
    if (!Array.isArray(wins)) throw new UsageError(`${at}: expected a list of [start, end] timestamp pairs, got ${shown(wins)}`);
    out.set(
      key,
      wins.map((w: unknown, j) => {
        if (!Array.isArray(w) || w.length !== 2 || w.some((x) => typeof x !== 'string'))
          throw new UsageError(`${at}: window ${j + 1}: expected a [start, end] pair of timestamp strings, got ${shown(w)}`);
        const [a, b] = (w as string[]).map((x) => {
          const t = parseTime(x);
          if (!Number.isFinite(t)) throw new UsageError(`${at}: window ${j + 1}: bad timestamp ${shown(x)}`);
          return t;
        });
        if (b < a) throw new UsageError(`${at}: window ${j + 1}: ends (${w[1]}) before it starts (${w[0]})`);
        return [a, b];
      }),
    );
  }
  return out;
}

/** Rows of a NAB series that are its history at least (then 15% of it, NAB_PROBATION). */
const NAB_MIN_HISTORY = 24;

function readNab(input: string, only: string[] | undefined, T: number): Entity[] {
  const labelsFile = path.join(input, 'labels', 'combined_windows.json');
  const windowsByFile = readNabWindows(labelsFile);
  const keys = [...windowsByFile.keys()].sort().filter((key) => fs.existsSync(path.join(input, 'data', key))); // labels may list series not present in this split
  const nameOf = (key: string): string => key.replace(/\.csv$/, '');
  checkEntityNames(input, keys.map(nameOf), only, (name) => [name, path.basename(name)]);
  const out: Entity[] = [];
  for (const key of keys) {
    const name = nameOf(key);
    if (only && !only.includes(name) && !only.includes(path.basename(name))) continue;
    const file = path.join(input, 'data', key);
    const ls = lines(readText(file));
    if (ls.length < 2) throw new UsageError(`${file}: no data rows`);
    const n = ls.length - 1;
    const minRows = NAB_MIN_HISTORY + T;
    if (n < minRows)
      throw new UsageError(
        `${file}: ${n} data rows, need at least ${minRows} (${NAB_MIN_HISTORY} rows of history, then a ${T}-row window to score)`,
      );
    const times = new Float64Array(n);
    const values = new Float64Array(n);
    for (let i = 0; i < n; i++) {
      const cells = ls[i + 1].split(',');
      if (cells.length !== 2) throw new UsageError(`${file}:${i + 2}: ${cells.length} values, expected 2 (timestamp,value)`);
      const t = parseTime(cells[0]);
      const v = Number(cells[1].trim());
      if (!Number.isFinite(t)) throw new UsageError(`${file}:${i + 2}: bad timestamp ${JSON.stringify(cells[0].slice(0, 30))}`);
      if (cells[1].trim() === '' || !Number.isFinite(v))
        throw new UsageError(`${file}:${i + 2}: value is not a number: ${JSON.stringify(cells[1].slice(0, 20))}`);
      times[i] = t;
      values[i] = v;
    }
    const wins = windowsByFile.get(key)!;
    const cut = Math.max(NAB_MIN_HISTORY, Math.floor(n * NAB_PROBATION));
    const labels = new Uint8Array(n - cut);
    for (let i = cut; i < n; i++) labels[i - cut] = wins.some(([a, b]) => times[i] >= a && times[i] <= b) ? 1 : 0;
    out.push({ name, train: values.slice(0, cut), test: values.slice(cut), cols: 1, labels });
  }
  if (out.length === 0)
    throw new UsageError(`${path.join(input, 'data')}: no series listed in ${labelsFile}${only ? ' matching --entities' : ''}`);
  return out;
}

/**
 * SMD-style when `test/` exists, NAB when `labels/combined_windows.json` exists. `only`: the
 * entities to read (--entities; every name must be one of the folder's). `T`: the window length
 * (a NAB series must have a window to score after its history).
 */
export function readInput(input: string, only?: string[], T = 12): Entity[] {
  if (!fs.existsSync(input) || !fs.statSync(input).isDirectory()) throw new UsageError(`--input ${input}: no such folder`);
  if (fs.existsSync(path.join(input, 'labels', 'combined_windows.json'))) return readNab(input, only, T);
  return readSmdStyle(input, only);
}

// ---------------------------------------------------------------- SCORE

interface Counts {
  tp: number;
  fp: number;
  fn: number;
  tpPa: number;
  fpPa: number;
  fnPa: number;
}
const zero = (): Counts => ({ tp: 0, fp: 0, fn: 0, tpPa: 0, fpPa: 0, fnPa: 0 });

/** Adds plain and point-adjusted confusion counts of one entity's window sequence to `c`. */
export function countConfusion(labels: ArrayLike<number>, pred: ArrayLike<number>, c: Counts = zero()): Counts {
  const n = labels.length;
  let i = 0;
  while (i < n) {
    if (labels[i]) {
      let j = i;
      let hit = false;
      while (j < n && labels[j]) {
        if (pred[j]) hit = true;
        j++;
      }
      for (let k = i; k < j; k++) {
        if (pred[k]) c.tp++;
        else c.fn++;
        if (hit) c.tpPa++;
        else c.fnPa++;
      }
      i = j;
    } else {
      if (pred[i]) {
        c.fp++;
        c.fpPa++;
      }
      i++;
    }
  }
  return c;
}

function f1(tp: number, fp: number, fn: number): number {
  return tp === 0 ? 0 : (2 * tp) / (2 * tp + fp + fn);
}

/** Every stage's pooled metrics: counts summed over entities, AUC-PR over the concatenated scores. */
function pooledStages(counts: Record<StageName, Counts>, labels: Uint8Array[], scores: Record<StageName, Float32Array[]>): StageSet {
  const cat = (xs: ArrayLike<number>[]): Float32Array => {
    const out = new Float32Array(xs.reduce((a, x) => a + x.length, 0));
    let off = 0;
    for (const x of xs) {
      out.set(x, off);
      off += x.length;
    }
    return out;
  };
  const all = cat(labels);
  const stages = {} as StageSet;
  for (const k of STAGES) stages[k] = { ...metricsOf(counts[k]), auprc: round(averagePrecision(all, cat(scores[k]))) };
  return stages;
}

export function metricsOf(c: Counts): StageMetrics {
  const r4 = (x: number): number => Math.round(x * 1e4) / 1e4;
  return {
    precision: r4(c.tp + c.fp === 0 ? 0 : c.tp / (c.tp + c.fp)),
    recall: r4(c.tp + c.fn === 0 ? 0 : c.tp / (c.tp + c.fn)),
    f1: r4(f1(c.tp, c.fp, c.fn)),
    f1PointAdjusted: r4(f1(c.tpPa, c.fpPa, c.fnPa)),
  };
}

/**
 * Average precision (area under the precision-recall curve, the step-wise sum sklearn's
 * average_precision_score computes): sum over distinct score thresholds, highest first, of
 * (recall gained) x (precision at that threshold). Tied scores enter together. 0 without positives.
 */
export function averagePrecision(labels: ArrayLike<number>, scores: ArrayLike<number>): number {
  const n = labels.length;
  let pos = 0;
  for (let i = 0; i < n; i++) pos += labels[i] ? 1 : 0;
  if (pos === 0) return 0;
  const idx = Array.from({ length: n }, (_, i) => i).sort((a, b) => {
    const sa = Number.isNaN(scores[a]) ? -Infinity : scores[a];
    const sb = Number.isNaN(scores[b]) ? -Infinity : scores[b];
    return sb > sa ? 1 : sb < sa ? -1 : 0;
  });
  let tp = 0;
  let seen = 0;
  let ap = 0;
  let i = 0;
  const key = (k: number): number => (Number.isNaN(scores[k]) ? -Infinity : scores[k]);
  while (i < n) {
    const s = key(idx[i]);
    let gained = 0;
    while (i < n && key(idx[i]) === s) {
      if (labels[idx[i]]) gained++;
      seen++;
      i++;
    }
    tp += gained;
    if (gained > 0) ap += (gained / pos) * (tp / seen);
  }
  return ap;
}

/** The rules' verdicts as an ordinal score for average precision: healthy 0, ambiguous 1, faulty 2. */
export function rulesScore(v: ArrayLike<Verdict>): Float32Array {
  return Float32Array.from(v as Verdict[], (x) => (x === 'faulty' ? 2 : x === 'ambiguous' ? 1 : 0));
}

/** Selects columns `dims` of a row-major matrix. */
function columns(data: Float64Array, cols: number, dims: number[]): Float64Array {
  const rows = data.length / cols;
  const out = new Float64Array(rows * dims.length);
  for (let r = 0; r < rows; r++) for (let k = 0; k < dims.length; k++) out[r * dims.length + k] = data[r * cols + dims[k]];
  return out;
}

/** Windows [count][T][D] (Float32) of rows `data` ([rows][D]) starting every `stride` rows. */
function windowsOf(data: Float64Array, D: number, T: number, stride: number): { w: Float32Array; count: number } {
  const rows = data.length / D;
  const count = rows < T ? 0 : Math.floor((rows - T) / stride) + 1;
  const w = new Float32Array(count * T * D);
  for (let k = 0; k < count; k++) w.set(data.subarray(k * stride * D, (k * stride + T) * D), k * T * D);
  return { w, count };
}

export interface EntityResult {
  name: string;
  windows: number;
  labels: Uint8Array;
  verdicts: Verdict[];
  /** Learned verdicts at eta (1 = anomalous). */
  learned: Uint8Array;
  /** Normalised window scores of the learned stage and the two baselines (one per window). */
  scores: { learned: Float32Array; pca: Float32Array; l2: Float32Array };
  rulesUs: number;
  learnedUs: number;
}

/** Columns of `e` that are not constant over its train rows (at least column 0). */
export function liveColumns(e: Entity): number[] {
  const trainRows = e.train.length / e.cols;
  const live: number[] = [];
  for (let c = 0; c < e.cols; c++) {
    let lo = Infinity;
    let hi = -Infinity;
    for (let r = 0; r < trainRows; r++) {
      const v = e.train[r * e.cols + c];
      if (v < lo) lo = v;
      if (v > hi) hi = v;
    }
    if (hi > lo) live.push(c);
  }
  if (live.length === 0) live.push(0);
  return live;
}

function checkEntity(e: Entity, T: number): void {
  const trainRows = e.train.length / e.cols;
  const testRows = e.test.length / e.cols;
  if (trainRows < T + 1) throw new UsageError(`${e.name}: train has ${trainRows} rows, need more than ${T}`);
  if (testRows < T) throw new UsageError(`${e.name}: test has ${testRows} rows, need at least ${T}`);
}

/** The rule columns: --dims, else every column that is not constant in train. */
export function ruleDims(e: Entity, o: DetectOptions): number[] {
  const dims = o.dims ?? liveColumns(e);
  for (const d of dims) if (d >= e.cols) throw new UsageError(`--dims ${d}: ${e.name} has only ${e.cols} columns (0-based)`);
  return dims;
}

/** Streams the test rows through the agent's filter; one verdict per window and the time taken. */
export function runRules(e: Entity, dims: number[], rules: Partial<DeviceFilterOptions>): { verdicts: Verdict[]; ns: number } {
  const testRows = e.test.length / e.cols;
  const N = dims.length;
  const trainR = columns(e.train, e.cols, dims);
  const testR = columns(e.test, e.cols, dims);
  const filter = new DeviceFilter(baselineFromHistory(trainR, N, rules), rules);
  const verdicts: Verdict[] = [];
  const row = new Float64Array(N);
  const t0 = process.hrtime.bigint();
  for (let r = 0; r < testRows; r++) {
    for (let k = 0; k < N; k++) row[k] = testR[r * N + k];
    const v = filter.push(row);
    if (v !== 'warming') verdicts.push(v);
  }
  return { verdicts, ns: Number(process.hrtime.bigint() - t0) };
}

/** Trains the learned detector on the train rows (live columns) and scores every test window. */
export function runLearned(e: Entity, o: DetectOptions): { scores: Float32Array; ns: number } {
  const T = o.rules.windowSize ?? 12;
  const trainRows = e.train.length / e.cols;
  const live = liveColumns(e);
  const D = live.length;
  const stride = Math.max(1, Math.ceil((trainRows - T + 1) / o.maxTrainWindows));
  const tw = windowsOf(columns(e.train, e.cols, live), D, T, stride);
  if (o.centre) centreWindows(tw.w, tw.count, T, D);
  const det = new VgruDetector(D, T, { eta: DETECT_ETA, ...o.learned, seed: ((o.learned.seed ?? o.seed) ^ hashString(e.name)) >>> 0 });
  try {
    det.fit(tw.w, tw.count);
    const xw = windowsOf(columns(e.test, e.cols, live), D, T, 1);
    if (o.centre) centreWindows(xw.w, xw.count, T, D);
    const t1 = process.hrtime.bigint();
    const scores = det.score(xw.w, xw.count);
    return { scores, ns: Number(process.hrtime.bigint() - t1) };
  } finally {
    det.dispose();
  }
}

/**
 * Window labels from row labels: window k covers test rows k .. k+T-1 (it ends at row k+T-1);
 * 'any' = 1 when any of those rows is 1, 'last' = the label of row k+T-1.
 */
export function windowLabels(rowLabels: Uint8Array, T: number, mode: 'any' | 'last'): Uint8Array {
  const windows = Math.max(0, rowLabels.length - T + 1);
  const labels = new Uint8Array(windows);
  for (let k = 0; k < windows; k++) {
    const end = k + T - 1;
    if (mode === 'last') labels[k] = rowLabels[end];
    else {
      let any = 0;
      for (let r = k; r <= end; r++) any |= rowLabels[r];
      labels[k] = any;
    }
  }
  return labels;
}

/**
 * The baselines' normalised window scores of one entity (critic/detector/baselines.ts): fitted on
 * the first 80% of its train rows (all live columns), calibrated on the last 20% (the learned
 * stage's held-out share), the same windows as the other stages.
 */
export function runBaselines(e: Entity, T: number): Record<BaselineKind, Float32Array> {
  const live = liveColumns(e);
  const train = columns(e.train, e.cols, live);
  const test = columns(e.test, e.cols, live);
  const trainRows = train.length / live.length;
  const fitRows = Math.max(2, Math.floor(trainRows * 0.8));
  const out = {} as Record<BaselineKind, Float32Array>;
  for (const kind of ['pca', 'l2'] as const) out[kind] = new BaselineDetector(kind, train, live.length, T, fitRows).score(test);
  return out;
}

/** The combination in effect: o.combination over DETECT_STAGE_COMBINATION, eta from o.learned.eta when given. */
export function combinationOf(o: DetectOptions): StageCombination {
  const eta = o.combination?.eta ?? o.learned.eta ?? DETECT_STAGE_COMBINATION.eta;
  return {
    eta,
    etaHealthy: Math.max(eta, o.combination?.etaHealthy ?? DETECT_STAGE_COMBINATION.etaHealthy),
    second: o.combination?.second ?? DETECT_STAGE_COMBINATION.second,
  };
}

/** Runs both stages and the baselines on one entity. */
export function runEntity(e: Entity, o: DetectOptions): EntityResult {
  const rules = { ...DETECT_RULE_DEFAULTS, ...o.rules };
  const T = rules.windowSize ?? 12;
  checkEntity(e, T);
  const { verdicts, ns: rulesNs } = runRules(e, ruleDims(e, o), rules);
  const windows = verdicts.length;
  const { scores, ns: learnedNs } = runLearned(e, o);
  const eta = combinationOf(o).eta;
  const learned = Uint8Array.from(scores, (s) => (s > eta ? 1 : 0));
  const labels = windowLabels(e.labels, T, o.windowLabel);
  const base = runBaselines(e, T);
  return {
    name: e.name,
    windows,
    labels,
    verdicts,
    learned,
    scores: { learned: scores, ...base },
    rulesUs: rulesNs / 1e3 / windows,
    learnedUs: learnedNs / 1e3 / windows,
  };
}

export interface EntitySummary extends StageSet {
  name: string;
  windows: number;
  rulesDecidedShare: number;
  /** twoStage F1 / the better of its two stages' F1 on this entity (rules, and the learned stage or l2 as c.second says; 1 when both are 0). */
  combinedVsBestStage: number;
}

/** Per-stage scores (> eta flags) and counts of one entity under combination `c`. */
export function stageScores(r: EntityResult, c: StageCombination): Record<StageName, Float32Array> {
  return {
    rules: rulesScore(r.verdicts),
    learned: r.scores.learned,
    pca: r.scores.pca,
    l2: r.scores.l2,
    twoStage: Float32Array.from(r.verdicts, (v, k) => fusedScore(v, secondScore(r, c)[k], c)),
  };
}

/** The second stage's normalised scores of an entity under combination `c`. */
function secondScore(r: EntityResult, c: StageCombination): Float32Array {
  return c.second === 'l2' ? r.scores.l2 : r.scores.learned;
}

/** Flags of a stage from its score: rules flag 'faulty' (score 2); the others flag score > eta. */
function flagsOf(stage: StageName, score: Float32Array, eta: number): Uint8Array {
  return stage === 'rules' ? Uint8Array.from(score, (x) => (x >= 2 ? 1 : 0)) : Uint8Array.from(score, (x) => (x > eta ? 1 : 0));
}

/** Pooled and per-entity metrics of every stage, with average precision, from entity results. */
export function summarise(
  results: EntityResult[],
  c: StageCombination,
): { stages: StageSet; perEntity: EntitySummary[]; decided: number; windows: number } {
  const tot = Object.fromEntries(STAGES.map((k) => [k, zero()])) as Record<StageName, Counts>;
  const pooledScores = Object.fromEntries(STAGES.map((k) => [k, [] as Float32Array[]])) as Record<StageName, Float32Array[]>;
  const pooledLabels: Uint8Array[] = [];
  const perEntity: EntitySummary[] = [];
  let decided = 0;
  let windows = 0;
  for (const r of results) {
    const sc = stageScores(r, c);
    const m = {} as StageSet;
    for (const k of STAGES) {
      const cnt = countConfusion(r.labels, flagsOf(k, sc[k], c.eta));
      for (const f of Object.keys(cnt) as (keyof Counts)[]) tot[k][f] += cnt[f];
      m[k] = { ...metricsOf(cnt), auprc: round(averagePrecision(r.labels, sc[k])) };
      pooledScores[k].push(sc[k]);
    }
    pooledLabels.push(r.labels);
    const dec = r.verdicts.filter((v) => v !== 'ambiguous').length;
    decided += dec;
    windows += r.windows;
    const best = Math.max(m.rules.f1, m[c.second === 'l2' ? 'l2' : 'learned'].f1);
    perEntity.push({
      name: r.name,
      windows: r.windows,
      ...m,
      rulesDecidedShare: round(dec / r.windows),
      combinedVsBestStage: best === 0 ? 1 : round(m.twoStage.f1 / best),
    });
  }
  const stages = pooledStages(tot, pooledLabels, pooledScores);
  return { stages, perEntity, decided, windows };
}

/** The whole job without printing: DESIGN.md §4 report plus a per-entity breakdown. */
export async function runDetect(o: DetectOptions): Promise<{ report: DetectReport; perEntity: EntitySummary[] }> {
  const entities = readInput(o.input, o.entities, o.rules.windowSize ?? 12);
  const c = combinationOf(o);
  const results: EntityResult[] = [];
  let rulesNs = 0;
  let learnedNs = 0;
  for (const e of entities) {
    const r = runEntity(e, o);
    rulesNs += r.rulesUs * r.windows;
    learnedNs += r.learnedUs * r.windows;
    results.push(r);
  }
  const { stages, perEntity, decided, windows } = summarise(results, c);
  const report: DetectReport = {
    input: o.input,
    windows,
    windowLabel: o.windowLabel,
    stages,
    rulesDecidedShare: round(decided / windows),
    usPerWindow: { rules: round(rulesNs / windows, 3), learned: round(learnedNs / windows, 3) },
    thresholds: THRESHOLD_RULE,
    combination: c,
    perEntity,
  };
  return { report, perEntity };
}

// ---------------------------------------------------------------- LEAVE ONE ENTITY OUT

/** One point of the leave-one-out grid: rule settings, the learned threshold and the combination. */
export interface LomoConfig {
  thetaM: number;
  thetaV: number;
  beta: number;
  faultyMargin: number;
  /** Single-metric routing multiple (Infinity: off; JSON prints it as null). */
  thetaS: number;
  eta: number;
  /** Learned threshold where the rules say healthy (Infinity: hard gate; JSON null). */
  etaHealthy: number;
  /** The second stage: the VGRU or the l2 baseline. */
  second: 'vgru' | 'l2';
}

/**
 * The grid `--lomo` searches (thetaR stays Sentinel's 0.4). thetaV 3 and 4 were added in session 5
 * because the selection on all 5 dev SMD machines picked the grid's largest value, 2 (it now picks 4,
 * again the largest; a wider grid was not measured). etaHealthy (issue 20): a grid value x gives
 * etaHealthy = max(eta, x), so -Infinity = the union of both stages' alarms (etaHealthy = eta) for
 * every eta. The grid holds only the union (2026-12-02; before: Infinity = the hard gate and the
 * soft gates 8, 4, 2, 1 too): of the family it is the one member that cannot lose what the second
 * stage finds (its flags are a superset of the second stage's, and the rules' added alarms raise
 * F1 while their precision is above half of it); a soft gate gives up second-stage hits on windows
 * the rules call healthy, and the one fold that chose one (machine-2-2's, etaHealthy 4) kept 0.943x
 * its better stage. `--eta-healthy` still fixes any member of the family. docs/detect.md.
 */
export const LOMO_GRID = Object.freeze({
  thetaM: [1.5, 2, 3],
  thetaV: [0.4, 1, 2, 3, 4],
  beta: [0.1, 0.2],
  faultyMargin: [1.5, 2],
  thetaS: [Infinity, 2, 4],
  eta: [0, 0.3, 1],
  etaHealthy: [-Infinity],
  second: ['vgru', 'l2'] as const,
});

export interface LomoFold {
  heldOut: string;
  chosen: LomoConfig;
  windows: number;
  stages: StageSet;
  rulesDecidedShare: number;
  rulesFlagged: number;
  combinedVsBestStage: number;
}

export interface GridCounts {
  rules: Counts;
  learned: Counts;
  two: Counts;
  decided: number;
  windows: number;
}

function addCounts(a: GridCounts, b: GridCounts): GridCounts {
  const add = (x: Counts, y: Counts): Counts => ({
    tp: x.tp + y.tp,
    fp: x.fp + y.fp,
    fn: x.fn + y.fn,
    tpPa: x.tpPa + y.tpPa,
    fpPa: x.fpPa + y.fpPa,
    fnPa: x.fnPa + y.fnPa,
  });
  return {
    rules: add(a.rules, b.rules),
    learned: add(a.learned, b.learned),
    two: add(a.two, b.two),
    decided: a.decided + b.decided,
    windows: a.windows + b.windows,
  };
}

/** Entities with fewer rule flags than this do not enter the worst-case precision of lomoObjective. */
export const LOMO_MIN_FLAGS = 10;

/** The combination keeps at least this share of the better stage's F1 on every tuning entity, or pays (lomoObjective). */
export const LOMO_MIN_COMBINED_VS_BEST = 0.95;

/** twoStage F1 / max(rules F1, learned F1) of one entity's counts (1 when both stages score 0). */
export function combinedVsBest(c: GridCounts): number {
  const best = Math.max(metricsOf(c.rules).f1, metricsOf(c.learned).f1);
  return best === 0 ? 1 : metricsOf(c.two).f1 / best;
}

/**
 * The selection objective over the tuning entities (one GridCounts each): two-stage F1 + 0.5 x
 * two-stage point-adjusted F1 on their pooled counts, minus 3 x the shortfall of the WORST tuning
 * entity's rules precision below 0.9 (entities with at least LOMO_MIN_FLAGS flags), 3 x the
 * shortfall of the worst entity's decided share below 0.65, and (issue 20) 3 x the shortfall of the
 * worst entity's combined-vs-better-stage F1 ratio below LOMO_MIN_COMBINED_VS_BEST. Worst case
 * rather than pooled: a setting that keeps its rules precise and decisive only on average (one
 * entity with many good flags hiding another whose flags are mostly false, or whose windows are
 * mostly ambiguous) carried over badly to the held-out machine. Labels of the held-out entity
 * never enter it.
 */
export function lomoObjective(tuning: GridCounts[]): number {
  if (tuning.length === 0) return -Infinity;
  const sum = tuning.reduce((a, b) => addCounts(a, b));
  const two = metricsOf(sum.two);
  let prec = 1;
  let dec = 1;
  let ratio = Infinity;
  for (const c of tuning) {
    const flagged = c.rules.tp + c.rules.fp;
    if (flagged >= LOMO_MIN_FLAGS) prec = Math.min(prec, c.rules.tp / flagged);
    dec = Math.min(dec, c.windows === 0 ? 0 : c.decided / c.windows);
    ratio = Math.min(ratio, combinedVsBest(c));
  }
  return (
    two.f1 +
    0.5 * two.f1PointAdjusted -
    3 * Math.max(0, 0.9 - prec) -
    3 * Math.max(0, 0.65 - dec) -
    3 * Math.max(0, LOMO_MIN_COMBINED_VS_BEST - ratio)
  );
}

/**
 * The selection's guard (issue 20, 2026-12-02): the worst tuning entity's combined-vs-better-stage
 * F1 ratio, capped at 1. `--lomo` first maximises it and only then `lomoObjective`
 * (`lomoBetter`): a setting under which the combination loses to one of its own stages on a machine
 * it can see is not chosen while one that loses on none exists. A penalty below 0.95 (the issue's
 * bar), which a higher pooled F1 could buy off, chose settings that kept 0.95x on the tuning
 * machines and fell below it on the held-out one.
 */
export function lomoGuard(tuning: GridCounts[]): number {
  let g = 1;
  for (const c of tuning) g = Math.min(g, combinedVsBest(c));
  return g;
}

/** True when (guard, objective) a is better than b: higher guard first, then higher objective. */
export function lomoBetter(a: { guard: number; objective: number }, b: { guard: number; objective: number }): boolean {
  if (a.guard > b.guard + 1e-12) return true;
  if (a.guard < b.guard - 1e-12) return false;
  return a.objective > b.objective + 1e-12;
}

const VERDICT_CODE: Record<Verdict, number> = { healthy: 0, ambiguous: 1, faulty: 2, warming: 0 };
const CODE_VERDICT: Verdict[] = ['healthy', 'ambiguous', 'faulty'];

/**
 * Leave-one-entity-out check: every entity's learned and baseline scores are computed once; each
 * rule setting of LOMO_GRID streams every entity; for each held-out entity the setting (rules,
 * eta, etaHealthy, second) with the best (`lomoGuard`, then `lomoObjective`) on the OTHER
 * entities (`lomoBetter`) is applied to it (an
 * explicit `--eta` / `--eta-healthy` replaces the grid's values by that one). The baselines use
 * the chosen eta (the same thresholding rule). Returns one fold per entity and the pooled held-out
 * metrics (average precision over the pooled held-out scores).
 */
export async function runLomo(o: DetectOptions): Promise<{ folds: LomoFold[]; pooled: LomoFold }> {
  const entities = readInput(o.input, o.entities, o.rules.windowSize ?? 12);
  if (entities.length < 2) throw new UsageError(`--lomo needs at least 2 entities, got ${entities.length}`);
  const configs: LomoConfig[] = [];
  const etas = o.learned.eta !== undefined ? [o.learned.eta] : LOMO_GRID.eta;
  const etaHs = o.combination?.etaHealthy !== undefined ? [o.combination.etaHealthy] : LOMO_GRID.etaHealthy;
  const seconds = o.combination?.second !== undefined ? [o.combination.second] : LOMO_GRID.second;
  for (const thetaM of LOMO_GRID.thetaM)
    for (const thetaV of LOMO_GRID.thetaV)
      for (const beta of LOMO_GRID.beta)
        for (const faultyMargin of LOMO_GRID.faultyMargin)
          for (const thetaS of LOMO_GRID.thetaS)
            for (const eta of etas)
              for (const etaHealthy of new Set(etaHs.map((x) => Math.max(eta, x))))
                for (const second of seconds) configs.push({ thetaM, thetaV, beta, faultyMargin, thetaS, eta, etaHealthy, second });
  const ruleKey = (c: LomoConfig): string => `${c.thetaM}/${c.thetaV}/${c.beta}/${c.faultyMargin}/${c.thetaS}`;
  const counts: GridCounts[][] = []; // [entity][config]
  const kept: { labels: Uint8Array; learned: Float32Array; pca: Float32Array; l2: Float32Array; verdicts: Map<string, Uint8Array> }[] = [];
  const T = o.rules.windowSize ?? 12;
  for (const e of entities) {
    checkEntity(e, T);
    const dims = ruleDims(e, o);
    const { scores } = runLearned(e, o);
    const base = runBaselines(e, T);
    const labels = windowLabels(e.labels, T, o.windowLabel);
    const learnedCounts = new Map<string, Counts>();
    const secondOf = (c: LomoConfig): Float32Array => (c.second === 'l2' ? base.l2 : scores);
    for (const eta of etas)
      for (const sec of seconds)
        learnedCounts.set(
          `${sec}/${eta}`,
          countConfusion(
            labels,
            Uint8Array.from(sec === 'l2' ? base.l2 : scores, (s) => (s > eta ? 1 : 0)),
          ),
        );
    const row: GridCounts[] = [];
    const verdictCache = new Map<string, Uint8Array>();
    const rulesCounts = new Map<string, { c: Counts; decided: number }>();
    const pred = new Uint8Array(labels.length);
    for (const c of configs) {
      const key = ruleKey(c);
      let codes = verdictCache.get(key);
      if (!codes) {
        const v = runRules(e, dims, {
          ...DETECT_RULE_DEFAULTS,
          ...o.rules,
          thetaM: c.thetaM,
          thetaV: c.thetaV,
          beta: c.beta,
          faultyMargin: c.faultyMargin,
          thetaS: c.thetaS,
        }).verdicts;
        codes = Uint8Array.from(v, (x) => VERDICT_CODE[x]);
        verdictCache.set(key, codes);
        rulesCounts.set(key, {
          c: countConfusion(
            labels,
            Uint8Array.from(codes, (x) => (x === 2 ? 1 : 0)),
          ),
          decided: codes.filter((x) => x !== 1).length,
        });
      }
      const rc = rulesCounts.get(key)!;
      const sc = secondOf(c);
      for (let k = 0; k < codes.length; k++) {
        const x = codes[k];
        pred[k] = x === 2 ? 1 : x === 1 ? (sc[k] > c.eta ? 1 : 0) : sc[k] > c.etaHealthy ? 1 : 0;
      }
      row.push({
        rules: rc.c,
        learned: learnedCounts.get(`${c.second}/${c.eta}`)!,
        two: countConfusion(labels, pred),
        decided: rc.decided,
        windows: codes.length,
      });
    }
    counts.push(row);
    kept.push({ labels, learned: scores, pca: base.pca, l2: base.l2, verdicts: verdictCache });
  }
  const folds: LomoFold[] = [];
  const pooledScores = Object.fromEntries(STAGES.map((k) => [k, [] as Float32Array[]])) as Record<StageName, Float32Array[]>;
  const pooledCounts = Object.fromEntries(STAGES.map((k) => [k, zero()])) as Record<StageName, Counts>;
  const pooledLabels: Uint8Array[] = [];
  let decided = 0;
  let windows = 0;
  let flagged = 0;
  entities.forEach((e, h) => {
    let best = 0;
    let bestKey = { guard: -Infinity, objective: -Infinity };
    configs.forEach((_, i) => {
      const tuning = counts.filter((_, k) => k !== h).map((row) => row[i]);
      const key = { guard: lomoGuard(tuning), objective: lomoObjective(tuning) };
      if (lomoBetter(key, bestKey)) {
        bestKey = key;
        best = i;
      }
    });
    const cfg = configs[best];
    const k = kept[h];
    const codes = k.verdicts.get(ruleKey(cfg))!;
    const r: EntityResult = {
      name: e.name,
      windows: codes.length,
      labels: k.labels,
      verdicts: Array.from(codes, (x) => CODE_VERDICT[x]),
      learned: Uint8Array.from(k.learned, (s) => (s > cfg.eta ? 1 : 0)),
      scores: { learned: k.learned, pca: k.pca, l2: k.l2 },
      rulesUs: 0,
      learnedUs: 0,
    };
    const comb = { eta: cfg.eta, etaHealthy: cfg.etaHealthy, second: cfg.second };
    const { stages, perEntity } = summarise([r], comb);
    const sc = stageScores(r, comb);
    for (const s of STAGES) {
      pooledScores[s].push(sc[s]);
      const cnt = countConfusion(r.labels, flagsOf(s, sc[s], cfg.eta));
      for (const f of Object.keys(cnt) as (keyof Counts)[]) pooledCounts[s][f] += cnt[f];
    }
    pooledLabels.push(r.labels);
    const g = counts[h][best];
    decided += g.decided;
    windows += g.windows;
    flagged += g.rules.tp + g.rules.fp;
    folds.push({
      heldOut: e.name,
      chosen: cfg,
      windows: g.windows,
      stages,
      rulesDecidedShare: round(g.decided / g.windows),
      rulesFlagged: g.rules.tp + g.rules.fp,
      combinedVsBestStage: perEntity[0].combinedVsBestStage,
    });
  });
  const stages = pooledStages(pooledCounts, pooledLabels, pooledScores);
  const pooledBest = Math.max(stages.rules.f1, stages.learned.f1, stages.l2.f1);
  return {
    folds,
    pooled: {
      heldOut: 'ALL held-out folds (pooled)',
      chosen: folds[0].chosen,
      windows,
      stages,
      rulesDecidedShare: round(decided / windows),
      rulesFlagged: flagged,
      combinedVsBestStage: pooledBest === 0 ? 1 : round(stages.twoStage.f1 / pooledBest),
    },
  };
}

function lomoTable(r: { folds: LomoFold[]; pooled: LomoFold }): string {
  const f = (x: number | undefined): string => (x === undefined ? '-' : x.toFixed(3));
  const inf = (x: number): string => (x === Infinity ? 'off' : String(x));
  const out = [
    'held out             chosen (thetaM thetaV beta margin thetaS eta etaHealthy second)  rules P/flagged/decided  | F1 / F1-PA / AUC-PR: rules | learned | pca | l2 | twoStage | twoStage/best stage',
  ];
  for (const x of [...r.folds, r.pooled]) {
    const c = x.chosen;
    const s = x.stages;
    const m = (k: StageName): string => `${f(s[k].f1)} / ${f(s[k].f1PointAdjusted)} / ${f(s[k].auprc)}`;
    out.push(
      `${x.heldOut.slice(0, 20).padEnd(20)} ${(x === r.pooled ? '(per fold)' : `${c.thetaM} ${c.thetaV} ${c.beta} ${c.faultyMargin} ${inf(c.thetaS)} ${c.eta} ${inf(c.etaHealthy)} ${c.second}`).padEnd(57)} ` +
        `${f(s.rules.precision)}/${x.rulesFlagged}/${f(x.rulesDecidedShare)}  | ${STAGES.map(m).join(' | ')} | ${f(x.combinedVsBestStage)}`,
    );
  }
  return out.join('\n');
}

// ---------------------------------------------------------------- PRINT

function table(report: DetectReport, perEntity: EntitySummary[]): string {
  const pad = (s: string, n: number): string => s.padEnd(n);
  const f = (x: number | undefined): string => (x === undefined ? '-' : x.toFixed(3)).padStart(7);
  const out: string[] = [];
  const c = report.combination;
  out.push(
    `input ${report.input}: ${report.windows} windows, window label = ${report.windowLabel} row; twoStage = rules + ${c.second}, eta ${c.eta}, etaHealthy ${c.etaHealthy === Infinity ? 'off (hard gate)' : c.etaHealthy}`,
  );
  out.push(`thresholds: ${report.thresholds}`);
  out.push(`${pad('entity', 30)} ${pad('stage', 9)} precision  recall      f1  f1(PA)  AUC-PR  decided  twoStage/best`);
  const rows = (name: string, s: StageSet, dec: number, ratio: number | undefined): void => {
    for (const k of STAGES) {
      const m = s[k];
      out.push(
        `${pad(name, 30)} ${pad(k, 9)} ${f(m.precision)}   ${f(m.recall)} ${f(m.f1)} ${f(m.f1PointAdjusted)} ${f(m.auprc)}${k === 'rules' ? f(dec) : k === 'twoStage' && ratio !== undefined ? '        ' + f(ratio) : ''}`,
      );
    }
  };
  for (const e of perEntity) rows(e.name.slice(0, 30), e, e.rulesDecidedShare, e.combinedVsBestStage);
  rows('ALL (pooled)', report.stages, report.rulesDecidedShare, undefined);
  out.push(
    `time per window: rules ${report.usPerWindow.rules.toFixed(2)} µs, learned ${report.usPerWindow.learned.toFixed(2)} µs (batched)`,
  );
  return out.join('\n');
}

// ---------------------------------------------------------------- CLI

/** `--dims 0,2,3`: 0-based column indices. */
function parseDims(text: string): number[] | Problem {
  const ds = text.split(',').map((x) => x.trim());
  const out = ds.map((x) => Number(x));
  if (out.some((d, i) => ds[i] === '' || !Number.isSafeInteger(d) || d < 0))
    return new Problem(`expected comma-separated 0-based column indices, got "${text}"`);
  return out;
}

/** The options of `kais detect`, declared once (shared/config.ts makes the flags, checks and docs). */
export const DETECT_SPEC = {
  input: opt.dir<string>({ demand: true, describe: 'SMD-style folder (train/, test/, test_label/) or NAB folder (data/, labels/)' }),
  dims: opt.custom<number[] | undefined>(
    'columns',
    { defaultText: 'every column not constant in train', describe: 'comma-separated 0-based columns for the rules' },
    parseDims,
  ),
  json: opt.boolean({ default: false, describe: 'print one JSON object (fields: docs/detect.md)' }),
  windowLabel: opt.choice(['any', 'last'] as const, {
    default: 'any',
    describe: "window label from row labels: 'any' row or the 'last' row",
  }),
  seed: opt.integer({ default: 1, describe: 'seed of the learned detector' }),
  entities: opt.optString({ defaultText: 'all', describe: 'comma-separated entity names (file stems) to run' }),
  thetaV: opt.number({
    min: 0,
    max: 1e6,
    defaultText: String(DETECT_RULE_DEFAULTS.thetaV),
    describe: 'variance threshold on standardised values',
  }),
  thetaR: opt.number({ min: 0, max: 1e6, defaultText: String(DETECT_RULE_DEFAULTS.thetaR), describe: 'correlation-rule threshold' }),
  beta: opt.number({ min: 0, max: 1, defaultText: String(DETECT_RULE_DEFAULTS.beta), describe: 'share of dimensions for rule 1' }),
  thetaM: opt.number({
    min: 0,
    max: 1e6,
    defaultText: String(DETECT_RULE_DEFAULTS.thetaM),
    describe: "level-shift threshold, in units of the history's own extreme",
  }),
  faultyMargin: opt.number({
    min: 0,
    minExclusive: true,
    max: 1e6,
    defaultText: String(DETECT_RULE_DEFAULTS.faultyMargin),
    describe: 'rule 1 must fire at this multiple of its thresholds for faulty',
  }),
  thetaS: opt.number({
    min: 0,
    minExclusive: true,
    allowInfinity: true,
    defaultText: String(DETECT_RULE_DEFAULTS.thetaS),
    describe:
      "single-metric routing: 'healthy' becomes 'ambiguous' when one metric's window variance is beyond this multiple of its own history extreme (Infinity = off)",
  }),
  eta: opt.number({
    min: -1e6,
    max: 1e6,
    defaultText: String(DETECT_STAGE_COMBINATION.eta),
    describe: 'learned threshold on the normalised score',
  }),
  etaHealthy: opt.number({
    min: -1e6,
    allowInfinity: true,
    defaultText: String(DETECT_STAGE_COMBINATION.etaHealthy),
    describe: 'learned threshold where the rules say healthy (Infinity = hard gate)',
  }),
  second: opt.choice(['vgru', 'l2'] as const, {
    defaultText: String(DETECT_STAGE_COMBINATION.second),
    describe: "twoStage's second stage",
  }),
  lomo: opt.boolean({
    default: false,
    describe: 'leave-one-entity-out check: tune rules and eta on the others, measure on each (an explicit --eta fixes eta)',
  }),
  centre: opt.boolean({
    default: false,
    describe: "learned stage: centre each window on its own per-metric mean (the live detector's centreWindows)",
  }),
  steps: opt.integer({ min: 1, max: 1_000_000, defaultText: '120', describe: 'learned detector training steps per entity' }),
};

export const detectCommand: CommandModule<object, object> = {
  command: 'detect',
  describe: 'measure the device anomaly filters (rules, learned, two-stage) on labelled metric series',
  builder: (y: Argv<object>) =>
    yargsOptions(y.example('$0 detect --input smd/ --json', 'precision, recall and F1 of each stage on an SMD-style folder'), DETECT_SPEC),
  handler: namingFlags(DETECT_SPEC, async (argv) => {
    const a = resolveOptions(DETECT_SPEC, argv);
    const rules: Partial<DeviceFilterOptions> = {};
    if (a.thetaV !== undefined) rules.thetaV = a.thetaV;
    if (a.thetaR !== undefined) rules.thetaR = a.thetaR;
    if (a.beta !== undefined) rules.beta = a.beta;
    if (a.thetaM !== undefined) rules.thetaM = a.thetaM;
    if (a.faultyMargin !== undefined) rules.faultyMargin = a.faultyMargin;
    if (a.thetaS !== undefined) rules.thetaS = a.thetaS;
    const learned: Partial<VgruOptions> = {};
    if (a.eta !== undefined) learned.eta = a.eta;
    if (a.steps !== undefined) learned.steps = a.steps;
    const opts: DetectOptions = {
      input: a.input,
      dims: a.dims,
      json: a.json,
      windowLabel: a.windowLabel,
      seed: a.seed,
      entities: a.entities ? a.entities.split(',').map((s) => s.trim()) : undefined,
      rules,
      learned,
      maxTrainWindows: 4000,
      centre: a.centre,
      combination: { etaHealthy: a.etaHealthy, second: a.second },
    };
    await loadBackend();
    if (a.lomo) {
      const r = await runLomo(opts);
      process.stdout.write(opts.json ? JSON.stringify(r) + '\n' : lomoTable(r) + '\n');
      return;
    }
    const { report, perEntity } = await runDetect(opts);
    process.stdout.write(opts.json ? JSON.stringify(report) + '\n' : table(report, perEntity) + '\n');
  }),
};
