/**
 * The orchestrator's door for learning input: every `experience` and `telemetry` frame of a
 * welcomed session is checked here (through the hub's `inspect` hook) before anything is stored
 * or learned from. The codec has already checked the frame's structure (types, finiteness as
 * float64, the mask against the action, the session's own eAP); the intake checks it against the
 * scenario and against the session's budget:
 *
 * - shapes: `obs` has the scenario's observation length, `mask` one entry per target, `service`
 *   and telemetry `node` ids exist, at most `maxTransitionsPerFrame` transitions and
 *   `numTargets` samples per frame;
 * - ranges: `reward` in [REWARD_MIN, REWARD_MAX] (the agent's reward is 1 in time, else 0),
 *   `logProb` and `latencyMs` finite as float32 and within bounds, every observation feature
 *   within +-MAX_FEATURE, telemetry numbers finite as float32 (1e300 is a finite double but
 *   Infinity once a learner packs it into a Float32Array), `weightVersion` not above the
 *   version the orchestrator has published;
 * - rate: per session, token buckets on bytes per second (checked before the frame is decoded,
 *   so a flood costs refusals, not decodes), frames per second and transitions per second (burst =
 *   2 s of the rate); a frame over its budget is refused with KAIS_ERR_RATE and not stored.
 *
 * A frame of a welcomed session that the codec or the hub refused before the intake saw it (a NaN
 * or infinite reward or feature is not a finite number: the codec's KAIS_ERR_BAD_FIELD; another
 * eAP's experience: the hub's KAIS_ERR_STATE) reaches the intake through `refusedUpstream` and is
 * counted and reported the same way (kind `invalid-frame`), so a poisoned agent is named
 * whichever layer caught it (issue 17 item 5).
 *
 * A refused frame gets an `error` reply (the hub sends it) and becomes an event naming the session
 * and the eAP (at most one per kind and session every `eventIntervalMs`, with the count of the
 * ones folded into it). A session with `quarantineAfter` invalid frames within `violationWindowMs`
 * is quarantined: closed, and its eAP's hellos refused for the hub's `quarantineMs`.
 */
import type { AgentFrame, InspectVerdict, SessionInfo } from './hub';
import type { ExperienceBody, TelemetryBody } from '../shared/protocol/envelope';
import { TokenBucket } from '../shared/token-bucket';
import { observationDim } from '../shared/spaces';
import { topologyOf, type Scenario } from '../shared/scenario';

/** Known bounds of the agent's reward (agent/dispatcher.ts: 1 if the device got its answer in time, else 0). */
export const REWARD_MIN = 0;
export const REWARD_MAX = 1;
/** Largest magnitude of an observation feature accepted (features are normalised; shared/spaces.ts). */
export const MAX_FEATURE = 1e6;

/** Refusal codes of the intake (docs/protocol.md, "Error codes"). */
export const INTAKE_ERROR_CODES = {
  /** Well-formed, but not within the scenario's shapes or ranges. */
  invalid: 'KAIS_ERR_INVALID',
  /** Over the session's rate budget. */
  rate: 'KAIS_ERR_RATE',
} as const;

export interface IntakeOptions {
  scenario: Scenario;
  /** Latest published weight version (a transition may not claim a newer one). */
  weightVersion: () => number | null;
  /** Transitions per second per session (burst: 2 s worth). @defaultValue 2000 */
  maxTransitionsPerS?: number;
  /** Frames (experience, telemetry, scale, error) per second per session (burst: 2 s worth). @defaultValue 200 */
  maxFramesPerS?: number;
  /** Message bytes per second per session, before decoding (burst: 2 s worth; a message larger than that never passes). @defaultValue 16 MiB */
  maxBytesPerS?: number;
  /** Transitions in one experience frame. @defaultValue 1024 */
  maxTransitionsPerFrame?: number;
  /** Invalid frames within `violationWindowMs` that quarantine a session. @defaultValue 10 */
  quarantineAfter?: number;
  /** @defaultValue 60000 */
  violationWindowMs?: number;
  /** Shortest interval between two events of one kind and session, ms. @defaultValue 5000 */
  eventIntervalMs?: number;
  /** Receives the events (stored and logged by the orchestrator). */
  onEvent?: (e: IntakeEvent) => void;
  /** Clock (ms). @defaultValue performance.now */
  now?: () => number;
}

export interface IntakeEvent {
  kind: 'invalid-experience' | 'invalid-telemetry' | 'invalid-frame' | 'rate-limit';
  eap: number;
  session: string;
  message: string;
}

export interface IntakeStats {
  accepted: number;
  invalid: number;
  rateLimited: number;
  quarantined: number;
}

interface SessionState {
  bytes: TokenBucket;
  frames: TokenBucket;
  transitions: TokenBucket;
  /** Times (ms) of recent invalid frames. */
  violations: number[];
  /** kind -> last event time and events folded since. */
  lastEvent: Map<string, { at: number; folded: number }>;
}

const f32 = Math.fround;
const finite32 = (x: number) => Number.isFinite(f32(x));

