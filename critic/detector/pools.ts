/**
 * The learned stage's bookkeeping, shared by the orchestrator's live detector
 * (orchestrator/detector.ts, asynchronous, in a worker) and the simulator's (training/sim/
 * telemetry.ts, synchronous): healthy device-filter windows pooled per node shape ("cores/GB" and
 * the window's size: the "similar nodes" the rules pool their baseline over), when a shape is due
 * for a fit, and its seeded detector options. No tfjs here.
 */
import type { DeviceWindow } from '../../shared/protocol/envelope';
import { hashString } from '../../shared/rng';
import type { VgruOptions } from './vgru';

export interface DetectorPoolOptions {
  /** Healthy windows of a shape before its first fit. @defaultValue 64 */
  minWindows: number;
  /** Newest healthy windows kept per shape (and fitted on). @defaultValue 1024 */
  maxWindows: number;
  /** New healthy windows of a shape that trigger a refit. @defaultValue 512 */
  refitWindows: number;
  /** VgruDetector options. @defaultValue { eta: LIVE_DETECTOR_ETA, seed: 1 } (seed mixed with the shape) */
  vgru: Partial<VgruOptions>;
  /**
   * What is taken off each window before the detector sees it:
   * - 'window' (default): the window's own mean (centreWindows). The detector judges dynamics;
   *   level is left to the rules. In the simulator (v2017 failure times, lec/hpa, seed 1, eta 1, 5
   *   in a row) 1.7% of healthy node-time held out; on SMD it misses incidents that are level
   *   shifts (docs/detect.md).
   * - 'node': its node's own level, the mean of that node's last `levelWindows` train windows
   *   per metric (what `kais detect`'s per-machine standardisation amounts to). In the simulator
   *   9.3% held out: a healthy node's CPU level drifts (AR(1), about a minute) further than its
   *   last minutes' windows show.
   * - 'none': nothing (17.5% in the simulator: nodes of one shape sit at different memory levels).
   */
  level: 'node' | 'window' | 'none';
  /** Train windows per node its level is the mean of. @defaultValue 64 */
  levelWindows: number;
}

/**
 * The live threshold on the normalised score: 1 = the training windows' q99 plus once more the
 * distance from their median to that q99 (`kais detect` uses DETECT_ETA = 0). With eta 0 and
 * uncentred windows the simulator's lec/hpa at the v2017 failure times (seed 1) held out 17.5% of
 * healthy node-time; centred, eta 1 and 5 anomalous verdicts in a row (NodeHealth learnedRun):
 * 1.7% (docs/detect.md "The learned stage live").
 */
export const LIVE_DETECTOR_ETA = 1;

export interface ShapePool {
  key: string;
  dims: number;
  steps: number;
  /** Newest train windows, oldest first, each [steps][dims], with their node. */
  windows: NodeWindow[];
  /** Healthy windows added since the last fit began. */
  sinceFit: number;
  fitted: boolean;
}


/**
 * Subtracts each window's own mean per metric, in place: the detector then judges a window's
 * dynamics (variance, trends, how the metrics move together), not its level. Nodes of one shape
 * sit at different levels of a near-constant metric (memory), and a level the pool has not seen
 * would otherwise score as an anomaly; the level is the rules' job (level evidence, thetaM).
 */
export function centreWindows(windows: Float32Array, count: number, steps: number, dims: number): void {
  for (let k = 0; k < count; k++) {
    const o = k * steps * dims;
    for (let d = 0; d < dims; d++) {
      let m = 0;
      for (let t = 0; t < steps; t++) m += windows[o + t * dims + d];
      m /= steps;
      for (let t = 0; t < steps; t++) windows[o + t * dims + d] -= m;
    }
  }
}

export interface NodeWindow {
  node: number;
  values: Float32Array;
}

export class DetectorPools {
  readonly o: DetectorPoolOptions;
  private readonly pools = new Map<string, ShapePool>();
  /** Per node: the per-metric means of its last levelWindows train windows (a ring), and their sum. */
  private readonly levels = new Map<number, { means: Float64Array[]; next: number; sum: Float64Array }>();

