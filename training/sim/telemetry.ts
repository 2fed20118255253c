/**
 * Node telemetry in the simulator and the device filters run on it, the way the agent runs them.
 *
 * Healthy series: four metrics per node. A common load factor, an AR(1) process with the lag-1
 * autocorrelation and spread of the real CPU series of v2018_machine_usage.csv (16 machines: cpu
 * ac1 0.75, std 11 points; memory ac1 0.93, std 4; disk ac1 0.64, std 5.6; network out ac1 ~1.0,
 * std 1.7), added to the node's smoothed utilisation in the simulator, drives CPU, disk and upload;
 * memory follows the node's reserved replica memory; each metric has a small noise of its own.
 * One sample per `periodS` (1 s of simulated time; a window of T = 12 samples spans 12 s).
 *
 * Abnormal series: from `precursorS` before a failure until it recovers, the node's metrics turn
 * erratic the way failing machines' do: CPU and disk swing over their whole range independently
 * of the load (variance up, correlations broken), memory drifts, the upload rate collapses.
 *
 * Filter loop: each node has a DeviceFilter (agent/filters/device-filter.ts) with the rule settings
 * `kais detect` measures on labelled server data (DETECT_DEVICE_FILTER_OPTIONS: level evidence,
 * faulty margin; `rules` overrides them), whose baseline is the pooled history of the first
 * `historySamples` (36) samples of all nodes of the same shape ("a similar node", as Sentinel says;
 * pooling keeps one node that is already failing from defining normal; nodes count as healthy
 * meanwhile). 36 and not 24 samples: the level evidence measures a window's distance from the
 * history's level in units of the history's own most extreme window, and 24 s of history do not
 * show how far the load wanders (its AR(1) correlation time is about a minute). Measured with these
 * rules (telemetry.test.ts, Poisson failures): 24 samples exclude 3.6% of healthy node-time, 36
 * samples 0.7%, 48 samples 0.8%; a longer history leaves the first failures unfiltered (lec/hpa at
 * the v2017 failure times: 300 / 382 / 441 requests lost with 24 / 36 / 48 samples, 1476 without
 * filters). The CPU level is the utilisation smoothed over ~10 s, as monitoring reports it.
 * 'faulty' excludes the node at once; 'ambiguous' twice in a row excludes it too (the learned
 * detector that decides ambiguous windows in the agent is not in the simulator loop yet); a node
 * is re-admitted after `readmitS` of consecutive 'healthy' verdicts.
 */
import { DETECT_DEVICE_FILTER_OPTIONS, DeviceFilter, baselineFromHistory, type DeviceFilterOptions } from '../../agent/filters/device-filter';
import { Rng } from '../../shared/rng';
import type { Cluster } from './cluster';

export const TELEMETRY_DIMS = 4;

export interface TelemetryOptions {
  /** @defaultValue 1 */
  periodS: number;
  /** Seconds before a failure during which telemetry is already abnormal. @defaultValue 20 */
  precursorS: number;
  /** Consecutive healthy seconds before an excluded node is re-admitted. @defaultValue 5 */
  readmitS: number;
  /** Consecutive 'ambiguous' verdicts that exclude a node (Infinity: only 'faulty' excludes). @defaultValue Infinity */
  ambiguousRun: number;
  /** Samples of history pooled into the baselines before the filters start. @defaultValue 36 */
  historySamples: number;
  /** Rule settings of every node's DeviceFilter (baseline and verdicts). @defaultValue
   *  DETECT_DEVICE_FILTER_OPTIONS, the settings `kais detect` measures on labelled server data */
  rules: Partial<DeviceFilterOptions>;
}

const AC1 = [0.75, 0.93, 0.64, 0.98];
const STD = [0.11, 0.04, 0.056, 0.017];
/** median sample spacing of v2018_machine_usage.csv (s) */
const REAL_SPACING_S = 60;

export class TelemetryFilters {
  readonly o: TelemetryOptions;
  private readonly rng: Rng;
  private readonly noise: Float64Array;
  private readonly cpuLevel: Float64Array;
  private readonly filters: (DeviceFilter | null)[];
  private readonly history: Float64Array[];
  private readonly ambiguousRun: Int32Array;
  private readonly healthyRunS: Float64Array;
  private readonly sample = new Float64Array(TELEMETRY_DIMS);
  /** node-seconds excluded while the node was healthy (not failing, not in its precursor) */
  falseExcludedS = 0;
  healthyNodeS = 0;
  exclusions = 0;
  /** verdict counts by ground truth (abnormal = failing or in its precursor), for reports */
  readonly verdicts = { abnormal: {} as Record<string, number>, normal: {} as Record<string, number> };

