/**
 * The agent's node health: the device filters (Sentinel rules, device-filter.ts) on every node's
 * telemetry samples and QoS isolation (qos-isolation.ts) on the agent's own request outcomes,
 * merged into one excluded(node) that the context filter masks with (through LocalClusterView).
 * Every exclusion and re-admission is an event naming the rule and the metrics.
 *
 * Device filters, as the simulator runs them (training/sim/telemetry.ts), so what `kais eval
 * --filters` measures is what the agent does:
 * - baseline: once every node that reports telemetry has `historySamples` (36) samples, each
 *   node's baseline is built from the pooled history of the nodes of the same shape (CPU cores and
 *   memory: "a similar node", as Sentinel says), so a node already failing at start does not teach
 *   its own baseline that it is normal; until then nodes count as healthy;
 * - re-baselining: after that, every `rebaselineEvery` (60) samples per node the baselines of each
 *   shape are rebuilt the same way from the last `recentSamples` (900) samples of each node whose
 *   window was not judged 'faulty' (nodes held out by the filters contribute none). A baseline from
 *   the first 36 samples alone stops describing a healthy node once its levels drift: on the
 *   3-node `tiny` cluster most windows of healthy nodes became 'ambiguous' and some 'faulty'
 *   within minutes (docs/runtime.md "Node health"). The rebuild absorbs drift that lasts longer
 *   than a window while the node looks healthy; what turns abnormal within minutes is still
 *   judged against the healthy minutes before it;
 * - rules: NODE_TELEMETRY_RULES, the settings `kais detect` measures on labelled data with a floor
 *   on the per-metric scale (TELEMETRY_MIN_SCALE);
 * - 'faulty' excludes the node at once; 'ambiguous' `ambiguousRun` times in a row too (default:
 *   never: the learned detector decides those, in the orchestrator);
 * - the learned stage (`windows` on, as in the agent): every 'ambiguous' window, and every
 *   `healthyEvery`-th 'healthy' window of the nodes this agent samples for training, is queued
 *   for the orchestrator (`takeWindows`, sent in `telemetry` frames); the orchestrator's
 *   detector (orchestrator/detector.ts) answers with verdicts (`learnedVerdict`), and
 *   `learnedRun` (5) 'anomalous' verdicts in a row on a node whose latest window is still not
 *   'healthy' exclude it like 'faulty' (rule `device:learned`, same cap and re-admission);
 *   a node is re-admitted after `readmitSamples` consecutive 'healthy' verdicts, or after
 *   `readmitQuietS` (30 s) without a 'faulty' window or learned exclusion (held out, a recovered node
 *   gets no requests and idles at a level its baseline never saw: 'ambiguous' for minutes, so
 *   5 'healthy' windows in a row come late; docs/runtime.md "Re-baselining"); at most half of
 *   an eAP's nodes are held out by the device filters at once (`maxExcludedShare`). The
 *   simulator's telemetry loop (training/sim/telemetry.ts) runs this class too.
 * QoS isolation: one observation per node and interval (requests, success rate, mean latency of
 * what this agent sent there), QosIsolation's rules, isolation times and per-eAP cap.
 *
 * Pure logic, time passed in: the agent (agent/main.ts) polls telemetry and feeds it.
 */
import { TELEMETRY_DIMS, TELEMETRY_METRICS } from '../../shared/node-telemetry';
import type { DeviceWindow } from '../../shared/protocol/envelope';
import { DETECT_DEVICE_FILTER_OPTIONS, DeviceFilter, baselineFromHistory, type DeviceFilterOptions, type Verdict } from './device-filter';
import { QosIsolation, type QosIsolationOptions, type QosObservation } from './qos-isolation';
import { L2Model, L2Stream, type L2StageOptions } from './l2-stage';
import { LIVE_STAGE_COMBINATION, combinedAnomalous, type StageCombination } from './stage-combination';

/**
 * Floor of the rules' per-metric scale on node telemetry (utilisation ratios in [0, 1]): 2 percentage
 * points. Real utilisation telemetry comes in whole percent (Alibaba's machine_usage, whose shape the
 * emulated nodes follow), so a history whose standard deviation is below a couple of those steps says
 * more about how short the history is than about the node: with the library floor (1e-6), a node
 * with no similar node to pool with (the 3-node `tiny` cluster) had its memory level standardised by
 * 0.0005 and every later placement change read as a level anomaly (26-32% of healthy node-time
 * excluded in the simulator; docs/runtime.md "Node health"). 0.01 was not enough there (8-26%).
 * `kais detect`, whose input can be on any scale, keeps the library floor.
 */
