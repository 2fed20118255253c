/**
 * The operator's dashboard (issue 18 item 3), served by the orchestrator's HTTP port
 * (orchestrator/http.ts):
 *
 *   GET /dashboard                 the page (no data in it; open to anyone who reaches the port)
 *   GET /dashboard/<asset>         app.js, app.css, and uPlot (from the `uplot` package, no CDN)
 *   GET /dashboard/stream          Server-Sent Events: one `snapshot` event now, then one a second;
 *                                  behind the admin token (Authorization: Bearer, as the admin API)
 *
 * The browser holds the admin token: the page reads it from the URL fragment (`#token=...`, which
 * the browser never sends to a server) or asks for it once, keeps it in the tab's sessionStorage,
 * and sends it as a header on the stream request (fetch, not EventSource, which cannot send one).
 *
 * One snapshot is built per tick, whatever the number of viewers, and only while someone watches:
 * what the feed keeps between ticks is a few bounded rings filled from frames the hub already
 * decodes (telemetry, experience) and from the orchestrator's events. What a snapshot holds:
 *
 * - topology: every edge node (its eAP, replicas by service, load from the agents' telemetry over
 *   the last 10 s: CPU, requests/s dispatched to it, share of its answers in time; health: `held` by the
 *   admin, `failing` when under a quarter of its (at least 10) requests of the last 10 s succeeded
 *   (once 5 s of telemetry about it came), `quiet` with no telemetry about it for 10 s (no agent
 *   sent to it), else `ok`) and every agent session (eAP, weight and
 *   placement versions);
 * - throughput: requests/s the agents dispatched and answered in time (telemetry, edge nodes and
 *   the cloud, 2 s buckets) against the simulator's prediction for the same run (the config's
 *   `prediction`, orchestrator/prediction.ts: the requests `kais up` replays, run in the simulator
 *   before the processes start; its in-time completions per wall second over each bucket, the
 *   frames aligned to wall-clock by the run's start and `speed`), and the orchestrator's forecast
 *   (placement-loop.ts: arrivals/s expected next frame, an average of the windows it observed, in
 *   wall-clock seconds). `prediction` in the snapshot: the simulator's policy and rate, the frame
 *   now, and the in-time answers since the start (or since this orchestrator started) live and
 *   predicted; null without a prediction;
 * - placements over time: replicas per service at each published placement version;
 * - the dispatch trail: the last decisions agents sent as experience (eAP, service, target, outcome,
 *   latency, weight version; with `--explore`, the explored ones) and the last per-(eAP, node)
 *   telemetry intervals (requests, succeeded, in time), which every agent sends;
 * - alerts: the last events with their messages (the reasons), admin actions included;
 * - learning curve: the online learner's mean reward and KL per update;
 * - safe learning: what the learner, the weight gate and the canary do, in `kais status`'s words
 *   (orchestrator/status-lines.ts), and the eAPs a running canary holds (the page marks their agents).
 */
import * as fs from 'node:fs';
import type * as http from 'node:http';
import * as path from 'node:path';
import type { Placement } from '../shared/domain';
import type { ExperienceBody, TelemetryBody } from '../shared/protocol/envelope';
import type { Scenario } from '../shared/scenario';
import { topologyOf } from '../shared/scenario';
import { round } from '../shared/round';
import { BEARER_CHALLENGE } from '../shared/auth';
import { predictedFrame, predictedInTime, type Prediction } from './prediction';
import { safeLearningLines } from './status-lines';

/** What the feed reads at each tick. */
export interface DashboardSources {
  scenario: Scenario;
  /** Scenario seconds per wall-clock second (the forecast is per scenario second). */
  speed: number;
  orchestration: string;
  sessions(): { eap: number; session: string; weightVersion: number | null; placementVersion: number | null }[];
  placementVersion(): number | null;
  weightVersion(): number | null;
  placement(): Placement;
  frame(): number;
  holds(): { node: number; reason: string; by: string }[];
  overrides(): { service: number; replicas: number; node: number | null; untilMs: number | null; reason: string; by: string }[];
  forecast(): number[] | null;
  /** The simulator's prediction of the run (config `prediction`); absent or null: none. */
  prediction?(): Prediction | null;
  learner(): { updates: number; published: number; lastMeanReward: number; lastApproxKl: number } | null;
  /**
   * The learner, gate, canary and rejected versions as GET /v1/status gives them (orchestrator/main.ts
   * safeLearningStatus); absent: the panel says safe learning is off.
   */
  safeLearning?(): { learner: unknown; gate: unknown; canary: unknown; rejectedVersions: unknown; storedVersions?: unknown };
}

