/**
 * QoS isolation and re-admission (ALGORITHMS.md §6, the OTT operator system), with the guards of
 * Envoy's outlier detection, plus `combineHealth`, which merges device-filter verdicts, learned
 * verdicts and QoS isolation into the one healthy(node) array the context filter masks with.
 *
 * Pure logic: time is passed in (seconds), nothing reads a clock, nothing allocates per call
 * except the returned events.
 *
 * Rules, per node and observation (stats over the caller's last interval):
 * - 'success-rate': requests >= minRequests and successRate < minSuccessRate -> isolate.
 * - 'latency': requests >= minRequests and latencyMs (first-byte, p50 or mean: the caller's choice,
 *   same unit) > maxLatencyMs -> isolate.
 * - isolation time = min(baseIsolationS x timesIsolated, maxIsolationS) (Envoy base_ejection_time x
 *   ejection count, capped by max_ejection_time); `timesIsolated` resets after the node stayed in
 *   service for `forgetAfterS` (Envoy decrements its multiplier while healthy; we reset, simpler).
 * - 'healthy-period': an isolated node is re-admitted once its isolation time is over AND no bad
 *   observation was seen for healthyPeriodS (observations of an isolated node come from probes or
 *   the few requests still sent to it; with none, the isolation time alone decides).
 * - 'cap': at most max(1, floor(maxIsolatedShare x nodes of the eAP)) nodes of one eAP are isolated
 *   at once (Envoy max_ejection_percent, default 10%, at least one). A new bad node past the cap
 *   replaces the healthiest isolated node of its eAP if it is less healthy than it; otherwise its
 *   isolation is suppressed. Either way an event says so. "Health" is the worse of
 *   successRate / minSuccessRate and maxLatencyMs / latencyMs (1 = on the threshold, lower = worse).
 */
import type { Verdict } from './device-filter';

export interface QosIsolationOptions {
  /** Isolate below this success rate (0..1). Default 0.9. */
  minSuccessRate: number;
  /** Isolate above this latency (ms). Default 1000. */
  maxLatencyMs: number;
  /**
   * Judge no fewer requests than this (too noisy). An observation with fewer is pooled with the
   * node's next ones until they hold this many, over at most poolS. Default 10.
   */
  minRequests: number;
  /**
   * Longest span of pooled low-rate observations (s); older ones are dropped. At 5 requests a
   * second a node failing every one was never judged (each 1 s interval held 5). Default 30.
   */
  poolS: number;
  /** No bad observation for this long before re-admission (s). Default 60. */
  healthyPeriodS: number;
  /** Base isolation time, multiplied by the times isolated (s). Default 30 (Envoy). */
  baseIsolationS: number;
  /** Cap on one isolation (s). Default 300 (Envoy). */
  maxIsolationS: number;
  /** Share of an eAP's nodes that may be isolated at once (at least one). Default 0.1 (Envoy). */
  maxIsolatedShare: number;
  /** In service this long without isolation -> timesIsolated back to 0 (s). Default 3600. */
  forgetAfterS: number;
}

export const DEFAULT_QOS_ISOLATION_OPTIONS: Readonly<QosIsolationOptions> = Object.freeze({
  minSuccessRate: 0.9,
  maxLatencyMs: 1000,
  minRequests: 10,
  poolS: 30,
  healthyPeriodS: 60,
  baseIsolationS: 30,
  maxIsolationS: 300,
  maxIsolatedShare: 0.1,
  forgetAfterS: 3600,
});

/** What the caller measured for one node over its last interval. */
export interface QosObservation {
  requests: number;
  /** Successful responses / requests, 0..1. */
  successRate: number;
  latencyMs: number;
}

export type QosRule = 'success-rate' | 'latency' | 'healthy-period' | 'cap';

export interface QosEvent {
  timeS: number;
  node: number;
  eap: number;
  kind: 'isolate' | 'readmit' | 'suppressed';
  /** Which rule caused it. */
  rule: QosRule;
  /** One line for alerts and logs, naming the metrics. */
  reason: string;
  /** The observation that triggered it (absent for time-driven re-admission). */
  metrics?: QosObservation;
  /** For 'isolate': the isolation time decided (s). */
  isolationS?: number;
}

