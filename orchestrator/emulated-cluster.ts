/**
 * The emulated edge cluster of `kais node` / `kais up`: one HTTP server per edge node and one for
 * the cloud, standing in for real service replicas, with the simulator's service model
 * (training/sim/cluster.ts):
 * - node n hosts d[w][n] replicas of service w; a replica serves one request at a time, and a
 *   request of w also needs cpuCores_w free CPU on the node to start (held until it finishes);
 * - processing time = work / cpuCores_w (work in core-seconds, sent by the caller; the nominal
 *   median 0.12 x workScale_w when it sends none), divided by `speed`;
 * - requests that cannot start wait in a queue per service, earliest deadline first (the
 *   simulator's default node dequeue), at most queueCapPerReplica x replicas of them (the context
 *   filter's room rule); beyond that, or with no replica of w, the answer is 503;
 * - a request whose deadline (`ttl` ms from arrival, when given) passes before it starts is dropped
 *   unserved with 504 `expired at node`, as the simulator drops it: late work never takes a replica;
 * - the cloud hosts every service, limited by its total vCPU (concurrency = vCPU / cpuCores_w).
 *
 * Wire: `POST /serve?service=<w>&work=<core-s>&ttl=<ms>` -> 200 `{node, service, procMs, queuedMs, cpu,
 * mem, waiting, busy}` or 503 `{reason, ...}`: cpu, mem are utilisation fractions after the
 * request (the node's telemetry), waiting[w] / busy[w] its queue and busy replicas per service
 * (so each agent also sees the load the other eAPs put on the node). `GET /healthz` -> 200.
 * `GET /telemetry` (edge nodes) -> `{seq, cpu, mem, disk, upload}`: the node's latest sample of the
 * four metrics the device filters watch (shared/node-telemetry.ts, one per `telemetryPeriodS`;
 * erratic while the node is abnormal or failed), `seq` counting samples.
 *
 * Faults: `faults` plays the fault model of the simulator (shared/faults.ts: abnormal telemetry
 * for the precursor, then failed for `durationS`: what the node holds is answered 503 `node
 * failed`, new requests too), and the admin server's `PUT /fault {node, state: ok|abnormal|failed}`
 * sets a state now; `GET /faults` returns the requests refused by and lost on failed nodes;
 * `GET /tally` what happened at each target since the start, counted as the simulator counts it
 * (shared/tally.ts: reached, refused, expired unstarted, completed, lost).
 *
 * Admin server (the orchestrator's executor, orchestrator/executors.ts, talks to it):
 * - `POST /scale` `{ops: [{service, node, delta: 1|-1}]}` carries out scale orders by the rules
 *   every executor follows (shared/orchestration/executor.ts: no replica on a failed node, none
 *   without the CPU for one request and the memory, none past maxReplicasPerService; a removed
 *   replica finishes its request first) and answers `{executed, refused}`;
 * - `GET /state` answers the cluster report a policy decides on (ClusterReport: replicas, busy,
 *   waiting, memory, failed nodes) with the statistics since the start (a read changes nothing;
 *   the executor's window is the difference of two reports);
 * - `PUT /placement` `{d: number[][]}` replaces the replica table, `GET /placement` returns it.
 * A created replica reserves its memory at once and serves after the scenario's replicaStartupS
 * (/ speed), as in the simulator; until then requests for it are refused (503 `no replica`).
 *
 * Bad requests are refused, never a crash of the process (every node and the admin server live in
 * it): a request target that is no URL, a missing or malformed query parameter, a body that is not
 * the JSON object the route takes, an index out of range, a table or order list breaking the
 * executors' rules: 400 `{reason}` naming the field; a known path with another method 405, an
 * unknown path 404. The admin server checks the token from the headers alone (401 before a byte
 * of the body is read) and reads at most adminBodyCap bytes (413 above it).
 */
import { BEARER_CHALLENGE, bearerMatches } from '../shared/auth';
import * as http from 'node:http';
import {
  capConnectionsPerAddress,
  HTTP_SERVER_LIMITS,
  MAX_CONNECTIONS,
  MAX_CONNECTIONS_PER_ADDRESS,
  SERVER_KEEP_ALIVE_MS,
} from '../shared/http-limits';
import type { AddressInfo } from 'node:net';
import type { Placement } from '../shared/domain';
import type { Scenario } from '../shared/scenario';
import { NodeTelemetryModel, TELEMETRY_DIMS } from '../shared/node-telemetry';
import { Rng } from '../shared/rng';
import {
  DEFAULT_PRECURSOR_S,
  faultTransitions,
  NODE_FAULT_STATES,
  validateFaults,
  type Fault,
  type NodeFaultState,
} from '../shared/faults';
import type { ScaleOp } from '../shared/domain';
import { emptyWindow, type ClusterReport, type ScaleReport, type WindowReport } from '../shared/orchestration/executor';
import { fitsReplica, initialPlacement, placementShapeProblem } from '../shared/orchestration/placement';
import { emptyTally, TALLY_KEYS, type TargetTally } from '../shared/tally';

export type NodeFault = NodeFaultState;
export { initialPlacement };

export interface ServeResult {
  status: number;
  body: Record<string, unknown>;
}

interface Waiting {
  procMs: number;
  enqueuedMs: number;
  /** performance.now() after which it is dropped instead of started (Infinity: never). */
  expiresMs: number;
  done: (r: ServeResult) => void;
}