export const TELEMETRY_MIN_SCALE = 0.02;

/**
 * The metrics a placement change moves by a step (their indices in TELEMETRY_METRICS): memory, which
 * a replica reserves from its creation to its deletion. CPU, disk and upload follow the load, which
 * the dispatch moves to a new replica over seconds, not in a step, and a failing node's upload
 * collapses: a break on them would hide that when the orchestration changes the failing node's
 * replicas (in the simulator, with breaks on every metric, 6-7% more requests were lost to failed
 * nodes; docs/runtime.md "Placement changes as marked breaks").
 */
export const PLACEMENT_STEP_METRICS: readonly number[] = [TELEMETRY_METRICS.indexOf('mem')];

/** The rules NodeHealth runs (the agent and the simulator): the `kais detect` settings with the telemetry floor. */
export const NODE_TELEMETRY_RULES: Readonly<Partial<DeviceFilterOptions>> = Object.freeze({
  ...DETECT_DEVICE_FILTER_OPTIONS,
  minScale: TELEMETRY_MIN_SCALE,
});

export interface NodeHealthOptions {
  /** Samples per node pooled into the baselines before the filters start. @defaultValue 36 */
  historySamples: number;
  /** Consecutive 'healthy' verdicts that re-admit an excluded node. @defaultValue 5 */
  readmitSamples: number;
  /** Seconds without a 'faulty' window (or a learned exclusion) that also re-admit a device-excluded node (Infinity: only readmitSamples). @defaultValue 30 */
  readmitQuietS: number;
  /** Consecutive 'ambiguous' verdicts that exclude a node. @defaultValue Infinity */
  ambiguousRun: number;
  /**
   * Consecutive 'anomalous' learned verdicts (no 'normal' verdict or 'healthy' window between
   * them) that exclude a node. @defaultValue 5 (1 held out 8.7% of healthy node-time in the
   * simulator, 3: 2.8%, 5: 1.7%; docs/detect.md "The learned stage live")
   */
  learnedRun: number;
  /**
   * Most of an eAP's nodes the device filters hold out at once (at least one; Envoy's panic
   * threshold in spirit): when load shifts onto the survivors of a failure, or every node runs
   * saturated, their telemetry leaves the history's range too, and excluding them would leave the
   * eAP nothing but the cloud. Later 'faulty' nodes past the cap stay in service (an event says
   * so). @defaultValue 0.5
   */
  maxExcludedShare: number;
  /** Samples per node between rebuilds of the baselines from recent non-faulty samples (Infinity: never). @defaultValue 60 */
  rebaselineEvery: number;
  /** Latest non-faulty samples per node (taken while it is not held out) kept for the rebuilds. @defaultValue 900 */
  recentSamples: number;
  /** @defaultValue NODE_TELEMETRY_RULES */
  rules: Partial<DeviceFilterOptions>;
  qos: Partial<QosIsolationOptions>;
  /** Queue windows for the learned detector (null: off, as in the simulator). @defaultValue null */
  windows: Partial<LearnedWindowOptions> | null;
  /**
   * The second stage of the shipped combination, the L2-norm baseline (l2-stage.ts), on every
   * window of every node (null: off, the rules alone). Fitted per shape at each baseline (re)build
   * on the same pooled samples (`fitSecond`); its metric scale is floored at TELEMETRY_MIN_SCALE
   * unless `minStd` is given. @defaultValue null (off: in the simulator it caught no failure the
   * rules missed and doubled the healthy node-time held out on Poisson failures, docs/detect.md "Live")
   */
  second: Partial<L2StageOptions> | null;
  /** How the rules' verdict and the second stage's score combine (stage-combination.ts). @defaultValue LIVE_STAGE_COMBINATION */
  combination: StageCombination;
  /**
   * Consecutive windows that the combination calls anomalous and the rules do not call 'faulty'
   * that exclude a node (rule `device:l2`; same cap and re-admission as `device:faulty`).
   * @defaultValue 5 (as learnedRun)
   */
  secondRun: number;
  /** Fewest calibration windows a shape's second stage is fitted on (fewer: the shape keeps its previous fit, or none). @defaultValue 100 */
  secondMinWindows: number;
}

