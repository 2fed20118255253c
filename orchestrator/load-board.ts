/**
 * The load board: what the agents report of the load (the `load` section of their `telemetry`
 * frames, agent/load-report.ts), combined into what an executor that cannot see load on its
 * cluster reports to the placement loop (the Kubernetes executor: busy replicas, waiting requests
 * and the per-service window that hpa and gsp-ss decide on; the emulated cluster measures these
 * itself, orchestrator/executors.ts).
 *
 * Combining (per target t and service w, over the agents whose last report is fresh):
 *   total(t, w)   = sum over agents of their outstanding requests at t (each agent counts only its
 *                   own, so the sum counts every request sent through an agent once)
 *   busy(t, w)    = min(ready(t, w), max(max over agents of their busy estimate, total))
 *   waiting(t, w) = max(max over agents of their waiting estimate, total - busy)
 * An agent's estimates already hold the node's own load report when the node sends one with its
 * answers (every eAP then sees the same node-wide figure: the largest is taken, not the sum).
 * `ready` is the cluster's (the executor's readiness): busy never exceeds it. Outstanding counts
 * the time on the wire too, so without node reports busy is a little high (a request is counted
 * from its send to its answer).
 *
 * The window (since the board started, in scenario seconds; an executor takes the difference of
 * two reads): arrivals and their work, and the requests answered in time and not (completedInTime,
 * failed: zero from agents that do not report them), are the sums of the agents' counts as their reports arrive
 * (a report buffered while its link was down counts when it arrives); busy and ready
 * replica-seconds are integrated sample-and-hold between reports (each report moves the integral
 * to now with the figures held so far, then holds its own), so they lag the truth by up to one
 * telemetry interval. A report older than `staleMs` when it was sent (buffered) adds its counts
 * but not its figures; an agent whose last report is older than `staleMs` counts as nothing.
 */
import type { Placement } from '../shared/domain';
import { emptyWindow, type WindowReport } from '../shared/orchestration/executor';
import type { LoadBody } from '../shared/protocol/envelope';
import { capacityArrays, type Scenario } from '../shared/scenario';

/** What a read of the board gives an executor: per (target, service) t * W + w, and the window since the start. */
export interface LoadReading {
  busy: number[];
  waiting: number[];
  window: WindowReport;
}

/** Where an executor reads the load from (the board, or a test's stand-in). */
export interface LoadSource {
  read(): LoadReading;
}

export interface LoadBoardOptions {
  scenario: Scenario;
  /** Scenario seconds per real second (the window's clock). @defaultValue 1 */
  speed?: number;
  /** An agent's figures older than this (real ms) count as nothing. @defaultValue 5000 */
  staleMs?: number;
  /** Real-time clock, ms. @defaultValue performance.now */
  now?: () => number;
}

interface Held {
  atMs: number;
  targets: Int32Array;
  outstanding: Float32Array;
  busy: Float32Array;
  waiting: Float32Array;
}

export class LoadBoard implements LoadSource {
  /** Ready replicas d[w][n] on the cluster now (the executor's); null: no clamp, none integrated. */
  ready: (() => Placement | null) | null = null;
  /** Reports taken, and those whose figures were too old to hold (counts only). */
  readonly stats = { reports: 0, stale: 0 };
  private readonly W: number;
  private readonly N: number;
  private readonly cloudReady: Float64Array;
  private readonly held = new Map<number, Held>();
  private readonly cum: WindowReport;
  private lastMs: number;
  private readonly now: () => number;

  constructor(private readonly o: LoadBoardOptions) {
    this.W = o.scenario.services.length;
    this.N = o.scenario.eaps.reduce((s, e) => s + e.nodes.length, 0);
    const cap = capacityArrays(o.scenario);
    this.cloudReady = Float64Array.from({ length: this.W }, (_, w) => Math.max(1, Math.floor(cap.cpu[this.N] / cap.svcCpu[w])));
    this.cum = emptyWindow(this.W);
    this.now = o.now ?? (() => performance.now());
    this.lastMs = this.now();
  }