interface NodeState {
  isolated: boolean;
  until: number;
  lastBadS: number;
  timesIsolated: number;
  inServiceSinceS: number;
  health: number;
  /** Low-rate observations pooled until they hold minRequests (requests 0: empty). */
  pool: { requests: number; successes: number; latencyMsSum: number; sinceS: number };
}

export class QosIsolation {
  readonly options: QosIsolationOptions;
  private readonly nodes: NodeState[];
  private readonly capOfEap = new Map<number, number>();
  /** Every event so far, in order (callers may also use the return values). */
  readonly events: QosEvent[] = [];

  /** `eapOfNode[n]` is the eAP of node n (DESIGN: nodes grouped by eAP). */
  constructor(
    readonly eapOfNode: readonly number[],
    options: Partial<QosIsolationOptions> = {},
  ) {
    this.options = { ...DEFAULT_QOS_ISOLATION_OPTIONS, ...options };
    const o = this.options;
    for (const k of Object.keys(o) as (keyof QosIsolationOptions)[]) {
      if (!Number.isFinite(o[k]) || o[k] < 0) throw new TypeError(`QosIsolation option ${k}: invalid value ${String(o[k])}`);
    }
    if (o.maxIsolatedShare > 1) throw new TypeError(`QosIsolation option maxIsolatedShare: invalid value ${o.maxIsolatedShare}`);
    this.nodes = eapOfNode.map(() => ({
      isolated: false,
      until: 0,
      lastBadS: -Infinity,
      timesIsolated: 0,
      inServiceSinceS: 0,
      health: 1,
      pool: { requests: 0, successes: 0, latencyMsSum: 0, sinceS: 0 },
    }));
    const size = new Map<number, number>();
    for (const e of eapOfNode) size.set(e, (size.get(e) ?? 0) + 1);
    for (const [e, n] of size) this.capOfEap.set(e, Math.max(1, Math.floor(o.maxIsolatedShare * n + 1e-9)));
  }

  isIsolated(node: number): boolean {
    return this.nodes[node].isolated;
  }

  /** How many times the node has been isolated (drives the isolation time). */
  timesIsolated(node: number): number {
    return this.nodes[node].timesIsolated;
  }

  /** Feed one observation of a node at time nowS; returns the events it caused. */
  observe(node: number, obs: QosObservation, nowS: number): QosEvent[] {
    const o = this.options;
    const st = this.nodes[node];
    if (st === undefined) throw new TypeError(`QosIsolation.observe: unknown node ${node}`);
    if (!(obs.requests > 0) || !Number.isFinite(obs.successRate) || !Number.isFinite(obs.latencyMs)) return [];
    if (obs.requests < o.minRequests || st.pool.requests > 0) {
      // a low rate: pooled with the node's recent observations until they are enough to judge
      const p = st.pool;
      if (p.requests > 0 && nowS - p.sinceS > o.poolS) p.requests = 0;
      if (p.requests === 0) Object.assign(p, { successes: 0, latencyMsSum: 0, sinceS: nowS });
      p.requests += obs.requests;
      p.successes += obs.successRate * obs.requests;
      p.latencyMsSum += obs.latencyMs * obs.requests;
      if (p.requests < o.minRequests) return [];
      obs = { requests: p.requests, successRate: p.successes / p.requests, latencyMs: p.latencyMsSum / p.requests };
      p.requests = 0;
    }
    const srHealth = obs.successRate / o.minSuccessRate;
    const latHealth = obs.latencyMs > 0 ? o.maxLatencyMs / obs.latencyMs : Infinity;
    st.health = Math.min(srHealth, latHealth);
    const rule: QosRule | null = obs.successRate < o.minSuccessRate ? 'success-rate' : obs.latencyMs > o.maxLatencyMs ? 'latency' : null;
    if (rule === null) return [];
    st.lastBadS = nowS;
    if (st.isolated) return [];
    const out: QosEvent[] = [];
    const eap = this.eapOfNode[node];
    const isolatedHere = this.nodes.map((s, n) => ({ s, n })).filter(({ s, n }) => s.isolated && this.eapOfNode[n] === eap);
    const what =
      rule === 'success-rate'
        ? `success rate ${fmt(obs.successRate)} < ${o.minSuccessRate}`
        : `latency ${fmt(obs.latencyMs)} ms > ${o.maxLatencyMs} ms`;
    if (isolatedHere.length >= (this.capOfEap.get(eap) ?? 1)) {
      // past the cap: the least healthy stay isolated
      const healthiest = isolatedHere.reduce((a, b) => (b.s.health > a.s.health ? b : a));
      if (healthiest.s.health <= st.health) {
        out.push({
          timeS: nowS,
          node,
          eap,
          kind: 'suppressed',
          rule: 'cap',
          reason: `${what}, but eAP ${eap} already has ${isolatedHere.length} isolated node(s) (cap)`,
          metrics: { ...obs },
        });
        return this.log(out);
      }
      out.push(this.readmit(healthiest.n, nowS, 'cap', `replaced by less healthy node ${node} (cap of eAP ${eap})`));
    }
    if (nowS - st.inServiceSinceS >= o.forgetAfterS) st.timesIsolated = 0;
    st.timesIsolated++;
    const isolationS = Math.min(o.baseIsolationS * st.timesIsolated, o.maxIsolationS);
    st.isolated = true;
    st.until = nowS + isolationS;
    out.push({
      timeS: nowS,
      node,
      eap,
      kind: 'isolate',
      rule,
      reason: `${what} over ${obs.requests} requests; isolated ${isolationS} s (time ${st.timesIsolated})`,
      metrics: { ...obs },
      isolationS,
    });
    return this.log(out);
  }