/** One emulated target (edge node or cloud); no sockets here, see `EmulatedCluster`. */
export class EmulatedTarget {
  readonly replicas: Int32Array;
  readonly busy: Int32Array;
  readonly waiting: Waiting[][];
  cpuUsed = 0;
  /**
   * Stats window, per service: requests accepted (queued), refused, their work, completed in time
   * (the result can reach the device by its deadline: done by `expiresMs`), failed after acceptance
   * (expired, lost, or done too late), as the simulator's window counts them (in time at the device).
   */
  arrivals: Float64Array;
  refusals: Float64Array;
  workCoreS: Float64Array;
  completed: Float64Array;
  failures: Float64Array;
  busyReplicaMs: Float64Array;
  readyReplicaMs: Float64Array;
  private lastIntegrateMs = performance.now();
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly running: Waiting[] = [];
  /** Set by drain(): resolves once no request runs. */
  private drained: Promise<void> | null = null;
  private onDrained: () => void = () => undefined;
  /** Requests refused because the node had failed. */
  failedRefusals = 0;
  /** Requests the node held (queued or running) when it failed. */
  lostOnFailure = 0;
  /** Since the start, as the simulator counts them per target (shared/tally.ts): reached, refused, expired unstarted, completed, lost. */
  readonly tally = { sent: 0, refused: 0, expired: 0, completed: 0, lost: 0 };

  constructor(
    readonly id: number,
    readonly isCloud: boolean,
    readonly cpuCores: number,
    readonly memGB: number,
    private readonly scenario: Scenario,
    private readonly speed: number,
  ) {
    const W = scenario.services.length;
    this.replicas = new Int32Array(W);
    this.starting = new Int32Array(W);
    this.startTimers = Array.from({ length: W }, () => []);
    this.busy = new Int32Array(W);
    this.waiting = Array.from({ length: W }, () => []);
    this.arrivals = new Float64Array(W);
    this.refusals = new Float64Array(W);
    this.workCoreS = new Float64Array(W);
    this.completed = new Float64Array(W);
    this.failures = new Float64Array(W);
    this.busyReplicaMs = new Float64Array(W);
    this.readyReplicaMs = new Float64Array(W);
    if (isCloud) {
      scenario.services.forEach((s, w) => (this.replicas[w] = Math.max(1, Math.floor(cpuCores / s.cpuCores))));
    }
  }

  /** Replicas of w created and not serving yet (each serves after the scenario's replicaStartupS), with their timers. */
  readonly starting: Int32Array;
  private readonly startTimers: NodeJS.Timeout[][];
  /** Settles when the latest replica started here serves (true) or is cancelled (false); for tests. */
  lastStart: Promise<boolean> = Promise.resolve(false);
  private readonly startDone = new Map<NodeJS.Timeout, (served: boolean) => void>();

  /** Creates a replica of w that serves after `afterMs` (real ms), as the simulator's replicaStartupS. */
  startReplica(w: number, afterMs: number): void {
    this.starting[w]++;
    let done: (served: boolean) => void = () => undefined;
    this.lastStart = new Promise<boolean>((resolve) => (done = resolve));
    const t = setTimeout(() => {
      this.startTimers[w].splice(this.startTimers[w].indexOf(t), 1);
      this.startDone.delete(t);
      this.starting[w]--;
      this.setReplicas(w, this.replicas[w] + 1);
      done(true);
    }, afterMs);
    this.startTimers[w].push(t);
    this.startDone.set(t, done);
  }

  /** Cancels the latest starting replica of w; false when none is starting. */
  cancelStarting(w: number): boolean {
    const t = this.startTimers[w].pop();
    if (t === undefined) return false;
    clearTimeout(t);
    this.starting[w]--;
    this.startDone.get(t)?.(false);
    this.startDone.delete(t);
    return true;
  }

  setReplicas(w: number, k: number): void {
    if (this.isCloud) return;
    this.integrate();
    this.replicas[w] = k;
    if (k === 0) {
      // no replica left to serve the waiting ones: refuse them now
      this.tally.lost += this.waiting[w].length;
      for (const q of this.waiting[w].splice(0)) q.done({ status: 503, body: { reason: 'replica removed' } });
    }
    this.tryStart();
  }

  /** Fault state: 'abnormal' (telemetry erratic, still serving: the minutes before a failure), 'failed' (refuses everything). */
  fault: NodeFault = 'ok';

  /** Fails the node: what it holds is lost (answered 503 `node failed`), new requests are refused. */
  fail(): void {
    this.fault = 'failed';
    this.lostOnFailure += this.running.length + this.waiting.reduce((a, q) => a + q.length, 0);
    this.tally.lost += this.running.length + this.waiting.reduce((a, q) => a + q.length, 0);
    this.waiting.forEach((q, w) => (this.failures[w] += q.length));
    for (let w = 0; w < this.busy.length; w++) this.failures[w] += this.busy[w];
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    this.busy.fill(0);
    this.cpuUsed = 0;
    for (const q of this.waiting) for (const r of q.splice(0)) r.done({ status: 503, body: { reason: 'node failed' } });
    for (const r of this.running.splice(0)) r.done({ status: 503, body: { reason: 'node failed' } });
    this.checkDrained();
  }

  serve(w: number, workCoreS: number | null, ttlMs: number | null = null): Promise<ServeResult> {
    const svc = this.scenario.services[w];
    this.integrate();
    this.tally.sent++;
    if (this.drained !== null) {
      this.tally.refused++;
      this.refusals[w]++;
      return Promise.resolve({ status: 503, body: { reason: 'node stopping' } });
    }
    if (this.fault === 'failed') {
      this.tally.refused++;
      this.failedRefusals++;
      this.refusals[w]++;
      return Promise.resolve({ status: 503, body: { reason: 'node failed' } });
    }
    if (this.replicas[w] === 0) {
      this.tally.refused++;
      this.refusals[w]++;
      return Promise.resolve({ status: 503, body: { reason: `no replica of service ${w}` } });
    }
    const cap = this.scenario.queueCapPerReplica * this.replicas[w];
    if (this.waiting[w].length >= cap) {
      this.tally.refused++;
      this.refusals[w]++;
      return Promise.resolve({ status: 503, body: { reason: 'full', ...this.snapshot() } });
    }
    const work = workCoreS ?? 0.12 * svc.workScale;
    this.arrivals[w]++;
    this.workCoreS[w] += work;
    const procMs = ((work / svc.cpuCores) * 1000) / this.speed;
    const now = performance.now();
    const expiresMs = ttlMs === null ? Infinity : now + ttlMs;
    return new Promise<ServeResult>((done) => {
      // earliest deadline first; equal deadlines (no ttl) keep arrival order
      const q = this.waiting[w];
      let i = q.length;
      while (i > 0 && q[i - 1].expiresMs > expiresMs) i--;
      q.splice(i, 0, { procMs, enqueuedMs: now, expiresMs, done });
      this.tryStart();
    });
  }

