/**
 * The wire protocol between an agent (one per eAP) and the orchestrator: one envelope
 * `{v, type, seq, ts, body}` per binary WebSocket message, msgpackr-encoded (see `codec.ts`).
 * A discriminated union on `type`; `docs/protocol.md` is the reader's version of this file.
 *
 * Conventions for every field below:
 * - ids (eAP, node, service), versions, seq and counters are non-negative safe integers;
 * - times are milliseconds since the Unix epoch (`ts`) or durations in milliseconds (`*Ms`);
 * - every number is finite (no NaN, no Infinity), including every element of a Float32Array;
 * - typed arrays travel as raw little-endian bytes, never as lists of numbers;
 * - "none yet" is `null`, never a missing field or a sentinel number.
 *
 * Extending: a new message type or field goes here, in the validator in `codec.ts`, in
 * `docs/protocol.md` and in the codec test. Receivers ignore (and strip) body fields they do not
 * know, so adding a field is not a breaking change; removing or retyping one is, and bumps
 * `PROTOCOL_VERSION`.
 *
 * Version history: 1 (initial). Optional fields added since, within version 1 (older peers strip
 * them): `epoch` on `welcome`, `weights` and `placement`; `epoch` and `instance` on `hello`; `load`
 * on `telemetry`.
 */
import { KaisError } from '../errors';
import type { EapId, NodeId, Placement, ServiceId } from '../domain';

/** The `v` every frame of this build carries; any other value is refused with KAIS_ERR_VERSION. */
export const PROTOCOL_VERSION = 1;

export const MESSAGE_TYPES = [
  'hello',
  'welcome',
  'weights',
  'placement',
  'experience',
  'telemetry',
  'scale',
  'ack',
  'error',
  'verdicts',
] as const;

export type MessageType = (typeof MESSAGE_TYPES)[number];

// ---------------------------------------------------------------------------------------------
// Bodies
// ---------------------------------------------------------------------------------------------

/** agent -> orchestrator, first frame on every connection. */
export interface HelloBody {
  /** The eAP this agent serves (0..numEaps-1). */
  eapId: EapId;
  /** Shared or per-agent secret checked by the orchestrator; may be '' when auth is off. */
  token: string;
  /** Version string of the agent build (semver of the package), for logs and the dashboard. */
  agentVersion: string;
  /** Version of the actor weights the agent holds (from its disk cache), `null` if none. */
  weightVersion: number | null;
  /** Version of the placement the agent holds, `null` if none. */
  placementVersion: number | null;
  /**
   * Orchestrator store epoch the held versions belong to (`null`: none held, or held before epochs
   * existed). Optional: absent from older agents.
   */
  epoch?: string | null;
  /**
   * Random id of this agent process, the same on every reconnect of the process (1..64
   * characters). A `hello` for an eAP that already has a live session replaces it only when the
   * instance is the same (the agent reconnecting over a half-dead socket); otherwise it is
   * refused (KAIS_ERR_DUPLICATE). Optional: absent from older agents, which are then refused too.
   */
  instance?: string;
  /**
   * What this agent build does beyond the base protocol (AGENT_FEATURES): `actor-switch`, it holds a
   * weights body's light actor and follows a placement's `actor`. Optional: absent from older
   * agents (the orchestrator warns when its model switches actors).
   */
  features?: string[];
}

/** Epoch ids: 1..64 characters of [0-9A-Za-z._-]. */
export const EPOCH_PATTERN = /^[0-9A-Za-z._-]{1,64}$/;

/** orchestrator -> agent, reply to an accepted `hello`. */
export interface WelcomeBody {
  /** Opaque id of this session (logs, dashboard); 1..128 characters. */
  sessionId: string;
  /** The agent sends a frame (telemetry at worst) at least this often; > 0, milliseconds. */
  heartbeatMs: number;
  /** Current actor weight version at the orchestrator, `null` if it has none yet. */
  weightVersion: number | null;
  /** Current placement version at the orchestrator, `null` if it has none yet. */
  placementVersion: number | null;
  /**
   * The orchestrator's store epoch (orchestrator/store.ts): versions are numbered within it. An
   * agent holding versions of another epoch takes the next `weights` and `placement` of this one
   * whatever their numbers. Optional: absent from older orchestrators.
   */
  epoch?: string;
  /**
   * How the orchestrator's model acts (its checkpoint's `act`, docs/cmmac.md): `sample`, an agent
   * not started with an explicit `--explore` draws every decision from the policy. Absent (argmax,
   * or an older orchestrator): the agent's `--explore` (0 by default).
   */
  act?: 'sample';
}

