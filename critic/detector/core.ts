/**
 * The learned device detector's tfjs side (critic/detector/vgru.ts), one VgruDetector per key
 * (a node shape): fit on healthy windows, load stored weights, score windows. Runs in the
 * detector's worker thread (orchestrator/detector-worker.ts) or, for tests, in process.
 */
import { VgruDetector, type VgruOptions } from './vgru';

export type DetectorRequest =
  | { kind: 'init' }
  | { kind: 'fit'; key: string; dims: number; steps: number; options: Partial<VgruOptions>; windows: Float32Array; count: number }
  | { kind: 'load'; key: string; dims: number; steps: number; options: Partial<VgruOptions>; weights: Float32Array[] }
  | { kind: 'score'; key: string; windows: Float32Array; count: number };

export interface DetectorResult {
  /** tfjs backend in use (init). */
  backend?: string;
  /** Weights after a fit (VgruDetector.getWeights order), to store. */
  weights?: Float32Array[];
  /** Normalised scores, one per window (score). */
  scores?: Float32Array;
  /** Threshold the verdicts use (score): anomalous = score > eta. */
  eta?: number;
  /** Wall time of the request, ms. */
  ms: number;
}

export type DetectorReply = { ok: true; result: DetectorResult } | { ok: false; error: string };

export class DetectorCore {
  private readonly detectors = new Map<string, VgruDetector>();

  handle(req: Exclude<DetectorRequest, { kind: 'init' }>): DetectorResult {
    const t0 = performance.now();
    if (req.kind === 'score') {
      const det = this.detectors.get(req.key);
      if (!det) throw new Error(`detector ${req.key}: not fitted`);
      const scores = det.score(req.windows, req.count);
      return { scores, eta: det.options.eta, ms: performance.now() - t0 };
    }
    const det = new VgruDetector(req.dims, req.steps, req.options);
    try {
      if (req.kind === 'fit') det.fit(req.windows, req.count);
      else det.setWeights(req.weights);
    } catch (e) {
      det.dispose();
      throw e;
    }
    this.detectors.get(req.key)?.dispose();
    this.detectors.set(req.key, det);
    return { weights: req.kind === 'fit' ? det.getWeights() : undefined, ms: performance.now() - t0 };
  }

  dispose(): void {
    for (const d of this.detectors.values()) d.dispose();
    this.detectors.clear();
  }
}