  /**
   * One agent's report. `sentTs` is the envelope's `ts` (the agent's clock, as `load.endTs`): the
   * difference is the report's age when it was sent, whatever the two machines' clocks say.
   */
  add(eap: number, load: LoadBody, sentTs: number): void {
    if (load.numServices !== this.W) return;
    this.advance();
    this.stats.reports++;
    const W = this.W;
    for (let w = 0; w < W; w++) {
      this.cum.arrivals[w] += load.arrivals[w];
      this.cum.workCoreS[w] += load.workCoreS[w];
      if (load.completedInTime && load.failed) {
        this.cum.completedInTime[w] += load.completedInTime[w];
        this.cum.failed[w] += load.failed[w];
      }
    }
    if (sentTs - load.endTs > (this.o.staleMs ?? 5000)) {
      this.stats.stale++;
      return;
    }
    this.held.set(eap, { atMs: this.now(), targets: load.targets, outstanding: load.outstanding, busy: load.busy, waiting: load.waiting });
  }

  read(): LoadReading {
    const ready = this.advance();
    const { busy, waiting } = this.combine(ready);
    const c = this.cum;
    const window: WindowReport = {
      windowS: c.windowS,
      arrivals: [...c.arrivals],
      busyReplicaS: [...c.busyReplicaS],
      readyReplicaS: [...c.readyReplicaS],
      completedInTime: [...c.completedInTime],
      failed: [...c.failed],
      workCoreS: [...c.workCoreS],
    };
    return { busy, waiting, window };
  }

  /** Moves the integrals to now with the figures held until now; returns the cluster's ready table. */
  private advance(): Placement | null {
    const nowMs = this.now();
    const dt = ((nowMs - this.lastMs) / 1000) * (this.o.speed ?? 1);
    this.lastMs = nowMs;
    const ready = this.ready?.() ?? null;
    if (dt <= 0) return ready;
    const { busy } = this.combine(ready);
    const W = this.W;
    for (let n = 0; n < this.N; n++) {
      for (let w = 0; w < W; w++) {
        this.cum.busyReplicaS[w] += busy[n * W + w] * dt;
        if (ready) this.cum.readyReplicaS[w] += (ready[w]?.[n] ?? 0) * dt;
      }
    }
    this.cum.windowS += dt;
    return ready;
  }

  private combine(ready: Placement | null): { busy: number[]; waiting: number[] } {
    const W = this.W;
    const T = this.N + 1;
    const total = new Float64Array(T * W);
    const bMax = new Float64Array(T * W);
    const qMax = new Float64Array(T * W);
    const staleMs = this.o.staleMs ?? 5000;
    const nowMs = this.now();
    for (const h of this.held.values()) {
      if (nowMs - h.atMs > staleMs) continue;
      for (let r = 0; r < h.targets.length; r++) {
        const t = h.targets[r];
        if (t >= T) continue;
        for (let w = 0; w < W; w++) {
          const k = t * W + w;
          const i = r * W + w;
          total[k] += h.outstanding[i];
          if (h.busy[i] > bMax[k]) bMax[k] = h.busy[i];
          if (h.waiting[i] > qMax[k]) qMax[k] = h.waiting[i];
        }
      }
    }
    const busy = new Array<number>(T * W).fill(0);
    const waiting = new Array<number>(T * W).fill(0);
    for (let t = 0; t < T; t++) {
      for (let w = 0; w < W; w++) {
        const k = t * W + w;
        const cap = t === this.N ? this.cloudReady[w] : ready ? (ready[w]?.[t] ?? 0) : Infinity;
        busy[k] = Math.min(cap, Math.max(bMax[k], total[k]));
        waiting[k] = Math.max(qMax[k], total[k] - busy[k]);
      }
    }
    return { busy, waiting };
  }
}