/**
 * orchestrator -> agent: a full set of actor weights. Built by `packWeights` (`weights.ts`).
 * `tensors[i]` holds `shapes[i]` in row-major order, so its length is the product of the shape
 * (1 for a scalar shape `[]`).
 */
export interface WeightsBody {
  /** Model version; increases by at least 1 on every push. */
  version: number;
  /** CRC-32 (IEEE 802.3) of the raw little-endian bytes of all tensors in order; unsigned 32-bit. */
  checksum: number;
  /** Shape per tensor, e.g. `[inDim, outDim]` for a dense kernel, `[outDim]` for its bias. */
  shapes: number[][];
  /** Values per tensor (dimensionless float32), same order as `shapes`. */
  tensors: Float32Array[];
  /**
   * Output head the actor was trained with (`relu1`: ReLU(z) + 1, `softplus1`: softplus(z) + 1);
   * the agent applies it. Absent (older orchestrators, checkpoints without it): the agent's
   * `--actor-head`.
   */
  head?: ActorHeadName;
  /** Store epoch the version belongs to (see WelcomeBody.epoch). Optional. */
  epoch?: string;
  /**
   * A second actor, the light-load one, held beside the first under the same version: the agent
   * dispatches with it in frames whose placement names it (`PlacementBody.actor` `light`).
   * Absent: one actor (older orchestrators, a model without an actor switch).
   */
  light?: LightActorBody;
}

/** The light-load actor of a weights body: tensors, checksum and head as the body's own. */
export interface LightActorBody {
  checksum: number;
  shapes: number[][];
  tensors: Float32Array[];
  head?: ActorHeadName;
}

/**
 * Which of an agent's actors dispatches in a frame: `main` (the weights body's own tensors) or
 * `light` (its `light` actor), as the orchestration decided (shared/orchestration/scale-in.ts).
 */
export const ACTOR_SLOTS = ['main', 'light'] as const;
export type ActorSlot = (typeof ACTOR_SLOTS)[number];

/** The features this agent build announces in its hello (HelloBody.features). */
export const AGENT_FEATURES = ['actor-switch'] as const;

export const ACTOR_HEADS = ['relu1', 'softplus1'] as const;
export type ActorHeadName = (typeof ACTOR_HEADS)[number];

/**
 * orchestrator -> agent: replica counts d[w][n] for the frame starting at `frame`.
 * `replicas[w * numNodes + n]` = replicas of service w on edge node n (row-major, w major).
 */
export interface PlacementBody {
  /** Placement version; increases by at least 1 on every push. */
  version: number;
  /** Index of the orchestration frame (100 dispatch slots) this placement applies from. */
  frame: number;
  /** W, number of services (rows). */
  numServices: number;
  /** N, number of edge nodes of the whole cluster (columns); the cloud is not a column. */
  numNodes: number;
  /** Replica counts, length numServices * numNodes, each >= 0. */
  replicas: Int32Array;
  /** Store epoch the version belongs to (see WelcomeBody.epoch). Optional. */
  epoch?: string;
  /**
   * The actor the agents dispatch with from this frame on (`light`: the weights' light actor; an
   * agent that holds none uses its main one). Absent: `main` (older orchestrators, an orchestration
   * without an actor switch).
   */
  actor?: ActorSlot;
}