export interface LearnedWindowOptions {
  /** Every this many 'healthy' windows of a sampled node, one is queued as training data. @defaultValue 3 (windows overlap by 9 samples: a shape of 10 nodes has the detector's 64 windows about 20 s after the rules start, at one sample per second) */
  healthyEvery: number;
  /** Nodes whose healthy windows this agent sends (e.g. its own eAP's; ambiguous windows go for every node). @defaultValue all */
  sampleHealthy: (node: number) => boolean;
  /** Most windows queued; the oldest are dropped beyond it. @defaultValue 256 */
  maxPending: number;
}

/** What the learned stage did, for /metrics, /healthz and `kais up`. */
export interface LearnedStats {
  /** Windows queued, by kind; dropped when the queue was full (orchestrator away). */
  ambiguousSent: number;
  trainSent: number;
  dropped: number;
  /** Verdicts received, by outcome; `stale` = anomalous, but the node's latest window was healthy again. */
  anomalous: number;
  normal: number;
  stale: number;
}

export interface HealthEvent {
  timeS: number;
  node: number;
  kind: 'exclude' | 'readmit' | 'isolate' | 'suppressed';
  /** `device:faulty`, `device:ambiguous`, `device:learned`, `device:stale`, `device:healthy` (re-admission), or a QoS rule (`qos:success-rate`, ...). */
  rule: string;
  /** One line naming the metrics. */
  reason: string;
}

export class NodeHealth {
  readonly o: NodeHealthOptions;
  readonly events: HealthEvent[] = [];
  private readonly filters: (DeviceFilter | null)[];
  private readonly history: number[][];
  private readonly deviceOut: Uint8Array;
  private readonly ambiguousRun: Int32Array;
  private readonly healthyRun: Int32Array;
  private readonly lastVerdict: (Verdict | undefined)[];
  private readonly reporting: Uint8Array;
  private readonly qos: QosIsolation;
  private built = false;
  /** Verdicts so far, by kind. */
  readonly verdicts: Record<string, number> = {};

  constructor(
    /** Shape key per node ("cores/GB"); nodes of one shape share a baseline. */
    private readonly shapes: readonly string[],
    /** eAP of each node (the QoS cap is per eAP). */
    nodeEap: readonly number[],
    options: Partial<NodeHealthOptions> = {},
    private readonly log: (e: HealthEvent) => void = () => undefined,
  ) {
    this.o = {
      historySamples: 36,
      readmitSamples: 5,
      readmitQuietS: 30,
      ambiguousRun: Infinity,
      learnedRun: 5,
      maxExcludedShare: 0.5,
      rebaselineEvery: 60,
      recentSamples: 900,
      rules: NODE_TELEMETRY_RULES,
      qos: {},
      windows: null,
      second: null,
      combination: LIVE_STAGE_COMBINATION,
      secondRun: 5,
      secondMinWindows: 500,
      ...options,
    };
    if (this.o.second) this.o.second = { minStd: TELEMETRY_MIN_SCALE, ...this.o.second };
    this.win = this.o.windows ? { healthyEvery: 3, sampleHealthy: () => true, maxPending: 256, ...this.o.windows } : null;
    if (this.win && !(Number.isInteger(this.win.healthyEvery) && this.win.healthyEvery >= 1))
      throw new TypeError(`NodeHealth windows.healthyEvery: expected an integer >= 1, got ${this.win.healthyEvery}`);
    if (!Number.isInteger(this.o.historySamples) || this.o.historySamples < 12)
      throw new TypeError(`NodeHealth historySamples: expected an integer >= 12, got ${this.o.historySamples}`);
    if (!(this.o.readmitQuietS > 0))
      throw new TypeError(`NodeHealth readmitQuietS: expected seconds > 0 (or Infinity), got ${this.o.readmitQuietS}`);
    if (!(this.o.rebaselineEvery === Infinity || (Number.isInteger(this.o.rebaselineEvery) && this.o.rebaselineEvery >= 1)))
      throw new TypeError(`NodeHealth rebaselineEvery: expected an integer >= 1 or Infinity, got ${this.o.rebaselineEvery}`);
    if (!Number.isInteger(this.o.recentSamples) || this.o.recentSamples < this.o.historySamples)
      throw new TypeError(
        `NodeHealth recentSamples: expected an integer >= historySamples (${this.o.historySamples}), got ${this.o.recentSamples}`,
      );
    const N = shapes.length;
    this.filters = new Array(N).fill(null);
    this.history = Array.from({ length: N }, () => []);
    this.deviceOut = new Uint8Array(N);
    this.ambiguousRun = new Int32Array(N);
    this.healthyRun = new Int32Array(N);
    this.lastVerdict = new Array(N).fill(undefined);
    this.reporting = new Uint8Array(N);
    this.qos = new QosIsolation(nodeEap, this.o.qos);
    this.nodeEap = nodeEap;
    for (const e of nodeEap) this.eapNodes.set(e, (this.eapNodes.get(e) ?? 0) + 1);
    this.suppressed = new Uint8Array(N);
    this.outRule = new Array<string>(N).fill('');
    this.windowIds = new Float64Array(N);
    this.healthyCount = new Int32Array(N);
    this.learnedRun = new Int32Array(N);
    this.lastBadS = new Float64Array(N);
    this.recent = Array.from({ length: N }, () => new Float64Array(this.o.recentSamples * TELEMETRY_DIMS));
    this.recentCount = new Float64Array(N);
    this.l2 = this.o.second ? Array.from({ length: N }, () => new L2Stream(TELEMETRY_DIMS, this.o.rules.windowSize ?? 12)) : null;
    this.secondRunOf = new Int32Array(N);
    if (!(this.o.maxExcludedShare > 0 && this.o.maxExcludedShare <= 1))
      throw new TypeError(`NodeHealth maxExcludedShare: expected a share in (0, 1], got ${this.o.maxExcludedShare}`);
  }