export interface DashboardEvent {
  tsMs: number;
  kind: string;
  eap: number | null;
  message: string;
}

const TICK_MS = 1000;
/**
 * A viewer that reads slower than the snapshots come (a laptop asleep with the page open): while
 * more than STREAM_BACKLOG_BYTES are still unsent to it, its snapshots are skipped (each holds the
 * whole state, so the next one it takes is whole), and after STALL_CLOSE_MS of skipping its stream
 * is closed (the page's EventSource reconnects when it wakes). Every snapshot used to be queued for
 * it: 100 viewers that never read built 204 MB of send queue in 40 s on kais (helper-42's review).
 */
const STREAM_BACKLOG_BYTES = 256 * 1024;
const STALL_CLOSE_MS = 30_000;
const BUCKET_MS = 2000;
const SERIES = 150; // 5 minutes of 2 s buckets
const TRAIL = 40;
const FLOWS = 40;
const EVENTS = 60;
const PLACEMENTS = 120;
const CURVE = 300;
const SILENT_MS = 10_000;
/** Load and health read the last 10 s: longer than a request's answer takes, so answers catch up with sends. */
const WINDOW_MS = 10_000;

interface NodeLoad {
  tsMs: number;
  /** When telemetry about it first came (0: never). */
  firstMs: number;
  cpu: number;
  mem: number;
  /** The telemetry intervals of the last WINDOW_MS, every eAP's, oldest first. */
  recent: { tsMs: number; requests: number; succeeded: number; inDeadline: number }[];
}

const ASSETS: Record<string, { file: () => string; type: string }> = {
  '/dashboard': { file: () => path.join(assetDir(), 'index.html'), type: 'text/html; charset=utf-8' },
  '/dashboard/app.js': { file: () => path.join(assetDir(), 'app.js'), type: 'text/javascript; charset=utf-8' },
  '/dashboard/app.css': { file: () => path.join(assetDir(), 'app.css'), type: 'text/css; charset=utf-8' },
  '/dashboard/uplot.js': { file: () => require.resolve('uplot/dist/uPlot.iife.min.js'), type: 'text/javascript; charset=utf-8' },
  '/dashboard/uplot.css': { file: () => require.resolve('uplot/dist/uPlot.min.css'), type: 'text/css; charset=utf-8' },
};

/** orchestrator/dashboard/ (the page's files), from the sources or from dist/orchestrator/. */
function assetDir(): string {
  for (const d of [path.join(__dirname, 'dashboard'), path.join(__dirname, '..', '..', 'orchestrator', 'dashboard')])
    if (fs.existsSync(path.join(d, 'index.html'))) return d;
  throw new Error('dashboard: orchestrator/dashboard/index.html not found beside the program');
}

export class DashboardFeed {
  private readonly clients = new Set<http.ServerResponse>();
  private readonly assets = new Map<string, Buffer>();
  private timer: NodeJS.Timeout | null = null;
  private readonly numNodes: number;
  private readonly nodeEap: number[];
  private readonly nodes: NodeLoad[];
  private readonly events: DashboardEvent[] = [];
  private readonly trail: unknown[] = [];
  private readonly flows: unknown[] = [];
  /** [bucket start ms, dispatched, in time, forecast arrivals, predicted in time] (req/s). */
  private readonly throughput: [number, number, number, number | null, number | null][] = [];
  /** In-time answers the agents reported since the prediction's start (or since this feed began, if later). */
  private readonly live = { fromMs: 0, inTime: 0 };
  private bucket = { start: 0, requests: 0, inDeadline: 0 };
  private readonly placements: { tsMs: number; version: number; frame: number; replicas: number[] }[] = [];
  private readonly curve: { tsMs: number; update: number; meanReward: number; approxKl: number }[] = [];
  /** Snapshots sent since the start (the bench and tests read it). */
  sent = 0;
  /** Snapshots skipped for viewers that had not taken the ones before, and streams closed for it. */
  skipped = 0;
  stalledClosed = 0;
  /** Since when each viewer with a backlog has been skipped. */
  private readonly stalled = new Map<http.ServerResponse, number>();

