/**
 * The agent's WebSocket link to the orchestrator: frames only, no models (it imports
 * `shared/protocol/` and `ws`, never tfjs).
 *
 * On every connection it sends `hello` (seq 0; the body comes fresh from `options.hello()`, so it
 * carries the versions held right now) and waits for `welcome`. From then on it is a plain frame
 * endpoint: `send(bytes)` and `onFrame(cb)` (the `welcome` itself is delivered too, so the
 * runtime learns that a new connection began). When the socket goes away it reconnects with
 * exponential backoff and jitter drawn from a seeded `Rng`, until `close()`.
 *
 * Heartbeat: every `heartbeatMs` (the `welcome`'s value once connected) the link pings; if nothing
 * at all came from the orchestrator since the previous tick (message, ping or pong) the socket is
 * terminated and the link reconnects, unless the tick itself fired late (this process stalled, so the
 * pong may be unread: `HeartbeatClock`).
 *
 * A `hello` refused with KAIS_ERR_AUTH stops the link (event `refused`, then close), because
 * retrying the same token cannot succeed; `reconnectOnAuthError` keeps trying instead.
 */
import WebSocket, { type RawData } from 'ws';
import { Rng } from '../shared/rng';
import { Codec, DEFAULT_MAX_FRAME_BYTES } from '../shared/protocol/codec';
import { makeFrame, type ErrorBody, type HelloBody, type WelcomeBody } from '../shared/protocol/envelope';
import type { FrameEndpoint } from '../shared/protocol/memory-link';
import { HeartbeatClock } from '../shared/protocol/heartbeat';
import { TypedEmitter } from '../shared/events';

export interface BackoffOptions {
  /** Delay before the first retry, ms. @defaultValue 200 */
  initialMs?: number;
  /** Largest delay, ms. @defaultValue 15000 */
  maxMs?: number;
  /** Growth per failed attempt. @defaultValue 2 */
  factor?: number;
  /** Fraction of the delay that is random: delay = base * (1 - jitter + jitter * U[0,1)). @defaultValue 0.5 */
  jitter?: number;
}

export interface AgentLinkOptions {
  /** Orchestrator URL, `ws://host:port`. */
  url: string;
  /** Builds the `hello` body for each new connection. */
  hello: () => HelloBody;
  /** Seed of the jitter (never Math.random: same seed, same retry schedule). */
  seed: number;
  backoff?: BackoffOptions;
  /** Heartbeat until a `welcome` says otherwise, ms. @defaultValue 5000 */
  heartbeatMs?: number;
  /** Time from dialling to `welcome` before the attempt counts as failed, ms. @defaultValue 10000 */
  handshakeTimeoutMs?: number;
  /** Largest inbound frame; larger ones close the socket. @defaultValue 16 MiB */
  maxFrameBytes?: number;
  /** Keep reconnecting after a KAIS_ERR_AUTH refusal. @defaultValue false */
  reconnectOnAuthError?: boolean;
  /** CA certificates (PEM) a wss:// orchestrator's certificate must chain to (a self-signed one: itself). @defaultValue Node's CA store */
  ca?: string;
}

export interface AgentLinkEvents {
  /** `welcome` received: the link carries frames. */
  ready: (welcome: WelcomeBody) => void;
  /** A welcomed connection ended; the link will reconnect unless closed. */
  down: (code: number, reason: string) => void;
  /**
   * The next attempt is scheduled in `delayMs` (attempt counts from 1 since the last welcome).
   * `problem`: why the attempt that just ended got no `welcome` (refused connection, another
   * server, an error frame, no answer), null after a welcomed connection ended.
   */
  retry: (delayMs: number, attempt: number, problem: string | null) => void;
  /** The orchestrator refused the `hello` (wrong token). */
  refused: (error: ErrorBody) => void;
  /** A wss:// handshake failed on the orchestrator's certificate (untrusted, expired, wrong host); the link keeps retrying. */
  tlsError: (reason: string) => void;
}

export class AgentLink extends TypedEmitter<AgentLinkEvents> implements FrameEndpoint {
  readonly url: string;
  private readonly options: AgentLinkOptions;
  private readonly backoff: Required<BackoffOptions>;
  private readonly rng: Rng;
  private readonly codec: Codec;
  private readonly frameListeners = new Set<(bytes: Uint8Array) => void>();
  private readonly closeListeners = new Set<(code: number, reason: string) => void>();
  private ws: WebSocket | null = null;
  private isReady = false;
  private stopped = false;
  private finished = false;
  private attempt = 0;
  private alive = true;
  private heartbeatMs: number;
  private heartbeatTimer: NodeJS.Timeout | null = null;
  private handshakeTimer: NodeJS.Timeout | null = null;
  private retryTimer: NodeJS.Timeout | null = null;
  private lastClose: { code: number; reason: string } = { code: 1000, reason: '' };
  /** Why the current attempt has no `welcome` yet (the first reason wins; null: none known). */
  private problem: string | null = null;
  /** Connections that reached `welcome`. */
  connections = 0;