  private readonly nodeEap: readonly number[];
  private readonly eapNodes = new Map<number, number>();
  private readonly suppressed: Uint8Array;
  /** Rule that holds each device-excluded node out. */
  private readonly outRule: string[];
  private readonly win: LearnedWindowOptions | null;
  private readonly windowIds: Float64Array;
  private readonly healthyCount: Int32Array;
  private readonly learnedRun: Int32Array;
  /** Time of node n's latest 'faulty' window or learned exclusion. */
  private readonly lastBadS: Float64Array;
  private pending: DeviceWindow[] = [];
  /** Per node, a ring of its latest non-faulty samples while not held out (recentSamples x TELEMETRY_DIMS) and how many it ever got. */
  private readonly recent: Float64Array[];
  private readonly recentCount: Float64Array;
  /** The second stage: each node's stream, each shape's fitted model, consecutive anomalous windows per node. */
  private readonly l2: L2Stream[] | null;
  private readonly l2Models = new Map<string, L2Model>();
  private readonly secondRunOf: Int32Array;
  /** Placement changes marked as breaks in nodes' windows (`placementChanged`). */
  placementBreaks = 0;
  /** What the second stage did: fits, windows scored, windows the combination called anomalous that the rules did not call faulty. */
  readonly second = { fits: 0, scored: 0, anomalous: 0 };
  /** Latest normalised second-stage score per node (NaN: none yet). */
  secondScore(n: number): number {
    return this.lastSecond[n] ?? NaN;
  }
  private readonly lastSecond: number[] = [];
  /** Samples of built filters since the last (re)build, over all nodes. */
  private sinceBuild = 0;
  /** Baseline rebuilds after the first build. */
  rebaselines = 0;
  readonly learned: LearnedStats = { ambiguousSent: 0, trainSent: 0, dropped: 0, anomalous: 0, normal: 0, stale: 0 };

  /** Nodes of each eAP, and the most of them the device filters may hold out at once (at least one). */
  private eapSize(eap: number): number {
    return this.eapNodes.get(eap) ?? 0;
  }

  private capOf(eap: number): number {
    return Math.max(1, Math.floor(this.o.maxExcludedShare * this.eapSize(eap) + 1e-9));
  }

  private deviceOutOf(eap: number): number {
    let k = 0;
    for (let m = 0; m < this.nodeEap.length; m++) if (this.nodeEap[m] === eap && this.deviceOut[m] === 1) k++;
    return k;
  }

  get numNodes(): number {
    return this.shapes.length;
  }

  /** Whether the context filter must leave node n out (device filter or QoS isolation). */
  excluded(n: number): boolean {
    return this.deviceOut[n] === 1 || this.qos.isIsolated(n);
  }

