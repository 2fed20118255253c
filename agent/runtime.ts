/**
 * The agent's protocol state machine, independent of the transport: `AgentRuntime(send, onFrame)`
 * gets its bytes from `agent/link.ts` (WebSocket) in production and from a memory link
 * (`shared/protocol/memory-link.ts`) in training and tests.
 *
 * It decodes every inbound frame with the codec. A bad frame, or a frame an orchestrator never
 * sends (`hello`, `experience`, `telemetry`), is answered with an `error` frame and dropped. A
 * `weights` or `placement` frame whose version is not above the one held is stale: counted and
 * ignored. A newer one is handed to the `onWeights` / `onPlacement` hook (where the actor swaps
 * its weights and the dispatcher its placement table); if the hook throws (weights of the wrong
 * shape for this actor, a placement for another cluster) the frame is refused with
 * KAIS_ERR_REJECTED and nothing changes. Otherwise the runtime holds the new version and acks it.
 *
 * Epochs: versions are numbered within the orchestrator's store epoch (`welcome.epoch`, and the
 * `epoch` of each `weights` / `placement`). A frame of another epoch than the one held (a lost or
 * replaced orchestrator database) is applied whatever its number, so an agent never gets stuck
 * on a version the orchestrator no longer has; a frame of an epoch other than the current
 * `welcome`'s is stale. Held versions above what the orchestrator says is current in the same
 * epoch cannot be its own (a planted or stale cache): the next frame of that kind is applied.
 * The `hello` reports the held epoch and the versions of that epoch, and this process's `instance`.
 *
 * `welcome` starts a new connection: the link sent `hello` as seq 0, so the runtime's next seq
 * is 1. `helloBody()` is called once per connection, right before its `hello` goes out, so it
 * opens the door for that connection's one `welcome`; a second `welcome` before the next
 * `helloBody()` (the same connection) is refused with KAIS_ERR_STATE and does not restart the seq.
 * (The first `welcome` a runtime ever sees is accepted even without a `helloBody()` call.)
 */
import type { EapId } from '../shared/domain';
import { Codec } from '../shared/protocol/codec';
import {
  AGENT_FEATURES,
  errorFrameFor,
  makeFrame,
  type BodyByType,
  type ErrorBody,
  type Frame,
  type HelloBody,
  type PlacementBody,
  type ScaleBody,
  type VerdictsBody,
  type WeightsBody,
  type WelcomeBody,
} from '../shared/protocol/envelope';
import { verifyWeights } from '../shared/protocol/weights';
import { TypedEmitter } from '../shared/events';
import { TokenBucket } from '../shared/token-bucket';

/** Refusals of the runtime that are not about a frame's encoding. */
export const RUNTIME_ERROR_CODES = {
  /** A frame type the orchestrator never sends. */
  state: 'KAIS_ERR_STATE',
  /** A valid frame the agent cannot apply (the hook threw). */
  rejected: 'KAIS_ERR_REJECTED',
} as const;

export interface AgentRuntimeOptions {
  eapId: EapId;
  /** Weights held at start (from the disk cache), `null` if none. @defaultValue null */
  weights?: WeightsBody | null;
  /** Placement held at start, `null` if none. @defaultValue null */
  placement?: PlacementBody | null;
  /** Id of this agent process, sent in every `hello` (the hub lets only it replace its own live session). @defaultValue '' (none) */
  instance?: string;
  /** Applies new weights (version above the held one); throw to refuse them. */
  onWeights?: (body: WeightsBody) => void;
  /** Applies a new placement; throw to refuse it. */
  onPlacement?: (body: PlacementBody) => void;
  /** Handles a `scale` request; throw to refuse it. */
  onScale?: (body: ScaleBody) => void;
  /** Takes the learned detector's verdicts on windows this agent sent (not acknowledged). */
  onVerdicts?: (body: VerdictsBody) => void;
  /** Codec to decode with (limits). @defaultValue new Codec() */
  codec?: Codec;
}

