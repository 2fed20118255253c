/**
 * The agent's `/metrics` (Prometheus text exposition format 0.0.4) and `/healthz` bodies.
 */
import type { Dispatcher } from './dispatcher';
import type { NodeHealth } from './filters/node-health';

export interface HealthState {
  eap: number;
  connected: boolean;
  draining: boolean;
  weightVersion: number | null;
  placementVersion: number | null;
  weightsApplied: number;
  placementsApplied: number;
  reconnects: number;
  experienceSent: number;
  telemetrySent: number;
  /** Device filters and QoS isolation, when on. */
  nodeHealth?: NodeHealth | null;
  /** The orchestrator's store epoch from its last `welcome` (null: none yet, or an orchestrator before epochs). */
  epoch?: string | null;
  /** Times the agent followed a new epoch (or distrusted a held version). */
  epochChanges?: number;
}

export function healthJson(d: Dispatcher, s: HealthState): Record<string, unknown> {
  return {
    ok: !s.draining,
    eap: s.eap,
    connected: s.connected,
    draining: s.draining,
    /** The rule deciding now (`cmmac`, or `lec` while cmmac waits for weights, or the --policy heuristic). */
    policy: d.policyName,
    /** `--policy`: `cmmac` or the heuristic that decides everything. */
    policyOption: d.policyOption,
    actorHead: d.actorHeadInUse,
    weightVersion: s.weightVersion,
    placementVersion: s.placementVersion,
    epoch: s.epoch ?? null,
    epochChanges: s.epochChanges ?? 0,
    weightsApplied: s.weightsApplied,
    placementsApplied: s.placementsApplied,
    queued: d.queued,
    outstanding: d.outstanding,
    counters: { ...d.counters },
    nodes: s.nodeHealth
      ? {
          filtersStarted: s.nodeHealth.started,
          excluded: s.nodeHealth.excludedNow(),
          verdicts: { ...s.nodeHealth.verdicts },
          events: s.nodeHealth.eventCounts(),
          exclusionsByRule: { ...s.nodeHealth.exclusionsByRule },
          learned: { ...s.nodeHealth.learned },
          lastEvents: s.nodeHealth.events.slice(-10),
        }
      : null,
  };
}

export function metricsText(d: Dispatcher, s: HealthState): string {
  const l = `eap="${s.eap}"`;
  const c = d.counters;
  const lines: string[] = [];
  const metric = (name: string, type: 'counter' | 'gauge', help: string, samples: [string, number][]) => {
    lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
    for (const [labels, v] of samples) lines.push(`${name}{${labels}} ${v}`);
  };
  metric('kais_agent_requests_total', 'counter', 'Requests answered by outcome.', [
    [`${l},outcome="in_time"`, c.inTime],
    [`${l},outcome="late"`, c.late],
    [`${l},outcome="refused"`, c.refused],
    [`${l},outcome="expired"`, c.expired],
    [`${l},outcome="timeout"`, c.timedOut],
  ]);
  metric('kais_agent_requests_received_total', 'counter', 'Requests received at the ingress.', [[l, c.received]]);
  metric('kais_agent_cloud_retries_total', 'counter', 'Requests an edge node refused that were retried on the cloud.', [
    [l, c.retriedOnCloud],
  ]);
  metric('kais_agent_decisions_total', 'counter', 'Dispatch decisions by policy.', [
    [`${l},policy="cmmac"`, c.decisionsLearned],
    // cmmac's lec fallback, or the --policy heuristic by name
    [`${l},policy="${d.policyOption === 'cmmac' ? 'fallback' : d.policyOption}"`, c.decisionsFallback],
  ]);
  metric('kais_agent_experience_dropped_total', 'counter', 'Transitions dropped from the full experience buffer.', [
    [l, c.experienceDropped],
  ]);
  metric('kais_agent_experience_frames_total', 'counter', 'Experience frames sent.', [[l, s.experienceSent]]);
  metric('kais_agent_telemetry_frames_total', 'counter', 'Telemetry frames sent.', [[l, s.telemetrySent]]);
  metric('kais_agent_queue_length', 'gauge', 'Requests waiting in the eAP queue.', [[l, d.queued]]);
  metric('kais_agent_outstanding', 'gauge', 'Requests queued or in flight.', [[l, d.outstanding]]);
  metric('kais_agent_connected', 'gauge', '1 while the orchestrator link is up.', [[l, s.connected ? 1 : 0]]);
  metric('kais_agent_weight_version', 'gauge', 'Actor weight version in use (-1: heuristic fallback).', [[l, s.weightVersion ?? -1]]);
  metric('kais_agent_placement_version', 'gauge', 'Placement version held (-1: none).', [[l, s.placementVersion ?? -1]]);
  metric('kais_agent_reconnects_total', 'counter', 'Connections to the orchestrator after the first.', [[l, s.reconnects]]);
  if (s.nodeHealth) {
    const h = s.nodeHealth;
    metric('kais_agent_nodes_excluded', 'gauge', 'Edge nodes left out of the mask by the device filters or QoS isolation.', [
      [l, h.excludedNow().length],
    ]);
    metric(
      'kais_agent_detector_windows_total',
      'counter',
      "Device-filter windows queued for the orchestrator's learned detector, by kind (dropped: queue full).",
      [
        [`${l},kind="ambiguous"`, h.learned.ambiguousSent],
        [`${l},kind="train"`, h.learned.trainSent],
        [`${l},kind="dropped"`, h.learned.dropped],
      ],
    );
    metric('kais_agent_detector_verdicts_total', 'counter', 'Learned-detector verdicts received (stale: the node looked healthy again).', [
      [`${l},verdict="anomalous"`, h.learned.anomalous],
      [`${l},verdict="normal"`, h.learned.normal],
      [`${l},verdict="stale"`, h.learned.stale],
    ]);
    const byKind = new Map<string, number>();
    for (const e of h.events) byKind.set(`${e.kind}|${e.rule}`, (byKind.get(`${e.kind}|${e.rule}`) ?? 0) + 1);
    metric(
      'kais_agent_node_health_events_total',
      'counter',
      'Exclusions and re-admissions of edge nodes, by rule (last 1000 events).',
      [...byKind].map(([k, v]) => [`${l},kind="${k.split('|')[0]}",rule="${k.split('|')[1]}"`, v] as [string, number]),
    );
  }
  lines.push(
    '# HELP kais_agent_latency_ms End-to-end latency at the eAP (ingress to answer), ms.',
    '# TYPE kais_agent_latency_ms histogram',
  );
  let cum = 0;
  d.latencyBucketsMs.forEach((le, i) => {
    cum += d.latencyCounts[i];
    lines.push(`kais_agent_latency_ms_bucket{${l},le="${le}"} ${cum}`);
  });
  cum += d.latencyCounts[d.latencyBucketsMs.length];
  lines.push(
    `kais_agent_latency_ms_bucket{${l},le="+Inf"} ${cum}`,
    `kais_agent_latency_ms_sum{${l}} ${d.latencyMsSum}`,
    `kais_agent_latency_ms_count{${l}} ${cum}`,
  );
  return `${lines.join('\n')}\n`;
}