  /** Latest device-filter verdict of node n (undefined: no filter yet). */
  verdict(n: number): Verdict | undefined {
    return this.lastVerdict[n];
  }

  /** Whether the device filters have their baselines (all reporting nodes had historySamples samples). */
  get started(): boolean {
    return this.built;
  }

  /**
   * The replicas on these nodes changed (a placement applied; the simulator: orders executed): a
   * replica added or removed moves a node's memory by a step and its load with it, and a window
   * holding that step read as a broken node (variance and correlations change at once; healthy
   * nodes were excluded right after placement changes, docs/runtime.md "Node health"). Each node's
   * filter marks a break (DeviceFilter.markBreak): while the step is in the window, each side of it
   * is judged around its own mean. Nodes without a filter yet are left alone (their history pools
   * the steps with the rest). Each node once per call: the simulator passes the nodes of its executed
   * orders, several of which may name one node, where an agent passes each changed node once.
   */
  placementChanged(nodes: Iterable<number>): void {
    for (const n of new Set(nodes)) {
      if (!Number.isInteger(n) || n < 0 || n >= this.numNodes) continue;
      const f = this.filters[n];
      if (!f) continue;
      f.markBreak(PLACEMENT_STEP_METRICS);
      this.placementBreaks++;
    }
  }

  /**
   * A node whose telemetry cannot be read (no endpoint): it no longer holds up the baselines of
   * the others, and the device filter never excludes it (QoS isolation still can).
   */
  silent(n: number): void {
    this.reporting[n] = 2;
    this.history[n] = [];
    this.countReporting();
    this.maybeBuild();
  }

  /** One telemetry sample of node n ([cpu, mem, disk, upload]) at time nowS. */
  sample(n: number, x: ArrayLike<number>, nowS: number): void {
    if (x.length !== TELEMETRY_DIMS) throw new TypeError(`NodeHealth.sample: expected ${TELEMETRY_DIMS} metrics, got ${x.length}`);
    const f = this.filters[n];
    if (!f) {
      const h = this.history[n];
      for (let d = 0; d < TELEMETRY_DIMS; d++) h.push(x[d]);
      if (this.built) this.lateJoin(n);
      else {
        this.reporting[n] = 1;
        this.maybeBuild();
      }
      return;
    }
    const v = f.push(x);
    this.lastVerdict[n] = v;
    const s2 = this.l2 ? this.l2[n].push(x, this.l2Models.get(this.shapes[n]) ?? null) : NaN;
    this.lastSecond[n] = s2;
    let secondAnomalous = false;
    if (!Number.isNaN(s2)) {
      this.second.scored++;
      secondAnomalous = v !== 'faulty' && combinedAnomalous(v, s2, this.o.combination);
      if (secondAnomalous) this.second.anomalous++;
    }
    if (v !== 'faulty' && this.deviceOut[n] === 0) {
      const k = this.recentCount[n]++ % this.o.recentSamples;
      for (let d = 0; d < TELEMETRY_DIMS; d++) this.recent[n][k * TELEMETRY_DIMS + d] = x[d];
    }
    if (++this.sinceBuild >= this.o.rebaselineEvery * this.reportingNodes) this.rebaseline();
    this.verdicts[v] = (this.verdicts[v] ?? 0) + 1;
    const why = () =>
      `${Math.round(100 * f.varianceShare)}% of metrics (${TELEMETRY_METRICS.join(', ')}) differ in variance or level (level ${f.levelMax.toFixed(1)} x the history's extreme), correlation change ${f.corrDistance.toFixed(2)}`;
    if (this.win && (v === 'ambiguous' || v === 'healthy')) this.queueWindow(n, f, v);
    if (v === 'faulty') this.lastBadS[n] = nowS;
    if (secondAnomalous) {
      this.healthyRun[n] = 0;
      if (++this.secondRunOf[n] >= this.o.secondRun) {
        // only when it goes out: held out, a node idles at a level its history never showed, so its
        // L2 score then reflects the exclusion, not the node (the quiet re-admission decides)
        if (this.deviceOut[n] === 0) this.lastBadS[n] = nowS;
        this.exclude(
          n,
          'device:l2',
          () => `${why()}; the L2 stage scored ${s2.toFixed(2)} (above ${this.o.combination.eta}) ${this.secondRunOf[n]} windows in a row`,
          nowS,
        );
      }
    } else this.secondRunOf[n] = 0;
    if (v === 'faulty' || (v === 'ambiguous' && ++this.ambiguousRun[n] >= this.o.ambiguousRun)) {
      this.healthyRun[n] = 0;
      this.exclude(n, `device:${v}`, why, nowS);
    } else if (v === 'healthy' && secondAnomalous) {
      this.ambiguousRun[n] = 0;
    } else if (v === 'healthy') {
      this.ambiguousRun[n] = 0;
      this.learnedRun[n] = 0;
      this.suppressed[n] = 0;
      if (this.deviceOut[n] === 1 && ++this.healthyRun[n] >= this.o.readmitSamples)
        this.readmit(n, nowS, 'device:healthy', `${this.o.readmitSamples} healthy windows in a row`);
    } else if (this.deviceOut[n] === 1 && nowS - this.lastBadS[n] >= this.o.readmitQuietS) {
      this.readmit(n, nowS, 'device:quiet', `no faulty window for ${this.o.readmitQuietS} s`);
    }
  }