  constructor(
    private readonly s: DashboardSources,
    /** When this feed began (a restarted orchestrator counts live answers from here). */
    private readonly createdMs = Date.now(),
  ) {
    const topo = topologyOf(s.scenario);
    this.numNodes = topo.numNodes;
    this.nodeEap = topo.nodeEap;
    this.nodes = Array.from({ length: topo.numNodes }, () => ({ tsMs: 0, firstMs: 0, cpu: 0, mem: 0, recent: [] }));
  }

  /** Whether the one-a-second snapshot timer runs (only while someone watches). */
  get ticking(): boolean {
    return this.timer !== null;
  }

  /** Viewers connected to the stream now. */
  get viewers(): number {
    return this.clients.size;
  }

  event(e: DashboardEvent): void {
    this.events.push(e);
    if (this.events.length > EVENTS) this.events.shift();
  }

  telemetry(body: TelemetryBody, nowMs = Date.now()): void {
    this.rollBucket(nowMs);
    const p = this.s.prediction?.() ?? null;
    const counting = p !== null && p.startMs !== null && nowMs >= p.startMs;
    if (counting && this.live.fromMs === 0) this.live.fromMs = Math.max(p.startMs!, this.createdMs);
    for (const x of body.samples) {
      // throughput counts every target, the cloud (index numNodes) too, as the simulator does
      if (x.node >= 0 && x.node <= this.numNodes) {
        this.bucket.requests += x.requests;
        this.bucket.inDeadline += x.inDeadline;
        if (counting) this.live.inTime += x.inDeadline;
      }
      if (!(x.node >= 0 && x.node < this.numNodes)) continue;
      const n = this.nodes[x.node];
      n.tsMs = nowMs;
      if (n.firstMs === 0) n.firstMs = nowMs;
      n.cpu = x.cpu;
      n.mem = x.mem;
      n.recent.push({ tsMs: nowMs, requests: x.requests, succeeded: x.succeeded, inDeadline: x.inDeadline });
      while (n.recent.length > 0 && nowMs - n.recent[0].tsMs > WINDOW_MS) n.recent.shift();
      if (x.requests > 0) {
        this.flows.push({
          tsMs: nowMs,
          eap: body.eap,
          node: x.node,
          requests: x.requests,
          succeeded: x.succeeded,
          inDeadline: x.inDeadline,
          meanLatencyMs: x.succeeded > 0 ? round(x.latencyMsSum / x.succeeded, 1) : null,
        });
        if (this.flows.length > FLOWS) this.flows.shift();
      }
    }
  }

  experience(body: ExperienceBody, nowMs = Date.now()): void {
    const cloud = this.numNodes;
    const from = Math.max(0, body.transitions.length - TRAIL);
    for (let i = from; i < body.transitions.length; i++) {
      const t = body.transitions[i];
      this.trail.push({
        tsMs: nowMs,
        eap: t.eap,
        service: t.service,
        target: t.action === cloud ? 'cloud' : t.action,
        outcome: t.metDeadline ? 'in time' : t.latencyMs === null ? 'dropped' : 'late',
        latencyMs: t.latencyMs === null ? null : round(t.latencyMs, 1),
        weightVersion: t.weightVersion,
      });
    }
    while (this.trail.length > TRAIL) this.trail.shift();
  }

  /** The requests under /dashboard; false when the path is not the dashboard's. */
  handle(req: http.IncomingMessage, res: http.ServerResponse, url: string, authorized: () => boolean): boolean {
    if (url === '/dashboard/') url = '/dashboard';
    if (url === '/dashboard/stream') {
      if (!authorized()) {
        res.writeHead(401, { 'content-type': 'application/json', ...BEARER_CHALLENGE });
        res.end(JSON.stringify({ reason: 'admin token missing or wrong' }));
        return true;
      }
      this.subscribe(res);
      return true;
    }
    const asset = ASSETS[url];
    if (!asset) return false;
    let body = this.assets.get(url);
    if (!body) {
      body = fs.readFileSync(asset.file());
      this.assets.set(url, body);
    }
    res.writeHead(200, {
      'content-type': asset.type,
      'content-length': body.length,
      'cache-control': 'no-cache',
      'x-content-type-options': 'nosniff',
      'content-security-policy': "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:",
    });
    res.end(req.method === 'HEAD' ? undefined : body);
    return true;
  }

