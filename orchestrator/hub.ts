/**
 * The orchestrator's WebSocket hub: one session per eAP, frames only (to the hub, weights are a
 * `WeightsBody` of Float32Arrays; it imports `shared/protocol/` and `ws`, never tfjs).
 *
 * Session life: connect -> `hello` (token checked; wrong token: `error` KAIS_ERR_AUTH, close 4001)
 * -> `welcome`, then the current weights and placement if the agent's `hello` says it holds older
 * ones, or ones of another store epoch -> frames both ways -> close. No `hello` within
 * `helloTimeoutMs`: close 4008.
 *
 * Identity: a token binds to an eAP. With `agentTokens`, an eAP is admitted only with its own
 * token (the shared `token`, if any, admits only eAPs without one of their own); an eAP id outside
 * the scenario (`numEaps`) is refused. A session speaks only for its eAP (an `experience` or
 * `telemetry` naming another is refused). A second `hello` for an eAP whose session is live
 * replaces it only when it carries the same `instance` (the same agent process reconnecting over
 * a half-dead socket, close 4002); any other is refused with KAIS_ERR_DUPLICATE (close 4009) and
 * counted, and the live session goes on.
 *
 * Inspection: `inspect` (the orchestrator's intake, orchestrator/intake.ts) sees every frame of a
 * welcomed session before it is accepted; a verdict refuses the frame (its code and line in the
 * `error` reply), and a `quarantine` verdict also closes the session (4003) and refuses that
 * eAP's hellos for `quarantineMs` (KAIS_ERR_QUARANTINED).
 *
 * Every inbound message goes through `Codec.decode`. A bad one (undecodable, a type the agent may
 * not send, a second `hello`, an `experience` claiming another eAP) is answered with an `error`
 * frame and dropped: it never changes the hub's state and never throws out of a handler.
 *
 * Heartbeats: every `heartbeatMs` the hub pings each socket; one that has sent nothing (no
 * message, no pong) since the previous tick is terminated, so a dead peer is gone within two
 * intervals. A tick that fires late (the hub's own process stalled) terminates nobody: the pongs
 * may be unread (`HeartbeatClock`).
 *
 * Backpressure: a push (weights, placement) to a session whose `ws.bufferedAmount` is over
 * `maxBufferedBytes` is not queued; it is kept as the session's pending push of that kind,
 * replacing an older pending one (weights and placements are full states, so only the newest
 * matters), and sent once the socket has drained. A slow agent costs one pending reference, never
 * a growing queue, and never delays the others. A peer that does not even read its error replies
 * (buffer over 4 x the limit) is closed (1008).
 *
 * Fan-out: a pushed body (weights, placement) is encoded once per version and shared by every
 * session; each session's frame goes out as one WebSocket message in two fragments, its own
 * envelope head (`Codec.encodeHead`, with its seq) and the shared body bytes.
 */
import * as http from 'node:http';
import type { IncomingMessage } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { timingSafeEqual } from 'node:crypto';
import { WebSocket, WebSocketServer, type RawData } from 'ws';
import * as https from 'node:https';
import type { TlsPair } from '../shared/tls';
import { capConnectionsPerAddress, HTTP_SERVER_LIMITS, MAX_CONNECTIONS, MAX_CONNECTIONS_PER_ADDRESS } from '../shared/http-limits';
import type { EapId } from '../shared/domain';
import { Codec, DEFAULT_MAX_FRAME_BYTES } from '../shared/protocol/codec';
import {
  makeFrame,
  type AckFrame,
  type BodyByType,
  type ErrorBody,
  type ErrorFrame,
  type ExperienceFrame,
  type Frame,
  type HelloBody,
  type PlacementBody,
  type ScaleFrame,
  type TelemetryFrame,
  type WeightsBody,
} from '../shared/protocol/envelope';
import { verifyWeights } from '../shared/protocol/weights';
import { HeartbeatClock } from '../shared/protocol/heartbeat';
import { TypedEmitter, type EventArgs } from '../shared/events';

/** Refusals of the hub that are not about a frame's encoding (docs/protocol.md, "Error codes"). */
export const HUB_ERROR_CODES = {
  /** `hello` with a wrong token; the socket is closed after the reply. */
  auth: 'KAIS_ERR_AUTH',
  /** A well-formed frame that is not allowed now: before `hello`, a second `hello`, an orchestrator-only type, another eAP's id. */
  state: 'KAIS_ERR_STATE',
  /** `hello` for an eAP whose session is live, from another agent instance; the socket is closed (4009). */
  duplicate: 'KAIS_ERR_DUPLICATE',
  /** `hello` for an eAP under quarantine (4003). */
  quarantined: 'KAIS_ERR_QUARANTINED',
} as const;

/** WebSocket close codes used by the hub (4000-4999 is the application range). */
export const HUB_CLOSE_CODES = {
  auth: 4001,
  replaced: 4002,
  quarantined: 4003,
  duplicate: 4009,
  helloTimeout: 4008,
  /** ws standard: try again later (too many sockets waiting for their hello, overall or from the address). */
  tryLater: 1013,
  /** ws standard: policy violation (the peer does not read what it is sent). */
  notReading: 1008,
  goingAway: 1001,
} as const;

