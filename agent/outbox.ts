/**
 * The agent's offline buffer (issue 19 item 4): while the link to the orchestrator is down (or
 * its socket is backed up: a link that went silent without closing), the telemetry of each
 * interval and the experience (in frames of up to 64 transitions) wait here instead of being
 * dropped (telemetry) or piling up in the socket without a bound; the agent keeps dispatching
 * meanwhile. Bounded: past `capacity` records the oldest is dropped and counted by kind. On
 * reconnect the records go out oldest first, paced (agent/main.ts), each once: a record leaves the
 * buffer when it is handed to the socket, so nothing is sent twice (what a socket that turns out
 * dead still held is lost, not repeated). Experience held across a change of the orchestrator's
 * store epoch is dropped (counted): its weight versions belong to the old store, whose successor
 * would refuse it.
 */
import type { ExperienceBody, TelemetryBody } from '../shared/protocol/envelope';

export type OutRecord = { type: 'telemetry'; body: TelemetryBody } | { type: 'experience'; body: ExperienceBody };

export interface OutboxStats {
  /** Records put in since the start. */
  held: number;
  /** Records sent from the buffer since the start. */
  flushed: number;
  /** Records dropped (oldest first, the buffer full), by kind. */
  dropped: { telemetry: number; experience: number };
}

/** Records held at most by default: 5 minutes of telemetry at the default 1 s interval, plus experience. */
export const DEFAULT_OFFLINE_BUFFER = 600;

export class Outbox {
  readonly stats: OutboxStats = { held: 0, flushed: 0, dropped: { telemetry: 0, experience: 0 } };
  private q: OutRecord[] = [];
  /** Index of the oldest record in q (shift() without moving the array each time). */
  private head = 0;

  constructor(readonly capacity: number = DEFAULT_OFFLINE_BUFFER) {
    if (!Number.isSafeInteger(capacity) || capacity < 0) throw new TypeError(`Outbox: capacity must be an integer >= 0, got ${capacity}`);
  }

  get length(): number {
    return this.q.length - this.head;
  }

  /** Keeps r; drops the oldest record when full (a capacity of 0 keeps nothing: r itself is dropped). */
  push(r: OutRecord): void {
    this.stats.held++;
    this.q.push(r);
    while (this.length > this.capacity) {
      const old = this.q[this.head];
      this.q[this.head++] = undefined as unknown as OutRecord;
      this.stats.dropped[old.type]++;
    }
    this.compact();
  }

  /** Drops every held record of one kind (counted): experience of another store epoch would be refused. */
  dropAll(type: OutRecord['type']): number {
    const kept: OutRecord[] = [];
    let n = 0;
    for (let i = this.head; i < this.q.length; i++) {
      if (this.q[i].type === type) n++;
      else kept.push(this.q[i]);
    }
    this.q = kept;
    this.head = 0;
    this.stats.dropped[type] += n;
    return n;
  }

  /** The oldest record, left in place. */
  peek(): OutRecord | undefined {
    return this.length > 0 ? this.q[this.head] : undefined;
  }

  /** Removes the oldest record (after it was sent). */
  shift(): OutRecord | undefined {
    if (this.length === 0) return undefined;
    const r = this.q[this.head];
    this.q[this.head++] = undefined as unknown as OutRecord;
    this.compact();
    return r;
  }

  private compact(): void {
    if (this.head > 1024 && this.head * 2 > this.q.length) {
      this.q = this.q.slice(this.head);
      this.head = 0;
    }
  }
}