  constructor(options: Partial<DetectorPoolOptions> = {}) {
    this.o = {
      minWindows: 64,
      maxWindows: 1024,
      refitWindows: 512,
      vgru: {},
      level: 'window',
      levelWindows: 64,
      ...Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)),
    } as DetectorPoolOptions;
    for (const k of ['minWindows', 'maxWindows', 'refitWindows', 'levelWindows'] as const) {
      if (!(Number.isInteger(this.o[k]) && this.o[k] >= 1)) throw new TypeError(`learned detector: ${k} must be a positive integer, got ${this.o[k]}`);
    }
    if (this.o.minWindows < 2 || this.o.minWindows > this.o.maxWindows) throw new TypeError(`learned detector: minWindows must be in 2..maxWindows, got ${this.o.minWindows}`);
  }

  static keyOf(w: Pick<DeviceWindow, 'shape' | 'steps' | 'dims'>): string {
    return `${w.shape}|${w.steps}x${w.dims}`;
  }

  pool(key: string, dims: number, steps: number): ShapePool {
    let p = this.pools.get(key);
    if (!p) {
      p = { key, dims, steps, windows: [], sinceFit: 0, fitted: false };
      this.pools.set(key, p);
    }
    return p;
  }

  /**
   * A train window joins its shape's pool (and its node's level); an ambiguous one: whether it
   * can be scored now (its shape is fitted and, with level 'node', its node has a level).
   */
  add(w: DeviceWindow): 'pooled' | 'score' | 'unscored' {
    const p = this.pool(DetectorPools.keyOf(w), w.dims, w.steps);
    if (w.kind === 'ambiguous') return p.fitted && (this.o.level !== 'node' || this.levels.has(w.node)) ? 'score' : 'unscored';
    this.trackLevel(w);
    p.windows.push({ node: w.node, values: w.values });
    if (p.windows.length > this.o.maxWindows) p.windows.shift();
    p.sinceFit++;
    return 'pooled';
  }

  /** The first shape (by key) due for a fit: enough windows, and never fitted or refitWindows new ones. */
  dueFit(): ShapePool | null {
    for (const key of [...this.pools.keys()].sort()) {
      const p = this.pools.get(key)!;
      if (p.windows.length >= this.o.minWindows && (!p.fitted || p.sinceFit >= this.o.refitWindows)) return p;
    }
    return null;
  }

  /** The pool's windows as one [count][steps][dims] array, prepared; the fit starts now (sinceFit = 0). */
  takeFitBatch(p: ShapePool): { windows: Float32Array; count: number } {
    const windows = this.pack(p, p.windows);
    p.sinceFit = 0;
    return { windows, count: p.windows.length };
  }

  /** Windows of shape `p` as one [count][steps][dims] array, their level taken off (option `level`). */
  pack(p: Pick<ShapePool, 'steps' | 'dims'>, list: readonly NodeWindow[]): Float32Array {
    const { steps: T, dims: D } = p;
    const windows = new Float32Array(list.length * T * D);
    list.forEach((w, i) => windows.set(w.values, i * T * D));
    if (this.o.level === 'window') centreWindows(windows, list.length, T, D);
    else if (this.o.level === 'node') {
      list.forEach((w, i) => {
        const lv = this.levels.get(w.node);
        if (!lv) return;
        const k = lv.means.length;
        for (let t = 0; t < T; t++) for (let d = 0; d < D; d++) windows[(i * T + t) * D + d] -= lv.sum[d] / k;
      });
    }
    return windows;
  }

  private trackLevel(w: DeviceWindow): void {
    let lv = this.levels.get(w.node);
    if (!lv || lv.sum.length !== w.dims) {
      lv = { means: [], next: 0, sum: new Float64Array(w.dims) };
      this.levels.set(w.node, lv);
    }
    const m = new Float64Array(w.dims);
    for (let t = 0; t < w.steps; t++) for (let d = 0; d < w.dims; d++) m[d] += w.values[t * w.dims + d] / w.steps;
    if (lv.means.length < this.o.levelWindows) lv.means.push(m);
    else {
      const old = lv.means[lv.next];
      for (let d = 0; d < w.dims; d++) lv.sum[d] -= old[d];
      lv.means[lv.next] = m;
      lv.next = (lv.next + 1) % this.o.levelWindows;
    }
    for (let d = 0; d < w.dims; d++) lv.sum[d] += m[d];
  }

  /** VgruDetector options of a shape: the `kais detect` threshold, the seed mixed with the key. */
  vgruOptions(key: string): Partial<VgruOptions> {
    const v = { eta: LIVE_DETECTOR_ETA, seed: 1, ...this.o.vgru };
    return { ...v, seed: (v.seed! ^ hashString(key)) >>> 0 };
  }

  fittedShapes(): string[] {
    return [...this.pools.values()].filter((p) => p.fitted).map((p) => p.key).sort();
  }

  get(key: string): ShapePool | undefined {
    return this.pools.get(key);
  }
}