export interface HubOptions {
  /** TCP port; 0 picks a free one (read it back from `hub.port`). @defaultValue 0 */
  port?: number;
  /** Interface to bind. @defaultValue '127.0.0.1' */
  host?: string;
  /** Certificate and key (PEM): agents connect with wss://; handshakes that fail are counted (stats.tlsFailures) and reported ('tlsError'). @defaultValue plain ws:// */
  tls?: TlsPair | null;
  /** Shared token every `hello` must carry; '' turns auth off. @defaultValue '' */
  token?: string;
  /** Per-eAP tokens, checked instead of `token` for the eAPs listed. @defaultValue {} */
  agentTokens?: Readonly<Record<number, string>>;
  /** Ping interval and the agent's required frame interval (sent in `welcome`), ms. @defaultValue 5000 */
  heartbeatMs?: number;
  /** Time a new socket has to send its `hello`, ms. @defaultValue 10000 */
  helloTimeoutMs?: number;
  /**
   * Bytes a socket may send before its `hello` is accepted (a hello is a few hundred); more and it
   * is cut. ws buffers a message's fragments up to maxFrameBytes, so without this an
   * unauthenticated peer made the hub hold 16 MiB per socket until the hello timeout. @defaultValue 64 KiB
   */
  maxPreHelloBytes?: number;
  /** Sockets waiting for their hello, in all (over it a new one is closed 1013). @defaultValue 1024 */
  maxPendingHellos?: number;
  /** Sockets waiting for their hello from one address (over it a new one is closed 1013). @defaultValue 64 */
  maxPendingHellosPerAddress?: number;
  /** TCP connections the port holds at once; one more is closed at once (shared/http-limits.ts). @defaultValue 4096 */
  maxConnections?: number;
  /** TCP connections one address holds at once on the port; one more is closed at once. @defaultValue 1200 */
  maxConnectionsPerAddress?: number;
  /** Socket buffer above which pushes to that session are coalesced, bytes. @defaultValue 4 MiB */
  maxBufferedBytes?: number;
  /** Largest inbound frame; larger messages close the socket (1009). @defaultValue 16 MiB */
  maxFrameBytes?: number;
  /** Current weights at startup (from the store), pushed to agents that hold older ones. @defaultValue null */
  weights?: WeightsBody | null;
  /** Current placement at startup (from the store). @defaultValue null */
  placement?: PlacementBody | null;
  /** eAP ids 0..numEaps-1 are admitted; others are refused at `hello`. @defaultValue no limit */
  numEaps?: number;
  /** The store epoch, sent in `welcome` (versions are numbered within it). @defaultValue none */
  epoch?: string;
  /** How the model acts, sent in `welcome` (`sample`: agents without an explicit --explore draw every decision). @defaultValue argmax */
  act?: 'argmax' | 'sample';
  /** Sees every frame of a welcomed session before it is accepted; a verdict refuses it. @defaultValue none */
  inspect?: (session: SessionInfo, frame: AgentFrame) => InspectVerdict | null;
  /** How long a quarantined eAP's hellos are refused, ms. @defaultValue 60000 */
  quarantineMs?: number;
  /**
   * Sees the size of every message of a welcomed session before it is decoded (a byte budget: a
   * frame over it costs a refusal, not a decode); a verdict refuses it. @defaultValue none
   */
  admitBytes?: (session: SessionInfo, bytes: number) => InspectVerdict | null;
}

/** Why the orchestrator refuses a frame; `quarantine` also closes the session and bars the eAP for a while. */
export interface InspectVerdict {
  code: string;
  message: string;
  quarantine?: boolean;
}

/** A `hello` that was not welcomed, or a session ended by the hub for what it did. */
export interface DenialInfo {
  kind: 'auth' | 'unknown-eap' | 'duplicate-hello' | 'quarantined-hello' | 'quarantine';
  eapId: EapId;
  /** The session concerned (the live one for a duplicate hello, the quarantined one), null if none. */
  sessionId: string | null;
  message: string;
  /** The peer's address (the socket's remote address), null if unknown. */
  remote: string | null;
}

/** What the hub tells the rest of the orchestrator about one welcomed session. */
export interface SessionInfo {
  sessionId: string;
  eapId: EapId;
  agentVersion: string;
  /** Weight version the agent holds: from its `hello`, then from its acks. */
  weightVersion: number | null;
  placementVersion: number | null;
  connectedMs: number;
  /** The agent process's `instance` from its hello ('' from older agents). */
  instance: string;
}

/** Frames an agent may send once welcomed, handed to the orchestrator as they are. */
export type AgentFrame = ExperienceFrame | TelemetryFrame | ScaleFrame | AckFrame | ErrorFrame;

export interface HubStats {
  /** Frames decoded and accepted (including `hello`). */
  accepted: number;
  /** Frames answered with an `error` and dropped. */
  refused: number;
  /** Pushes kept pending (or replacing a pending one) because the socket was over its buffer limit. */
  coalesced: number;
  /** Sockets terminated by the heartbeat. */
  deadPeers: number;
  /** Hellos refused for a wrong token or an unknown eAP. */
  authFailures: number;
  /** Hellos refused because the eAP already had a live session of another instance. */
  duplicateHellos: number;
  /** Sessions closed by a quarantine verdict, and hellos refused during a quarantine. */
  quarantines: number;
  quarantinedHellos: number;
  /** TLS handshakes that failed (a client that does not trust the certificate, plain ws:// on a wss:// port). */
  tlsFailures: number;
  /** Sockets closed at once (1013) because too many were waiting for their hello, in all or from their address. */
  pendingHelloRefused: number;
  /** Sockets cut because they sent more than maxPreHelloBytes before their hello. */
  preHelloCut: number;
}