  /** The load report every answer carries: utilisations and, per service, waiting and busy counts. */
  snapshot(): { cpu: number; mem: number; waiting: number[]; busy: number[] } {
    return {
      cpu: this.cpuUsed / this.cpuCores,
      mem: this.memUtil(),
      waiting: this.waiting.map((q) => q.length),
      busy: Array.from(this.busy),
    };
  }

  /** Memory reserved by replicas (GB), removed ones still serving included. */
  reservedMemGB(): number {
    let used = 0;
    this.scenario.services.forEach((s, w) => (used += (Math.max(this.replicas[w], this.busy[w]) + this.starting[w]) * s.memGB));
    return used;
  }

  /** Memory in use by replicas, fraction of the node's. */
  memUtil(): number {
    if (this.isCloud) return 0;
    let used = 0;
    this.scenario.services.forEach((s, w) => (used += this.replicas[w] * s.memGB));
    return Math.min(4, used / this.memGB);
  }

  /** Window stats since the previous call (seconds, scaled back to scenario time). */
  takeStats(): {
    arrivals: number[];
    refusals: number[];
    workCoreS: number[];
    completed: number[];
    failures: number[];
    busyReplicaS: number[];
    readyReplicaS: number[];
  } {
    this.integrate();
    const s = {
      arrivals: Array.from(this.arrivals),
      refusals: Array.from(this.refusals),
      workCoreS: Array.from(this.workCoreS),
      completed: Array.from(this.completed),
      failures: Array.from(this.failures),
      busyReplicaS: Array.from(this.busyReplicaMs, (x) => (x / 1000) * this.speed),
      readyReplicaS: Array.from(this.readyReplicaMs, (x) => (x / 1000) * this.speed),
    };
    for (const a of [this.arrivals, this.refusals, this.workCoreS, this.completed, this.failures, this.busyReplicaMs, this.readyReplicaMs])
      a.fill(0);
    return s;
  }

  /**
   * Stop taking requests (503 `node stopping`, the waiting ones too) and let the running ones
   * finish: resolves once none runs. close() then ends the rest.
   */
  drain(): Promise<void> {
    if (this.drained === null) {
      this.drained = new Promise<void>((resolve) => (this.onDrained = resolve));
      for (const q of this.waiting) for (const r of q.splice(0)) r.done({ status: 503, body: { reason: 'node stopping' } });
      this.checkDrained();
    }
    return this.drained;
  }

  private checkDrained(): void {
    if (this.drained !== null && this.running.length === 0) this.onDrained();
  }

  close(): void {
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    for (let w = 0; w < this.starting.length; w++) while (this.cancelStarting(w));
    for (const q of this.waiting) for (const r of q.splice(0)) r.done({ status: 503, body: { reason: 'node stopping' } });
  }

  private integrate(): void {
    const now = performance.now();
    const dt = now - this.lastIntegrateMs;
    this.lastIntegrateMs = now;
    if (dt <= 0) return;
    for (let w = 0; w < this.replicas.length; w++) {
      this.busyReplicaMs[w] += Math.min(this.busy[w], this.replicas[w]) * dt;
      this.readyReplicaMs[w] += this.replicas[w] * dt;
    }
  }

  /**
   * Starts what can start. `freedAtMs` is when the resource just released was free on the node's own
   * clock: a completion's timer fires a little after the request's processing time (setTimeout's
   * millisecond rounding and event-loop delays, 1-7 ms a request on a busy machine), and a real
   * replica would have taken its next request at the exact end. The next request's processing is
   * counted from then (its timer is that much shorter), so the emulated node serves exactly
   * work / cpuCores a request on average, as the simulator's, and timer lag is not lost capacity
   * (it was 3-6% at the cloud with the machine busy, enough to double the cloud's expired requests).
   * Timers that fire early (up to 1 ms) do not add capacity either: the next request starts at the end.
   * Waiting requests are dropped when their deadline had passed at `freedAtMs`. Order: the service
   * just released first (`first`), then the earliest deadline at the head of any queue, as the
   * simulator's tryStart / tryStartAny with EDF queues.
   */
  private tryStart(freedAtMs = performance.now(), first = -1): void {
    const W = this.replicas.length;
    for (let w = 0; w < W; w++) {
      const q = this.waiting[w];
      for (let i = q.length - 1; i >= 0; i--) {
        if (q[i].expiresMs < freedAtMs) {
          const [r] = q.splice(i, 1);
          this.failures[w]++;
          this.tally.expired++;
          r.done({ status: 504, body: { reason: 'expired at node', ...this.snapshot() } });
        }
      }
    }
    const canStart = (w: number) =>
      this.waiting[w].length > 0 &&
      this.busy[w] < this.replicas[w] &&
      this.cpuUsed + this.scenario.services[w].cpuCores <= this.cpuCores + 1e-9;
    if (first >= 0) while (canStart(first)) this.start(first, this.waiting[first].shift()!, freedAtMs);
    for (;;) {
      let best = -1;
      for (let w = 0; w < W; w++) if (canStart(w) && (best < 0 || this.waiting[w][0].expiresMs < this.waiting[best][0].expiresMs)) best = w;
      if (best < 0) return;
      this.start(best, this.waiting[best].shift()!, freedAtMs);
    }
  }