  constructor(options: AgentLinkOptions) {
    super();
    if (typeof options.url !== 'string' || !/^wss?:\/\//.test(options.url)) {
      throw new TypeError(`AgentLink: options.url must be a ws:// or wss:// URL, got ${String(options.url)}`);
    }
    if (typeof options.hello !== 'function') throw new TypeError('AgentLink: options.hello must be a function');
    const b = options.backoff ?? {};
    this.backoff = { initialMs: b.initialMs ?? 200, maxMs: b.maxMs ?? 15_000, factor: b.factor ?? 2, jitter: b.jitter ?? 0.5 };
    for (const [k, v] of Object.entries(this.backoff)) {
      if (!Number.isFinite(v) || v < 0) throw new TypeError(`AgentLink: options.backoff.${k} must be >= 0, got ${v}`);
    }
    if (this.backoff.jitter > 1) throw new TypeError(`AgentLink: options.backoff.jitter must be in [0, 1], got ${this.backoff.jitter}`);
    if (this.backoff.factor < 1) throw new TypeError(`AgentLink: options.backoff.factor must be >= 1, got ${this.backoff.factor}`);
    this.heartbeatMs = options.heartbeatMs ?? 5000;
    if (!Number.isSafeInteger(this.heartbeatMs) || this.heartbeatMs <= 0) {
      throw new TypeError(`AgentLink: options.heartbeatMs must be a positive integer, got ${options.heartbeatMs}`);
    }
    this.url = options.url;
    this.options = options;
    this.rng = new Rng(options.seed);
    this.codec = new Codec({ maxFrameBytes: options.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES });
  }

  /** Dials the orchestrator (and keeps dialling until `close()`). */
  start(): this {
    if (!this.ws && !this.retryTimer && !this.stopped) this.connect();
    return this;
  }

  /** True between `welcome` and the end of that connection. */
  get ready(): boolean {
    return this.isReady;
  }

  /** True once `close()` was called or the link gave up (auth refused). */
  get closed(): boolean {
    return this.stopped;
  }

  /** Bytes queued on the current socket (0 when not connected). */
  get bufferedAmount(): number {
    return this.ws?.bufferedAmount ?? 0;
  }

  /** Sends one encoded frame; false (dropped) when not connected and welcomed. */
  send(bytes: Uint8Array): boolean {
    if (!this.isReady || !this.ws || this.ws.readyState !== WebSocket.OPEN) return false;
    this.ws.send(bytes, { binary: true });
    return true;
  }

  onFrame(cb: (bytes: Uint8Array) => void): () => void {
    this.frameListeners.add(cb);
    return () => this.frameListeners.delete(cb);
  }

  /** Called once, when the link stops for good (`close()` or an auth refusal). */
  onClose(cb: (code: number, reason: string) => void): () => void {
    this.closeListeners.add(cb);
    return () => this.closeListeners.delete(cb);
  }

  /** Stops reconnecting and closes the socket; resolves once it is closed. */
  close(code = 1000, reason = 'agent stopping'): Promise<void> {
    this.stopped = true;
    this.lastClose = { code, reason };
    if (this.retryTimer) {
      clearTimeout(this.retryTimer);
      this.retryTimer = null;
    }
    const ws = this.ws;
    if (!ws) {
      this.finish();
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => {
      const onClosed = () => resolve();
      this.closeListeners.add(onClosed);
      if (ws.readyState === WebSocket.CONNECTING) ws.terminate();
      else if (ws.readyState === WebSocket.OPEN) {
        ws.close(code, reason);
        // a peer that never answers the close handshake: do not wait forever
        setTimeout(() => ws.terminate(), 2000).unref();
      }
    });
  }

  /** Delay before retry number `attempt` (1-based), drawn from the seeded Rng. */
  private nextDelayMs(attempt: number): number {
    const { initialMs, maxMs, factor, jitter } = this.backoff;
    const base = Math.min(maxMs, initialMs * factor ** (attempt - 1));
    return Math.round(base * (1 - jitter + jitter * this.rng.next()));
  }

  private connect(): void {
    this.retryTimer = null;
    this.alive = true;
    const ws = new WebSocket(this.url, {
      maxPayload: this.codec.maxFrameBytes,
      perMessageDeflate: false,
      handshakeTimeout: this.options.handshakeTimeoutMs ?? 10_000,
      ...(this.options.ca !== undefined ? { ca: this.options.ca } : {}),
    });
    this.ws = ws;
    this.problem = null;
    const handshakeMs = this.options.handshakeTimeoutMs ?? 10_000;
    this.handshakeTimer = setTimeout(() => {
      this.problem ??= `no welcome within ${handshakeMs / 1000} s`;
      ws.terminate();
    }, handshakeMs);
    ws.on('open', () => {
      const hello = makeFrame('hello', 0, this.options.hello());
      ws.send(this.codec.encode(hello), { binary: true });
    });
    ws.on('message', (data, isBinary) => this.receive(ws, data, isBinary));
    ws.on('ping', () => (this.alive = true));
    ws.on('pong', () => (this.alive = true));
    // 'error' (refused connection, bad handshake) is always followed by 'close'; a certificate the
    // link does not trust is said apart (a configuration problem, not a network one)
    ws.on('error', (e: NodeJS.ErrnoException) => {
      if (isTlsVerifyError(e)) this.emit('tlsError', `${e.code}: ${e.message}`);
      // ECONNREFUSED, or "Unexpected server response: 426" (an HTTP port, not the hub's)
      if (!this.isReady) this.problem ??= e.message;
    });
    ws.on('close', (code, reason) => this.onSocketClose(ws, code, reason.toString()));
  }