export interface HubEvents {
  /** A `hello` was accepted and `welcome` sent. */
  session: (session: SessionInfo, hello: HelloBody) => void;
  /** A welcomed session ended. */
  sessionClosed: (session: SessionInfo, code: number, reason: string) => void;
  /** A valid frame from a welcomed agent (experience, telemetry, scale, ack, error). */
  frame: (session: SessionInfo, frame: AgentFrame) => void;
  /** An agent acknowledged applying a weights or placement version the hub pushed. */
  applied: (session: SessionInfo, kind: 'weights' | 'placement', version: number) => void;
  /** A frame was refused (`session` is null before `hello`). */
  refused: (session: SessionInfo | null, error: ErrorBody) => void;
  /** A hello was not welcomed, or a session was quarantined (for the orchestrator's events). */
  denied: (denial: DenialInfo) => void;
  /**
   * A pushed weights or placement version has been handed to the session's socket completely (the
   * ws send callback): the orchestrator's side of a fan-out is over for that agent.
   */
  flushed: (session: SessionInfo, kind: 'weights' | 'placement', version: number) => void;
  /** A TLS handshake on the wss:// port failed (the client does not trust the certificate, or spoke plain ws://). */
  tlsError: (failure: { remote: string | null; reason: string }) => void;
}

type PushKind = 'weights' | 'placement';

class Session {
  info: SessionInfo | null = null;
  /** Outbound sequence number of this connection. */
  seq = 0;
  /** Set by any inbound traffic, cleared by the heartbeat tick. */
  alive = true;
  /** No more frames are processed (auth refused, replaced, closing). */
  closing = false;
  readonly pending: { weights: WeightsBody | null; placement: PlacementBody | null } = { weights: null, placement: null };
  /** Outbound seq of a push -> what it carried, until acked (bounded). */
  readonly unacked = new Map<number, { kind: PushKind; version: number }>();
  helloTimer: NodeJS.Timeout | null = null;
  /** Counted among the sockets waiting for their hello (until the hello is accepted or the socket closes). */
  pendingHello = false;
  /** Stops counting the raw bytes before the hello. */
  stopCounting: (() => void) | null = null;

  constructor(
    readonly ws: WebSocket,
    /** The peer's address, null if unknown. */
    readonly remote: string | null,
  ) {}
}

const MAX_UNACKED = 64;

export class Hub extends TypedEmitter<HubEvents> {
  readonly host: string;
  readonly heartbeatMs: number;
  readonly helloTimeoutMs: number;
  readonly maxPreHelloBytes: number;
  readonly maxPendingHellos: number;
  readonly maxPendingHellosPerAddress: number;
  /** Sockets waiting for their hello, by address. */
  private readonly pendingHellos = new Map<string, number>();
  private pendingHellosTotal = 0;
  readonly maxBufferedBytes: number;
  readonly stats: HubStats = {
    accepted: 0,
    refused: 0,
    coalesced: 0,
    deadPeers: 0,
    authFailures: 0,
    tlsFailures: 0,
    duplicateHellos: 0,
    quarantines: 0,
    quarantinedHellos: 0,
    pendingHelloRefused: 0,
    preHelloCut: 0,
  };
  readonly epoch: string | null;
  readonly act: 'argmax' | 'sample';
  private readonly numEaps: number;
  private readonly inspect: HubOptions['inspect'] | null;
  private readonly admitBytes: HubOptions['admitBytes'] | null;
  private readonly quarantineMs: number;
  /** eAP -> time (Date.now ms) its quarantine ends. */
  private readonly quarantinedUntil = new Map<EapId, number>();

  private readonly token: string;
  private readonly agentTokens: Readonly<Record<number, string>>;
  private readonly codec: Codec;
  /** Outgoing frames are validated once per push, not once per session. */
  private readonly outCodec: Codec;
  private readonly sockets = new Set<Session>();
  /** Encoded push bodies (weights, placement), shared by every session's frame. */
  private readonly bodyBytes = new WeakMap<WeightsBody | PlacementBody, Buffer>();
  private readonly byEap = new Map<EapId, Session>();
  private weights: WeightsBody | null;
  /** A canary version (orchestrator/canary.ts): held by these eAPs only, until promoted or replaced. */
  private canary: { eaps: ReadonlySet<EapId>; body: WeightsBody } | null = null;
  private placement: PlacementBody | null;
  private sessionCounter = 0;
  private readonly startedMs = Date.now();
  private heartbeat: NodeJS.Timeout | null = null;
  private readonly heartbeatClock: HeartbeatClock;
  private closed = false;

