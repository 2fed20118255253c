/**
 * The agent's offline buffer (issue 19 item 4): while the link to the orchestrator is down (or
 * its socket is backed up: a link that went silent without closing), the telemetry of each
 * interval and the experience (in frames of up to 64 transitions) wait here instead of being
 * dropped (telemetry) or piling up in the socket without a bound; the agent keeps dispatching
 * meanwhile. Bounded twice: past `capacity` records, or past `maxBytes` of their estimated encoded
 * size (an experience frame of 64 transitions is ~170 KB on kais, so 600 of them were
 * 100 MB), the oldest is dropped and counted by kind. On
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
/** Estimated bytes held at most by default (MiB). */
export const DEFAULT_OFFLINE_BUFFER_MIB = 32;

/**
 * A record's size as msgpackr encodes it, estimated by walking it: a typed array's bytes, a
 * string's length, 9 bytes per number, 4 per key and container. Hand-written: encoding every record
 * to measure it would double the work of the frames that are sent, and a bound needs no exactness.
 */
export function approxBytes(v: unknown, depth = 0): number {
  if (typeof v === 'number') return 9;
  if (typeof v === 'string') return 5 + v.length;
  if (v === null || typeof v !== 'object' || depth > 8) return 1;
  if (ArrayBuffer.isView(v)) return 6 + v.byteLength;
  let n = 4;
  if (Array.isArray(v)) for (const x of v) n += approxBytes(x, depth + 1);
  else for (const k in v) n += 4 + k.length + approxBytes((v as Record<string, unknown>)[k], depth + 1);
  return n;
}

export class Outbox {
  readonly stats: OutboxStats = { held: 0, flushed: 0, dropped: { telemetry: 0, experience: 0 } };
  private q: OutRecord[] = [];
  /** Estimated size of each record in q (same indices). */
  private sizes: number[] = [];
  /** Estimated bytes held. */
  bytes = 0;
  /** Index of the oldest record in q (shift() without moving the array each time). */
  private head = 0;

  constructor(
    readonly capacity: number = DEFAULT_OFFLINE_BUFFER,
    readonly maxBytes: number = DEFAULT_OFFLINE_BUFFER_MIB * 1024 * 1024,
  ) {
    if (!Number.isSafeInteger(capacity) || capacity < 0) throw new TypeError(`Outbox: capacity must be an integer >= 0, got ${capacity}`);
    if (!Number.isSafeInteger(maxBytes) || maxBytes < 0) throw new TypeError(`Outbox: maxBytes must be an integer >= 0, got ${maxBytes}`);
  }

  get length(): number {
    return this.q.length - this.head;
  }

  /**
   * Keeps r; drops the oldest records while there are more than `capacity` or more than `maxBytes`
   * (a capacity of 0 keeps nothing, and a record larger than maxBytes alone is dropped itself).
   */
  push(r: OutRecord): void {
    this.stats.held++;
    const size = approxBytes(r.body);
    this.q.push(r);
    this.sizes.push(size);
    this.bytes += size;
    while (this.length > this.capacity || (this.length > 0 && this.bytes > this.maxBytes)) this.dropOldest();
    this.compact();
  }

  private dropOldest(): void {
    const old = this.q[this.head];
    this.bytes -= this.sizes[this.head];
    this.q[this.head++] = undefined as unknown as OutRecord;
    this.stats.dropped[old.type]++;
  }

  /** Drops every held record of one kind (counted): experience of another store epoch would be refused. */
  dropAll(type: OutRecord['type']): number {
    const kept: OutRecord[] = [];
    const keptSizes: number[] = [];
    let n = 0;
    for (let i = this.head; i < this.q.length; i++) {
      if (this.q[i].type === type) {
        n++;
        this.bytes -= this.sizes[i];
      } else {
        kept.push(this.q[i]);
        keptSizes.push(this.sizes[i]);
      }
    }
    this.q = kept;
    this.sizes = keptSizes;
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
    this.bytes -= this.sizes[this.head];
    this.q[this.head++] = undefined as unknown as OutRecord;
    this.compact();
    return r;
  }

  private compact(): void {
    if (this.head > 1024 && this.head * 2 > this.q.length) {
      this.q = this.q.slice(this.head);
      this.sizes = this.sizes.slice(this.head);
      this.head = 0;
    }
  }
}