  private receive(ws: WebSocket, data: RawData, isBinary: boolean): void {
    this.alive = true;
    if (ws !== this.ws) return;
    // Frames are binary. After `welcome` a text message goes the same way, as its UTF-8 bytes:
    // garbage then gets a KAIS_ERR_MALFORMED reply from the runtime (as at the hub) instead of
    // vanishing, and a peer gains nothing it could not do with a binary message.
    if (!isBinary && !this.isReady) return;
    const bytes = Array.isArray(data) ? Buffer.concat(data) : data instanceof ArrayBuffer ? new Uint8Array(data) : data;
    if (!this.isReady) {
      // Before `welcome` the link reads frames itself; anything but welcome or a refusal is dropped.
      const r = this.codec.decode(bytes);
      if (!r.ok) {
        this.problem ??= 'it answered with something other than a kais frame';
        return;
      }
      if (r.frame.type === 'error') this.problem ??= `refused: ${r.frame.body.code}: ${r.frame.body.message}`;
      if (r.frame.type === 'error' && r.frame.body.code === 'KAIS_ERR_AUTH') {
        this.emit('refused', r.frame.body);
        if (!this.options.reconnectOnAuthError) {
          this.stopped = true;
          this.lastClose = { code: 4001, reason: r.frame.body.message };
        }
        return;
      }
      if (r.frame.type !== 'welcome') return;
      if (this.handshakeTimer) clearTimeout(this.handshakeTimer);
      this.handshakeTimer = null;
      this.isReady = true;
      this.attempt = 0;
      this.connections++;
      // within what a timer can hold (a heartbeat of 1e15 ms would overflow setInterval and fire every ms)
      this.heartbeatMs = Math.min(Math.max(r.frame.body.heartbeatMs, 100), 3_600_000);
      this.startHeartbeat(ws);
      this.emit('ready', r.frame.body);
    }
    for (const cb of [...this.frameListeners]) cb(bytes);
  }

  private startHeartbeat(ws: WebSocket): void {
    if (this.heartbeatTimer) clearInterval(this.heartbeatTimer);
    this.alive = true;
    // a late tick (this process stalled) judges nobody: the pong may be unread (shared/protocol/heartbeat.ts)
    const clock = new HeartbeatClock(this.heartbeatMs);
    this.heartbeatTimer = setInterval(() => {
      const onTime = clock.onTime();
      if (!this.alive && onTime) {
        ws.terminate();
        return;
      }
      this.alive = false;
      if (ws.readyState === WebSocket.OPEN) ws.ping();
    }, this.heartbeatMs);
  }

  private onSocketClose(ws: WebSocket, code: number, reason: string): void {
    if (ws !== this.ws) return;
    this.ws = null;
    if (this.handshakeTimer) clearTimeout(this.handshakeTimer);
    if (this.heartbeatTimer) clearInterval(this.heartbeatTimer);
    this.handshakeTimer = null;
    this.heartbeatTimer = null;
    const wasReady = this.isReady;
    this.isReady = false;
    if (wasReady) this.emit('down', code, reason);
    else this.problem ??= `closed (${code}${reason ? `: ${reason}` : ''}) before welcome`;
    if (this.stopped) {
      this.finish();
      return;
    }
    this.attempt++;
    const delayMs = this.nextDelayMs(this.attempt);
    this.retryTimer = setTimeout(() => this.connect(), delayMs);
    this.emit('retry', delayMs, this.attempt, wasReady ? null : this.problem);
  }

  private finish(): void {
    if (this.finished) return;
    this.finished = true;
    const { code, reason } = this.lastClose;
    for (const cb of [...this.closeListeners]) cb(code, reason);
    this.closeListeners.clear();
    this.frameListeners.clear();
  }
}

/** Node's certificate verification failures (the peer's certificate is not trusted or does not fit). */
export function isTlsVerifyError(e: NodeJS.ErrnoException): boolean {
  return (
    typeof e.code === 'string' &&
    /^(DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_VERIFY_LEAF_SIGNATURE|UNABLE_TO_GET_ISSUER_CERT(_LOCALLY)?|CERT_|ERR_TLS_CERT_ALTNAME_INVALID|ERR_SSL_)/.test(
      e.code,
    )
  );
}