  private constructor(
    private readonly wss: WebSocketServer,
    options: HubOptions,
    codec: Codec,
    /** The http(s) server under ws (with HTTP_SERVER_LIMITS). */
    private readonly server: http.Server | https.Server,
    private readonly scheme: 'ws' | 'wss',
  ) {
    super();
    this.host = options.host ?? '127.0.0.1';
    this.heartbeatMs = options.heartbeatMs ?? 5000;
    this.helloTimeoutMs = options.helloTimeoutMs ?? 10_000;
    this.maxPreHelloBytes = options.maxPreHelloBytes ?? 65_536;
    this.maxPendingHellos = options.maxPendingHellos ?? 1024;
    this.maxPendingHellosPerAddress = options.maxPendingHellosPerAddress ?? 64;
    this.maxBufferedBytes = options.maxBufferedBytes ?? 4 * 1024 * 1024;
    this.token = options.token ?? '';
    this.agentTokens = options.agentTokens ?? {};
    this.codec = codec;
    // Outgoing frames are bounded by what an agent accepts by default, not by the inbound limit.
    this.outCodec = new Codec({ maxFrameBytes: DEFAULT_MAX_FRAME_BYTES, validateOutgoing: false });
    this.weights = options.weights ?? null;
    this.placement = options.placement ?? null;
    this.epoch = options.epoch ?? null;
    this.act = options.act ?? 'argmax';
    this.numEaps = options.numEaps ?? Number.MAX_SAFE_INTEGER;
    this.inspect = options.inspect ?? null;
    this.admitBytes = options.admitBytes ?? null;
    this.quarantineMs = options.quarantineMs ?? 60_000;
    wss.on('connection', (ws, req) => this.accept(ws, req));
    this.heartbeatClock = new HeartbeatClock(this.heartbeatMs);
    this.heartbeat = setInterval(() => this.tick(), this.heartbeatMs);
    this.heartbeat.unref();
  }

  /** Starts a hub listening on `options.port` (0: a free port). Rejects if the port is taken. */
  static async listen(options: HubOptions = {}): Promise<Hub> {
    for (const key of [
      'heartbeatMs',
      'helloTimeoutMs',
      'maxBufferedBytes',
      'maxFrameBytes',
      'numEaps',
      'quarantineMs',
      'maxPreHelloBytes',
      'maxPendingHellos',
      'maxPendingHellosPerAddress',
      'maxConnections',
      'maxConnectionsPerAddress',
    ] as const) {
      const v = options[key];
      if (v !== undefined && (!Number.isSafeInteger(v) || v <= 0)) {
        throw new TypeError(`Hub: options.${key} must be a positive integer, got ${v}`);
      }
    }
    const port = options.port ?? 0;
    if (!Number.isSafeInteger(port) || port < 0 || port > 65535) {
      throw new TypeError(`Hub: options.port must be an integer in 0..65535, got ${port}`);
    }
    const codec = new Codec({ maxFrameBytes: options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES });
    if (options.weights) {
      const problem = verifyWeights(options.weights);
      if (problem) throw new TypeError(`Hub: options.weights: ${problem.message}`);
    }
    const common = {
      // Frames over the limit never reach the codec: ws closes the socket with 1009.
      maxPayload: codec.maxFrameBytes,
      perMessageDeflate: false,
      clientTracking: false,
    };
    const host = options.host ?? '127.0.0.1';
    // our own server under ws (ws:// and wss:// alike), for its time limits: a connection that has
    // not sent its upgrade request in 10 s is cut (shared/http-limits.ts)
    const server: http.Server | https.Server = options.tls
      ? https.createServer({ ...HTTP_SERVER_LIMITS, cert: options.tls.cert, key: options.tls.key, minVersion: 'TLSv1.2' })
      : http.createServer(HTTP_SERVER_LIMITS);
    // a plain request (no upgrade) is answered as ws's own server answers it
    server.on('request', (_req: http.IncomingMessage, res: http.ServerResponse) => {
      const body = http.STATUS_CODES[426]!;
      res.writeHead(426, { 'content-type': 'text/plain', 'content-length': Buffer.byteLength(body), connection: 'close' });
      res.end(body);
    });
    server.maxConnections = options.maxConnections ?? MAX_CONNECTIONS.hub;
    capConnectionsPerAddress(server, options.maxConnectionsPerAddress ?? MAX_CONNECTIONS_PER_ADDRESS.hub);
    const wss = new WebSocketServer({ ...common, server });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    // After listening, a server error must not crash the process; it is reported, not thrown.
    server.on('error', () => undefined);
    wss.on('error', () => undefined);
    const hub = new Hub(wss, options, codec, server, options.tls ? 'wss' : 'ws');
    server.on('tlsClientError', (e: Error & { code?: string }, socket: Socket) => {
      hub.stats.tlsFailures++;
      hub.emitSafe('tlsError', { remote: socket.remoteAddress ?? null, reason: e.code ?? e.message });
    });
    return hub;
  }

  /** The port the hub listens on (the real one when started with port 0). */
  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  get url(): string {
    return `${this.scheme}://${this.host}:${this.port}`;
  }

  get weightVersion(): number | null {
    return this.weights?.version ?? null;
  }

  /** The weights `eapId` should hold: the canary's for a canary eAP, else the current ones. */
  weightsFor(eapId: EapId): WeightsBody | null {
    return this.canary && this.canary.eaps.has(eapId) ? this.canary.body : this.weights;
  }

  /** The running canary's version and eAPs (null: none). */
  get canaryWeights(): { version: number; eaps: EapId[] } | null {
    return this.canary ? { version: this.canary.body.version, eaps: [...this.canary.eaps].sort((a, b) => a - b) } : null;
  }

  get placementVersion(): number | null {
    return this.placement?.version ?? null;
  }

  /** Welcomed sessions, by eAP id. */
  sessions(): SessionInfo[] {
    return [...this.byEap.values()].map((s) => ({ ...s.info! })).sort((a, b) => a.eapId - b.eapId);
  }

  /** Versions waiting for one eAP's socket to drain (coalesced pushes); null when nothing waits. */
  pendingPushes(eapId: EapId): { weights: number | null; placement: number | null } {
    const s = this.byEap.get(eapId);
    return { weights: s?.pending.weights?.version ?? null, placement: s?.pending.placement?.version ?? null };
  }

