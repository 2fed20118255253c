/**
 * The orchestrator's plain-HTTP port (issue 18 items 1, 3, 4): the admin API under `/v1/`, the dashboard under
 * `/dashboard` (orchestrator/dashboard.ts), `/metrics`
 * (Prometheus text through prom-client), `/healthz` (alive: 200 with a JSON summary) and `/readyz`
 * (200 once the hub listens, the store is writable and a placement is published; 503 with the
 * reason otherwise). Its own port (`kais orchestrator --http-port`), separate from the agents'
 * WebSocket, so an operator can scrape and probe it without an agent token.
 *
 * Metrics (base units; counters read from counts that only grow):
 *   kais_orchestrator_agents_connected                      gauge, welcomed sessions
 *   kais_orchestrator_weight_version, _placement_version    gauges (-1: none)
 *   kais_orchestrator_events_total{kind}                    every event of the store's events table since the start
 *   kais_orchestrator_intake_total{verdict}                 accepted | invalid | rate_limited | quarantined
 *   kais_orchestrator_learner_updates_total{result}         run | published | failed | refused | stale
 *   kais_orchestrator_learning_frozen                       gauge, 1 while an admin froze online learning (kais weights --freeze)
 *   kais_orchestrator_placement_orders_total{result}        executed | refused
 *   kais_orchestrator_placement_steps_failed_total          steps that failed (also events placement-failed)
 *   kais_orchestrator_gate_verdicts_total{verdict}          pass | reject | failed (with a weight gate)
 *   kais_orchestrator_gate_last_seconds                     wall time of the last shadow evaluation
 *   kais_orchestrator_canary_total{result}                  started | promoted | rolled_back | superseded (with a canary)
 *   kais_orchestrator_canary_version                        gauge, the version under canary (-1: none runs)
 *   kais_orchestrator_store_write_failures_total
 * plus prom-client's process and Node.js metrics prefixed `kais_orchestrator_`.
 */
import * as http from 'node:http';
import { capConnectionsPerAddress, HTTP_SERVER_LIMITS, MAX_CONNECTIONS, MAX_CONNECTIONS_PER_ADDRESS } from '../shared/http-limits';
import * as https from 'node:https';
import type { TlsPair } from '../shared/tls';
import { NOT_JSON, type AdminApi } from './admin-api';
import type { DashboardFeed } from './dashboard';
import { BEARER_CHALLENGE, bearerMatches } from '../shared/auth';
import { collectDefaultMetrics, Registry } from 'prom-client';
import { scrapedCounter, scrapedGauge } from '../shared/prom';

/** What the endpoint reads, at scrape time. */
export interface OrchestratorFigures {
  agentsConnected(): number;
  weightVersion(): number | null;
  placementVersion(): number | null;
  /** Events since the start, by kind. */
  eventTotals(): Record<string, number>;
  intake(): { accepted: number; invalid: number; rateLimited: number; quarantined: number };
  learner(): { updates: number; published: number; failedUpdates: number; refusedUpdates: number; staleUpdates?: number } | null;
  /** Whether an admin froze online learning (absent: never). */
  learningFrozen?(): boolean;
  /** The weight gate's verdicts (null: no gate). */
  gate?(): { passed: number; rejected: number; failed: number; lastMs: number } | null;
  /** The canary rollout's counts and the version under canary (null: no canary). */
  canary?(): { started: number; promoted: number; rolledBack: number; superseded: number; running: number | null } | null;
  placementOrders(): { executed: number; refused: number; deferredSteps: number; failedSteps: number };
  storeWriteFailures(): number;
  /** null when ready, else why not. */
  notReady(): string | null;
  /** The /healthz body. */
  health(): Record<string, unknown>;
}

export class OrchestratorHttp {
  readonly registry = new Registry();
  private server: http.Server | null = null;

