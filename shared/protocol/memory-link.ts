/**
 * An in-process pair of connected endpoints with the same shape as a socket endpoint (ws's
 * `test/duplex-pair.js`): bytes sent on one end arrive, in order and asynchronously, at the
 * other. `agent/runtime.ts` and the hub take an endpoint, so tests and training can run the real
 * protocol without a network, and `agent/link.ts` wraps a WebSocket into the same interface.
 */

/** What transport-agnostic code needs from a connection. */
export interface FrameEndpoint {
  /**
   * Queue one binary message for the peer. Returns false (and drops it) once the link is closed,
   * like a socket that has gone away; never throws for that.
   */
  send(bytes: Uint8Array): boolean;
  /** Listen for messages from the peer. Returns a function that removes the listener. */
  onFrame(cb: (bytes: Uint8Array) => void): () => void;
  /** Close both ends. Messages already sent are delivered first, then both ends report close. */
  close(code?: number, reason?: string): void;
  /** Called once, on both ends, when the link closes (WebSocket close code and reason). */
  onClose(cb: (code: number, reason: string) => void): () => void;
  /** True once `close` was called on either end. */
  readonly closed: boolean;
}

export interface MemoryLinkOptions {
  /**
   * How delivery is deferred. 'immediate' (setImmediate) lets timers and I/O run between
   * messages, so two endpoints answering each other cannot starve the event loop; 'microtask'
   * (queueMicrotask) is faster for tight in-process training loops.
   * @defaultValue 'immediate'
   */
  delivery?: 'immediate' | 'microtask';
  /**
   * Copy each message on send, as a socket would, so the sender may reuse its buffer.
   * @defaultValue true
   */
  copy?: boolean;
}

/** Shared state of one link: the two ends close together. */
interface LinkState {
  closed: boolean;
  /** Deliveries scheduled and not yet run, over both directions. */
  pending: number;
  closeInfo: { code: number; reason: string } | null;
  closeFired: boolean;
  ends: MemoryEndpoint[];
}

class MemoryEndpoint implements FrameEndpoint {
  peer!: MemoryEndpoint;
  private readonly frameListeners = new Set<(bytes: Uint8Array) => void>();
  private readonly closeListeners = new Set<(code: number, reason: string) => void>();

  constructor(
    private readonly link: LinkState,
    private readonly defer: (fn: () => void) => void,
    private readonly copy: boolean,
  ) {}

  get closed(): boolean {
    return this.link.closed;
  }

  send(bytes: Uint8Array): boolean {
    if (this.link.closed) return false;
    const message = this.copy ? new Uint8Array(bytes) : bytes;
    const peer = this.peer;
    this.link.pending++;
    this.defer(() => {
      this.link.pending--;
      peer.deliver(message);
      maybeFireClose(this.link, this.defer);
    });
    return true;
  }

  onFrame(cb: (bytes: Uint8Array) => void): () => void {
    this.frameListeners.add(cb);
    return () => this.frameListeners.delete(cb);
  }

  close(code = 1000, reason = ''): void {
    if (this.link.closed) return;
    this.link.closed = true;
    this.link.closeInfo = { code, reason };
    maybeFireClose(this.link, this.defer);
  }

  onClose(cb: (code: number, reason: string) => void): () => void {
    this.closeListeners.add(cb);
    return () => this.closeListeners.delete(cb);
  }

  deliver(message: Uint8Array): void {
    for (const cb of [...this.frameListeners]) cb(message);
  }

  fireClose(code: number, reason: string): void {
    for (const cb of [...this.closeListeners]) cb(code, reason);
    this.frameListeners.clear();
    this.closeListeners.clear();
  }
}

/** Once closed and drained, report close on both ends, once, asynchronously. */
function maybeFireClose(link: LinkState, defer: (fn: () => void) => void): void {
  if (!link.closed || link.pending > 0 || link.closeFired || link.closeInfo === null) return;
  link.closeFired = true;
  const { code, reason } = link.closeInfo;
  defer(() => link.ends.forEach((e) => e.fireClose(code, reason)));
}

/** Two connected endpoints: what `a` sends, `b` receives, and the other way round. */
export function createMemoryLinkPair(options: MemoryLinkOptions = {}): [FrameEndpoint, FrameEndpoint] {
  const delivery = options.delivery ?? 'immediate';
  if (delivery !== 'immediate' && delivery !== 'microtask') {
    throw new TypeError(`createMemoryLinkPair: options.delivery must be 'immediate' or 'microtask', got ${String(delivery)}`);
  }
  const defer = delivery === 'immediate' ? (fn: () => void) => void setImmediate(fn) : queueMicrotask;
  const copy = options.copy ?? true;
  const link: LinkState = { closed: false, pending: 0, closeInfo: null, closeFired: false, ends: [] };
  const a = new MemoryEndpoint(link, defer, copy);
  const b = new MemoryEndpoint(link, defer, copy);
  a.peer = b;
  b.peer = a;
  link.ends.push(a, b);
  return [a, b];
}