  /**
   * Makes `body` the current weights and pushes it to every welcomed session (coalesced for
   * sessions over their buffer limit). Throws TypeError for a body whose shapes do not fit its
   * tensors or a version that does not increase. Returns how many sessions got it now and how many will get it on drain.
   */
  broadcastWeights(body: WeightsBody): { sent: number; coalesced: number } {
    // structure only: the values and the checksum were checked where the body was made (learner,
    // packWeights) and are verified again by every agent's codec (shared/protocol/weights.ts)
    const problem = verifyWeights(body, { checksum: false, values: false });
    if (problem) throw new TypeError(`Hub.broadcastWeights: ${problem.message}`);
    const above = Math.max(this.weights?.version ?? -Infinity, this.canary?.body.version ?? -Infinity);
    if (body.version <= above) {
      throw new TypeError(`Hub.broadcastWeights: version ${body.version} is not above the current ${above}`);
    }
    this.encodedBody('weights', body); // throws KAIS_ERR_OVERSIZED before any state changes
    this.weights = body;
    this.canary = null; // a version for everyone ends a canary (a rollback)
    return this.pushAll('weights', body);
  }

  /**
   * A canary: `body` goes to the sessions of `eaps` only (now, and at their next `hello`); the
   * others keep the current weights. Same checks as `broadcastWeights`; one canary at a time.
   */
  startCanary(eaps: readonly EapId[], body: WeightsBody): { sent: number; coalesced: number } {
    const problem = verifyWeights(body, { checksum: false, values: false });
    if (problem) throw new TypeError(`Hub.startCanary: ${problem.message}`);
    if (this.canary) throw new TypeError(`Hub.startCanary: the canary of version ${this.canary.body.version} still runs`);
    if (this.weights && body.version <= this.weights.version) {
      throw new TypeError(`Hub.startCanary: version ${body.version} is not above the current ${this.weights.version}`);
    }
    this.encodedBody('weights', body);
    const set = new Set(eaps);
    this.canary = { eaps: set, body };
    let sent = 0;
    let coalesced = 0;
    for (const [eap, s] of this.byEap) {
      if (s.closing || !set.has(eap)) continue;
      if (this.push(s, 'weights', body)) sent++;
      else coalesced++;
    }
    return { sent, coalesced };
  }

  /** The running canary's version becomes the current weights, pushed to the eAPs that do not hold it yet. */
  promoteCanary(): { sent: number; coalesced: number } {
    const c = this.canary;
    if (!c) throw new TypeError('Hub.promoteCanary: no canary runs');
    this.canary = null;
    this.weights = c.body;
    let sent = 0;
    let coalesced = 0;
    for (const [eap, s] of this.byEap) {
      if (s.closing || c.eaps.has(eap)) continue;
      if (this.push(s, 'weights', c.body)) sent++;
      else coalesced++;
    }
    return { sent, coalesced };
  }

  /** Same as `broadcastWeights`, for a placement. */
  broadcastPlacement(body: PlacementBody): { sent: number; coalesced: number } {
    // validates the body (TypeError naming the field) and its size, before any state changes
    const bytes = new Codec({ maxFrameBytes: DEFAULT_MAX_FRAME_BYTES }).encodeBody('placement', body);
    if (this.placement && body.version <= this.placement.version) {
      throw new TypeError(`Hub.broadcastPlacement: version ${body.version} is not above the current ${this.placement.version}`);
    }
    this.bodyBytes.set(body, bytes);
    this.placement = body;
    return this.pushAll('placement', body);
  }

  /** Sends one frame (e.g. `scale`, `verdicts`) to one eAP's session; false if it has none. */
  sendTo<T extends 'scale' | 'ack' | 'error' | 'verdicts'>(eapId: EapId, type: T, body: BodyByType[T]): boolean {
    const s = this.byEap.get(eapId);
    if (!s || s.closing) return false;
    return this.sendFrame(s, makeFrame(type, s.seq++, body) as Frame);
  }

