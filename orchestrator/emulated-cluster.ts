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
 * Faults: `faults` plays scripted failures (abnormal telemetry for `precursorS`, then failed for
 * `downS`: what the node holds is answered 503 `node failed`, new requests too), and the admin
 * server's `PUT /fault {node, state: ok|abnormal|failed}` sets a state now; `GET /faults` returns
 * the requests refused by and lost on failed nodes.
 *
 * Admin server (the orchestrator's executor talks to it): `PUT /placement` `{d: number[][]}`
 * replaces the replica table (a removed replica finishes its request first); `GET /stats`
 * returns per-service `arrivals`, `busyReplicaS`, `readyReplicaS` over the window since the
 * previous call (what the hpa rule needs), and `GET /placement` the current table.
 */
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Placement } from '../shared/domain';
import type { Scenario } from '../shared/scenario';
import { topologyOf } from '../shared/scenario';
import { NodeTelemetryModel, TELEMETRY_DIMS } from '../shared/node-telemetry';
import { Rng } from '../shared/rng';

export type NodeFault = 'ok' | 'abnormal' | 'failed';

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
  /** Stats window, per service. */
  arrivals: Float64Array;
  busyReplicaMs: Float64Array;
  readyReplicaMs: Float64Array;
  private lastIntegrateMs = performance.now();
  private rr = 0;
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly running: Waiting[] = [];
  /** Requests refused because the node had failed. */
  failedRefusals = 0;
  /** Requests the node held (queued or running) when it failed. */
  lostOnFailure = 0;

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
    this.busy = new Int32Array(W);
    this.waiting = Array.from({ length: W }, () => []);
    this.arrivals = new Float64Array(W);
    this.busyReplicaMs = new Float64Array(W);
    this.readyReplicaMs = new Float64Array(W);
    if (isCloud) {
      scenario.services.forEach((s, w) => (this.replicas[w] = Math.max(1, Math.floor(cpuCores / s.cpuCores))));
    }
  }

  setReplicas(w: number, k: number): void {
    if (this.isCloud) return;
    this.integrate();
    this.replicas[w] = k;
    if (k === 0) {
      // no replica left to serve the waiting ones: refuse them now
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
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    this.busy.fill(0);
    this.cpuUsed = 0;
    for (const q of this.waiting) for (const r of q.splice(0)) r.done({ status: 503, body: { reason: 'node failed' } });
    for (const r of this.running.splice(0)) r.done({ status: 503, body: { reason: 'node failed' } });
  }

  serve(w: number, workCoreS: number | null, ttlMs: number | null = null): Promise<ServeResult> {
    const svc = this.scenario.services[w];
    this.integrate();
    this.arrivals[w]++;
    if (this.fault === 'failed') {
      this.failedRefusals++;
      return Promise.resolve({ status: 503, body: { reason: 'node failed' } });
    }
    if (this.replicas[w] === 0) return Promise.resolve({ status: 503, body: { reason: `no replica of service ${w}` } });
    const cap = this.scenario.queueCapPerReplica * this.replicas[w];
    if (this.waiting[w].length >= cap) return Promise.resolve({ status: 503, body: { reason: 'full', ...this.snapshot() } });
    const work = workCoreS ?? 0.12 * svc.workScale;
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
    return { cpu: this.cpuUsed / this.cpuCores, mem: this.memUtil(), waiting: this.waiting.map((q) => q.length), busy: Array.from(this.busy) };
  }

  /** Memory in use by replicas, fraction of the node's. */
  memUtil(): number {
    if (this.isCloud) return 0;
    let used = 0;
    this.scenario.services.forEach((s, w) => (used += this.replicas[w] * s.memGB));
    return Math.min(4, used / this.memGB);
  }

  /** Window stats since the previous call (seconds, scaled back to scenario time). */
  takeStats(): { arrivals: number[]; busyReplicaS: number[]; readyReplicaS: number[] } {
    this.integrate();
    const s = {
      arrivals: Array.from(this.arrivals),
      busyReplicaS: Array.from(this.busyReplicaMs, (x) => (x / 1000) * this.speed),
      readyReplicaS: Array.from(this.readyReplicaMs, (x) => (x / 1000) * this.speed),
    };
    this.arrivals.fill(0);
    this.busyReplicaMs.fill(0);
    this.readyReplicaMs.fill(0);
    return s;
  }

  close(): void {
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
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

  private tryStart(): void {
    const W = this.replicas.length;
    const now = performance.now();
    for (let w = 0; w < W; w++) {
      const q = this.waiting[w];
      for (let i = q.length - 1; i >= 0; i--) {
        if (q[i].expiresMs < now) {
          const [r] = q.splice(i, 1);
          r.done({ status: 504, body: { reason: 'expired at node', ...this.snapshot() } });
        }
      }
    }
    let started = true;
    while (started) {
      started = false;
      for (let j = 0; j < W; j++) {
        const w = (this.rr + j) % W;
        const q = this.waiting[w];
        const need = this.scenario.services[w].cpuCores;
        if (q.length > 0 && this.busy[w] < this.replicas[w] && this.cpuUsed + need <= this.cpuCores + 1e-9) {
          this.rr = (w + 1) % W;
          this.start(w, q.shift()!, need);
          started = true;
        }
      }
    }
  }

  private start(w: number, r: Waiting, need: number): void {
    this.integrate();
    this.busy[w]++;
    this.cpuUsed += need;
    const queuedMs = performance.now() - r.enqueuedMs;
    this.running.push(r);
    const t = setTimeout(() => {
      this.timers.delete(t);
      this.running.splice(this.running.indexOf(r), 1);
      this.integrate();
      this.busy[w]--;
      this.cpuUsed = Math.max(0, this.cpuUsed - need);
      r.done({
        status: 200,
        body: { node: this.id, service: w, procMs: r.procMs, queuedMs, ...this.snapshot() },
      });
      this.tryStart();
    }, r.procMs);
    this.timers.add(t);
  }
}

/**
 * Initial placement d[w][n], the simulator's rule: for each eAP, `initialReplicasPerEap` replicas
 * of every service, each on the node of that eAP with the most free memory that fits it.
 */
export function initialPlacement(scenario: Scenario): Placement {
  const topo = topologyOf(scenario);
  const nodes = scenario.eaps.flatMap((e) => e.nodes);
  const used = new Float64Array(topo.numNodes);
  const d: Placement = scenario.services.map(() => new Array<number>(topo.numNodes).fill(0));
  for (let b = 0; b < topo.numEaps; b++) {
    for (let r = 0; r < scenario.initialReplicasPerEap; r++) {
      scenario.services.forEach((s, w) => {
        let best = -1;
        let bestFree = -Infinity;
        for (let n = 0; n < topo.numNodes; n++) {
          if (topo.nodeEap[n] !== b) continue;
          const free = nodes[n].memGB - used[n];
          if (free >= s.memGB - 1e-9 && free > bestFree) {
            best = n;
            bestFree = free;
          }
        }
        if (best >= 0) {
          d[w][best]++;
          used[best] += s.memGB;
        }
      });
    }
  }
  return d;
}

/** A scripted node failure: telemetry abnormal from `atS - precursorS`, failed from `atS` for `downS` (seconds of scenario time). */
export interface FaultPlan {
  node: number;
  atS: number;
  precursorS: number;
  downS: number;
}

export interface EmulatedClusterOptions {
  scenario: Scenario;
  /** Seed of the telemetry series. @defaultValue 1 */
  seed?: number;
  /** Telemetry sample period, seconds of scenario time (real: / speed). @defaultValue 1 */
  telemetryPeriodS?: number;
  /** Node failures to play, from `listen()`. @defaultValue none */
  faults?: readonly FaultPlan[];
  /** Time scale (nominal work only; callers scale the work they send). @defaultValue 1 */
  speed?: number;
  /** @defaultValue '127.0.0.1' */
  host?: string;
  /** Admin server port. @defaultValue 0 */
  adminPort?: number;
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

  constructor(private readonly o: EmulatedClusterOptions) {
    const s = o.scenario;
    const nodes = s.eaps.flatMap((e) => e.nodes);
    const speed = o.speed ?? 1;
    this.targets = nodes.map((n, i) => new EmulatedTarget(i, false, n.cpuCores, n.memGB, s, speed));
    this.targets.push(new EmulatedTarget(nodes.length, true, s.cloud.vms * s.cloud.vcpuPerVm, s.cloud.vms * s.cloud.memGBPerVm, s, speed));
    this.placement = initialPlacement(s);
    this.applyPlacement(this.placement);
    for (const f of o.faults ?? []) {
      if (!Number.isInteger(f.node) || f.node < 0 || f.node >= nodes.length || !(f.atS >= 0) || !(f.precursorS >= 0) || !(f.downS > 0)) {
        throw new TypeError(`fault ${JSON.stringify(f)}: needs a node in 0..${nodes.length - 1}, atS >= 0, precursorS >= 0, downS > 0`);
      }
    }
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
    if (!Array.isArray(d) || d.length !== W || !d.every((row) => Array.isArray(row) && row.length === N && row.every((k) => Number.isInteger(k) && k >= 0))) {
      throw new TypeError(`placement must be ${W} rows of ${N} non-negative integers`);
    }
    this.placement = d.map((row) => row.slice());
    for (let w = 0; w < W; w++) for (let n = 0; n < N; n++) this.targets[n].setReplicas(w, d[w][n]);
  }

  async listen(): Promise<void> {
    const host = this.o.host ?? '127.0.0.1';
    for (const t of this.targets) {
      const server = http.createServer((req, res) => this.handleServe(t, req, res));
      server.keepAliveTimeout = 65_000;
      await listen(server, 0, host);
      this.servers.push(server);
      const url = `http://${host}:${(server.address() as AddressInfo).port}`;
      if (t.isCloud) this.cloudUrl = url;
      else this.nodeUrls.push(url);
    }
    this.admin = http.createServer((req, res) => this.handleAdmin(req, res));
    await listen(this.admin, this.o.adminPort ?? 0, host);
    this.adminUrl = `http://${host}:${(this.admin.address() as AddressInfo).port}`;
    const realMs = (scenarioS: number) => (scenarioS * 1000) / (this.o.speed ?? 1);
    this.sampleTelemetry();
    const every = setInterval(() => this.sampleTelemetry(), realMs(this.o.telemetryPeriodS ?? 1));
    every.unref();
    this.clusterTimers.add(every as unknown as NodeJS.Timeout);
    for (const f of this.o.faults ?? []) {
      this.after(realMs(Math.max(0, f.atS - f.precursorS)), () => this.setFault(f.node, 'abnormal'));
      this.after(realMs(f.atS), () => this.setFault(f.node, 'failed'));
      this.after(realMs(f.atS + f.downS), () => this.setFault(f.node, 'ok'));
    }
  }

  async close(): Promise<void> {
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
    req.resume();
    const url = new URL(req.url ?? '/', 'http://x');
    if (req.method === 'GET' && url.pathname === '/healthz') return json(res, 200, { ok: true, node: t.id });
    if (req.method === 'GET' && url.pathname === '/telemetry' && !t.isCloud) {
      const x = this.samples[t.id];
      return json(res, 200, { seq: this.telemetrySeq, cpu: x[0], mem: x[1], disk: x[2], upload: x[3] });
    }
    if (req.method !== 'POST' || url.pathname !== '/serve') return json(res, 404, { reason: 'no such route' });
    const w = Number(url.searchParams.get('service'));
    const workText = url.searchParams.get('work');
    const work = workText === null ? null : Number(workText);
    const ttlText = url.searchParams.get('ttl');
    const ttl = ttlText === null ? null : Number(ttlText);
    if (ttl !== null && (!Number.isFinite(ttl) || ttl < 0)) return json(res, 400, { reason: `bad ttl ${ttlText}` });
    if (!Number.isInteger(w) || w < 0 || w >= t.replicas.length) return json(res, 400, { reason: `bad service ${url.searchParams.get('service')}` });
    if (work !== null && (!Number.isFinite(work) || work < 0 || work > 3600)) return json(res, 400, { reason: `bad work ${workText}` });
    void t.serve(w, work, ttl).then((r) => json(res, r.status, r.body));
  }

  private handleAdmin(req: http.IncomingMessage, res: http.ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const path = (req.url ?? '/').split('?')[0];
      if (req.method === 'GET' && path === '/stats') {
        const W = this.o.scenario.services.length;
        const sum = { arrivals: new Array<number>(W).fill(0), busyReplicaS: new Array<number>(W).fill(0), readyReplicaS: new Array<number>(W).fill(0) };
        for (const t of this.targets) {
          const s = t.takeStats();
          if (t.isCloud) continue; // hpa looks at edge replicas only
          for (let w = 0; w < W; w++) {
            sum.arrivals[w] += s.arrivals[w];
            sum.busyReplicaS[w] += s.busyReplicaS[w];
            sum.readyReplicaS[w] += s.readyReplicaS[w];
          }
        }
        return json(res, 200, sum);
      }
      if (req.method === 'GET' && path === '/placement') return json(res, 200, { d: this.placement });
      if (req.method === 'PUT' && path === '/fault') {
        try {
          const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { node: number; state: NodeFault };
          if (!['ok', 'abnormal', 'failed'].includes(body.state)) throw new TypeError(`state must be ok, abnormal or failed, got ${JSON.stringify(body.state)}`);
          this.setFault(body.node, body.state);
          return json(res, 200, { ok: true });
        } catch (e) {
          return json(res, 400, { reason: (e as Error).message });
        }
      }
      if (req.method === 'GET' && path === '/faults') return json(res, 200, { ...this.failureLosses(), states: this.targets.filter((t) => !t.isCloud).map((t) => t.fault) });
      if (req.method === 'PUT' && path === '/placement') {
        try {
          const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { d: Placement };
          this.applyPlacement(body.d);
          return json(res, 200, { ok: true });
        } catch (e) {
          return json(res, 400, { reason: (e as Error).message });
        }
      }
      json(res, 404, { reason: 'no such route' });
    });
  }
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

function json(res: http.ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}