  /** Starts r at max(its arrival, atMs) on the node's clock (see tryStart); its result is sent when its processing ends. */
  private start(w: number, r: Waiting, atMs: number): void {
    const need = this.scenario.services[w].cpuCores;
    this.integrate();
    this.busy[w]++;
    this.cpuUsed += need;
    // atMs may be a little ahead of now: a timer can also fire up to 1 ms early (libuv's clock is in
    // whole ms); the replica was busy until then on the node clock
    const startMs = Math.max(r.enqueuedMs, atMs);
    const queuedMs = startMs - r.enqueuedMs;
    const endMs = startMs + r.procMs;
    this.running.push(r);
    const t = setTimeout(
      () => {
        this.timers.delete(t);
        this.running.splice(this.running.indexOf(r), 1);
        this.integrate();
        this.busy[w]--;
        this.cpuUsed = Math.max(0, this.cpuUsed - need);
        // in time iff its result gets back by the deadline: done by the latest start the agent gave
        // (deadline - return time), as the simulator's doneAt <= deadline; the tally counts it either way.
        // Until 2026-12-04 every completion counted in time here, so a live orchestration policy saw
        // about half the failure rate the simulator's did (GPG's failed / arrivals feature)
        if (endMs <= r.expiresMs) this.completed[w]++;
        else this.failures[w]++;
        this.tally.completed++;
        r.done({
          status: 200,
          body: { node: this.id, service: w, procMs: r.procMs, queuedMs, ...this.snapshot() },
        });
        this.tryStart(endMs, w);
        this.checkDrained();
      },
      Math.max(0, endMs - performance.now()),
    );
    this.timers.add(t);
  }
}

export interface EmulatedClusterOptions {
  scenario: Scenario;
  /** Seed of the telemetry series. @defaultValue 1 */
  seed?: number;
  /** Telemetry sample period, seconds of scenario time (real: / speed). @defaultValue 1 */
  telemetryPeriodS?: number;
  /** Node failures to play (shared/faults.ts), from `listen()`. @defaultValue none */
  faults?: readonly Fault[];
  /** Abnormal telemetry before a failure whose fault gives none (seconds of scenario time). @defaultValue DEFAULT_PRECURSOR_S (20) */
  precursorS?: number;
  /** Time scale (nominal work only; callers scale the work they send). @defaultValue 1 */
  speed?: number;
  /** @defaultValue '127.0.0.1' */
  host?: string;
  /** Admin server port. @defaultValue 0 */
  adminPort?: number;
  /**
   * Token the admin server's changing requests (POST /scale, PUT /fault, PUT /placement) must
   * carry as `Authorization: Bearer <token>`; reads stay open. null: no check (in-process tests);
   * `kais node` always sets one. @defaultValue null
   */
  adminToken?: string | null;
}

export class EmulatedCluster {
  readonly targets: EmulatedTarget[];
  private readonly servers: http.Server[] = [];
  private admin: http.Server | null = null;
  nodeUrls: string[] = [];
  cloudUrl = '';
  adminUrl = '';
  private placement: Placement;
  private readonly telemetry: NodeTelemetryModel;
  /** Latest telemetry sample per edge node: [cpu, mem, disk, upload], and its sequence number. */
  private readonly samples: Float64Array[];
  private readonly cpuLevel: Float64Array;
  private telemetrySeq = 0;
  private readonly clusterTimers = new Set<NodeJS.Timeout>();
  private readonly t0Ms: number;
  /** Per-service statistics since the start (the report's window). */
  private readonly totals: WindowReport;
  /** Largest admin request body read, bytes (adminBodyCap). */
  private readonly adminBodyCap: number;

  constructor(private readonly o: EmulatedClusterOptions) {
    const s = o.scenario;
    const nodes = s.eaps.flatMap((e) => e.nodes);
    const speed = o.speed ?? 1;
    this.targets = nodes.map((n, i) => new EmulatedTarget(i, false, n.cpuCores, n.memGB, s, speed));
    this.targets.push(new EmulatedTarget(nodes.length, true, s.cloud.vms * s.cloud.vcpuPerVm, s.cloud.vms * s.cloud.memGBPerVm, s, speed));
    this.placement = initialPlacement(s);
    this.applyPlacement(this.placement);
    validateFaults(o.faults ?? [], nodes.length);
    checkFaultTimes(o.faults ?? [], speed);
    this.adminBodyCap = adminBodyCap(s);
    this.t0Ms = performance.now();
    this.totals = emptyWindow(s.services.length);
    this.telemetry = new NodeTelemetryModel(nodes.length, o.telemetryPeriodS ?? 1, Rng.derive(o.seed ?? 1, 'emulated-telemetry'));
    this.samples = nodes.map(() => new Float64Array(TELEMETRY_DIMS));
    this.cpuLevel = new Float64Array(nodes.length);
  }

  /** Sets a node's fault state now ('failed' drops what it holds; 'ok' recovers it). */
  setFault(node: number, state: NodeFault): void {
    const t = this.targets[node];
    if (!t || t.isCloud) throw new TypeError(`fault: no edge node ${node}`);
    if (state === 'failed' && t.fault !== 'failed') t.fail();
    else t.fault = state;
  }

  /** Requests refused by failed nodes, and requests failed nodes held when they failed. */
  /** Per target (edge nodes, then the cloud), since the start: the counts the simulator keeps as `EdgeCloudEnv.tally`. */
  tally(): TargetTally {
    const out = emptyTally(this.targets.length);
    this.targets.forEach((t, i) => {
      for (const k of TALLY_KEYS) out[k][i] = t.tally[k];
    });
    return out;
  }