  /** Closes every socket (1001) and the server. Sockets that do not close within 2 s are terminated. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.heartbeat) clearInterval(this.heartbeat);
    const waits = [...this.sockets].map(
      (s) =>
        new Promise<void>((resolve) => {
          if (s.ws.readyState === WebSocket.CLOSED) return resolve();
          const t = setTimeout(() => s.ws.terminate(), 2000);
          s.ws.once('close', () => {
            clearTimeout(t);
            resolve();
          });
          s.closing = true;
          s.ws.close(HUB_CLOSE_CODES.goingAway, 'orchestrator shutting down');
        }),
    );
    await Promise.all(waits);
    await new Promise<void>((resolve) => this.wss.close(() => resolve()));
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }

  // ------------------------------------------------------------------------------------------
  // Sessions
  // ------------------------------------------------------------------------------------------

  private accept(ws: WebSocket, req: IncomingMessage): void {
    const s = new Session(ws, req.socket.remoteAddress ?? null);
    if (this.closed) {
      ws.terminate();
      return;
    }
    // sockets waiting for their hello are bounded, in all and per address (each may hold up to
    // maxPreHelloBytes until the hello timeout): one more is closed at once, 1013 "try again later"
    const from = s.remote ?? '?';
    const waiting = this.pendingHellos.get(from) ?? 0;
    if (this.pendingHellosTotal >= this.maxPendingHellos || waiting >= this.maxPendingHellosPerAddress) {
      this.stats.pendingHelloRefused++;
      ws.close(HUB_CLOSE_CODES.tryLater, 'too many connections waiting for their hello');
      return;
    }
    this.pendingHellos.set(from, waiting + 1);
    this.pendingHellosTotal++;
    s.pendingHello = true;
    // the raw bytes before the hello (ws would buffer a message's fragments up to maxFrameBytes)
    const raw = req.socket;
    let preHello = 0;
    const count = (chunk: Buffer) => {
      preHello += chunk.length;
      if (preHello > this.maxPreHelloBytes && s.info === null && !s.closing) {
        s.closing = true;
        this.stats.preHelloCut++;
        ws.terminate();
      }
    };
    raw.on('data', count);
    s.stopCounting = () => raw.off('data', count);
    this.sockets.add(s);
    s.helloTimer = setTimeout(() => {
      if (s.info === null && !s.closing) {
        s.closing = true;
        ws.close(HUB_CLOSE_CODES.helloTimeout, 'no hello');
      }
    }, this.helloTimeoutMs);
    ws.on('message', (data, isBinary) => {
      s.alive = true;
      if (s.closing) return;
      try {
        this.receive(s, data, isBinary);
      } catch (e) {
        // A bug in a handler or a listener must not take the process down or leave the session
        // half-updated: refuse the frame and go on.
        this.refuse(s, HUB_ERROR_CODES.state, `internal error handling the frame: ${e instanceof Error ? e.message : String(e)}`, null);
      }
    });
    ws.on('pong', () => (s.alive = true));
    ws.on('ping', () => (s.alive = true));
    // 'error' is followed by 'close'; without a listener it would be thrown.
    ws.on('error', () => undefined);
    ws.on('close', (code, reason) => this.onSocketClose(s, code, reason.toString()));
  }

  /** The socket no longer waits for its hello (accepted, or closed). */
  private helloDone(s: Session): void {
    s.stopCounting?.();
    s.stopCounting = null;
    if (!s.pendingHello) return;
    s.pendingHello = false;
    this.pendingHellosTotal--;
    const from = s.remote ?? '?';
    const n = (this.pendingHellos.get(from) ?? 1) - 1;
    if (n > 0) this.pendingHellos.set(from, n);
    else this.pendingHellos.delete(from);
  }

  private onSocketClose(s: Session, code: number, reason: string): void {
    if (s.helloTimer) clearTimeout(s.helloTimer);
    this.helloDone(s);
    this.sockets.delete(s);
    s.closing = true;
    const info = s.info;
    if (info && this.byEap.get(info.eapId) === s) this.byEap.delete(info.eapId);
    if (info) this.emitSafe('sessionClosed', { ...info }, code, reason);
  }

  private receive(s: Session, data: RawData, isBinary: boolean): void {
    if (!isBinary) {
      this.refuse(s, 'KAIS_ERR_MALFORMED', 'text message: frames are binary msgpack', null);
      return;
    }
    const bytes = Array.isArray(data) ? Buffer.concat(data) : data instanceof ArrayBuffer ? new Uint8Array(data) : data;
    if (s.info !== null && this.admitBytes) {
      const verdict = this.admitBytes({ ...s.info }, bytes.byteLength);
      if (verdict) {
        this.refuse(s, verdict.code, verdict.message, null);
        return;
      }
    }
    const r = this.codec.decode(bytes);
    if (!r.ok) {
      this.refuse(s, r.error.code, r.error.message, r.error.seq);
      return;
    }
    const frame = r.frame;
    if (s.info === null) {
      if (frame.type !== 'hello') {
        this.refuse(s, HUB_ERROR_CODES.state, `expected hello as the first frame, got ${frame.type}`, frame.seq);
        return;
      }
      this.hello(s, frame.body, frame.seq);
      return;
    }
    const info = s.info;
    switch (frame.type) {
      case 'hello':
        this.refuse(s, HUB_ERROR_CODES.state, 'hello was already accepted on this connection', frame.seq);
        return;
      case 'welcome':
      case 'weights':
      case 'placement':
      case 'verdicts':
        this.refuse(s, HUB_ERROR_CODES.state, `${frame.type} frames are sent by the orchestrator only`, frame.seq);
        return;
      case 'experience':
      case 'telemetry':
        if (frame.body.eap !== info.eapId) {
          this.refuse(s, HUB_ERROR_CODES.state, `body.eap ${frame.body.eap} is not this session's eAP ${info.eapId}`, frame.seq);
          return;
        }
        break;
      case 'ack': {
        const pushed = s.unacked.get(frame.body.of);
        if (pushed) {
          for (const seq of [...s.unacked.keys()]) if (seq <= frame.body.of) s.unacked.delete(seq);
          if (pushed.kind === 'weights') info.weightVersion = pushed.version;
          else info.placementVersion = pushed.version;
          this.stats.accepted++;
          this.emitSafe('applied', { ...info }, pushed.kind, pushed.version);
        }
        break;
      }
      default:
        break;
    }
    if (this.inspect && frame.type !== 'ack') {
      const verdict = this.inspect({ ...info }, frame as AgentFrame);
      if (verdict) {
        this.refuse(s, verdict.code, verdict.message, frame.seq);
        if (verdict.quarantine) this.quarantine(s, verdict.message);
        return;
      }
    }
    if (frame.type !== 'ack') this.stats.accepted++;
    this.emitSafe('frame', { ...info }, frame as AgentFrame);
  }

