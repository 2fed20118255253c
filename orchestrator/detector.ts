/**
 * The learned stage of the device filters, live: the orchestrator's side of DESIGN.md §6 and
 * ALGORITHMS.md §6 ("the learned detector decides the ambiguous windows, runs in the
 * orchestrator, and its verdicts reach the agents").
 *
 * - Agents (agent/filters/node-health.ts) put device-filter windows in their `telemetry` frames:
 *   every 'ambiguous' window, and one in `healthyEvery` 'healthy' windows of their own eAP's
 *   nodes.
 * - Healthy windows are pooled per node shape ("cores/GB", with the window's size): the same
 *   "similar nodes" the rules pool their baseline over. The newest `maxWindows` are kept.
 * - Once a shape has `minWindows` of them, a VgruDetector (critic/detector/vgru.ts, the
 *   `kais detect` settings and threshold) is fitted on them in a worker thread, stored in SQLite
 *   (a restarted orchestrator scores at once with the stored one) and refitted after every
 *   `refitWindows` new healthy windows, so it follows the cluster's load as it changes.
 * - Ambiguous windows of a fitted shape are scored as they come, and each agent gets a `verdicts`
 *   frame for its windows. Windows of a shape not fitted yet get no verdict (counted `unscored`):
 *   for the agent they stay ambiguous, which changes nothing.
 *
 * Scoring goes before fitting, one worker request at a time. Deterministic for a given stream of
 * windows (seeded per shape).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { DETECT_ETA } from '../critic/detector/defaults';
import type { VgruOptions } from '../critic/detector/vgru';
import { MAX_DEVICE_WINDOWS, type DeviceVerdict, type DeviceWindow, type VerdictsBody } from '../shared/protocol/envelope';
import { hashString } from '../shared/rng';
import type { DetectorCore, DetectorReply, DetectorRequest, DetectorResult } from './detector-core';
import { SerialWorker } from './serial-worker';
import type { Store } from './store';

export interface LearnedDetectorOptions {
  /** Where fitted detectors are kept across restarts (null: nowhere). */
  store: Store | null;
  /** Sends verdicts to an eAP's session. */
  send: (eap: number, body: VerdictsBody) => void;
  log?: (line: string) => void;
  /** Healthy windows of a shape before its first fit. @defaultValue 64 */
  minWindows?: number;
  /** Newest healthy windows kept per shape (and fitted on). @defaultValue 1024 */
  maxWindows?: number;
  /** New healthy windows of a shape that trigger a refit. @defaultValue 512 */
  refitWindows?: number;
  /** Ambiguous windows waiting to be scored; the oldest are dropped beyond it. @defaultValue 1024 */
  maxQueued?: number;
  /** VgruDetector options. @defaultValue { eta: DETECT_ETA, seed: 1 } (seed mixed with the shape) */
  vgru?: Partial<VgruOptions>;
  /** @defaultValue 'auto': the worker when its compiled file exists (dist), else in process */
  thread?: 'auto' | 'worker' | 'in-process';
}

export interface LearnedDetectorStats {
  healthyWindows: number;
  ambiguousWindows: number;
  fits: number;
  scored: number;
  anomalous: number;
  /** Ambiguous windows of a shape with no detector yet. */
  unscored: number;
  /** Ambiguous windows dropped from a full queue. */
  dropped: number;
  /** Wall time of the last fit, ms. */
  lastFitMs: number;
}

interface Pool {
  key: string;
  dims: number;
  steps: number;
  windows: Float32Array[];
  sinceFit: number;
  fitted: boolean;
}

interface Queued {
  eap: number;
  key: string;
  node: number;
  id: number;
  values: Float32Array;
}

interface Engine {
  call(req: DetectorRequest): Promise<DetectorResult>;
  dispose(): void;
}

/** In this thread (tests; a build without the worker file): tfjs loads with it, not before. */
class InProcessEngine implements Engine {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  private readonly core: DetectorCore = new (require('./detector-core') as typeof import('./detector-core')).DetectorCore();
  async call(req: DetectorRequest): Promise<DetectorResult> {
    return req.kind === 'init' ? { backend: 'current', ms: 0 } : this.core.handle(req);
  }
  dispose(): void {
    this.core.dispose();
  }
}

