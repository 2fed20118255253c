/**
 * Node telemetry in the simulator and the device filters run on it, the way the agent runs them.
 *
 * Series: shared/node-telemetry.ts (four metrics per node, healthy and abnormal, shaped on the real
 * v2018_machine_usage.csv series; the emulated cluster of `kais up` uses the same model). One
 * sample per `periodS` (1 s of simulated time; a window of T = 12 samples spans 12 s). From
 * `precursorS` before a failure until it recovers, the node's series is the abnormal one.
 *
 * Filter loop: the agent's own (NodeHealth, agent/filters/node-health.ts), so the simulator runs
 * the filters exactly as `kais agent` does: each node has a DeviceFilter with the rule settings
 * `kais detect` measures on labelled server data with the telemetry scale floor
 * (NODE_TELEMETRY_RULES: level evidence, faulty margin, minScale 0.02; `rules` overrides them),
 * re-baselined from recent samples as NodeHealth does, whose baseline is the pooled history of the first
 * `historySamples` (36) samples of all nodes of the same shape ("a similar node", as Sentinel says;
 * pooling keeps one node that is already failing from defining normal; nodes count as healthy
 * meanwhile). 36 and not 24 samples: the level evidence measures a window's distance from the
 * history's level in units of the history's own most extreme window, and 24 s of history do not
 * show how far the load wanders (its AR(1) correlation time is about a minute). Measured with these
 * rules (telemetry.test.ts, Poisson failures): 24 samples exclude 3.6% of healthy node-time, 36
 * samples 0.7%, 48 samples 0.8%; a longer history leaves the first failures unfiltered (lec/hpa at
 * the v2017 failure times: 300 / 382 / 441 requests lost with 24 / 36 / 48 samples, 1476 without
 * filters). The CPU level is the utilisation smoothed over ~10 s, as monitoring reports it.
 * 'faulty' excludes the node at once; `ambiguousRun` 'ambiguous' verdicts in a row too (default:
 * never); with `second`, NodeHealth's second stage (the L2 stage of the shipped combination,
 * agent/filters/l2-stage.ts, LIVE_STAGE_COMBINATION) runs on every window and excludes after 5
 * anomalous windows in a row (rule device:l2); with `learned` (`kais eval --filters --detector vgru`), the learned stage decides the
 * ambiguous windows as the orchestrator does live: the same windows (every ambiguous one, one
 * in 3 healthy ones), the same per-shape pools, fits and threshold (critic/detector/pools.ts,
 * core.ts, whose DetectorCore the caller hands in as `scorer`: the simulator loads no tfjs), but
 * synchronous: a window is scored in the tick it is made, a due fit runs at the end
 * of that tick (live, the worker takes seconds, so verdicts come a little later); a node is
 * re-admitted after `readmitS` of consecutive 'healthy' verdicts, or after NodeHealth's
 * `readmitQuietS` (30 s) without a 'faulty' window; at most half of an eAP's nodes
 * are held out at once (on kais with the v2017 failure times, seeds 1-3, that cap never binds).
 * QoS isolation, NodeHealth's other half, gets no observations here.
 */
import type { DeviceFilterOptions } from '../../agent/filters/device-filter';
import type { L2StageOptions } from '../../agent/filters/l2-stage';
import { NODE_TELEMETRY_RULES, NodeHealth } from '../../agent/filters/node-health';
import { DetectorPools, type DetectorPoolOptions } from '../../critic/detector/pools';
import type { DeviceWindow } from '../../shared/protocol/envelope';
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
   *  NODE_TELEMETRY_RULES, the settings `kais detect` measures on labelled server data with the telemetry scale floor */
  rules: Partial<DeviceFilterOptions>;
  /** NodeHealth's second stage (agent/filters/l2-stage.ts) on every window (null: off). @defaultValue null */
  second: Partial<L2StageOptions> | null;
  /** The learned stage on the ambiguous windows (null: off); needs `scorer`. @defaultValue null */
  learned: Partial<DetectorPoolOptions> | null;
  /**
   * Makes the learned stage's scorer (critic/detector/core.ts DetectorCore), called once with
   * `learned`: the caller's, so the simulator never loads tfjs (the caller loads its backend too). @defaultValue null
   */
  scorer: (() => WindowScorer) | null;
}

/** A job of the learned stage: score windows with the model of a key, or fit that model on windows. */
export type WindowJob =
  | { kind: 'score'; key: string; windows: Float32Array; count: number }
  | {
      kind: 'fit';
      key: string;
      dims: number;
      steps: number;
      options: ReturnType<DetectorPools['vgruOptions']>;
      windows: Float32Array;
      count: number;
    };

/** What the learned stage needs of its model: critic/detector/core.ts DetectorCore's handle and dispose. */
export interface WindowScorer {
  /** score: normalised scores, one per window, and the threshold (anomalous = score > eta). */
  handle(job: WindowJob): { scores?: Float32Array; eta?: number };
  dispose(): void;
}

export class TelemetryFilters {
  readonly o: TelemetryOptions;
  private readonly model: NodeTelemetryModel;
  private readonly cpuLevel: Float64Array;
  /** The agent's own filter loop (baselines, verdicts, exclusion and re-admission, the cap). */
  private readonly health: NodeHealth;
  private readonly sample = new Float64Array(TELEMETRY_DIMS);
  /** node-seconds excluded while the node was healthy (not failing, not in its precursor) */
  falseExcludedS = 0;
  healthyNodeS = 0;
  /** verdict counts by ground truth (abnormal = failing or in its precursor), for reports */
  readonly verdicts = { abnormal: {} as Record<string, number>, normal: {} as Record<string, number> };
  /** The learned stage: fits, windows scored, anomalous verdicts (by ground truth), windows of shapes not fitted yet. */
  readonly learnedStats = { fits: 0, scored: 0, anomalousAbnormal: 0, anomalousNormal: 0, unscored: 0 };
  private readonly pools: DetectorPools | null;
  private readonly core: WindowScorer | null;