  /**
   * A node that was silent when the filters were built and sends samples now: once it has
   * historySamples of them it gets a filter, on the baseline of a node of its shape that has one
   * (the baseline the others are judged by), or on its own samples when it is the only one of its
   * shape. Its later samples then count as any node's.
   */
  private lateJoin(n: number): void {
    const h = this.history[n];
    if (h.length < this.o.historySamples * TELEMETRY_DIMS) return;
    let m = 0;
    while (m < this.numNodes && !(this.filters[m] && this.shapes[m] === this.shapes[n])) m++;
    const base = m < this.numNodes ? this.filters[m]!.baseline : baselineFromHistory(h, TELEMETRY_DIMS, this.o.rules);
    this.filters[n] = new DeviceFilter(base, this.o.rules);
    if (m === this.numNodes) this.fitSecond(this.shapes[n], [h]);
    this.history[n] = [];
    this.reporting[n] = 1;
    this.countReporting();
  }

  /**
   * Node n, which has a device filter, sent no new telemetry sample in `polls` polls (unreachable,
   * or its `seq` stuck): it cannot be judged, and a node whose exporter froze is as likely hung as
   * its metrics would be broken, so it is excluded like 'faulty' (rule `device:stale`, same eAP cap).
   * It comes back as any excluded node does: `readmitSamples` healthy windows in a row once its
   * samples flow again. A node without a filter (silent when the baselines built, not yet joined)
   * is not judged: false. True when the node is out (now or already).
   */
  stale(n: number, polls: number, nowS: number): boolean {
    if (!Number.isInteger(n) || n < 0 || n >= this.numNodes || !this.filters[n]) return false;
    this.lastBadS[n] = nowS;
    this.healthyRun[n] = 0;
    this.exclude(n, 'device:stale', () => `no new telemetry sample in ${polls} polls`, nowS);
    return this.deviceOut[n] === 1;
  }

  /** Ends node n's device exclusion. */
  private readmit(n: number, nowS: number, rule: string, reason: string): void {
    this.deviceOut[n] = 0;
    this.healthyRun[n] = 0;
    this.emit({ timeS: nowS, node: n, kind: 'readmit', rule, reason });
  }

  /** Device exclusion of node n by `rule` (unless the eAP's cap is reached: then one 'suppressed' event per run). */
  private exclude(n: number, rule: string, why: () => string, nowS: number): void {
    if (this.deviceOut[n] !== 0) return;
    const eap = this.nodeEap[n];
    const out = this.deviceOutOf(eap);
    if (out < this.capOf(eap)) {
      this.deviceOut[n] = 1;
      this.outRule[n] = rule;
      this.suppressed[n] = 0;
      this.emit({ timeS: nowS, node: n, kind: 'exclude', rule, reason: why() });
    } else if (this.suppressed[n] === 0) {
      this.suppressed[n] = 1; // said once per run of bad windows, not per window
      this.emit({
        timeS: nowS,
        node: n,
        kind: 'suppressed',
        rule: 'device:cap',
        reason: `${why()}; but eAP ${eap} already has ${out} of its ${this.eapSize(eap)} nodes out (cap ${this.capOf(eap)})`,
      });
    }
  }

