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
import type { DetectorCore, DetectorReply, DetectorRequest, DetectorResult } from '../critic/detector/core';
import { DetectorPools, type DetectorPoolOptions, type ShapePool } from '../critic/detector/pools';
import { MAX_DEVICE_WINDOWS, type DeviceVerdict, type DeviceWindow, type VerdictsBody } from '../shared/protocol/envelope';
import { SerialWorker } from './serial-worker';
import type { Store } from './store';

export interface LearnedDetectorOptions extends Partial<DetectorPoolOptions> {
  /** Where fitted detectors are kept across restarts (null: nowhere). */
  store: Store | null;
  /** Sends verdicts to an eAP's session. */
  send: (eap: number, body: VerdictsBody) => void;
  log?: (line: string) => void;
  /** Ambiguous windows waiting to be scored; the oldest are dropped beyond it. @defaultValue 1024 */
  maxQueued?: number;
  /** @defaultValue 'auto': the worker when its compiled file exists (dist), else in process */
  thread?: 'auto' | 'worker' | 'in-process';
}

export interface LearnedDetectorStats {
  trainWindows: number;
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
  private readonly core: DetectorCore = new (require('../critic/detector/core') as typeof import('../critic/detector/core')).DetectorCore();
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
  readonly stats: LearnedDetectorStats = {
    trainWindows: 0,
    ambiguousWindows: 0,
    fits: 0,
    scored: 0,
    anomalous: 0,
    unscored: 0,
    dropped: 0,
    lastFitMs: 0,
  };
  private readonly pools: DetectorPools;
  private readonly maxQueued: number;
  private readonly log: (line: string) => void;
  private queue: Queued[] = [];
  private engine: Engine | null = null;
  private starting: Promise<string> | null = null;
  private ready = false;
  private failed = false;
  private busy = false;
  private disposed = false;
  private idleWaiters: (() => void)[] = [];

  constructor(private readonly opts: LearnedDetectorOptions) {
    this.pools = new DetectorPools(opts);
    this.maxQueued = opts.maxQueued ?? 1024;
    if (!(Number.isInteger(this.maxQueued) && this.maxQueued >= 1))
      throw new TypeError(`LearnedDetector: maxQueued must be a positive integer, got ${this.maxQueued}`);
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

  private async boot(): Promise<string> {
    const workerFile = path.join(__dirname, 'detector-worker.js');
    const thread = this.opts.thread ?? 'auto';
    const useWorker = thread === 'worker' || (thread === 'auto' && fs.existsSync(workerFile));
    const engine = (this.engine = useWorker ? new WorkerEngine(workerFile) : new InProcessEngine());
    const { backend } = await engine.call({ kind: 'init' });
    for (const d of this.opts.store?.detectors() ?? []) {
      try {
        await engine.call({
          kind: 'load',
          key: d.key,
          dims: d.dims,
          steps: d.steps,
          options: this.pools.vgruOptions(d.key),
          weights: d.weights,
        });
        this.pools.pool(d.key, d.dims, d.steps).fitted = true;
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
    return this.pools.fittedShapes();
  }

  /** Windows from eAP `eap`'s telemetry frame. */
  add(eap: number, windows: readonly DeviceWindow[]): void {
    if (this.disposed || windows.length === 0) return;
    if (!this.starting) {
      this.start().then(
        (backend) => this.log(`detector: on (${backend}); fits a shape after ${this.pools.o.minWindows} healthy windows`),
        (e: Error) => this.log(`detector: could not start (${e.message}); ambiguous windows stay undecided`),
      );
    }
    for (const w of windows) {
      const route = this.pools.add(w);
      if (route === 'pooled') this.stats.trainWindows++;
      else {
        this.stats.ambiguousWindows++;
        if (route === 'unscored') this.stats.unscored++;
        else {
          this.queue.push({ eap, key: DetectorPools.keyOf(w), node: w.node, id: w.id, values: w.values });
          if (this.queue.length > this.maxQueued) {
            this.queue.shift();
            this.stats.dropped++;
          }
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

  private isIdle(): boolean {
    if (this.busy) return false;
    if (this.disposed || this.failed || !this.starting) return true;
    return this.ready && this.queue.length === 0 && this.pools.dueFit() === null;
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
      const p = this.pools.dueFit();
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

  private async fit(p: ShapePool): Promise<void> {
    const { windows, count } = this.pools.takeFitBatch(p);
    const r = await this.engine!.call({
      kind: 'fit',
      key: p.key,
      dims: p.dims,
      steps: p.steps,
      options: this.pools.vgruOptions(p.key),
      windows,
      count,
    });
    if (this.disposed) return;
    p.fitted = true;
    this.stats.fits++;
    this.stats.lastFitMs = r.ms;
    this.opts.store?.putDetector({ key: p.key, dims: p.dims, steps: p.steps, fitWindows: count, weights: r.weights ?? [] });
    this.log(`detector: shape ${p.key} fitted on ${count} healthy windows in ${(r.ms / 1000).toFixed(1)} s`);
  }

  private async score(key: string, batch: Queued[]): Promise<void> {
    const windows = this.pools.pack(
      this.pools.get(key)!,
      batch.map((q) => q.values),
    );
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
      for (let i = 0; i < verdicts.length; i += MAX_DEVICE_WINDOWS)
        this.opts.send(eap, { verdicts: verdicts.slice(i, i + MAX_DEVICE_WINDOWS) });
    }
  }
}