export class Intake {
  readonly stats: IntakeStats = { accepted: 0, invalid: 0, rateLimited: 0, quarantined: 0 };
  private readonly o: Required<Omit<IntakeOptions, 'onEvent' | 'now'>> & Pick<IntakeOptions, 'onEvent'> & { now: () => number };
  private readonly obsDim: number;
  private readonly numTargets: number;
  private readonly numServices: number;
  private readonly sessions = new Map<string, SessionState>();

  constructor(options: IntakeOptions) {
    this.o = {
      maxTransitionsPerS: 2000,
      maxFramesPerS: 200,
      maxBytesPerS: 16 * 1048576,
      maxTransitionsPerFrame: 1024,
      quarantineAfter: 10,
      violationWindowMs: 60_000,
      eventIntervalMs: 5000,
      now: () => performance.now(),
      ...Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)),
    } as Intake['o'];
    for (const k of [
      'maxTransitionsPerS',
      'maxFramesPerS',
      'maxBytesPerS',
      'maxTransitionsPerFrame',
      'quarantineAfter',
      'violationWindowMs',
      'eventIntervalMs',
    ] as const) {
      if (!(Number.isFinite(this.o[k]) && this.o[k] > 0))
        throw new TypeError(`Intake: options.${k} must be a positive number, got ${this.o[k]}`);
    }
    const topo = topologyOf(options.scenario);
    this.numTargets = topo.numNodes + 1;
    this.numServices = topo.numServices;
    this.obsDim = observationDim({ numServices: topo.numServices, numTargets: this.numTargets, numEaps: topo.numEaps });
  }

  /** The hub's `admitBytes` hook (before decoding): null lets the message be decoded. */
  readonly admitBytes = (session: SessionInfo, bytes: number): InspectVerdict | null => {
    const now = this.o.now();
    const st = this.state(session.sessionId, now);
    if (st.bytes.take(bytes, now)) return null;
    return this.rateLimited(session, st, now, `over ${(this.o.maxBytesPerS / 1048576).toFixed(1)} MiB/s`);
  };

  /** The hub's `inspect` hook: null accepts the frame. */
  readonly inspect = (session: SessionInfo, frame: AgentFrame): InspectVerdict | null => {
    const now = this.o.now();
    const st = this.state(session.sessionId, now);
    if (!st.frames.take(1, now)) return this.rateLimited(session, st, now, `over ${this.o.maxFramesPerS} frames/s`);
    let problem: string | null = null;
    if (frame.type === 'experience') {
      problem = this.checkExperience(frame.body);
      if (problem === null && !st.transitions.take(frame.body.transitions.length, now)) {
        return this.rateLimited(session, st, now, `over ${this.o.maxTransitionsPerS} transitions/s`);
      }
    } else if (frame.type === 'telemetry') {
      problem = this.checkTelemetry(frame.body);
    }
    if (problem === null) {
      this.stats.accepted++;
      return null;
    }
    this.stats.invalid++;
    st.violations.push(now);
    while (st.violations.length > 0 && st.violations[0] < now - this.o.violationWindowMs) st.violations.shift();
    const kind = frame.type === 'experience' ? 'invalid-experience' : 'invalid-telemetry';
    const quarantine = st.violations.length >= this.o.quarantineAfter;
    this.event(session, st, now, kind, `${frame.type} refused: ${problem}`);
    if (quarantine) {
      // the hub closes the session and reports the quarantine (its `denied` event)
      this.stats.quarantined++;
      st.violations.length = 0;
    }
    return {
      code: INTAKE_ERROR_CODES.invalid,
      message: quarantine
        ? `${frame.type} refused: ${problem}; ${this.o.quarantineAfter} invalid frames within ${this.o.violationWindowMs} ms`
        : `${frame.type} refused: ${problem}`,
      quarantine,
    };
  };

  /**
   * The hub's `refused` event: a welcomed session's frame refused by the codec or the hub itself
   * (the intake's own refusals, and the hello-time ones the hub reports as `denied`, are skipped).
   */
  refusedUpstream(session: SessionInfo | null, error: { code: string; message: string }): void {
    if (session === null) return;
    if ((Object.values(INTAKE_ERROR_CODES) as string[]).includes(error.code)) return;
    if (['KAIS_ERR_AUTH', 'KAIS_ERR_DUPLICATE', 'KAIS_ERR_QUARANTINED'].includes(error.code)) return;
    const now = this.o.now();
    const st = this.state(session.sessionId, now);
    this.stats.invalid++;
    this.event(session, st, now, 'invalid-frame', `frame refused (${error.code}): ${error.message}`);
  }

  /** Forgets a closed session's budget. */
  sessionClosed(sessionId: string): void {
    this.sessions.delete(sessionId);
  }

  /** What is wrong with an experience batch for this scenario, or null. */
  checkExperience(b: ExperienceBody): string | null {
    if (b.transitions.length > this.o.maxTransitionsPerFrame)
      return `${b.transitions.length} transitions in one frame, at most ${this.o.maxTransitionsPerFrame}`;
    const published = this.o.weightVersion();
    for (let k = 0; k < b.transitions.length; k++) {
      const t = b.transitions[k];
      const at = `transitions[${k}]`;
      if (t.obs.length !== this.obsDim) return `${at}.obs has ${t.obs.length} features, the scenario's observation has ${this.obsDim}`;
      if (t.mask.length !== this.numTargets) return `${at}.mask has ${t.mask.length} targets, the scenario has ${this.numTargets}`;
      if (t.service >= this.numServices) return `${at}.service ${t.service} is not a service of the scenario (0..${this.numServices - 1})`;
      if (!(t.reward >= REWARD_MIN && t.reward <= REWARD_MAX)) return `${at}.reward ${t.reward} is outside [${REWARD_MIN}, ${REWARD_MAX}]`;
      if (!finite32(t.logProb) || t.logProb < -1000)
        return `${at}.logProb ${t.logProb} is not a log-probability (finite in float32, >= -1000)`;
      if (t.latencyMs !== null && (!finite32(t.latencyMs) || t.latencyMs > 86_400_000))
        return `${at}.latencyMs ${t.latencyMs} is out of range`;
      if (t.weightVersion !== null && (published === null || t.weightVersion > published)) {
        return `${at}.weightVersion ${t.weightVersion} was never published (latest ${published ?? 'none'})`;
      }
      for (let i = 0; i < t.obs.length; i++) {
        const x = t.obs[i];
        if (!(x >= -MAX_FEATURE && x <= MAX_FEATURE)) return `${at}.obs[${i}] = ${x} is out of range (|x| <= ${MAX_FEATURE})`;
      }
    }
    return null;
  }

  /** What is wrong with a telemetry frame for this scenario, or null. */
  checkTelemetry(b: TelemetryBody): string | null {
    if (b.samples.length > this.numTargets) return `${b.samples.length} samples, the scenario has ${this.numTargets} targets`;
    for (let k = 0; k < b.samples.length; k++) {
      const s = b.samples[k];
      if (s.node >= this.numTargets) return `samples[${k}].node ${s.node} is not a target of the scenario`;
      for (const key of ['ts', 'cpu', 'mem', 'disk', 'upBwMbps', 'requests', 'succeeded', 'inDeadline', 'latencyMsSum'] as const) {
        if (!finite32(s[key])) return `samples[${k}].${key} ${s[key]} is not finite as float32`;
      }
      if (s.requests > 1e9 || s.succeeded > 1e9) return `samples[${k}] counts ${s.requests} requests, out of range`;
    }
    const l = b.load;
    if (l) {
      const W = this.o.scenario.services.length;
      if (l.numServices !== W) return `load.numServices ${l.numServices}, the scenario has ${W} services`;
      const last = l.targets.length > 0 ? l.targets[l.targets.length - 1] : -1;
      if (last >= this.numTargets) return `load.targets holds ${last}, not a target of the scenario`;
      for (const key of ['arrivals', 'workCoreS', 'outstanding', 'busy', 'waiting'] as const) {
        for (let i = 0; i < l[key].length; i++) if (l[key][i] > 1e9) return `load.${key}[${i}] = ${l[key][i]} is out of range`;
      }
    }
    for (let k = 0; k < (b.windows?.length ?? 0); k++) {
      const w = b.windows![k];
      if (w.node >= this.numTargets - 1) return `windows[${k}].node ${w.node} is not an edge node of the scenario`;
    }
    return null;
  }

  private state(sessionId: string, now: number): SessionState {
    let st = this.sessions.get(sessionId);
    if (!st) {
      st = {
        bytes: new TokenBucket(this.o.maxBytesPerS, 2 * this.o.maxBytesPerS, now),
        frames: new TokenBucket(this.o.maxFramesPerS, 2 * this.o.maxFramesPerS, now),
        transitions: new TokenBucket(
          this.o.maxTransitionsPerS,
          Math.max(2 * this.o.maxTransitionsPerS, this.o.maxTransitionsPerFrame),
          now,
        ),
        violations: [],
        lastEvent: new Map(),
      };
      this.sessions.set(sessionId, st);
    }
    return st;
  }

  private rateLimited(session: SessionInfo, st: SessionState, now: number, why: string): InspectVerdict {
    this.stats.rateLimited++;
    this.event(session, st, now, 'rate-limit', `frames refused: ${why}`);
    return { code: INTAKE_ERROR_CODES.rate, message: `rate limit: ${why}; frame dropped` };
  }

  /** At most one event per kind and session per eventIntervalMs; the ones in between are counted into the next. */
  private event(session: SessionInfo, st: SessionState, now: number, kind: IntakeEvent['kind'], message: string): void {
    const last = st.lastEvent.get(kind);
    if (last && now - last.at < this.o.eventIntervalMs) {
      last.folded++;
      return;
    }
    const folded = last?.folded ?? 0;
    st.lastEvent.set(kind, { at: now, folded: 0 });
    this.o.onEvent?.({
      kind,
      eap: session.eapId,
      session: session.sessionId,
      message: folded > 0 ? `${message} (and ${folded} more since the last event of this kind)` : message,
    });
  }
}