  /** Closes the session (4003) and refuses its eAP's hellos for `quarantineMs`. */
  private quarantine(s: Session, why: string): void {
    const info = s.info!;
    this.stats.quarantines++;
    this.quarantinedUntil.set(info.eapId, Date.now() + this.quarantineMs);
    s.closing = true;
    s.ws.close(HUB_CLOSE_CODES.quarantined, 'quarantined');
    this.emitSafe('denied', {
      kind: 'quarantine',
      eapId: info.eapId,
      sessionId: info.sessionId,
      message: `session quarantined for ${this.quarantineMs} ms: ${why}`,
      remote: s.remote,
    });
  }

  /** eAPs under quarantine now, with the ms left. */
  quarantined(): { eapId: EapId; msLeft: number }[] {
    const now = Date.now();
    return [...this.quarantinedUntil].filter(([, until]) => until > now).map(([eapId, until]) => ({ eapId, msLeft: until - now }));
  }

  private hello(s: Session, hello: HelloBody, seq: number): void {
    const deny = (kind: DenialInfo['kind'], code: string, closeCode: number, message: string, sessionId: string | null = null) => {
      s.closing = true;
      this.refuse(s, code, message, seq);
      s.ws.close(closeCode, kind);
      this.emitSafe('denied', { kind, eapId: hello.eapId, sessionId, message, remote: s.remote });
    };
    if (hello.eapId >= this.numEaps) {
      this.stats.authFailures++;
      deny(
        'unknown-eap',
        HUB_ERROR_CODES.auth,
        HUB_CLOSE_CODES.auth,
        `eAP ${hello.eapId} is not in this cluster (eAPs 0..${this.numEaps - 1})`,
      );
      return;
    }
    // a token binds to an eAP: an eAP with a token of its own is admitted with that token only;
    // the shared token (if any) admits the others; with per-eAP tokens and no shared one, an eAP
    // without a token is not admitted at all
    const own = Object.prototype.hasOwnProperty.call(this.agentTokens, hello.eapId) ? this.agentTokens[hello.eapId] : undefined;
    const perEap = Object.keys(this.agentTokens).length > 0;
    const expected = own ?? this.token;
    if ((expected === '' && perEap) || (expected !== '' && !sameToken(hello.token, expected))) {
      this.stats.authFailures++;
      deny('auth', HUB_ERROR_CODES.auth, HUB_CLOSE_CODES.auth, `wrong token for eAP ${hello.eapId}`);
      return;
    }
    const until = this.quarantinedUntil.get(hello.eapId);
    if (until !== undefined) {
      if (until > Date.now()) {
        this.stats.quarantinedHellos++;
        deny(
          'quarantined-hello',
          HUB_ERROR_CODES.quarantined,
          HUB_CLOSE_CODES.quarantined,
          `eAP ${hello.eapId} is quarantined for another ${until - Date.now()} ms`,
        );
        return;
      }
      this.quarantinedUntil.delete(hello.eapId);
    }
    const live = this.byEap.get(hello.eapId);
    if (live && !live.closing && live.ws.readyState === WebSocket.OPEN && !(hello.instance && live.info!.instance === hello.instance)) {
      // the live session stays: only the same agent process may take its place
      this.stats.duplicateHellos++;
      deny(
        'duplicate-hello',
        HUB_ERROR_CODES.duplicate,
        HUB_CLOSE_CODES.duplicate,
        `eAP ${hello.eapId} already has a live session (${live.info!.sessionId}) of another agent instance`,
        live.info!.sessionId,
      );
      return;
    }
    if (s.helloTimer) clearTimeout(s.helloTimer);
    const previous = this.byEap.get(hello.eapId);
    if (previous) {
      previous.closing = true;
      previous.ws.close(HUB_CLOSE_CODES.replaced, 'replaced by a new session');
    }
    const info: SessionInfo = {
      sessionId: `e${hello.eapId}-${this.startedMs.toString(36)}-${++this.sessionCounter}`,
      eapId: hello.eapId,
      agentVersion: hello.agentVersion,
      weightVersion: hello.weightVersion,
      placementVersion: hello.placementVersion,
      connectedMs: Date.now(),
      instance: hello.instance ?? '',
    };
    s.info = info;
    this.helloDone(s);
    this.byEap.set(hello.eapId, s);
    this.stats.accepted++;
    this.sendFrame(
      s,
      makeFrame('welcome', s.seq++, {
        sessionId: info.sessionId,
        heartbeatMs: this.heartbeatMs,
        weightVersion: this.weightsFor(hello.eapId)?.version ?? null,
        placementVersion: this.placementVersion,
        ...(this.epoch !== null ? { epoch: this.epoch } : {}),
        ...(this.act === 'sample' ? { act: 'sample' as const } : {}),
      }),
    );
    // versions of another epoch (a lost or replaced store) say nothing about ours: push ours
    const otherEpoch = this.epoch !== null && hello.epoch !== undefined && hello.epoch !== this.epoch;
    // (a version above ours in the same epoch was never ours either: a stale or planted cache)
    const weights = this.weightsFor(hello.eapId);
    if (weights && (otherEpoch || hello.weightVersion !== weights.version)) {
      this.push(s, 'weights', weights);
    }
    if (this.placement && (otherEpoch || hello.placementVersion !== this.placement.version)) {
      this.push(s, 'placement', this.placement);
    }
    this.emitSafe('session', { ...info }, hello);
  }