  failureLosses(): { refused: number; lostOnFailure: number } {
    let refused = 0;
    let lostOnFailure = 0;
    for (const t of this.targets) {
      refused += t.failedRefusals;
      lostOnFailure += t.lostOnFailure;
    }
    return { refused, lostOnFailure };
  }

  /** Samples every edge node's telemetry (the series the simulator's device filters see). */
  private sampleTelemetry(): void {
    this.telemetrySeq++;
    for (let n = 0; n < this.samples.length; n++) {
      const t = this.targets[n];
      this.cpuLevel[n] = 0.97 * this.cpuLevel[n] + 0.03 * (t.cpuUsed / t.cpuCores);
      this.telemetry.sample(n, t.fault !== 'ok', this.cpuLevel[n], Math.min(1, t.memUtil()), this.samples[n]);
    }
  }

  private after(ms: number, f: () => void): void {
    const t = setTimeout(() => {
      this.clusterTimers.delete(t);
      f();
    }, ms);
    this.clusterTimers.add(t);
  }

  /** Replaces the replica table d[w][n]; throws TypeError for a table of another shape. */
  applyPlacement(d: Placement): void {
    const W = this.o.scenario.services.length;
    const N = this.targets.length - 1;
    if (
      !Array.isArray(d) ||
      d.length !== W ||
      !d.every((row) => Array.isArray(row) && row.length === N && row.every((k) => Number.isInteger(k) && k >= 0))
    ) {
      throw new TypeError(`placement must be ${W} rows of ${N} non-negative integers`);
    }
    this.placement = d.map((row) => row.slice());
    for (let w = 0; w < W; w++) {
      for (let n = 0; n < N; n++) {
        while (this.targets[n].cancelStarting(w));
        this.targets[n].setReplicas(w, d[w][n]);
      }
    }
  }

  /** The replica table d[w][n] the cluster holds now (a copy). */
  currentPlacement(): Placement {
    return this.placement.map((row) => row.slice());
  }

  /** Carries out scale orders by the executors' rules (shared/orchestration/executor.ts). */
  scale(ops: readonly ScaleOp[]): ScaleReport {
    const s = this.o.scenario;
    const W = s.services.length;
    const N = this.targets.length - 1;
    const executed: ScaleOp[] = [];
    for (const op of ops) {
      const { node: n, service: w } = op;
      if (!Number.isInteger(n) || n < 0 || n >= N || !Number.isInteger(w) || w < 0 || w >= W) continue;
      const t = this.targets[n];
      const svc = s.services[w];
      if (op.delta === 1) {
        if (t.fault === 'failed') continue;
        if (!fitsReplica(t.cpuCores, t.memGB - t.reservedMemGB(), svc.cpuCores, svc.memGB)) continue;
        if (this.placement[w].reduce((a, b) => a + b, 0) >= s.maxReplicasPerService) continue;
        // it serves after the start-up time, as in the simulator
        if (s.replicaStartupS > 0) t.startReplica(w, (s.replicaStartupS * 1000) / (this.o.speed ?? 1));
        else t.setReplicas(w, t.replicas[w] + 1);
      } else if (op.delta === -1 && this.placement[w][n] > 0) {
        // a starting replica is cancelled first, else a ready one leaves (finishing its request)
        if (!t.cancelStarting(w)) t.setReplicas(w, t.replicas[w] - 1);
      } else continue;
      this.placement[w][n] += op.delta;
      executed.push({ service: w, node: n, delta: op.delta });
    }
    return { executed, refused: ops.length - executed.length };
  }

  /**
   * The cluster report (shared/orchestration/executor.ts); its `window` holds the statistics since
   * the cluster started (windowS = nowS): reading it changes nothing, an executor takes the
   * difference of two reports (windowSince).
   */
  report(): ClusterReport {
    const W = this.o.scenario.services.length;
    const T = this.targets.length;
    const r: ClusterReport = {
      nowS: ((performance.now() - this.t0Ms) / 1000) * (this.o.speed ?? 1),
      ready: new Array<number>(T * W).fill(0),
      starting: new Array<number>(T * W).fill(0),
      draining: new Array<number>(T * W).fill(0),
      busy: new Array<number>(T * W).fill(0),
      waiting: new Array<number>(T * W).fill(0),
      usedMemGB: new Array<number>(T).fill(0),
      freeCpuCores: new Array<number>(T).fill(0),
      failed: this.targets.filter((t) => !t.isCloud).map((t) => (t.fault === 'failed' ? 1 : 0)),
      window: this.totals,
    };
    const win = this.totals;
    this.targets.forEach((t, i) => {
      const st = t.takeStats();
      for (let w = 0; w < W; w++) {
        const k = i * W + w;
        // a removed replica still serving its request is draining, as in the simulator
        r.ready[k] = Math.max(t.replicas[w], t.busy[w]);
        r.starting[k] = t.starting[w];
        r.draining[k] = Math.max(0, t.busy[w] - t.replicas[w]);
        r.busy[k] = t.busy[w];
        r.waiting[k] = t.waiting[w].length;
        // a request refused at an edge node is retried on the cloud by its agent: count it there only
        win.arrivals[w] += st.arrivals[w] + (t.isCloud ? st.refusals[w] : 0);
        win.workCoreS[w] += st.workCoreS[w];
        win.completedInTime[w] += st.completed[w];
        win.failed[w] += st.failures[w] + (t.isCloud ? st.refusals[w] : 0);
        if (!t.isCloud) {
          win.busyReplicaS[w] += st.busyReplicaS[w];
          win.readyReplicaS[w] += st.readyReplicaS[w];
        }
      }
      r.usedMemGB[i] = t.isCloud ? 0 : t.reservedMemGB();
      r.freeCpuCores[i] = t.cpuCores - t.cpuUsed;
    });
    win.windowS = r.nowS;
    r.window = {
      ...win,
      arrivals: [...win.arrivals],
      busyReplicaS: [...win.busyReplicaS],
      readyReplicaS: [...win.readyReplicaS],
      completedInTime: [...win.completedInTime],
      failed: [...win.failed],
      workCoreS: [...win.workCoreS],
    };
    return r;
  }

