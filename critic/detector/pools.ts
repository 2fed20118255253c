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
  /** Newest train windows, oldest first, each [steps][dims]. */
  windows: Float32Array[];
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

export class DetectorPools {
  readonly o: DetectorPoolOptions;
  private readonly pools = new Map<string, ShapePool>();

  constructor(options: Partial<DetectorPoolOptions> = {}) {
    this.o = {
      minWindows: 64,
      maxWindows: 1024,
      refitWindows: 512,
      vgru: {},
      ...Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)),
    } as DetectorPoolOptions;
    for (const k of ['minWindows', 'maxWindows', 'refitWindows'] as const) {
      if (!(Number.isInteger(this.o[k]) && this.o[k] >= 1))
        throw new TypeError(`learned detector: ${k} must be a positive integer, got ${this.o[k]}`);
    }
    if (this.o.minWindows < 2 || this.o.minWindows > this.o.maxWindows)
      throw new TypeError(`learned detector: minWindows must be in 2..maxWindows, got ${this.o.minWindows}`);
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

  /** A train window joins its shape's pool; an ambiguous one: whether its shape can score it now. */
  add(w: DeviceWindow): 'pooled' | 'score' | 'unscored' {
    const p = this.pool(DetectorPools.keyOf(w), w.dims, w.steps);
    if (w.kind === 'ambiguous') return p.fitted ? 'score' : 'unscored';
    p.windows.push(w.values);
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

  /**
   * Windows of shape `p` as one [count][steps][dims] array, each centred on its own mean
   * (centreWindows). Taking off each node's own level instead (the mean of its last 64 train
   * windows, what `kais detect`'s per-machine standardisation amounts to) was measured and
   * dropped: 9.3% of healthy node-time held out in the simulator against 1.7% (docs/detect.md).
   */
  pack(p: Pick<ShapePool, 'steps' | 'dims'>, list: readonly Float32Array[]): Float32Array {
    const n = p.steps * p.dims;
    const windows = new Float32Array(list.length * n);
    list.forEach((w, i) => windows.set(w, i * n));
    centreWindows(windows, list.length, p.steps, p.dims);
    return windows;
  }

  /** VgruDetector options of a shape: the `kais detect` threshold, the seed mixed with the key. */
  vgruOptions(key: string): Partial<VgruOptions> {
    const v = { eta: LIVE_DETECTOR_ETA, seed: 1, ...this.o.vgru };
    return { ...v, seed: (v.seed! ^ hashString(key)) >>> 0 };
  }

  fittedShapes(): string[] {
    return [...this.pools.values()]
      .filter((p) => p.fitted)
      .map((p) => p.key)
      .sort();
  }

  get(key: string): ShapePool | undefined {
    return this.pools.get(key);
  }
}