  constructor(
    private readonly cluster: Cluster,
    seed: number,
    options: Partial<TelemetryOptions> = {},
  ) {
    this.o = { periodS: 1, precursorS: 20, readmitS: 5, ambiguousRun: Infinity, historySamples: 36, rules: DETECT_DEVICE_FILTER_OPTIONS, ...options };
    if (!Number.isInteger(this.o.historySamples) || this.o.historySamples < 12) throw new TypeError(`TelemetryFilters historySamples: expected an integer >= 12, got ${this.o.historySamples}`);
    const N = cluster.numNodes;
    this.rng = Rng.derive(seed, 'telemetry');
    this.noise = new Float64Array(N * TELEMETRY_DIMS);
    this.cpuLevel = new Float64Array(N);
    this.ambiguousRun = new Int32Array(N);
    this.healthyRunS = new Float64Array(N);
    this.filters = new Array(N).fill(null);
    this.history = Array.from({ length: N }, () => new Float64Array(0));
  }

  /** One sample of node n into out: [cpu, mem, disk, upload], each in [0, 1]. */
  private generate(n: number, abnormal: boolean, memLevel: number, out: Float64Array): void {
    const base = n * TELEMETRY_DIMS;
    // noise[base] is the node's common load factor (AR(1) with the CPU series' ac1 and spread);
    // the other three are small independent measurement noises of the other metrics
    for (let d = 0; d < TELEMETRY_DIMS; d++) {
      // the real series were measured at ~60 s spacing: per-sample autocorrelation at periodS spacing
      const a = Math.pow(AC1[d], this.o.periodS / REAL_SPACING_S);
      const sd = d === 0 ? STD[0] : 0.2 * STD[d];
      this.noise[base + d] = a * this.noise[base + d] + Math.sqrt(1 - a * a) * sd * this.rng.normal();
    }
    const load = this.cpuLevel[n] + this.noise[base];
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

  /**
   * Sample every node, run its filter, set cluster.healthyFlag. `abnormalUntil[n]` > now means the
   * node is failing or about to (ground truth, used for the telemetry and for the false-exclusion count).
   */
  tick(now: number, abnormal: (node: number) => boolean): void {
    const c = this.cluster;
    const dt = this.o.periodS;
    if (this.filters[0] === null && this.history[0].length >= this.o.historySamples * TELEMETRY_DIMS) this.buildFilters();
    for (let n = 0; n < c.numNodes; n++) {
      this.cpuLevel[n] = 0.97 * this.cpuLevel[n] + 0.03 * (1 - c.freeCpu[n] / c.cpu[n]);
      const bad = abnormal(n);
      this.generate(n, bad, c.usedMem[n] / c.mem[n], this.sample);
      const f = this.filters[n];
      if (!f) {
        // first minute: collect every node's history; then each node's baseline is built from the
        // pooled histories of the nodes of the same shape (Sentinel: "a similar node"), so a node
        // that is already failing in its first minute does not teach its own baseline that it is normal
        const h = this.history[n];
        const grown = new Float64Array(h.length + TELEMETRY_DIMS);
        grown.set(h);
        grown.set(this.sample, h.length);
        this.history[n] = grown;
        if (!bad) this.healthyNodeS += dt;
        continue;
      }
      const v = f.push(this.sample);
      const tally = bad ? this.verdicts.abnormal : this.verdicts.normal;
      tally[v] = (tally[v] ?? 0) + 1;
      const wasUp = c.healthyFlag[n] === 1;
      if (v === 'faulty' || (v === 'ambiguous' && ++this.ambiguousRun[n] >= this.o.ambiguousRun)) {
        if (wasUp) this.exclusions++;
        c.healthyFlag[n] = 0;
        this.healthyRunS[n] = 0;
      } else if (v === 'healthy') {
        this.ambiguousRun[n] = 0;
        this.healthyRunS[n] += dt;
        if (!wasUp && this.healthyRunS[n] >= this.o.readmitS) c.healthyFlag[n] = 1;
      }
      if (!bad) {
        this.healthyNodeS += dt;
        if (c.healthyFlag[n] === 0) this.falseExcludedS += dt;
      }
    }
  }

  /** Builds every node's filter once all have historySamples samples (see tick). */
  private buildFilters(): void {
    const c = this.cluster;
    const shapeOf = (n: number): string => `${c.cpu[n]}/${c.mem[n]}`;
    for (let n = 0; n < c.numNodes; n++) {
      const peers: Float64Array[] = [];
      for (let m = 0; m < c.numNodes; m++) if (shapeOf(m) === shapeOf(n)) peers.push(this.history[m]);
      const pooled = new Float64Array(peers.reduce((a, p) => a + p.length, 0));
      let off = 0;
      for (const p of peers) {
        pooled.set(p, off);
        off += p.length;
      }
      this.filters[n] = new DeviceFilter(baselineFromHistory(pooled, TELEMETRY_DIMS, this.o.rules), this.o.rules);
    }
    for (let n = 0; n < c.numNodes; n++) this.history[n] = new Float64Array(0);
  }

  get falseExclusionRate(): number {
    return this.healthyNodeS > 0 ? this.falseExcludedS / this.healthyNodeS : 0;
  }
}

function clamp01(x: number): number {
  return x < 0 ? 0 : x > 1 ? 1 : x;
}
