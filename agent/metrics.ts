/**
 * The agent's `/metrics` through prom-client (issue 18): the process and Node.js default metrics,
 * and the agent's own, in base units (`_seconds`), every counter read from a count that only
 * grows (the dispatcher's counters, the node-health totals), so no counter ever goes down.
 * One Registry per agent (not prom-client's global one): several agents can live in one process
 * (tests) without mixing their figures.
 *
 * Names (label `eap` on every agent metric):
 *   kais_agent_requests_total{outcome}            in_time | late | refused | expired | timeout
 *   kais_agent_requests_received_total
 *   kais_agent_cloud_retries_total
 *   kais_agent_decisions_total{policy}            cmmac | fallback | <the --policy heuristic>
 *   kais_agent_experience_dropped_total, kais_agent_experience_frames_total, kais_agent_telemetry_frames_total
 *   kais_agent_orchestrator_frames_refused_total{answered}  frames from the orchestrator refused, answered with an error or not (past the budget)
 *   kais_agent_experience_retired_total             transitions not sent: decided on weights of an orchestrator store that is gone
 *   kais_agent_reconnects_total
 *   kais_agent_offline_dropped_total{kind}        telemetry | experience records dropped from the offline buffer (full, a new store, the drain's end)
 *   kais_agent_offline_flushed_total, kais_agent_offline_held      records sent from it after a cut, held now
 *   kais_agent_orchestrator_tls_failures_total    wss:// handshakes refused on the orchestrator's certificate
 *   kais_agent_queue_length, kais_agent_outstanding, kais_agent_connected,
 *   kais_agent_weight_version, kais_agent_placement_version      gauges (-1: none)
 *   kais_agent_nodes_excluded                                      gauge (device filters on)
 *   kais_agent_detector_windows_total{kind}, kais_agent_detector_verdicts_total{verdict}
 *   kais_agent_node_health_events_total{kind, rule}                every event since the start
 *   kais_agent_latency_seconds                                     histogram, ingress to answer
 *   kais_agent_queue_wait_seconds                                  histogram, ingress to dispatch (time in the eAP queue)
 * plus prom-client's defaults (process_cpu_seconds_total, process_resident_memory_bytes,
 * nodejs_eventloop_lag_seconds, ...) with the prefix `kais_agent_`.
 */
import { collectDefaultMetrics, Histogram, Registry } from 'prom-client';
import { scrapedCounter, scrapedGauge } from '../shared/prom';
import type { Dispatcher } from './dispatcher';
import type { HealthState } from './health';

/** Latency buckets in seconds (10 ms .. 10 s, as the hand-written histogram had in ms). */
const LATENCY_BUCKETS_S = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
/** eAP queue wait buckets in seconds: most requests leave it within a millisecond; seconds mean the admission limits bind. */
const QUEUE_WAIT_BUCKETS_S = [0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5];

export class AgentMetrics {
  readonly registry = new Registry();
  private readonly latency: Histogram;
  private readonly queueWait: Histogram;