class WorkerEngine implements Engine {
  private readonly w: SerialWorker<DetectorRequest, DetectorReply>;
  constructor(file: string) {
    this.w = new SerialWorker(file, 'detector');
  }
  async call(req: DetectorRequest): Promise<DetectorResult> {
    const transfer = req.kind === 'fit' || req.kind === 'score' ? [req.windows.buffer as ArrayBuffer] : [];
    const r = await this.w.call(req, transfer);
    return (r as { ok: true; result: DetectorResult }).result;
  }
  dispose(): void {
    this.w.dispose();
  }
}

export class LearnedDetector {
  readonly stats: LearnedDetectorStats = { healthyWindows: 0, ambiguousWindows: 0, fits: 0, scored: 0, anomalous: 0, unscored: 0, dropped: 0, lastFitMs: 0 };
  private readonly o: Required<Omit<LearnedDetectorOptions, 'log' | 'store' | 'send'>>;
  private readonly log: (line: string) => void;
  private readonly pools = new Map<string, Pool>();
  private queue: Queued[] = [];
  private engine: Engine | null = null;
  private starting: Promise<string> | null = null;
  private ready = false;
  private busy = false;
  private disposed = false;
  private idleWaiters: (() => void)[] = [];

  constructor(private readonly opts: LearnedDetectorOptions) {
    this.o = {
      minWindows: 64,
      maxWindows: 1024,
      refitWindows: 512,
      maxQueued: 1024,
      vgru: {},
      thread: 'auto',
      ...Object.fromEntries(Object.entries(opts).filter(([k, v]) => v !== undefined && k !== 'log' && k !== 'store' && k !== 'send')),
    } as LearnedDetector['o'];
    for (const k of ['minWindows', 'maxWindows', 'refitWindows', 'maxQueued'] as const) {
      if (!(Number.isInteger(this.o[k]) && this.o[k] >= 1)) throw new TypeError(`LearnedDetector: ${k} must be a positive integer, got ${this.o[k]}`);
    }
    if (this.o.minWindows < 2 || this.o.minWindows > this.o.maxWindows) throw new TypeError(`LearnedDetector: minWindows must be in 2..maxWindows, got ${this.o.minWindows}`);
    this.log = opts.log ?? (() => undefined);
  }

  /**
   * Starts the engine (worker thread, tfjs backend) and loads the stored detectors; scoring and
   * fitting start after it. Idempotent; `add` calls it, so an orchestrator whose agents send no
   * windows never loads tfjs for this.
   */
  start(): Promise<string> {
    this.starting ??= this.boot().catch((e: Error) => {
      this.failed = true;
      this.settle();
      throw e;
    });
    return this.starting;
  }

  private failed = false;

  private async boot(): Promise<string> {
    const workerFile = path.join(__dirname, 'detector-worker.js');
    const useWorker = this.o.thread === 'worker' || (this.o.thread === 'auto' && fs.existsSync(workerFile));
    const engine = (this.engine = useWorker ? new WorkerEngine(workerFile) : new InProcessEngine());
    const { backend } = await engine.call({ kind: 'init' });
    for (const d of this.opts.store?.detectors() ?? []) {
      try {
        await engine.call({ kind: 'load', key: d.key, dims: d.dims, steps: d.steps, options: this.vgruOptions(d.key), weights: d.weights });
        const p = this.pool(d.key, d.dims, d.steps);
        p.fitted = true;
        this.log(`detector: shape ${d.key} loaded from the store (fitted on ${d.fitWindows} healthy windows)`);
      } catch (e) {
        this.log(`detector: stored shape ${d.key} ignored (${(e as Error).message})`);
      }
    }
    this.ready = true;
    this.pump();
    return backend ?? '';
  }

  /** Shapes with a fitted detector. */
  fittedShapes(): string[] {
    return [...this.pools.values()].filter((p) => p.fitted).map((p) => p.key).sort();
  }

  /** Windows from eAP `eap`'s telemetry frame. */
  add(eap: number, windows: readonly DeviceWindow[]): void {
    if (this.disposed || windows.length === 0) return;
    if (!this.starting) {
      this.start().then(
        (backend) => this.log(`detector: on (${backend}); fits a shape after ${this.o.minWindows} healthy windows`),
        (e: Error) => this.log(`detector: could not start (${e.message}); ambiguous windows stay undecided`),
      );
    }
    for (const w of windows) {
      const key = `${w.shape}|${w.steps}x${w.dims}`;
      const p = this.pool(key, w.dims, w.steps);
      if (w.kind === 'healthy') {
        this.stats.healthyWindows++;
        p.windows.push(w.values);
        if (p.windows.length > this.o.maxWindows) p.windows.shift();
        p.sinceFit++;
      } else {
        this.stats.ambiguousWindows++;
        if (!p.fitted) {
          this.stats.unscored++;
          continue;
        }
        this.queue.push({ eap, key, node: w.node, id: w.id, values: w.values });
        if (this.queue.length > this.o.maxQueued) {
          this.queue.shift();
          this.stats.dropped++;
        }
      }
    }
    this.pump();
  }