  private subscribe(res: http.ServerResponse): void {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
    this.clients.add(res);
    res.on('close', () => {
      this.clients.delete(res);
      this.stalled.delete(res);
      if (this.clients.size === 0) this.stopTicking();
    });
    this.write([res], this.snapshotText());
    if (!this.timer) {
      this.timer = setInterval(() => this.tick(), TICK_MS);
      this.timer.unref();
    }
  }

  private tick(): void {
    if (this.clients.size === 0) return this.stopTicking();
    this.write([...this.clients], this.snapshotText());
  }

  private write(to: http.ServerResponse[], text: string, nowMs = Date.now()): void {
    const chunk = `event: snapshot\ndata: ${text}\n\n`;
    for (const r of to) {
      if (r.writableLength > STREAM_BACKLOG_BYTES) {
        const since = this.stalled.get(r) ?? nowMs;
        this.stalled.set(r, since);
        this.skipped++;
        if (nowMs - since >= STALL_CLOSE_MS) {
          this.stalled.delete(r);
          this.clients.delete(r);
          this.stalledClosed++;
          r.destroy();
        }
        continue;
      }
      this.stalled.delete(r);
      r.write(chunk);
      this.sent++;
    }
    if (this.clients.size === 0) this.stopTicking();
  }

  private stopTicking(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** Ends every stream (the server is closing). */
  close(): void {
    this.stopTicking();
    for (const r of this.clients) r.end();
    this.clients.clear();
  }

  private rollBucket(nowMs: number): void {
    const start = nowMs - (nowMs % BUCKET_MS);
    if (this.bucket.start === start) return;
    if (this.bucket.start > 0) {
      const f = this.s.forecast();
      const forecast = f ? round(f.reduce((a, b) => a + b, 0) * this.s.speed, 2) : null;
      const p = this.s.prediction?.() ?? null;
      // empty buckets between two telemetry frames are zeros, not gaps
      for (let t = this.bucket.start; t < start && t >= start - SERIES * BUCKET_MS; t += BUCKET_MS) {
        const own = t === this.bucket.start;
        const predicted = p ? predictedInTime(p, this.s.speed, t, t + BUCKET_MS) : null;
        this.throughput.push([
          t,
          own ? round(this.bucket.requests / (BUCKET_MS / 1000), 2) : 0,
          own ? round(this.bucket.inDeadline / (BUCKET_MS / 1000), 2) : 0,
          forecast,
          predicted === null ? null : round(predicted / (BUCKET_MS / 1000), 2),
        ]);
      }
      while (this.throughput.length > SERIES) this.throughput.shift();
    }
    this.bucket = { start, requests: 0, inDeadline: 0 };
  }

  /**
   * The simulator's prediction as the page shows it: its policy and rate over the run, the frame
   * now with the in-time answers per wall second predicted for it, and since the start (or since
   * this feed began) the in-time answers the agents reported against those predicted.
   */
  private predictionSnapshot(nowMs: number): Record<string, unknown> | null {
    const p = this.s.prediction?.() ?? null;
    if (!p) return null;
    const speed = this.s.speed;
    const at = predictedFrame(p, speed, nowMs);
    const frames = p.completedInTimePerFrame.length;
    const fromMs = this.live.fromMs;
    const predicted = fromMs > 0 ? (predictedInTime(p, speed, fromMs, nowMs) ?? 0) : null;
    return {
      policy: p.policy,
      throughputRate: p.throughputRate,
      frameS: p.frameS,
      startMs: p.startMs,
      frames,
      frame: at ? at.frame : null,
      inTimePerS: at && !at.over ? round((p.completedInTimePerFrame[at.frame] / p.frameS) * speed, 2) : null,
      arrivalsPerS: at && !at.over ? round((p.arrivedPerFrame[at.frame] / p.frameS) * speed, 2) : null,
      since:
        predicted === null
          ? null
          : {
              fromMs,
              liveInTime: this.live.inTime,
              predictedInTime: round(predicted, 1),
              livePerPredicted: predicted > 0 ? round(this.live.inTime / predicted, 3) : null,
            },
    };
  }

  /** The snapshot as the stream sends it (JSON). */
  snapshotText(nowMs = Date.now()): string {
    return JSON.stringify(this.snapshot(nowMs));
  }

  snapshot(nowMs = Date.now()): Record<string, unknown> {
    const s = this.s;
    this.rollBucket(nowMs);
    const placement = s.placement();
    const version = s.placementVersion();
    const last = this.placements[this.placements.length - 1];
    if (version !== null && (!last || last.version !== version)) {
      this.placements.push({ tsMs: nowMs, version, frame: s.frame(), replicas: placement.map((row) => row.reduce((a, b) => a + b, 0)) });
      if (this.placements.length > PLACEMENTS) this.placements.shift();
    }
    const learner = s.learner();
    if (learner && learner.updates > 0 && this.curve[this.curve.length - 1]?.update !== learner.updates) {
      this.curve.push({
        tsMs: nowMs,
        update: learner.updates,
        meanReward: round(learner.lastMeanReward, 4),
        approxKl: round(learner.lastApproxKl, 5),
      });
      if (this.curve.length > CURVE) this.curve.shift();
    }
    const held = new Map(s.holds().map((h) => [h.node, h]));
    const nodes = this.nodes.map((n, id) => {
      let requests = 0;
      let succeeded = 0;
      let inDeadline = 0;
      for (const c of n.recent) {
        if (nowMs - c.tsMs > WINDOW_MS) continue;
        requests += c.requests;
        succeeded += c.succeeded;
        inDeadline += c.inDeadline;
      }
      const h = held.get(id);
      const health = h
        ? 'held'
        : n.tsMs === 0 || nowMs - n.tsMs > SILENT_MS
          ? 'quiet'
          : nowMs - n.firstMs >= WINDOW_MS / 2 && requests >= 10 && succeeded < requests / 4
            ? 'failing'
            : 'ok';
      return {
        id,
        eap: this.nodeEap[id],
        health,
        heldReason: h ? `${h.by}: ${h.reason}` : null,
        cpu: round(n.cpu, 3),
        mem: round(n.mem, 3),
        requestsPerS: round(requests / (WINDOW_MS / 1000), 2),
        // of the answers in the window, those in time (answers of requests sent before the window count too)
        inTimeShare: succeeded > 0 ? round(inDeadline / succeeded, 3) : null,
        replicas: placement.map((row) => row[id] ?? 0),
      };
    });
    const f = s.forecast();
    const sessions = s.sessions();
    return {
      tsMs: nowMs,
      scenario: s.scenario.name,
      orchestration: s.orchestration,
      services: s.scenario.services.length,
      // every eAP of the scenario, and any other an agent session speaks for (a hub without the scenario's bound)
      numEaps: Math.max(s.scenario.eaps.length, ...sessions.map((a) => a.eap + 1)),
      weightVersion: s.weightVersion(),
      placementVersion: version,
      frame: s.frame(),
      agents: sessions,
      nodes,
      overrides: s.overrides(),
      forecast: f ? f.map((x) => round(x * s.speed, 3)) : null,
      prediction: this.predictionSnapshot(nowMs),
      throughput: this.throughput,
      placements: this.placements,
      trail: this.trail,
      flows: this.flows,
      events: this.events,
      learner: learner ? { ...learner, curve: this.curve } : null,
      safeLearning: this.safeLearningSnapshot(),
    };
  }

  /** The safe-learning panel: kais status's lines, and the eAPs under a running canary (none: []). */
  private safeLearningSnapshot(): { lines: string[]; canaryEaps: number[] } {
    const st = this.s.safeLearning?.();
    if (!st) return { lines: [], canaryEaps: [] };
    const running = (st.canary as { running?: { eaps?: unknown } | null } | null)?.running;
    const eaps = Array.isArray(running?.eaps) ? running.eaps.filter((e): e is number => Number.isInteger(e)) : [];
    return { lines: safeLearningLines(st), canaryEaps: eaps };
  }
}