  constructor(d: Dispatcher, state: () => HealthState) {
    const r = this.registry;
    const eap = String(state().eap);
    r.setDefaultLabels({ eap });
    collectDefaultMetrics({ register: r, prefix: 'kais_agent_' });
    /** A counter whose value is read from a monotonic source at scrape time. */
    const counter = <L extends string>(name: string, help: string, labelNames: L[], read: () => [Partial<Record<L, string>>, number][]) =>
      scrapedCounter(r, name, help, labelNames, read);
    const gauge = (name: string, help: string, read: () => number) => scrapedGauge(r, name, help, read);
    const c = d.counters;
    counter('kais_agent_requests_total', 'Requests answered, by outcome.', ['outcome'], () => [
      [{ outcome: 'in_time' }, c.inTime],
      [{ outcome: 'late' }, c.late],
      [{ outcome: 'refused' }, c.refused],
      [{ outcome: 'expired' }, c.expired],
      [{ outcome: 'timeout' }, c.timedOut],
      // refused at the door (the eAP's admission limits): answered 503, never dispatched; the outcomes
      // then sum to the requests answered (they were left out: 700 received, 512 counted)
      [{ outcome: 'admission' }, c.admissionRefused],
    ]);
    counter('kais_agent_requests_received_total', 'Requests received at the ingress.', [], () => [[{}, c.received]]);
    counter('kais_agent_cloud_retries_total', 'Requests an edge node refused that were retried on the cloud.', [], () => [
      [{}, c.retriedOnCloud],
    ]);
    counter('kais_agent_decisions_total', 'Dispatch decisions, by policy.', ['policy'], () => [
      [{ policy: 'cmmac' }, c.decisionsLearned],
      // cmmac's lec fallback, or the --policy heuristic by name
      [{ policy: d.policyOption === 'cmmac' ? 'fallback' : d.policyOption }, c.decisionsFallback],
    ]);
    counter('kais_agent_decisions_drawn_total', "cmmac's decisions drawn from its policy rather than its argmax (--explore).", [], () => [
      [{}, c.decisionsDrawn],
    ]);
    counter(
      'kais_agent_decisions_light_total',
      "cmmac's decisions made by the light actor (frames whose placement names it: the actor switch).",
      [],
      () => [[{}, c.decisionsLight]],
    );
    counter('kais_agent_guard_switches_total', 'Switches of the regime guard (to its fallback and back).', [], () => [
      [{}, c.guardSwitches],
    ]);
    counter('kais_agent_guard_decisions_total', "Decisions the regime guard's fallback took over from cmmac.", [], () => [
      [{}, c.decisionsGuarded],
    ]);
    gauge('kais_agent_guard_fallback', "1 while the regime guard's fallback decides.", () => (d.guardState?.fallback ? 1 : 0));
    counter('kais_agent_experience_dropped_total', 'Transitions dropped from the full experience buffer.', [], () => [
      [{}, c.experienceDropped],
    ]);
    counter(
      'kais_agent_experience_retired_total',
      'Transitions not sent: decided on weights of an orchestrator store that is gone (a new epoch).',
      [],
      () => [[{}, c.experienceRetired]],
    );
    counter(
      'kais_agent_orchestrator_frames_refused_total',
      'Frames from the orchestrator the agent refused, by whether an error was sent back (past the reply budget it is not).',
      ['answered'],
      () => {
        const f = state().framesRefused?.() ?? { total: 0, unanswered: 0 };
        return [
          [{ answered: 'true' }, f.total - f.unanswered],
          [{ answered: 'false' }, f.unanswered],
        ];
      },
    );
    counter('kais_agent_experience_frames_total', 'Experience frames sent.', [], () => [[{}, state().experienceSent]]);
    counter('kais_agent_telemetry_frames_total', 'Telemetry frames sent.', [], () => [[{}, state().telemetrySent]]);
    const off = () => state().offline;
    counter(
      'kais_agent_offline_dropped_total',
      'Records dropped from the offline buffer, by kind: the oldest when it is full, experience of an orchestrator store that is gone, and what a drain could not send.',
      ['kind'],
      () => [
        [{ kind: 'telemetry' }, off()?.stats.dropped.telemetry ?? 0],
        [{ kind: 'experience' }, off()?.stats.dropped.experience ?? 0],
      ],
    );
    counter('kais_agent_offline_flushed_total', 'Records sent from the offline buffer once the link was back.', [], () => [
      [{}, off()?.stats.flushed ?? 0],
    ]);
    gauge('kais_agent_offline_held', 'Records waiting in the offline buffer.', () => off()?.length ?? 0);
    counter('kais_agent_reconnects_total', 'Connections to the orchestrator after the first.', [], () => [[{}, state().reconnects]]);
    counter('kais_agent_orchestrator_tls_failures_total', "wss:// handshakes that failed on the orchestrator's certificate.", [], () => [
      [{}, state().tlsFailures ?? 0],
    ]);
    gauge('kais_agent_link_refused', '1 once the orchestrator refused the hello (the link has stopped), else 0.', () =>
      state().linkRefused ? 1 : 0,
    );
    gauge('kais_agent_queue_length', 'Requests waiting in the eAP queue.', () => d.queued);
    gauge('kais_agent_outstanding', 'Requests queued or in flight.', () => d.outstanding);
    gauge('kais_agent_connected', '1 while the orchestrator link is up.', () => (state().connected ? 1 : 0));
    gauge('kais_agent_weight_version', 'Actor weight version in use (-1: heuristic fallback).', () => state().weightVersion ?? -1);
    gauge('kais_agent_placement_version', 'Placement version held (-1: none).', () => state().placementVersion ?? -1);
    if (state().nodeHealth) {
      const h = () => state().nodeHealth!;
      gauge(
        'kais_agent_nodes_excluded',
        'Edge nodes left out of the mask by the device filters or QoS isolation.',
        () => h().excludedNow().length,
      );
      counter(
        'kais_agent_detector_windows_total',
        "Device-filter windows queued for the orchestrator's learned detector, by kind (dropped: queue full).",
        ['kind'],
        () => [
          [{ kind: 'ambiguous' }, h().learned.ambiguousSent],
          [{ kind: 'train' }, h().learned.trainSent],
          [{ kind: 'dropped' }, h().learned.dropped],
        ],
      );
      counter(
        'kais_agent_detector_verdicts_total',
        'Learned-detector verdicts received (stale: the node looked healthy again).',
        ['verdict'],
        () => [
          [{ verdict: 'anomalous' }, h().learned.anomalous],
          [{ verdict: 'normal' }, h().learned.normal],
          [{ verdict: 'stale' }, h().learned.stale],
        ],
      );
      counter(
        'kais_agent_node_health_events_total',
        'Exclusions, re-admissions and isolations of edge nodes since the start, by rule.',
        ['kind', 'rule'],
        () =>
          Object.entries(h().eventTotals).map(([k, v]) => {
            const [kind, rule] = k.split('|');
            return [{ kind, rule }, v] as [Partial<Record<'kind' | 'rule', string>>, number];
          }),
      );
    }
    const histogram = (name: string, help: string, buckets: number[]) => new Histogram({ name, help, buckets, registers: [r] });
    this.latency = histogram('kais_agent_latency_seconds', 'End-to-end latency at the eAP, ingress to answer, seconds.', LATENCY_BUCKETS_S);
    d.onAnswer = (ms) => this.latency.observe(ms / 1000);
    this.queueWait = histogram(
      'kais_agent_queue_wait_seconds',
      'Time a request waited in the eAP queue, ingress to dispatch, seconds (long waits: the admission limits bind).',
      QUEUE_WAIT_BUCKETS_S,
    );
    d.onDispatch = (ms) => this.queueWait.observe(ms / 1000);
  }

  contentType(): string {
    return this.registry.contentType;
  }

  text(): Promise<string> {
    return this.registry.metrics();
  }
}
