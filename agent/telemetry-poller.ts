/**
 * Reads every edge node's telemetry for the device filters: `GET <node>/telemetry` ->
 * `{seq, cpu, mem, disk, upload}` (each a number; the emulated cluster's format, see
 * orchestrator/emulated-cluster.ts; a real node needs a small exporter that answers it), one node
 * at a time, spread evenly over each period so the polls never arrive as a burst on the request
 * path. A new `seq` is one sample for NodeHealth; the same `seq` again is skipped.
 *
 * A node that answers 404 has no telemetry endpoint: it is reported silent once and no longer
 * polled (its device filter never excludes it; QoS isolation still can). A node that cannot be
 * reached, or whose `seq` does not change, keeps being polled; before the filters have their
 * baselines, `historySamples` consecutive polls without a new sample also report it silent, so one
 * dead or stuck node cannot hold up the baselines of all the others. When such a node sends new
 * samples again, NodeHealth gives it a filter after `historySamples` of them (a late join).
 * After the start, a node with a filter that sends no new sample in `staleAfterPolls` polls in a
 * row is excluded (NodeHealth.stale, rule `device:stale`): without samples its filter would never
 * judge it, and an exporter frozen on one `seq` often means a hung node. It is re-admitted as any
 * excluded node, by healthy windows once its samples flow again.
 * Never throws; every poll has a timeout.
 */
import * as http from 'node:http';
import type { NodeHealth } from './filters/node-health';
import { keepAliveAgentOptions } from '../shared/http-limits';

export interface TelemetryPollerOptions {
  nodeUrls: readonly string[];
  health: NodeHealth;
  /** Real ms per round over all nodes. @defaultValue 1000 */
  periodMs?: number;
  /**
   * Polls in a row without a new sample after which a node with a filter is excluded as stale (an
   * exporter that refreshes slower than the poll repeats its `seq` between refreshes: keep this
   * above its refresh period / periodMs). @defaultValue the filters' historySamples (36)
   */
  staleAfterPolls?: number;
  /** Scenario time now (s), for the events. */
  nowS: () => number;
  log?: (line: string) => void;
}

/** Largest /telemetry answer read (a node's is a few hundred bytes). */
const MAX_TELEMETRY_BYTES = 64 * 1024;

export class TelemetryPoller {
  private readonly agent = new http.Agent(keepAliveAgentOptions(1));
  private readonly lastSeq: number[];
  /** Consecutive polls without a new sample (failed, or the same seq). */
  private readonly noSample: Int32Array;
  /** 1: no /telemetry (404), not polled again; 2: reported silent for want of samples, still polled. */
  private readonly silent: Uint8Array;
  private readonly inFlight: Uint8Array;
  private timer: NodeJS.Timeout | null = null;
  private next = 0;
  /** Samples taken, polls that failed, stale exclusions (NodeHealth.stale). */
  readonly stats = { samples: 0, failed: 0, stale: 0 };
  private readonly staleAfter: number;

  constructor(private readonly o: TelemetryPollerOptions) {
    const N = o.nodeUrls.length;
    this.lastSeq = new Array<number>(N).fill(-1);
    this.noSample = new Int32Array(N);
    this.silent = new Uint8Array(N);
    this.inFlight = new Uint8Array(N);
    this.staleAfter = o.staleAfterPolls ?? o.health.o.historySamples;
    if (!Number.isInteger(this.staleAfter) || this.staleAfter < 1)
      throw new TypeError(`TelemetryPoller staleAfterPolls: expected an integer >= 1, got ${String(o.staleAfterPolls)}`);
  }

  start(): void {
    const N = this.o.nodeUrls.length;
    if (N === 0 || this.timer) return;
    const stepMs = Math.max(1, (this.o.periodMs ?? 1000) / N);
    this.timer = setInterval(() => this.pollNext(), stepMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    this.agent.destroy();
  }

  private pollNext(): void {
    const N = this.o.nodeUrls.length;
    for (let k = 0; k < N; k++) {
      const n = this.next;
      this.next = (this.next + 1) % N;
      if (this.silent[n] !== 1 && this.inFlight[n] === 0) {
        this.poll(n);
        return;
      }
    }
  }

  private poll(n: number): void {
    this.inFlight[n] = 1;
    let done = false;
    const finish = (body: Record<string, unknown> | 'missing' | null) => {
      if (done) return;
      done = true;
      this.inFlight[n] = 0;
      if (body === 'missing') {
        this.silent[n] = 1;
        this.o.health.silent(n);
        this.o.log?.(`node ${n} has no /telemetry (404): its device filter is off`);
        return;
      }
      const x = body && [body.cpu, body.mem, body.disk, body.upload];
      // finite as a float32 too: the device-filter windows go to the orchestrator as float32 (cpu 4e38
      // is finite in JSON, and its window's frame could not be encoded: the interval's telemetry was lost)
      const valid = body && x!.every((v) => typeof v === 'number' && Number.isFinite(Math.fround(v))) && typeof body.seq === 'number';
      if (!valid) this.stats.failed++;
      if (!valid || body.seq === this.lastSeq[n]) {
        const none = ++this.noSample[n];
        // once per run of polls without a sample; NodeHealth logs the exclusion as an event
        if (this.o.health.started && none === this.staleAfter && this.o.health.stale(n, none, this.o.nowS())) this.stats.stale++;
        if (none >= this.o.health.o.historySamples && this.silent[n] === 0 && !this.o.health.started) {
          this.silent[n] = 2;
          this.o.health.silent(n);
          this.o.log?.(
            `node ${n}: no new telemetry sample in ${this.noSample[n]} polls (${valid ? `seq stays ${this.lastSeq[n]}` : 'unreachable or malformed'}); the other nodes' filters start without it`,
          );
        }
        return;
      }
      this.noSample[n] = 0;
      if (this.silent[n] === 2) {
        this.silent[n] = 0;
        this.o.log?.(`node ${n} sends telemetry again: its device filter starts after ${this.o.health.o.historySamples} samples`);
      }
      this.lastSeq[n] = body.seq as number;
      this.stats.samples++;
      this.o.health.sample(n, x as number[], this.o.nowS());
    };
    let req: http.ClientRequest;
    try {
      req = http.get(`${this.o.nodeUrls[n]}/telemetry`, { agent: this.agent, timeout: this.o.periodMs ?? 1000 }, (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (c: Buffer) => {
          // a telemetry answer is a few hundred bytes: a node that streams on is cut, a failed poll
          size += c.length;
          if (size > MAX_TELEMETRY_BYTES) {
            req.destroy();
            return finish(null);
          }
          chunks.push(c);
        });
        res.on('error', () => finish(null));
        res.on('end', () => {
          if (res.statusCode === 404) return finish('missing');
          if (res.statusCode !== 200) return finish(null);
          try {
            const b = JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown;
            finish(typeof b === 'object' && b !== null ? (b as Record<string, unknown>) : null);
          } catch {
            finish(null);
          }
        });
      });
    } catch {
      return finish(null); // a URL http.get cannot take: a failed poll, never an uncaught exception in a timer
    }
    req.on('timeout', () => req.destroy());
    req.on('error', () => finish(null));
    // the whole poll within its period (the socket timeout above only counts idle time)
    const whole = setTimeout(
      () => {
        req.destroy();
        finish(null);
      },
      2 * (this.o.periodMs ?? 1000),
    );
    whole.unref();
    req.on('close', () => clearTimeout(whole));
  }
}
