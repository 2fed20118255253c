/**
 * The shape of a node's telemetry: four metrics in [0, 1] per sample, [cpu, mem, disk, upload],
 * healthy and abnormal. One model for the simulator (training/sim/telemetry.ts) and the emulated
 * cluster of `kais up` / `kais node` (orchestrator/emulated-cluster.ts), so the live device filters
 * see the series the simulator's filters were measured on.
 *
 * Healthy: a common load factor, an AR(1) process with the lag-1 autocorrelation and spread of the
 * real CPU series of v2018_machine_usage.csv (16 machines: cpu ac1 0.75, std 11 points; memory ac1
 * 0.93, std 4; disk ac1 0.64, std 5.6; network out ac1 ~1.0, std 1.7), added to the node's smoothed
 * utilisation, drives CPU, disk and upload; memory follows the node's reserved replica memory; each
 * metric has a small noise of its own.
 * Abnormal (failing, or in the minutes before): CPU and disk swing over their whole range
 * independently of the load (variance up, correlations broken), memory drifts, upload collapses.
 */
import type { Rng } from './rng';

export const TELEMETRY_DIMS = 4;
export const TELEMETRY_METRICS = ['cpu', 'mem', 'disk', 'upload'] as const;

const AC1 = [0.75, 0.93, 0.64, 0.98];
const STD = [0.11, 0.04, 0.056, 0.017];
/** median sample spacing of v2018_machine_usage.csv (s) */
const REAL_SPACING_S = 60;

export class NodeTelemetryModel {
  /** Per node: the load factor, then the other three metrics' own noises. */
  private readonly noise: Float64Array;

  constructor(
    numNodes: number,
    private readonly periodS: number,
    private readonly rng: Rng,
  ) {
    this.noise = new Float64Array(numNodes * TELEMETRY_DIMS);
  }

  /**
   * Next sample of node n into out ([cpu, mem, disk, upload], each in [0, 1]). `cpuLevel`: the
   * node's smoothed CPU utilisation; `memLevel`: its reserved memory fraction.
   */
  sample(n: number, abnormal: boolean, cpuLevel: number, memLevel: number, out: Float64Array): void {
    const base = n * TELEMETRY_DIMS;
    for (let d = 0; d < TELEMETRY_DIMS; d++) {
      // the real series were measured at ~60 s spacing: per-sample autocorrelation at periodS spacing
      const a = Math.pow(AC1[d], this.periodS / REAL_SPACING_S);
      const sd = d === 0 ? STD[0] : 0.2 * STD[d];
      this.noise[base + d] = a * this.noise[base + d] + Math.sqrt(1 - a * a) * sd * this.rng.normal();
    }
    const load = cpuLevel + this.noise[base];
    if (!abnormal) {
      // healthy: CPU, disk and upload all follow the load (stable correlations), memory its reservations
      out[0] = clamp01(0.2 + 0.6 * load);
      out[1] = clamp01(0.3 + 0.6 * memLevel + this.noise[base + 1]);
      out[2] = clamp01(0.07 + 0.3 * load + this.noise[base + 2]);
      out[3] = clamp01(0.3 + 0.3 * load + this.noise[base + 3]);
    } else {
      out[0] = this.rng.next();
      out[1] = clamp01(0.3 + 0.6 * memLevel + 10 * this.noise[base + 1]);
      out[2] = this.rng.next() < 0.5 ? this.rng.next() : 0.01;
      out[3] = clamp01(0.05 * this.rng.next());
    }
  }
}

function clamp01(x: number): number {
  return x < 0 ? 0 : x > 1 ? 1 : x;
}