  /** Advance time: re-admits nodes whose isolation and healthy period are over. */
  tick(nowS: number): QosEvent[] {
    const out: QosEvent[] = [];
    this.nodes.forEach((st, n) => {
      if (st.isolated && nowS >= st.until && nowS - st.lastBadS >= this.options.healthyPeriodS) {
        out.push(this.readmit(n, nowS, 'healthy-period', `isolation over and no bad observation for ${this.options.healthyPeriodS} s`));
      }
    });
    return this.log(out);
  }

  /** isolated[n] for every node, into `out` if given (no allocation then). */
  isolatedMask(out: boolean[] = new Array<boolean>(this.nodes.length)): boolean[] {
    for (let n = 0; n < this.nodes.length; n++) out[n] = this.nodes[n].isolated;
    return out;
  }

  private readmit(node: number, nowS: number, rule: QosRule, reason: string): QosEvent {
    const st = this.nodes[node];
    st.isolated = false;
    st.inServiceSinceS = nowS;
    return { timeS: nowS, node, eap: this.eapOfNode[node], kind: 'readmit', rule, reason };
  }

  private log(evs: QosEvent[]): QosEvent[] {
    for (const e of evs) this.events.push(e);
    return evs;
  }
}

function fmt(x: number): string {
  return Number.isInteger(x) ? String(x) : x.toFixed(3);
}

/** What `combineHealth` merges; every array is indexed by node and may be omitted. */
export interface HealthInputs {
  /** Latest device-filter verdict per node (undefined = no telemetry yet). */
  device?: ArrayLike<Verdict | undefined>;
  /** Latest learned-detector verdict per node: true = anomalous (undefined = not scored). */
  learnedAnomalous?: ArrayLike<boolean | undefined>;
  /** QoS isolation state. */
  qos?: { isIsolated(node: number): boolean };
}

/**
 * healthy[n] for the context filter's mask:
 * - device 'faulty' -> false; device 'ambiguous' -> the learned verdict decides (anomalous ->
 *   false); an ambiguous node with no learned verdict yet stays in service unless
 *   `ambiguousWithoutLearned` = 'exclude' (default 'keep': a missing orchestrator must not empty the
 *   cluster); 'healthy', 'warming' or no telemetry -> true;
 * - learned verdicts are consulted only for ambiguous windows (Sentinel's two stages);
 * - QoS isolated -> false (its cap already applies there).
 * Writes into `out` when given (no allocation per slot).
 */
export function combineHealth(
  numNodes: number,
  inputs: HealthInputs,
  out: boolean[] = new Array<boolean>(numNodes),
  ambiguousWithoutLearned: 'keep' | 'exclude' = 'keep',
): boolean[] {
  const { device, learnedAnomalous, qos } = inputs;
  for (let n = 0; n < numNodes; n++) {
    let ok = true;
    const v = device?.[n];
    if (v === 'faulty') ok = false;
    else if (v === 'ambiguous') {
      const l = learnedAnomalous?.[n];
      ok = l === undefined ? ambiguousWithoutLearned === 'keep' : !l;
    }
    if (ok && qos?.isIsolated(n)) ok = false;
    out[n] = ok;
  }
  return out;
}