/** One dispatch decision and what came of it. */
export interface Transition {
  /** eAP that made the decision. */
  eap: EapId;
  /** Global dispatch slot index (slot = 0.25 s by default) in which the decision was made. */
  slot: number;
  /** Service of the dispatched request. */
  service: ServiceId;
  /** Observation the actor saw, [obsDim] (feature table in shared/spaces.ts). */
  obs: Float32Array;
  /** Action mask, [numTargets] = [numNodes + 1]; 1 = valid target, 0 = masked. Last = cloud. */
  mask: Uint8Array;
  /** Chosen target index, 0 <= action < mask.length, and mask[action] === 1. */
  action: number;
  /** Natural log of the probability of `action` under the behaviour policy; <= 0. */
  logProb: number;
  /** Reward credited to this decision by the agent (dimensionless). */
  reward: number;
  /** End-to-end latency of the request (ms), `null` if it was dropped or never answered. */
  latencyMs: number | null;
  /** True if the response reached the device before the deadline. */
  metDeadline: boolean;
  /** True if this is the last transition of an episode (training) or of a session (live). */
  done: boolean;
  /** Actor weight version that decided, `null` for the heuristic fallback (no weights yet). */
  weightVersion: number | null;
  /** Present (`light`) when the version's light actor decided (the learner learns the main actor only). */
  actor?: 'light';
}

/** agent -> orchestrator: a batch of transitions, in decision order. */
export interface ExperienceBody {
  /** eAP sending the batch. */
  eap: EapId;
  transitions: Transition[];
}

/** Metrics of one edge node over one reporting interval (counters are deltas, not totals). */
export interface NodeSample {
  node: NodeId;
  /** When the sample was taken (ms since epoch). */
  ts: number;
  /**
   * Utilisation fractions (normally 0..1) of CPU, memory and disk. Only finiteness and >= 0 are
   * enforced: a broken device may report nonsense, and the device filter must get to see it.
   */
  cpu: number;
  mem: number;
  disk: number;
  /** Upload bandwidth in use, megabits per second, >= 0. */
  upBwMbps: number;
  /** Requests this eAP dispatched to the node during the interval. */
  requests: number;
  /** Requests answered successfully during the interval. */
  succeeded: number;
  /** Of `succeeded`, those answered within their deadline (<= succeeded). */
  inDeadline: number;
  /** Sum of end-to-end latencies of the `succeeded` requests (ms); mean = latencyMsSum / succeeded. */
  latencyMsSum: number;
}

/**
 * One device-filter window of one node's telemetry (agent/filters/node-health.ts), for the
 * orchestrator's learned detector: 'ambiguous' windows to be judged, 'train' ones to learn from.
 */
export interface DeviceWindow {
  node: NodeId;
  /** Agent-side id of the window (per node, increasing); a verdict names it. */
  id: number;
  kind: 'ambiguous' | 'train';
  /** Shape key of the node ("cores/GB"): nodes of one shape share a detector. 1..64 characters. */
  shape: string;
  /** T, samples in the window (2..256). */
  steps: number;
  /** D, metrics per sample (1..64). */
  dims: number;
  /** Raw metrics, row-major [steps][dims], oldest sample first; all finite. */
  values: Float32Array;
}

/** Most windows in one telemetry frame. */
export const MAX_DEVICE_WINDOWS = 512;

/**
 * What one agent saw of the load over one telemetry interval (agent/load-report.ts), for an
 * executor that cannot see it on its cluster (Kubernetes: orchestrator/load-board.ts combines the
 * agents' reports). Per-(target, service) figures are means over samples taken through the
 * interval, for the listed targets only (a target not listed: nothing seen there).
 */