  async listen(): Promise<void> {
    const host = this.o.host ?? '127.0.0.1';
    for (const t of this.targets) {
      const server = http.createServer(HTTP_SERVER_LIMITS, (req, res) => this.handleServe(t, req, res));
      server.keepAliveTimeout = SERVER_KEEP_ALIVE_MS;
      server.maxConnections = MAX_CONNECTIONS.ingress;
      await listen(server, 0, host);
      this.servers.push(server);
      const url = `http://${host}:${(server.address() as AddressInfo).port}`;
      if (t.isCloud) this.cloudUrl = url;
      else this.nodeUrls.push(url);
    }
    this.admin = http.createServer(HTTP_SERVER_LIMITS, (req, res) => this.handleAdmin(req, res));
    this.admin.maxConnections = MAX_CONNECTIONS.admin;
    capConnectionsPerAddress(this.admin, MAX_CONNECTIONS_PER_ADDRESS.admin);
    await listen(this.admin, this.o.adminPort ?? 0, host);
    this.adminUrl = `http://${host}:${(this.admin.address() as AddressInfo).port}`;
    const realMs = (scenarioS: number) => (scenarioS * 1000) / (this.o.speed ?? 1);
    this.sampleTelemetry();
    const every = setInterval(() => this.sampleTelemetry(), realMs(this.o.telemetryPeriodS ?? 1));
    every.unref();
    this.clusterTimers.add(every as unknown as NodeJS.Timeout);
    for (const f of faultTransitions(this.o.faults ?? [], this.o.precursorS ?? DEFAULT_PRECURSOR_S))
      this.after(realMs(f.atS), () => this.setFault(f.node, f.state));
  }