  constructor(
    private readonly f: OrchestratorFigures,
    /** The admin API under /v1/ and its token (null: no token configured, every /v1/ call is refused). */
    private readonly admin: { api: AdminApi; token: string | null } | null = null,
    /** The dashboard under /dashboard (orchestrator/dashboard.ts); its stream takes the admin token. */
    private readonly dashboard: DashboardFeed | null = null,
  ) {
    const r = this.registry;
    collectDefaultMetrics({ register: r, prefix: 'kais_orchestrator_' });
    const counter = <L extends string>(name: string, help: string, labelNames: L[], read: () => [Partial<Record<L, string>>, number][]) =>
      scrapedCounter(r, name, help, labelNames, read);
    const gauge = (name: string, help: string, read: () => number) => scrapedGauge(r, name, help, read);
    gauge('kais_orchestrator_agents_connected', 'Agent sessions welcomed and open.', () => f.agentsConnected());
    gauge('kais_orchestrator_weight_version', 'Latest published actor weight version (-1: none).', () => f.weightVersion() ?? -1);
    gauge('kais_orchestrator_placement_version', 'Latest published placement version (-1: none).', () => f.placementVersion() ?? -1);
    counter('kais_orchestrator_events_total', 'Events recorded since the start, by kind.', ['kind'], () =>
      Object.entries(f.eventTotals()).map(([kind, v]) => [{ kind }, v] as [Partial<Record<'kind', string>>, number]),
    );
    counter('kais_orchestrator_intake_total', 'Learning input (experience, telemetry) at the door, by verdict.', ['verdict'], () => {
      const i = f.intake();
      return [
        [{ verdict: 'accepted' }, i.accepted],
        [{ verdict: 'invalid' }, i.invalid],
        [{ verdict: 'rate_limited' }, i.rateLimited],
        [{ verdict: 'quarantined' }, i.quarantined],
      ];
    });
    counter('kais_orchestrator_learner_updates_total', 'Online learner updates, by result.', ['result'], () => {
      const l = f.learner();
      if (!l) return [];
      return [
        [{ result: 'run' }, l.updates],
        [{ result: 'published' }, l.published],
        [{ result: 'failed' }, l.failedUpdates],
        [{ result: 'refused' }, l.refusedUpdates],
        [{ result: 'stale' }, l.staleUpdates ?? 0],
      ];
    });
    gauge('kais_orchestrator_learning_frozen', 'Whether an admin froze online learning (1) or not (0).', () =>
      f.learningFrozen?.() ? 1 : 0,
    );
    counter(
      'kais_orchestrator_gate_verdicts_total',
      'Weight gate verdicts on learned versions (failed: counted in reject too).',
      ['verdict'],
      () => {
        const g = f.gate?.();
        if (!g) return [];
        return [
          [{ verdict: 'pass' }, g.passed],
          [{ verdict: 'reject' }, g.rejected],
          [{ verdict: 'failed' }, g.failed],
        ];
      },
    );
    gauge(
      'kais_orchestrator_gate_last_seconds',
      'Wall time of the last shadow evaluation of the weight gate (0: none).',
      () => (f.gate?.()?.lastMs ?? 0) / 1000,
    );
    counter('kais_orchestrator_canary_total', 'Canary rollouts of weight versions, by result.', ['result'], () => {
      const c = f.canary?.();
      if (!c) return [];
      return [
        [{ result: 'started' }, c.started],
        [{ result: 'promoted' }, c.promoted],
        [{ result: 'rolled_back' }, c.rolledBack],
        [{ result: 'superseded' }, c.superseded],
      ];
    });
    gauge('kais_orchestrator_canary_version', 'Weight version under canary (-1: none runs).', () => f.canary?.()?.running ?? -1);
    counter('kais_orchestrator_placement_orders_total', 'Scale orders of the placement loop, by result.', ['result'], () => {
      const p = f.placementOrders();
      return [
        [{ result: 'executed' }, p.executed],
        [{ result: 'refused' }, p.refused],
      ];
    });
    counter(
      'kais_orchestrator_placement_steps_deferred_total',
      'Placement steps that fell due while a weights canary ran (run at its verdict).',
      [],
      () => [[{}, f.placementOrders().deferredSteps]],
    );
    counter(
      'kais_orchestrator_placement_steps_failed_total',
      'Placement steps that failed (the executor refused the step, the policy threw): each also an event placement-failed.',
      [],
      () => [[{}, f.placementOrders().failedSteps]],
    );
    counter('kais_orchestrator_store_write_failures_total', 'Store writes that failed (disk full, read-only, file cap).', [], () => [
      [{}, f.storeWriteFailures()],
    ]);
  }