export interface LoadBody {
  /** The agent's wall clock at the end of the interval (ms since epoch); the envelope's `ts` minus this is the record's age when sent (a record buffered while the link was down is old). */
  endTs: number;
  /** Length of the interval, ms (> 0). */
  intervalMs: number;
  /** W, number of services. */
  numServices: number;
  /** [w] requests of w that arrived at this eAP's ingress during the interval. */
  arrivals: Float32Array;
  /** [w] their CPU work, core-seconds (the request's `workCoreS`, else the service's nominal work). */
  workCoreS: Float32Array;
  /**
   * [w] requests of w this eAP answered in the interval with a result by their deadline, and those it
   * answered otherwise (late, refused, expired): the window's completedInTime and failed as the
   * simulator counts them (at the device). Optional (agents before 2026-12-04 do not send them);
   * both or neither.
   */
  completedInTime?: Float32Array;
  failed?: Float32Array;
  /** Targets reported, ascending, each once: edge node ids, numNodes = the cloud. */
  targets: Int32Array;
  /** [k * W + w] for targets[k]: requests of w this eAP sent there and had no answer to yet (mean over the interval). */
  outstanding: Float32Array;
  /** [k * W + w]: busy replicas of w there as this agent estimated them (its own requests, raised to the node's last load report while fresh), mean. */
  busy: Float32Array;
  /** [k * W + w]: requests of w waiting there, estimated the same way, mean. */
  waiting: Float32Array;
}

/** agent (or an emulated node) -> orchestrator. */
export interface TelemetryBody {
  /** eAP reporting. */
  eap: EapId;
  samples: NodeSample[];
  /** Device-filter windows for the learned detector (optional; absent = none). */
  windows?: DeviceWindow[];
  /** The load this agent saw over the interval (optional; absent = not reported). */
  load?: LoadBody;
  /** Its regime guard's switches since the last frame (optional; absent = none; at most MAX_GUARD_SWITCHES). */
  guard?: GuardSwitchReport[];
}

/** One switch of an agent's regime guard (shared/dispatch/guard.ts), for the orchestrator's events. */
export interface GuardSwitchReport {
  /** When it switched (ms since epoch). */
  ts: number;
  /** 0: cmmac decides again, 1: the middle fallback, 2: the fallback. */
  level: number;
  /** The policy deciding from then on (`cmmac`, `round-robin`, ...), 1..32 characters. */
  policy: string;
  /** The eAP's late share when it switched, 0..1. */
  lateShare: number;
  /** The eAP's decisions so far (the guard's clock). */
  decision: number;
}

/** Most guard switches in one telemetry frame (an agent keeps only the newest). */
export const MAX_GUARD_SWITCHES = 64;

/** The learned detector's verdict on one 'ambiguous' DeviceWindow. */
export interface DeviceVerdict {
  node: NodeId;
  /** The window's `id`. */
  id: number;
  /** Normalised anomaly score > the detector's threshold eta. */
  anomalous: boolean;
  /** Normalised anomaly score (critic/detector/vgru.ts; 0 = the healthy windows' 99th percentile). */
  score: number;
}

/** orchestrator -> agent: verdicts on windows that agent sent. */
export interface VerdictsBody {
  verdicts: DeviceVerdict[];
}

/** Set the replica count of one service on one node (absolute, not a delta). */
export interface ScaleBody {
  service: ServiceId;
  node: NodeId;
  /** Desired number of replicas, >= 0. */
  replicas: number;
}

/** Acknowledges the frame with sequence number `of` (e.g. weights or placement applied). */
export interface AckBody {
  of: number;
}

/** A refused frame: sent in reply to a bad frame, which is then dropped. */
export interface ErrorBody {
  /** A `KAIS_ERR_*` code: one of `ProtocolErrorCode`, or a code of the peer's own (KAIS_ERR_AUTH). */
  code: string;
  /** One human-readable line, at most 1024 characters. */
  message: string;
  /** `seq` of the refused frame, `null` when it could not be read. */
  of: number | null;
}

export interface BodyByType {
  hello: HelloBody;
  welcome: WelcomeBody;
  weights: WeightsBody;
  placement: PlacementBody;
  experience: ExperienceBody;
  telemetry: TelemetryBody;
  scale: ScaleBody;
  ack: AckBody;
  error: ErrorBody;
  verdicts: VerdictsBody;
}

// ---------------------------------------------------------------------------------------------
// Envelope
// ---------------------------------------------------------------------------------------------