  /**
   * Stops the nodes: with `drainMs` > 0, first no new request is taken (503 `node stopping`) and the
   * running ones may finish for up to drainMs (real ms; `kais node` on SIGTERM); then every timer and
   * server is closed (what still runs is cut).
   */
  async close(options: { drainMs?: number } = {}): Promise<void> {
    const drainMs = options.drainMs ?? 0;
    if (drainMs > 0) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.all(this.targets.map((t) => t.drain())),
        new Promise<void>((resolve) => (timer = setTimeout(resolve, drainMs))),
      ]);
      clearTimeout(timer);
    }
    for (const t of this.clusterTimers) clearTimeout(t);
    this.clusterTimers.clear();
    for (const t of this.targets) t.close();
    const all = [...this.servers, ...(this.admin ? [this.admin] : [])];
    await Promise.all(
      all.map(
        (s) =>
          new Promise<void>((resolve) => {
            s.close(() => resolve());
            s.closeAllConnections();
          }),
      ),
    );
  }

  private handleServe(t: EmulatedTarget, req: http.IncomingMessage, res: http.ServerResponse): void {
    // a target's requests carry their parameters in the query: a body is refused unread, and the
    // answer closes the connection (reading it on, 8 GB in 4 s cost a core)
    if (hasBody(req)) {
      res.once('finish', () => req.socket.destroy());
      return json(res, 413, { reason: 'body: a target takes none (service, work and ttl are query parameters)' }, { connection: 'close' });
    }
    req.resume();
    // `new URL` throws on a target such as `//[`: unguarded, one such request took every node down
    const url = requestUrl(req);
    if (url === null) return json(res, 400, { reason: 'url: not a request target this server can read' });
    const refused = routeRefusal(t.isCloud ? CLOUD_ROUTES : NODE_ROUTES, req.method, url.pathname);
    if (refused) return json(res, refused.status, { reason: refused.reason }, refused.headers);
    if (url.pathname === '/healthz') return json(res, 200, { ok: true, node: t.id });
    if (url.pathname === '/telemetry') {
      const x = this.samples[t.id];
      return json(res, 200, { seq: this.telemetrySeq, cpu: x[0], mem: x[1], disk: x[2], upload: x[3] });
    }
    // POST /serve: service is required (an absent or empty one was read as service 0), ttl optional
    // but never empty (`ttl=` was read as 0 ms: expired at once)
    const q = url.searchParams;
    const W = t.replicas.length;
    const w = wholeNumber(q.get('service'));
    if (w === null || w >= W)
      return json(res, 400, { reason: `service: must be an integer in 0..${W - 1}, got ${shown(q.get('service'))}` });
    const ttlText = q.get('ttl');
    const ttl = ttlText === null ? null : wholeNumber(ttlText);
    if (ttlText !== null && ttl === null)
      return json(res, 400, { reason: `ttl: must be whole milliseconds >= 0 when given, got ${shown(ttlText)}` });
    const workText = q.get('work');
    const work = workText === null || workText.trim() !== workText || workText === '' ? null : Number(workText);
    if (workText !== null && (work === null || !Number.isFinite(work) || work < 0 || work > 3600))
      return json(res, 400, { reason: `work: must be core-seconds in 0..3600 when given, got ${shown(workText)}` });
    void t.serve(w, work, ttl).then((r) => json(res, r.status, r.body));
  }

  private handleAdmin(req: http.IncomingMessage, res: http.ServerResponse): void {
    // an answer given before the body is read closes the connection: the rest of the body is not read
    // (Node drops the socket once the answer is out) and the next request cannot start inside it
    const early = (status: number, reason: string, headers: http.OutgoingHttpHeaders = {}) =>
      json(res, status, { reason }, hasBody(req) ? { ...headers, connection: 'close' } : headers);
    const url = requestUrl(req);
    if (url === null) return early(400, 'url: not a request target this server can read');
    const path = url.pathname;
    const refused = routeRefusal(ADMIN_ROUTES, req.method, path);
    if (refused) return early(refused.status, refused.reason, refused.headers);
    if (req.method === 'GET') {
      req.resume();
      if (path === '/state') return json(res, 200, this.report());
      if (path === '/placement') return json(res, 200, { d: this.currentPlacement() });
      if (path === '/tally') return json(res, 200, this.tally());
      return json(res, 200, { ...this.failureLosses(), states: this.targets.filter((t) => !t.isCloud).map((t) => t.fault) });
    }
    // changes: the token from the headers alone, before a byte of the body is read (it was read
    // whole first, so 300 MB without a token cost 300 MB before the 401)
    if (!bearerMatches(req.headers.authorization, this.o.adminToken ?? null))
      return early(401, 'admin token required: Authorization: Bearer <token> (kais node --admin-token-file)', BEARER_CHALLENGE);
    const tooLarge = `body: over ${this.adminBodyCap} bytes`;
    if (Number(req.headers['content-length'] ?? 0) > this.adminBodyCap) return early(413, tooLarge);
    let chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      if (res.headersSent) return;
      size += c.length;
      if (size <= this.adminBodyCap) return void chunks.push(c);
      chunks = [];
      early(413, tooLarge);
    });
    req.on('end', () => {
      if (res.headersSent) return;
      let body: unknown;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch {
        return json(res, 400, { reason: 'body: not JSON' });
      }
      // a mistake of ours answers 500 and leaves the process up (a throw here was uncaught: every node down)
      let r: ServeResult;
      try {
        r = this.change(req.method === 'POST' ? 'POST' : 'PUT', path, body);
      } catch (e) {
        r = { status: 500, body: { reason: `internal error: ${(e as Error).message}` } };
      }
      json(res, r.status, r.body);
    });
  }

  /**
   * A change the admin server was asked for, its body parsed: checked field by field first (every
   * index an integer in range before it indexes anything: `"__proto__"` or `"length"` as a node did
   * reach the tables), so a mistake is a 400 naming the field, never a raw JavaScript message.
   */
  private change(method: 'POST' | 'PUT', path: string, body: unknown): ServeResult {
    const bad = (reason: string): ServeResult => ({ status: 400, body: { reason } });
    if (!isObject(body)) return bad('body: must be a JSON object');
    const W = this.o.scenario.services.length;
    const N = this.targets.length - 1;
    if (method === 'POST' && path === '/scale') {
      if (!Array.isArray(body.ops)) return bad('ops: must be a list of {service, node, delta}');
      const ops: ScaleOp[] = [];
      for (const [i, op] of (body.ops as unknown[]).entries()) {
        if (!isObject(op)) return bad(`ops[${i}]: must be an object {service, node, delta}`);
        if (!indexIn(op.service, W)) return bad(`ops[${i}].service: must be an integer in 0..${W - 1}`);
        if (!indexIn(op.node, N)) return bad(`ops[${i}].node: must be an integer in 0..${N - 1}`);
        if (op.delta !== 1 && op.delta !== -1) return bad(`ops[${i}].delta: must be 1 or -1`);
        ops.push({ service: op.service, node: op.node, delta: op.delta });
      }
      return { status: 200, body: { ...this.scale(ops) } };
    }
    if (path === '/fault') {
      if (!indexIn(body.node, N)) return bad(`node: must be an integer in 0..${N - 1}`);
      const state = NODE_FAULT_STATES.find((s) => s === body.state);
      if (state === undefined) return bad(`state: must be ok, abnormal or failed, got ${shown(body.state)}`);
      this.setFault(body.node, state);
      return { status: 200, body: { ok: true } };
    }
    // PUT /placement
    const problem = this.placementProblem(body.d);
    if (problem !== null) return bad(problem);
    this.applyPlacement(body.d as Placement);
    return { status: 200, body: { ok: true } };
  }

  /**
   * Why a replica table from outside cannot be held, or null: the shape (W rows of N non-negative
   * integers) and the rules POST /scale applies to each new replica (shared/orchestration/executor.ts),
   * to the table as a whole: no new replica on a failed node, each node with the CPU for one request of
   * every service it hosts and the memory for all its replicas (removed ones still serving included,
   * as reservedMemGB counts them), at most maxReplicasPerService of a service. Unchecked, a table of a
   * million replicas was taken and the node "held" them all (usedMemGB 250000).
   */
  placementProblem(d: unknown): string | null {
    const s = this.o.scenario;
    const W = s.services.length;
    const N = this.targets.length - 1;
    const shape = placementShapeProblem(s, d);
    if (shape !== null) return shape;
    const table = d as number[][];
    for (let n = 0; n < N; n++) {
      const t = this.targets[n];
      let memGB = 0;
      for (let w = 0; w < W; w++) {
        const k = table[w][n];
        const svc = s.services[w];
        if (t.fault === 'failed' && k > this.placement[w][n]) return `d[${w}][${n}]: node ${n} has failed, no new replica there`;
        if (k > 0 && !fitsReplica(t.cpuCores, Infinity, svc.cpuCores, 0))
          return `d[${w}][${n}]: a replica of service ${w} needs ${svc.cpuCores} cores, node ${n} has ${t.cpuCores}`;
        memGB += Math.max(k, t.busy[w]) * svc.memGB;
      }
      if (!fitsReplica(Infinity, t.memGB, 0, memGB))
        return `d[*][${n}]: the replicas need ${+memGB.toFixed(3)} GB of memory, node ${n} has ${t.memGB} GB`;
    }
    return null;
  }
}

