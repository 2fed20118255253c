/**
 * The contract between the orchestrator's weight gate (orchestrator/gate.ts: the verdict) and its
 * shadow evaluation (training/jobs/gate.ts, run in the worker thread training/jobs/gate-worker.ts:
 * the measurement). The orchestrator imports no training code, so the messages that cross the
 * thread are typed here, once, for both sides.
 */
import type { Placement } from './domain';
import type { HeadActivation } from './nets/actor';
import type { Scenario } from './scenario';

/** One live decision's arrival: what the experience ring tells. */
export interface LiveArrival {
  eap: number;
  service: number;
  slot: number;
}

export interface ActorSpec {
  version: number | null;
  head: HeadActivation;
  arrays: Float32Array[];
}

export interface ShadowInput {
  /** The orchestrator's scenario (a plain object: it crosses to the worker as is). */
  scenario: Scenario;
  candidate: ActorSpec;
  /** The version agents run now; null when there is none. */
  current: ActorSpec | null;
  arrivals: LiveArrival[];
  /**
   * The placement the agents dispatch on now (d[w][n], the orchestrator's last published one): the
   * replay starts from it, every replica ready, and holds it. Absent or null: the scenario's initial
   * placement under hpa (what the gate replayed on before session 49). One the scenario cannot hold
   * (shape, a service past maxReplicasPerService, a node's memory: placementProblem) is not used, and the result says why.
   */
  placement?: Placement | null;
  /** Heuristics the candidate must not lose to (the best of them counts). */
  heuristics: string[];
  seed: number;
  /** Longest replay, simulated seconds (the newest arrivals are kept). */
  seconds: number;
  /**
   * Stop as soon as the candidate is below (1 - margin) x a rate measured so far (the current
   * version first, then each heuristic): the verdict is a rejection whatever the rest would say,
   * and a bad version costs fewer episodes. null: run everything.
   */
  stopBelowMargin?: number | null;
  /**
   * How the actors act: argmax, or sample (the model's act is sample: drawn from the policy, a stream
   * seeded by `seed`, as the agents then act). @defaultValue 'argmax'
   */
  act?: 'argmax' | 'sample';
}

export interface ShadowResult {
  /** Requests replayed. */
  requests: number;
  /** Simulated seconds replayed. */
  durationS: number;
  candidate: number;
  current: number | null;
  /** The best heuristic run (all of them unless stopped early; name '' and rate NaN when none ran). */
  heuristic: { name: string; rate: number };
  /** Whether the evaluation stopped early (stopBelowMargin). */
  stopped: boolean;
  /** Wall time of the evaluation (ms). */
  ms: number;
  /** What the replay ran on: the live placement given, or the initial one (none given, or `placementProblem` says why not). */
  placement: 'live' | 'initial';
  placementProblem?: string;
}

export type GateWorkerRequest = { kind: 'evaluate'; input: ShadowInput } | { kind: 'ping' };
/** `result` is null for a ping. */
export type GateWorkerReply = { ok: true; result: ShadowResult | null } | { ok: false; error: string };
