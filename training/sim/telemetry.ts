/**
 * Node telemetry in the simulator and the device filters run on it, the way the agent runs them.
 *
 * Series: shared/node-telemetry.ts (four metrics per node, healthy and abnormal, shaped on the real
 * v2018_machine_usage.csv series; the emulated cluster of `kais up` uses the same model). One
 * sample per `periodS` (1 s of simulated time; a window of T = 12 samples spans 12 s). From
 * `precursorS` before a failure until it recovers, the node's series is the abnormal one.
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
 * is re-admitted after `readmitS` of consecutive 'healthy' verdicts. At most half of an eAP's
 * nodes are held out at once, as in the agent (agent/filters/node-health.ts, maxExcludedShare):
 * the load a failed node sheds can push its neighbours' telemetry out of range too. On kais with
 * the v2017 failure times (seeds 1-3) the cap never binds: the `kais eval --filters` JSON is
 * byte-identical with and without it.
 */
import { DETECT_DEVICE_FILTER_OPTIONS, DeviceFilter, baselineFromHistory, type DeviceFilterOptions } from '../../agent/filters/device-filter';
import { NodeTelemetryModel, TELEMETRY_DIMS } from '../../shared/node-telemetry';
import { Rng } from '../../shared/rng';
import type { Cluster } from './cluster';

export { TELEMETRY_DIMS };

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

export class TelemetryFilters {
  readonly o: TelemetryOptions;
  private readonly model: NodeTelemetryModel;
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
    this.model = new NodeTelemetryModel(N, this.o.periodS, Rng.derive(seed, 'telemetry'));
    this.cpuLevel = new Float64Array(N);
    this.ambiguousRun = new Int32Array(N);
    this.healthyRunS = new Float64Array(N);
    this.filters = new Array(N).fill(null);
    this.history = Array.from({ length: N }, () => new Float64Array(0));
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
      this.model.sample(n, bad, this.cpuLevel[n], c.usedMem[n] / c.mem[n], this.sample);
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
        this.healthyRunS[n] = 0;
        // at most half of an eAP's nodes out at once (the agent's NodeHealth guard, maxExcludedShare 0.5)
        if (wasUp && this.outOfEap(c.eapOfNode[n]) < this.capOfEap(c.eapOfNode[n])) {
          this.exclusions++;
          c.healthyFlag[n] = 0;
        }
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

  private outOfEap(eap: number): number {
    const c = this.cluster;
    let k = 0;
    for (let m = 0; m < c.numNodes; m++) if (c.eapOfNode[m] === eap && c.healthyFlag[m] === 0) k++;
    return k;
  }

  private capOfEap(eap: number): number {
    const c = this.cluster;
    let k = 0;
    for (let m = 0; m < c.numNodes; m++) if (c.eapOfNode[m] === eap) k++;
    return Math.max(1, Math.floor(0.5 * k + 1e-9));
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