/**
 * The least admin request body read, bytes: the orchestrator's HTTP API's cap (orchestrator/http.ts,
 * 64 KiB). adminBodyCap raises it for a scenario whose largest honest body is bigger.
 */
export const ADMIN_BODY_BYTES = 64 * 1024;
/** The most admin request body ever read, bytes, whatever the scenario: what one request may cost. */
export const ADMIN_BODY_BYTES_MAX = 8 * 1024 * 1024;

/**
 * The admin body cap of a scenario: ADMIN_BODY_BYTES, or the largest honest body when that is bigger
 * (a POST /scale removing and making again every replica the scenario allows, 2 W maxReplicasPerService
 * orders of at most 64 bytes, e.g. 160 KB for the large scenario; a PUT /placement is far smaller), at
 * most ADMIN_BODY_BYTES_MAX: the executor's orders must never be refused for their size.
 */
export function adminBodyCap(s: Scenario): number {
  const orders = 2 * s.services.length * s.maxReplicasPerService * 64;
  return Math.min(ADMIN_BODY_BYTES_MAX, Math.max(ADMIN_BODY_BYTES, orders));
}

/** The longest a Node timer can wait (ms, 2^31 - 1, about 24.8 days): a longer one fires at once, with a warning. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Checks that every change the faults make can be scheduled: a fault is played by timers of
 * (scenario seconds x 1000 / speed) ms, and a time past MAX_TIMER_MS fired at once (a startS of 1e12
 * failed the node at the start, a durationS of 1e12 recovered it at once) with Node's non-JSON
 * TimeoutOverflowWarning. Throws TypeError naming the fault and its field.
 */
function checkFaultTimes(faults: readonly Fault[], speed: number): void {
  // the real ms exactly as listen() computes them
  const tooLate = (scenarioS: number) => !((scenarioS * 1000) / speed <= MAX_TIMER_MS);
  const why = `past the ${Math.floor((MAX_TIMER_MS / 1000) * speed)} s of scenario time a timer can wait at speed ${speed} (2^31 - 1 ms, about 24.8 days of real time)`;
  faults.forEach((f, i) => {
    if (tooLate(f.startS)) throw new TypeError(`faults[${i}].startS: ${f.startS} s is ${why}`);
    if (tooLate(f.startS + f.durationS))
      throw new TypeError(`faults[${i}].durationS: the failure would end at ${f.startS + f.durationS} s, ${why}`);
  });
}

/** The routes of a node server, a cloud server and the admin server, with the methods each answers. */
const NODE_ROUTES: ReadonlyMap<string, readonly string[]> = new Map([
  ['/healthz', ['GET']],
  ['/telemetry', ['GET']],
  ['/serve', ['POST']],
]);
const CLOUD_ROUTES: ReadonlyMap<string, readonly string[]> = new Map([
  ['/healthz', ['GET']],
  ['/serve', ['POST']],
]);
const ADMIN_ROUTES: ReadonlyMap<string, readonly string[]> = new Map([
  ['/state', ['GET']],
  ['/placement', ['GET', 'PUT']],
  ['/scale', ['POST']],
  ['/fault', ['PUT']],
  ['/faults', ['GET']],
  ['/tally', ['GET']],
]);

/** 404 for a path the server does not have, 405 (with Allow) for another method on one it has, else null. */
function routeRefusal(
  routes: ReadonlyMap<string, readonly string[]>,
  method: string | undefined,
  path: string,
): { status: number; reason: string; headers: http.OutgoingHttpHeaders } | null {
  const methods = routes.get(path);
  if (methods === undefined) return { status: 404, reason: `no such route (known: ${[...routes.keys()].join(', ')})`, headers: {} };
  if (method === undefined || !methods.includes(method))
    return { status: 405, reason: `${path} answers ${methods.join(', ')} only`, headers: { allow: methods.join(', ') } };
  return null;
}

/** The request's URL, or null when its target is none (`//[`: `new URL` throws). */
function requestUrl(req: http.IncomingMessage): URL | null {
  try {
    return new URL(req.url ?? '/', 'http://x');
  } catch {
    return null;
  }
}

/** Whether the request carries a body (a length above 0, or chunks). */
function hasBody(req: http.IncomingMessage): boolean {
  return req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;
}

/** A query parameter holding a whole number (digits only: no sign, blank, fraction or exponent), else null. */
function wholeNumber(text: string | null): number | null {
  return text !== null && /^\d{1,15}$/.test(text) ? Number(text) : null;
}

/**
 * A value from a request, for a reason: a string quoted and cut to 40 characters, a number, boolean
 * or null as JSON, anything else by its kind (never JSON.stringify of a request's object: one nested
 * 60000 deep overflows the stack).
 */
function shown(x: unknown): string {
  if (typeof x === 'string') return JSON.stringify(x.length > 40 ? `${x.slice(0, 40)}...` : x);
  if (x === null || typeof x === 'number' || typeof x === 'boolean') return String(x);
  return Array.isArray(x) ? 'a list' : x === undefined ? 'nothing' : `an ${typeof x}`;
}

/** A JSON object (not null, not a list). */
function isObject(x: unknown): x is Record<string, unknown> {
  return typeof x === 'object' && x !== null && !Array.isArray(x);
}

/** An integer in 0..n-1 (a number: the string "0" is not one). */
function indexIn(x: unknown, n: number): x is number {
  return typeof x === 'number' && Number.isInteger(x) && x >= 0 && x < n;
}

function listen(server: http.Server, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

function json(res: http.ServerResponse, status: number, body: unknown, headers: http.OutgoingHttpHeaders = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}
