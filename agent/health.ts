/**
 * The agent's `/healthz` body (its `/metrics` are agent/metrics.ts).
 */
import type { Dispatcher } from './dispatcher';
import type { NodeHealth } from './filters/node-health';
import type { Outbox } from './outbox';

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
  /** wss:// handshakes that failed on the orchestrator's certificate. */
  tlsFailures?: number;
  /** The orchestrator refused this agent's hello (KAIS_ERR_AUTH): its message; the link then stops for good. */
  linkRefused?: string | null;
  /** Why the last attempt to reach the orchestrator got no `welcome` (null once connected, or before any attempt failed). */
  linkProblem?: string | null;
  /** Whether the ingress is https (the agent's --tls-cert). */
  tls?: boolean;
  /** The offline buffer (agent/outbox.ts): what waits while the orchestrator link is down. */
  offline?: Outbox;
  /** Frames from the orchestrator the agent refused, and of them those past the reply budget (agent/runtime.ts). */
  framesRefused?: () => { total: number; unanswered: number };
}

/** An agent's state before anything happened (no link, nothing applied or sent). */
export function freshHealthState(eap: number): HealthState {
  return {
    eap,
    connected: false,
    draining: false,
    weightVersion: null,
    placementVersion: null,
    weightsApplied: 0,
    placementsApplied: 0,
    reconnects: 0,
    experienceSent: 0,
    telemetrySent: 0,
  };
}

export function healthJson(d: Dispatcher, s: HealthState): Record<string, unknown> {
  return {
    // not ok once the orchestrator refused the hello: the link has stopped and only a restart with
    // the right token brings it back (it said ok: true while cut off for good)
    ok: !s.draining && !s.linkRefused,
    linkRefused: s.linkRefused ?? null,
    /** Why the orchestrator was not reached on the last attempt (refused connection, another server, an error frame). */
    linkProblem: s.linkProblem ?? null,
    eap: s.eap,
    framesRefused: s.framesRefused?.() ?? { total: 0, unanswered: 0 },
    connected: s.connected,
    draining: s.draining,
    /** The rule deciding now (`cmmac`, or `lec` while cmmac waits for weights, or the --policy heuristic). */
    policy: d.policyName,
    /** `--policy`: `cmmac` or the heuristic that decides everything. */
    policyOption: d.policyOption,
    actorHead: d.actorHeadInUse,
    /** The actor deciding now (`light` in frames whose placement names it, when the weights hold one; null: no weights yet). */
    actor: d.actorInUse,
    /** Whether the weights in use hold a light actor (the actor switch). */
    lightActor: d.holdsLightActor,
    /** Share of cmmac's decisions drawn from the policy (--explore; 1 when the orchestrator's model acts by sampling). */
    explore: d.explore,
    weightVersion: s.weightVersion,
    placementVersion: s.placementVersion,
    epoch: s.epoch ?? null,
    epochChanges: s.epochChanges ?? 0,
    tls: s.tls ?? false,
    tlsFailures: s.tlsFailures ?? 0,
    weightsApplied: s.weightsApplied,
    placementsApplied: s.placementsApplied,
    queued: d.queued,
    outstanding: d.outstanding,
    counters: { ...d.counters },
    /** Frames sent to the orchestrator (those from the offline buffer included). */
    framesSent: { telemetry: s.telemetrySent, experience: s.experienceSent },
    /** The offline buffer: records held now, sent from it, dropped from it (oldest first), by kind. */
    offline: s.offline
      ? {
          capacity: s.offline.capacity,
          maxBytes: s.offline.maxBytes,
          bytes: s.offline.bytes,
          held: s.offline.length,
          flushed: s.offline.stats.flushed,
          dropped: { ...s.offline.stats.dropped },
        }
      : null,
    nodes: s.nodeHealth
      ? {
          filtersStarted: s.nodeHealth.started,
          excluded: s.nodeHealth.excludedNow(),
          verdicts: { ...s.nodeHealth.verdicts },
          events: s.nodeHealth.eventCounts(),
          exclusionsByRule: { ...s.nodeHealth.exclusionsByRule },
          learned: { ...s.nodeHealth.learned },
          /** Placement changes marked as breaks in the nodes' windows (a step there is not read as a fault). */
          placementBreaks: s.nodeHealth.placementBreaks,
          lastEvents: s.nodeHealth.events.slice(-10),
        }
      : null,
  };
}