  /** Queues node n's current window: every ambiguous one, and one in healthyEvery healthy ones of a sampled node (kind 'train'). */
  private queueWindow(n: number, f: DeviceFilter, v: 'ambiguous' | 'healthy'): void {
    const w = this.win!;
    if (v === 'healthy' && !(w.sampleHealthy(n) && ++this.healthyCount[n] % w.healthyEvery === 0)) return;
    const T = f.options.windowSize;
    const values = new Float32Array(T * f.dims);
    f.windowInto(values);
    const kind = v === 'ambiguous' ? 'ambiguous' : 'train';
    this.pending.push({ node: n, id: ++this.windowIds[n], kind, shape: this.shapes[n], steps: T, dims: f.dims, values });
    if (kind === 'ambiguous') this.learned.ambiguousSent++;
    else this.learned.trainSent++;
    if (this.pending.length > w.maxPending) {
      const drop = this.pending.length - w.maxPending;
      this.pending.splice(0, drop);
      this.learned.dropped += drop;
    }
  }

  /** Queued windows for the orchestrator's detector, oldest first, at most `max` of them. */
  takeWindows(max = 512): DeviceWindow[] {
    return this.pending.splice(0, max);
  }

  /**
   * The orchestrator's verdict on window `id` of node n. The `learnedRun`-th anomalous verdict in
   * a row on a node whose latest window is still not 'healthy' excludes it like 'faulty' (rule
   * `device:learned`); anything else is counted only.
   */
  learnedVerdict(n: number, id: number, anomalous: boolean, score: number, nowS: number): void {
    if (!Number.isInteger(n) || n < 0 || n >= this.numNodes) return;
    if (!anomalous) {
      this.learned.normal++;
      this.learnedRun[n] = 0;
      return;
    }
    const last = this.lastVerdict[n];
    if (last !== 'ambiguous' && last !== 'faulty') {
      this.learned.stale++;
      return;
    }
    this.learned.anomalous++;
    this.healthyRun[n] = 0;
    if (++this.learnedRun[n] < this.o.learnedRun) return;
    this.lastBadS[n] = nowS;
    this.exclude(n, 'device:learned', () => `the learned detector scored window ${id} ${score.toFixed(2)} (above its threshold)`, nowS);
  }

  /** The agent's own outcomes on node n over its last interval. */
  observe(n: number, obs: QosObservation, nowS: number): void {
    for (const e of this.qos.observe(n, obs, nowS))
      this.emit({ timeS: e.timeS, node: e.node, kind: e.kind === 'readmit' ? 'readmit' : e.kind, rule: `qos:${e.rule}`, reason: e.reason });
  }

  /** Advances QoS isolation time (re-admissions). */
  tick(nowS: number): void {
    for (const e of this.qos.tick(nowS))
      this.emit({ timeS: e.timeS, node: e.node, kind: 'readmit', rule: `qos:${e.rule}`, reason: e.reason });
  }

  /** Nodes left out now, with the rule that did it. */
  excludedNow(): { node: number; rule: string }[] {
    const out: { node: number; rule: string }[] = [];
    for (let n = 0; n < this.numNodes; n++) {
      if (this.deviceOut[n] === 1) out.push({ node: n, rule: this.outRule[n] });
      else if (this.qos.isIsolated(n)) out.push({ node: n, rule: 'qos' });
    }
    return out;
  }

  /** Events so far by kind (all of them; `events` keeps the last 1000). */
  eventCounts(): Record<HealthEvent['kind'], number> {
    return { ...this.counts };
  }

  private readonly counts: Record<HealthEvent['kind'], number> = { exclude: 0, readmit: 0, isolate: 0, suppressed: 0 };

  /** Exclusions and isolations so far, by rule (`device:faulty`, `device:learned`, `qos:success-rate`, ...). */
  readonly exclusionsByRule: Record<string, number> = {};

  /** Every event since the start by `kind|rule` (only grows: /metrics' counter; `events` keeps the last 1000). */
  readonly eventTotals: Record<string, number> = {};

  private emit(e: HealthEvent): void {
    this.counts[e.kind]++;
    this.eventTotals[`${e.kind}|${e.rule}`] = (this.eventTotals[`${e.kind}|${e.rule}`] ?? 0) + 1;
    if (e.kind === 'exclude' || e.kind === 'isolate') this.exclusionsByRule[e.rule] = (this.exclusionsByRule[e.rule] ?? 0) + 1;
    this.events.push(e);
    if (this.events.length > 1000) this.events.splice(0, this.events.length - 1000);
    this.log(e);
  }