  /** Resolves when nothing is queued, no fit is due and the worker is idle (tests, shutdown). */
  idle(): Promise<void> {
    if (this.isIdle()) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  dispose(): void {
    this.disposed = true;
    this.engine?.dispose();
    for (const r of this.idleWaiters.splice(0)) r();
  }

  private pool(key: string, dims: number, steps: number): Pool {
    let p = this.pools.get(key);
    if (!p) {
      p = { key, dims, steps, windows: [], sinceFit: 0, fitted: false };
      this.pools.set(key, p);
    }
    return p;
  }

  private vgruOptions(key: string): Partial<VgruOptions> {
    const v = { eta: DETECT_ETA, seed: 1, ...this.o.vgru };
    return { ...v, seed: (v.seed! ^ hashString(key)) >>> 0 };
  }

  private dueFit(): Pool | null {
    for (const key of [...this.pools.keys()].sort()) {
      const p = this.pools.get(key)!;
      if (p.windows.length >= this.o.minWindows && (!p.fitted || p.sinceFit >= this.o.refitWindows)) return p;
    }
    return null;
  }

  private isIdle(): boolean {
    if (this.busy) return false;
    if (this.disposed || this.failed || !this.starting) return true;
    return this.ready && this.queue.length === 0 && this.dueFit() === null;
  }

  private pump(): void {
    if (this.busy || this.disposed || !this.ready) return this.settle();
    let job: Promise<void> | null = null;
    if (this.queue.length > 0) {
      const key = this.queue[0].key;
      const batch = this.queue.filter((q) => q.key === key);
      this.queue = this.queue.filter((q) => q.key !== key);
      job = this.score(key, batch);
    } else {
      const p = this.dueFit();
      if (p) job = this.fit(p);
    }
    if (!job) return this.settle();
    this.busy = true;
    job
      .catch((e: Error) => {
        if (!this.disposed) this.log(`detector: ${e.message}`);
      })
      .finally(() => {
        this.busy = false;
        this.pump();
      });
  }

  private settle(): void {
    if (this.isIdle()) for (const r of this.idleWaiters.splice(0)) r();
  }

  private async fit(p: Pool): Promise<void> {
    const T = p.steps;
    const D = p.dims;
    const count = p.windows.length;
    const windows = new Float32Array(count * T * D);
    p.windows.forEach((w, i) => windows.set(w, i * T * D));
    p.sinceFit = 0;
    const r = await this.engine!.call({ kind: 'fit', key: p.key, dims: D, steps: T, options: this.vgruOptions(p.key), windows, count });
    if (this.disposed) return;
    p.fitted = true;
    this.stats.fits++;
    this.stats.lastFitMs = r.ms;
    this.opts.store?.putDetector({ key: p.key, dims: D, steps: T, fitWindows: count, weights: r.weights ?? [] });
    this.log(`detector: shape ${p.key} fitted on ${count} healthy windows in ${(r.ms / 1000).toFixed(1)} s`);
  }

  private async score(key: string, batch: Queued[]): Promise<void> {
    const p = this.pools.get(key)!;
    const n = p.steps * p.dims;
    const windows = new Float32Array(batch.length * n);
    batch.forEach((q, i) => windows.set(q.values, i * n));
    const r = await this.engine!.call({ kind: 'score', key, windows, count: batch.length });
    if (this.disposed) return;
    const byEap = new Map<number, DeviceVerdict[]>();
    batch.forEach((q, i) => {
      const score = r.scores![i];
      const anomalous = score > r.eta!;
      if (anomalous) this.stats.anomalous++;
      this.stats.scored++;
      let list = byEap.get(q.eap);
      if (!list) byEap.set(q.eap, (list = []));
      list.push({ node: q.node, id: q.id, anomalous, score: Number.isFinite(score) ? score : 1e9 });
    });
    for (const [eap, verdicts] of byEap) {
      for (let i = 0; i < verdicts.length; i += MAX_DEVICE_WINDOWS) this.opts.send(eap, { verdicts: verdicts.slice(i, i + MAX_DEVICE_WINDOWS) });
    }
  }
}