/** The envelope of one message type. */
export interface Envelope<T extends MessageType> {
  /** Protocol version, always PROTOCOL_VERSION. */
  v: typeof PROTOCOL_VERSION;
  type: T;
  /** Per-sender, per-connection sequence number, starting at 0 and increasing by 1. */
  seq: number;
  /** Sender's wall clock when the frame was built (ms since epoch). */
  ts: number;
  body: BodyByType[T];
}

/** Any frame: narrow with `switch (frame.type)`. */
export type Frame = { [T in MessageType]: Envelope<T> }[MessageType];

export type HelloFrame = Envelope<'hello'>;
export type WelcomeFrame = Envelope<'welcome'>;
export type WeightsFrame = Envelope<'weights'>;
export type PlacementFrame = Envelope<'placement'>;
export type ExperienceFrame = Envelope<'experience'>;
export type TelemetryFrame = Envelope<'telemetry'>;
export type ScaleFrame = Envelope<'scale'>;
export type AckFrame = Envelope<'ack'>;
export type ErrorFrame = Envelope<'error'>;
export type VerdictsFrame = Envelope<'verdicts'>;

/** Build a frame; `ts` defaults to now. */
export function makeFrame<T extends MessageType>(type: T, seq: number, body: BodyByType[T], ts: number = Date.now()): Envelope<T> {
  return { v: PROTOCOL_VERSION, type, seq, ts, body };
}

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

/** Stable codes of the codec; each is documented in docs/protocol.md, "Error codes". */
export const PROTOCOL_ERROR_CODES = [
  'KAIS_ERR_MALFORMED',
  'KAIS_ERR_OVERSIZED',
  'KAIS_ERR_VERSION',
  'KAIS_ERR_UNKNOWN_TYPE',
  'KAIS_ERR_BAD_FIELD',
  'KAIS_ERR_CHECKSUM',
] as const;

export type ProtocolErrorCode = (typeof PROTOCOL_ERROR_CODES)[number];

/** A refused frame or weights buffer (ws `Receiver.createError`): a stable code and one line. */
export class ProtocolError extends KaisError {
  declare readonly code: ProtocolErrorCode;

  constructor(
    code: ProtocolErrorCode,
    message: string,
    /** `seq` of the offending frame when it could be read, else `null`. */
    readonly seq: number | null = null,
    /** Path of the offending field (`body.transitions[3].mask`) for KAIS_ERR_BAD_FIELD. */
    readonly field: string | null = null,
  ) {
    super(code, message);
    this.name = 'ProtocolError';
  }
}

/** The `error` frame answering a refused frame. */
export function errorFrameFor(error: ProtocolError, seq: number, ts: number = Date.now()): ErrorFrame {
  const message = error.message.length > 1024 ? `${error.message.slice(0, 1021)}...` : error.message;
  return makeFrame('error', seq, { code: error.code, message, of: error.seq }, ts);
}

// ---------------------------------------------------------------------------------------------
// Placement helpers
// ---------------------------------------------------------------------------------------------

/** d[w][n] (domain form) -> placement body. Throws TypeError on a ragged or negative matrix. */
export function placementBody(version: number, frame: number, d: Placement): PlacementBody {
  const numServices = d.length;
  const numNodes = numServices > 0 ? d[0].length : 0;
  const replicas = new Int32Array(numServices * numNodes);
  for (let w = 0; w < numServices; w++) {
    if (d[w].length !== numNodes) {
      throw new TypeError(`placement row ${w} has ${d[w].length} nodes, expected ${numNodes}`);
    }
    for (let n = 0; n < numNodes; n++) {
      const k = d[w][n];
      if (!Number.isInteger(k) || k < 0 || k > 0x7fffffff) {
        throw new TypeError(`placement d[${w}][${n}] must be a non-negative integer, got ${k}`);
      }
      replicas[w * numNodes + n] = k;
    }
  }
  return { version, frame, numServices, numNodes, replicas };
}

/** Placement body -> d[w][n] (domain form). */
export function placementMatrix(body: PlacementBody): Placement {
  const d: Placement = [];
  for (let w = 0; w < body.numServices; w++) {
    d.push(Array.from(body.replicas.subarray(w * body.numNodes, (w + 1) * body.numNodes)));
  }
  return d;
}