export interface AgentRuntimeStats {
  weightsApplied: number;
  placementsApplied: number;
  /** weights/placement frames not newer than the version held. */
  stale: number;
  /** Inbound frames refused (answered with an `error`, unless past the reply budget: refusedUnanswered). */
  refused: number;
  /** Of `refused`, those past the reply budget: counted, neither answered nor reported (a peer flooding garbage). */
  refusedUnanswered: number;
  /** `error` frames received from the orchestrator. */
  errorsReceived: number;
  /** Learned-detector verdicts received. */
  verdicts: number;
}

export interface AgentRuntimeEvents {
  welcome: (body: WelcomeBody) => void;
  /**
   * The orchestrator's epoch is not the one of the held versions (`from` null: none known), or it
   * says a held version is above its current one: the next frames of that kind are applied whatever their numbers.
   * `weights`: the held weights are among the distrusted (what they decided names versions the
   * orchestrator never published); false when only the held placement is.
   */
  epoch: (change: { from: string | null; to: string; reason: string; weights: boolean }) => void;
  weights: (body: WeightsBody) => void;
  placement: (body: PlacementBody) => void;
  /**
   * An inbound frame was refused with this error (already sent to the peer); `folded`: refusals
   * since the last report that were past the reply budget, neither answered nor reported;
   * `quiet`: refusals of frames a hook refused since the last report, answered but past the
   * report budget (a peer sending such frames without end flooded the log, 130,000 lines in 8 s).
   */
  refused: (error: ErrorBody, folded: number, quiet: number) => void;
  /** The orchestrator sent an `error` (e.g. it refused one of our frames). */
  peerError: (error: ErrorBody) => void;
}

export class AgentRuntime extends TypedEmitter<AgentRuntimeEvents> {
  readonly eapId: EapId;
  readonly stats: AgentRuntimeStats = {
    weightsApplied: 0,
    placementsApplied: 0,
    stale: 0,
    refused: 0,
    refusedUnanswered: 0,
    errorsReceived: 0,
    verdicts: 0,
  };
  /**
   * Error replies (and 'refused' reports) left in the budget: REPLY_BURST at once, REPLY_PER_S a
   * second after. A peer that sends garbage frames and stops reading grew the agent's socket buffer
   * and its log by one reply and one line per frame.
   */
  private readonly replies = new TokenBucket(REPLY_PER_S, REPLY_BURST, performance.now());
  private folded = 0;
  /** Reports of hook refusals (always answered): their own budget, so that a garbage flood never hides one. */
  private readonly hookReports = new TokenBucket(REPLY_PER_S, REPLY_BURST, performance.now());
  private quiet = 0;
  private readonly codec: Codec;
  private readonly unsubscribe: () => void;
  private held: { weights: WeightsBody | null; placement: PlacementBody | null };
  private seq = 0;
  private lastWelcome: WelcomeBody | null = null;
  /** Kinds whose next frame is applied whatever its version (new epoch, or a held version the orchestrator never issued). */
  private readonly resync = { weights: false, placement: false };
  /** True from `helloBody()` (a new connection) until that connection's `welcome`. */
  private expectingWelcome = true;

  constructor(
    private readonly sendBytes: (bytes: Uint8Array) => boolean,
    onFrame: (cb: (bytes: Uint8Array) => void) => () => void,
    private readonly options: AgentRuntimeOptions,
  ) {
    super();
    if (!Number.isSafeInteger(options.eapId) || options.eapId < 0) {
      throw new TypeError(`AgentRuntime: options.eapId must be a non-negative integer, got ${options.eapId}`);
    }
    if (options.weights) {
      const problem = verifyWeights(options.weights);
      if (problem) throw new TypeError(`AgentRuntime: options.weights: ${problem.message}`);
    }
    this.eapId = options.eapId;
    this.codec = options.codec ?? new Codec();
    this.held = { weights: options.weights ?? null, placement: options.placement ?? null };
    this.unsubscribe = onFrame((bytes) => this.receive(bytes));
  }