  /** Listens on 127.0.0.1:port (0: a free one), https with a certificate; resolves with the port. */
  listen(port: number, host = '127.0.0.1', tls: TlsPair | null = null): Promise<number> {
    const handler = (req: http.IncomingMessage, res: http.ServerResponse) => this.handle(req, res);
    const server: http.Server = tls
      ? https.createServer({ ...HTTP_SERVER_LIMITS, cert: tls.cert, key: tls.key, minVersion: 'TLSv1.2' }, handler)
      : http.createServer(HTTP_SERVER_LIMITS, handler);
    server.maxConnections = MAX_CONNECTIONS.admin;
    capConnectionsPerAddress(server, MAX_CONNECTIONS_PER_ADDRESS.admin);
    this.server = server;
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        server.off('error', reject);
        resolve((server.address() as { port: number }).port);
      });
    });
  }

  async close(): Promise<void> {
    const s = this.server;
    this.server = null;
    if (!s) return;
    this.dashboard?.close();
    s.closeAllConnections();
    await new Promise<void>((resolve) => s.close(() => resolve()));
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const url = (req.url ?? '/').split('?')[0];
    if (url.startsWith('/v1/')) return this.handleAdmin(req, res, url);
    if (req.method !== 'GET' && req.method !== 'HEAD') return json(res, 405, { reason: 'only GET here' }, { allow: 'GET, HEAD' });
    if (this.dashboard && (url === '/dashboard' || url.startsWith('/dashboard/'))) {
      const token = this.admin?.token ?? null;
      if (this.dashboard.handle(req, res, url, () => token !== null && bearerMatches(req.headers.authorization, token))) return;
    }
    if (url === '/healthz') return json(res, 200, { ok: true, ...this.f.health() });
    if (url === '/readyz') {
      const why = this.f.notReady();
      return json(res, why ? 503 : 200, why ? { ready: false, reason: why } : { ready: true });
    }
    if (url === '/metrics') {
      this.registry.metrics().then(
        (text) => {
          res.writeHead(200, { 'content-type': this.registry.contentType });
          res.end(text);
        },
        (e: Error) => json(res, 500, { reason: `metrics: ${e.message}` }),
      );
      return;
    }
    json(res, 404, { reason: `no ${url} here (known: /metrics, /healthz, /readyz, /v1/..., /dashboard)` });
  }

  private handleAdmin(req: http.IncomingMessage, res: http.ServerResponse, url: string): void {
    const admin = this.admin;
    if (!admin || admin.token === null)
      return json(res, 403, { reason: 'the admin API is off: no "adminToken" in the orchestrator config' });
    if (!bearerMatches(req.headers.authorization, admin.token))
      return json(res, 401, { reason: 'admin token missing or wrong' }, BEARER_CHALLENGE);
    // (a path that starts with /v1/ always parses against a base: no '//host' form reaches here)
    const query = new URL(req.url ?? '/', 'http://x').searchParams;
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_ADMIN_BODY) {
        json(res, 413, { reason: `body over ${MAX_ADMIN_BODY} bytes` });
        req.destroy();
      } else chunks.push(c);
    });
    req.on('end', () => {
      if (res.headersSent) return;
      let body: unknown = null;
      if (size > 0) {
        try {
          body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        } catch {
          body = NOT_JSON; // the API judges the route and method first (404/405), then says so
        }
      }
      admin.api.handle(req.method ?? 'GET', url, query, body).then(
        (r) => json(res, r.status, r.body, r.allow ? { allow: r.allow } : {}),
        (e: Error) => json(res, 500, { reason: e.message }),
      );
    });
  }
}

const MAX_ADMIN_BODY = 64 * 1024;

function json(res: http.ServerResponse, status: number, body: unknown, headers: http.OutgoingHttpHeaders = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { ...headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}