  constructor(
    private readonly cluster: Cluster,
    seed: number,
    options: Partial<TelemetryOptions> = {},
  ) {
    this.o = {
      periodS: 1,
      precursorS: 20,
      readmitS: 5,
      ambiguousRun: Infinity,
      historySamples: 36,
      rules: NODE_TELEMETRY_RULES,
      learned: null,
      scorer: null,
      second: null,
      ...options,
    };
    if (!Number.isInteger(this.o.historySamples) || this.o.historySamples < 12)
      throw new TypeError(`TelemetryFilters historySamples: expected an integer >= 12, got ${this.o.historySamples}`);
    const N = cluster.numNodes;
    this.model = new NodeTelemetryModel(N, this.o.periodS, Rng.derive(seed, 'telemetry'));
    this.cpuLevel = new Float64Array(N);
    this.health = new NodeHealth(
      Array.from({ length: N }, (_, n) => `${cluster.cpu[n]}/${cluster.mem[n]}`),
      Array.from(cluster.eapOfNode),
      {
        historySamples: this.o.historySamples,
        readmitSamples: Math.ceil(this.o.readmitS / this.o.periodS - 1e-9),
        ambiguousRun: this.o.ambiguousRun,
        rules: this.o.rules,
        windows: this.o.learned ? {} : null,
        second: this.o.second,
      },
    );
    if (this.o.learned && !this.o.scorer)
      throw new TypeError('TelemetryFilters: the learned stage needs a scorer (critic/detector/core.ts DetectorCore)');
    this.pools = this.o.learned ? new DetectorPools(this.o.learned) : null;
    this.core = this.o.learned ? this.o.scorer!() : null;
  }

  /** Frees the learned stage's detectors (tfjs variables). */
  dispose(): void {
    this.core?.dispose();
  }

  /** The replicas on these nodes changed (orders executed): as the agent does on a new placement (NodeHealth.placementChanged). */
  placementChanged(nodes: Iterable<number>): void {
    this.health.placementChanged(nodes);
  }

  /** Placement changes marked as breaks in the nodes' windows (NodeHealth.placementBreaks). */
  get placementBreaks(): number {
    return this.health.placementBreaks;
  }

  /** Nodes the filters excluded (each exclusion once). */
  get exclusions(): number {
    return this.health.eventCounts().exclude;
  }

  /**
   * Sample every node, run its filter, set cluster.healthyFlag. `abnormal(n)` means the node is
   * failing or about to (ground truth, used for the telemetry and for the false-exclusion count).
   */
  tick(now: number, abnormal: (node: number) => boolean): void {
    const c = this.cluster;
    const dt = this.o.periodS;
    for (let n = 0; n < c.numNodes; n++) {
      this.cpuLevel[n] = 0.97 * this.cpuLevel[n] + 0.03 * (1 - c.freeCpu[n] / c.cpu[n]);
      const bad = abnormal(n);
      this.model.sample(n, bad, this.cpuLevel[n], c.usedMem[n] / c.mem[n], this.sample);
      // before the baselines exist (the first historySamples samples) nodes count as healthy
      const judged = this.health.started;
      this.health.sample(n, this.sample, now);
      if (judged) {
        const v = this.health.verdict(n)!;
        const tally = bad ? this.verdicts.abnormal : this.verdicts.normal;
        tally[v] = (tally[v] ?? 0) + 1;
        c.healthyFlag[n] = this.health.excluded(n) ? 0 : 1;
      }
      if (!bad) {
        this.healthyNodeS += dt;
        if (c.healthyFlag[n] === 0) this.falseExcludedS += dt;
      }
    }
    if (this.pools) this.learnedStep(now, abnormal);
  }

  /** This tick's windows through the learned stage: score the ambiguous ones, then run due fits. */
  private learnedStep(now: number, abnormal: (node: number) => boolean): void {
    const pools = this.pools!;
    const core = this.core!;
    const toScore = new Map<string, DeviceWindow[]>();
    for (const w of this.health.takeWindows(Infinity)) {
      const route = pools.add(w);
      if (route === 'unscored') this.learnedStats.unscored++;
      else if (route === 'score') {
        const key = DetectorPools.keyOf(w);
        const list = toScore.get(key) ?? [];
        list.push(w);
        toScore.set(key, list);
      }
    }
    for (const key of [...toScore.keys()].sort()) {
      const list = toScore.get(key)!;
      const windows = pools.pack(
        pools.get(key)!,
        list.map((w) => w.values),
      );
      const r = core.handle({ kind: 'score', key, windows, count: list.length });
      list.forEach((w, i) => {
        const anomalous = r.scores![i] > r.eta!;
        this.learnedStats.scored++;
        if (anomalous) this.learnedStats[abnormal(w.node) ? 'anomalousAbnormal' : 'anomalousNormal']++;
        this.health.learnedVerdict(w.node, w.id, anomalous, r.scores![i], now);
        if (this.health.started) this.cluster.healthyFlag[w.node] = this.health.excluded(w.node) ? 0 : 1;
      });
    }
    for (let p = pools.dueFit(); p; p = pools.dueFit()) {
      const { windows, count } = pools.takeFitBatch(p);
      core.handle({ kind: 'fit', key: p.key, dims: p.dims, steps: p.steps, options: pools.vgruOptions(p.key), windows, count });
      p.fitted = true;
      this.learnedStats.fits++;
    }
  }

  get falseExclusionRate(): number {
    return this.healthyNodeS > 0 ? this.falseExcludedS / this.healthyNodeS : 0;
  }
}