  get weights(): WeightsBody | null {
    return this.held.weights;
  }

  get placement(): PlacementBody | null {
    return this.held.placement;
  }

  get weightVersion(): number | null {
    return this.held.weights?.version ?? null;
  }

  get placementVersion(): number | null {
    return this.held.placement?.version ?? null;
  }

  /** The orchestrator's last `welcome`, null before the first. */
  get welcome(): WelcomeBody | null {
    return this.lastWelcome;
  }

  /** Epoch of the held placement, else of the held weights (null: none, or held before epochs). */
  get epoch(): string | null {
    return this.held.placement?.epoch ?? this.held.weights?.epoch ?? null;
  }

  /** The `hello` body for a new connection (what `AgentLink`'s `hello` option returns). */
  helloBody(token: string, agentVersion: string): HelloBody {
    this.expectingWelcome = true;
    const epoch = this.epoch;
    // a version is reported only with the epoch it belongs to
    const inEpoch = (b: WeightsBody | PlacementBody | null) => (b !== null && (b.epoch ?? null) === epoch ? b.version : null);
    return {
      eapId: this.eapId,
      token,
      agentVersion,
      weightVersion: inEpoch(this.held.weights),
      placementVersion: inEpoch(this.held.placement),
      epoch,
      ...(this.options.instance ? { instance: this.options.instance } : {}),
      features: [...AGENT_FEATURES],
    };
  }

  /** Encodes and sends one frame with the next seq; false if the transport dropped it. */
  sendFrame<T extends 'experience' | 'telemetry' | 'scale' | 'ack' | 'error'>(type: T, body: BodyByType[T]): boolean {
    return this.sendBytes(this.codec.encode(makeFrame(type, this.seq++, body) as Frame));
  }

  /** Stops listening to the transport. */
  dispose(): void {
    this.unsubscribe();
    this.removeAllListeners();
  }

  private receive(bytes: Uint8Array): void {
    const r = this.codec.decode(bytes);
    if (!r.ok) {
      this.refuse(errorFrameFor(r.error, 0).body);
      return;
    }
    const frame = r.frame;
    switch (frame.type) {
      case 'welcome':
        if (!this.expectingWelcome) {
          this.refuse({ code: RUNTIME_ERROR_CODES.state, message: 'welcome was already received on this connection', of: frame.seq });
          return;
        }
        this.expectingWelcome = false;
        this.seq = 1;
        this.lastWelcome = frame.body;
        this.checkEpoch(frame.body);
        this.emit('welcome', frame.body);
        return;
      case 'weights':
        this.apply('weights', frame.seq, frame.body, this.options.onWeights);
        return;
      case 'placement':
        this.apply('placement', frame.seq, frame.body, this.options.onPlacement);
        return;
      case 'scale':
        try {
          this.options.onScale?.(frame.body);
        } catch (e) {
          this.refuse({ code: RUNTIME_ERROR_CODES.rejected, message: `scale refused: ${messageOf(e)}`, of: frame.seq }, false);
          return;
        }
        this.sendFrame('ack', { of: frame.seq });
        return;
      case 'verdicts':
        this.stats.verdicts += frame.body.verdicts.length;
        try {
          this.options.onVerdicts?.(frame.body);
        } catch (e) {
          this.refuse({ code: RUNTIME_ERROR_CODES.rejected, message: `verdicts refused: ${messageOf(e)}`, of: frame.seq }, false);
        }
        return;
      case 'error':
        this.stats.errorsReceived++;
        this.emit('peerError', frame.body); // never answered: two peers must not loop on errors
        return;
      case 'ack':
        return;
      default:
        this.refuse({ code: RUNTIME_ERROR_CODES.state, message: `${frame.type} frames are not sent to agents`, of: frame.seq });
    }
  }