  /** Replies with an `error` frame (the frame itself is dropped by the caller). */
  private refuse(s: Session, code: string, message: string, of: number | null): void {
    this.stats.refused++;
    const body: ErrorBody = { code, message: message.length > 1024 ? `${message.slice(0, 1021)}...` : message, of };
    if (s.ws.bufferedAmount > 4 * this.maxBufferedBytes) {
      // It does not read its replies: stop talking to it.
      s.closing = true;
      s.ws.close(HUB_CLOSE_CODES.notReading, 'peer does not read');
    } else {
      this.sendFrame(s, makeFrame('error', s.seq++, body));
    }
    this.emitSafe('refused', s.info ? { ...s.info } : null, body);
  }

  // ------------------------------------------------------------------------------------------
  // Pushes and backpressure
  // ------------------------------------------------------------------------------------------

  private pushAll(kind: PushKind, body: WeightsBody | PlacementBody): { sent: number; coalesced: number } {
    let sent = 0;
    let coalesced = 0;
    for (const s of this.byEap.values()) {
      if (s.closing) continue;
      if (this.push(s, kind, body)) sent++;
      else coalesced++;
    }
    return { sent, coalesced };
  }

  /** Sends now, or keeps it as the pending push of its kind when the socket is backed up. */
  private push(s: Session, kind: PushKind, body: WeightsBody | PlacementBody): boolean {
    if (s.ws.bufferedAmount > this.maxBufferedBytes) {
      if (kind === 'weights') s.pending.weights = body as WeightsBody;
      else s.pending.placement = body as PlacementBody;
      this.stats.coalesced++;
      return false;
    }
    if (kind === 'weights') s.pending.weights = null;
    else s.pending.placement = null;
    const seq = s.seq++;
    s.unacked.set(seq, { kind, version: body.version });
    if (s.unacked.size > MAX_UNACKED) s.unacked.delete(s.unacked.keys().next().value!);
    if (s.ws.readyState !== WebSocket.OPEN) return false;
    // One message in two fragments: this session's envelope head, then the body bytes every
    // session shares (encoded once per version). Encoding a 800 KB weights frame per session
    // cost 1-6 ms each (a fresh buffer per frame), over 1 s for 200 agents. The message bytes are
    // the same as `encode(frame)`; the receiver's WebSocket reassembles the fragments.
    s.ws.send(this.outCodec.encodeHead(kind, seq, Date.now()), { binary: true, fin: false });
    s.ws.send(this.encodedBody(kind, body), { binary: true, fin: true }, (err) => {
      if (err) return;
      if (s.info) this.emit('flushed', s.info, kind, body.version);
      if (s.pending.weights || s.pending.placement) this.flush(s);
    });
    return true;
  }

  /** The encoded body of a push, encoded once per body object (kept while the body is referenced). */
  private encodedBody(kind: PushKind, body: WeightsBody | PlacementBody): Buffer {
    let bytes = this.bodyBytes.get(body);
    if (!bytes) {
      bytes =
        kind === 'weights'
          ? this.outCodec.encodeBody('weights', body as WeightsBody)
          : this.outCodec.encodeBody('placement', body as PlacementBody);
      this.bodyBytes.set(body, bytes);
    }
    return bytes;
  }

  private flush(s: Session): void {
    if (s.closing || s.ws.readyState !== WebSocket.OPEN) return;
    if (s.pending.weights && s.ws.bufferedAmount <= this.maxBufferedBytes) this.push(s, 'weights', s.pending.weights);
    if (s.pending.placement && s.ws.bufferedAmount <= this.maxBufferedBytes) this.push(s, 'placement', s.pending.placement);
  }

  private sendFrame(s: Session, frame: Frame): boolean {
    if (s.ws.readyState !== WebSocket.OPEN) return false;
    const bytes = this.outCodec.encode(frame);
    s.ws.send(bytes, { binary: true }, (err) => {
      if (!err && (s.pending.weights || s.pending.placement)) this.flush(s);
    });
    return true;
  }

  /** Heartbeat: terminate sockets silent since the last tick, ping the others, retry pending pushes. */
  private tick(): void {
    // a late tick (this process stalled) judges nobody: the pongs may be unread (shared/protocol/heartbeat.ts)
    const onTime = this.heartbeatClock.onTime();
    for (const s of this.sockets) {
      if (!s.alive && onTime) {
        this.stats.deadPeers++;
        s.closing = true;
        s.ws.terminate();
        continue;
      }
      s.alive = false;
      if (s.ws.readyState === WebSocket.OPEN) s.ws.ping();
      this.flush(s);
    }
  }

  /** Listeners' exceptions stay theirs: the hub's state is already updated when it emits. */
  private emitSafe<K extends keyof HubEvents>(event: K, ...args: EventArgs<HubEvents>[K]): void {
    // emit's typed arguments are a conditional on K that TypeScript leaves unresolved for a generic K
    const emit = this.emit as (event: K, ...a: EventArgs<HubEvents>[K]) => boolean;
    try {
      emit.call(this, event, ...args);
    } catch {
      // a listener bug must not turn into a refused frame or a crash of the hub
    }
  }
}

/** Constant-time token comparison (length leaks; the token's content does not). */
function sameToken(got: string, expected: string): boolean {
  const a = Buffer.from(got, 'utf8');
  const b = Buffer.from(expected, 'utf8');
  return a.length === b.length && timingSafeEqual(a, b);
}