  /** Nodes whose telemetry builds baselines (counted when the filters are built and when one goes silent). */
  private reportingNodes = 0;

  private countReporting(): void {
    let k = 0;
    for (let n = 0; n < this.numNodes; n++) if (this.reporting[n] === 1) k++;
    this.reportingNodes = k;
  }

  /**
   * Rebuilds each shape's baseline from the recent non-faulty samples of its nodes not held out (oldest first per
   * node, nodes in order, as the first build pools them); a shape with fewer than historySamples of
   * them keeps its baseline. The filters keep their windows.
   */
  private rebaseline(): void {
    this.sinceBuild = 0;
    const R = this.o.recentSamples;
    const done = new Set<string>();
    for (let n = 0; n < this.numNodes; n++) {
      const shape = this.shapes[n];
      if (!this.filters[n] || done.has(shape)) continue;
      done.add(shape);
      const pooled: number[] = [];
      const blocks: number[][] = [];
      for (let m = 0; m < this.numNodes; m++) {
        if (this.shapes[m] !== shape || !this.filters[m] || this.deviceOut[m] === 1) continue;
        const c = this.recentCount[m];
        const rows = Math.min(c, R);
        const block: number[] = [];
        for (let i = 0; i < rows; i++) {
          const k = (c - rows + i) % R;
          for (let d = 0; d < TELEMETRY_DIMS; d++) block.push(this.recent[m][k * TELEMETRY_DIMS + d]);
        }
        for (const x of block) pooled.push(x);
        blocks.push(block);
      }
      if (pooled.length < this.o.historySamples * TELEMETRY_DIMS) continue;
      this.fitSecond(shape, blocks);
      const base = baselineFromHistory(pooled, TELEMETRY_DIMS, this.o.rules);
      for (let m = 0; m < this.numNodes; m++) if (this.shapes[m] === shape && this.filters[m]) this.filters[m]!.setBaseline(base);
    }
    this.rebaselines++;
  }

  /**
   * Fits shape's second stage on per-node sample blocks (each [rows][TELEMETRY_DIMS], oldest first):
   * every sample standardises, and every window wholly inside a block calibrates. Unlike `kais
   * detect` (the first 80% of a machine's train half standardises, the windows of the last 20%
   * calibrate), nothing is held out: with the newest 20% held out, a healthy node whose level
   * drifts slowly (memory 0.4 -> 0.6 over 15 minutes, node-health.test.ts) scored beyond its
   * calibration and the L2 stage excluded it. Fewer than secondMinWindows calibration windows:
   * the shape keeps its previous fit (or none).
   */
  private fitSecond(shape: string, blocks: ArrayLike<number>[]): void {
    if (!this.o.second) return;
    const D = TELEMETRY_DIMS;
    const T = this.o.rules.windowSize ?? 12;
    const fit: number[] = [];
    let windows = 0;
    for (const b of blocks) {
      for (let i = 0; i < b.length; i++) fit.push(b[i]);
      windows += Math.max(0, Math.floor(b.length / D) - T + 1);
    }
    if (windows < this.o.secondMinWindows) return;
    this.l2Models.set(shape, new L2Model(fit, blocks, D, { ...this.o.second, windowSize: T }));
    this.second.fits++;
  }

  private maybeBuild(): void {
    if (this.built) return;
    const need = this.o.historySamples * TELEMETRY_DIMS;
    let any = false;
    for (let n = 0; n < this.numNodes; n++) {
      if (this.reporting[n] === 2) continue;
      if (this.history[n].length < need) return; // a node still collecting (or not heard from yet)
      any = true;
    }
    if (!any) return;
    for (let n = 0; n < this.numNodes; n++) {
      if (this.reporting[n] !== 1) continue;
      const pooled: number[] = [];
      for (let m = 0; m < this.numNodes; m++)
        if (this.reporting[m] === 1 && this.shapes[m] === this.shapes[n]) pooled.push(...this.history[m]);
      this.filters[n] = new DeviceFilter(baselineFromHistory(pooled, TELEMETRY_DIMS, this.o.rules), this.o.rules);
    }
    for (const shape of new Set(this.shapes))
      this.fitSecond(
        shape,
        this.history.filter((h, m) => this.reporting[m] === 1 && this.shapes[m] === shape),
      );
    for (let n = 0; n < this.numNodes; n++) this.history[n] = [];
    this.countReporting();
    this.built = true;
  }
}