  private apply<K extends 'weights' | 'placement'>(
    kind: K,
    seq: number,
    body: K extends 'weights' ? WeightsBody : PlacementBody,
    hook: ((body: K extends 'weights' ? WeightsBody : PlacementBody) => void) | undefined,
  ): void {
    const held = this.held[kind];
    const current = this.lastWelcome?.epoch;
    if (body.epoch !== undefined && current !== undefined && body.epoch !== current) {
      this.stats.stale++; // a version of an epoch the orchestrator no longer serves
      return;
    }
    const otherEpoch = held !== null && body.epoch !== undefined && body.epoch !== (held.epoch ?? null);
    if (held !== null && !otherEpoch && !this.resync[kind] && body.version <= held.version) {
      this.stats.stale++;
      return;
    }
    try {
      hook?.(body);
    } catch (e) {
      this.refuse({ code: RUNTIME_ERROR_CODES.rejected, message: `${kind} ${body.version} refused: ${messageOf(e)}`, of: seq }, false);
      return;
    }
    this.resync[kind] = false;
    if (kind === 'weights') {
      this.held.weights = body as WeightsBody;
      this.stats.weightsApplied++;
      this.emit('weights', body as WeightsBody);
    } else {
      this.held.placement = body as PlacementBody;
      this.stats.placementsApplied++;
      this.emit('placement', body as PlacementBody);
    }
    this.sendFrame('ack', { of: seq });
  }

  /** On `welcome`: held versions of another epoch, or above the orchestrator's current ones, are not trusted. */
  private checkEpoch(w: WelcomeBody): void {
    if (w.epoch === undefined) return;
    const from = this.epoch;
    if (from !== w.epoch && (this.held.weights !== null || this.held.placement !== null)) {
      this.resync.weights = this.resync.placement = true;
      this.emit('epoch', {
        from,
        to: w.epoch,
        reason: from === null ? 'held versions carry no epoch' : `the orchestrator's store is a new one (epoch ${w.epoch}, held ${from})`,
        weights: true,
      });
      return;
    }
    const above = (b: WeightsBody | PlacementBody | null, current: number | null) =>
      b !== null && (b.epoch ?? null) === w.epoch && (current === null || b.version > current);
    const reasons: string[] = [];
    if (above(this.held.weights, w.weightVersion)) {
      this.resync.weights = true;
      reasons.push(`held weights v${this.held.weights!.version} above the orchestrator's ${w.weightVersion ?? 'none'}`);
    }
    if (above(this.held.placement, w.placementVersion)) {
      this.resync.placement = true;
      reasons.push(`held placement v${this.held.placement!.version} above the orchestrator's ${w.placementVersion ?? 'none'}`);
    }
    if (reasons.length > 0)
      this.emit('epoch', {
        from,
        to: w.epoch,
        reason: `${reasons.join(', ')} in the same epoch: not trusted`,
        weights: this.resync.weights,
      });
  }

  /**
   * Answers a refused frame with an error and reports it. `budgeted` (frames that did not decode or
   * came out of turn, which a peer can send without end): within the reply budget only. A frame a
   * hook refused (weights that do not fit, a bad placement) is always answered, and reported within
   * a budget of its own (the ones past it are counted into the next report).
   */
  private refuse(error: ErrorBody, budgeted = true): void {
    this.stats.refused++;
    if (budgeted && !this.replies.take(1, performance.now())) {
      this.stats.refusedUnanswered++;
      this.folded++;
      return;
    }
    const message = error.message.length > 1024 ? `${error.message.slice(0, 1021)}...` : error.message;
    this.sendFrame('error', { ...error, message });
    if (!budgeted && !this.hookReports.take(1, performance.now())) {
      this.quiet++;
      return;
    }
    const { folded, quiet } = this;
    this.folded = 0;
    this.quiet = 0;
    this.emit('refused', error, folded, quiet);
  }
}

/** Error replies at most at once, and a second after that (AgentRuntime.refuse). */
const REPLY_BURST = 20;
const REPLY_PER_S = 5;

function messageOf(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
