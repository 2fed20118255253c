/**
 * The admin API (issue 18 items 1-2) on the orchestrator's HTTP port (orchestrator/http.ts),
 * behind its own token (config `adminToken`, never an agent's; compared in constant time, never
 * logged). JSON in and out; a bad request is 400 with one `reason` line naming the field.
 *
 *   GET  /v1/status            agents, versions, placement, overrides, holds, learner, forecast
 *   POST /v1/scale             {service, replicas, node?, ttlS?, reason, by?}   an override
 *   POST /v1/scale/release     {service, reason, by?}
 *   POST /v1/nodes/hold        {node, reason, by?}
 *   POST /v1/nodes/readmit     {node, reason, by?}
 *   GET  /v1/events?since=<ms>&kind=<k>&limit=<n>   oldest first, at most 1000 a page
 *   GET  /v1/forecast          arrivals per second per service expected next frame
 *   POST /v1/weights/rollback  {to?, reason, by?}   every agent back to an earlier version's weights
 *   POST /v1/weights/freeze    {reason, by?}        online learning stops publishing (kept over a restart)
 *   POST /v1/weights/unfreeze  {reason, by?}
 *
 * The weights' changes are orchestrator/weights-admin.ts's (events `admin-rollback`,
 * `admin-freeze`, `admin-unfreeze`); they touch no placement, so they need no executor.
 *
 * Every change is an event (`admin-scale`, `admin-release`, `admin-hold`, `admin-readmit`,
 * `admin-expired`) naming who (`by`, default "admin") and why, is saved in the store (overrides
 * and holds survive a restart), and is applied at once: the placement loop takes a step with the
 * admin's orders only (the policy keeps its own period) and publishes the placement that follows.
 * The answer says what the cluster did (`applied`: orders carried out and refused); 202 when the
 * step has not ended within 20 s (saved; still being applied: a slow cluster); 502 when the
 * executor failed (the change is saved, and the next step tries again); 409 when the orchestrator
 * has no executor, so a change would act on nothing.
 */
import type { Scenario } from '../shared/scenario';
import { topologyOf } from '../shared/scenario';
import type { AdminSnapshot, AdminState } from './admin';
import type { StepOutcome } from './placement-loop';
import type { WeightsReply } from './weights-admin';

export interface AdminDeps {
  scenario: Scenario;
  state: AdminState;
  /** Keeps the state in the store; false when the store could not be written (the change is then undone). */
  save(s: AdminSnapshot): boolean | void;
  event(kind: string, message: string): void;
  /** Apply now: one placement step with the admin's orders, resolved with what it did once its placement is published. */
  stepNow(): Promise<StepOutcome>;
  /** False when the orchestrator has no executor (no cluster an override or a hold could act on). @defaultValue true */
  cluster?: boolean;
  /** How long a change waits for its step before the answer says it is still being applied (202). @defaultValue 20 s */
  answerWithinMs?: number;
  status(): Record<string, unknown>;
  events(q: { sinceMs: number; kind?: string; limit: number }): unknown[];
  forecast(): number[] | null;
  /** The weights' admin (orchestrator/weights-admin.ts); absent: /v1/weights/* answer 409. */
  weights?: {
    rollback(to: number | null, reason: string, by: string): WeightsReply;
    freeze(reason: string, by: string): WeightsReply;
    unfreeze(reason: string, by: string): WeightsReply;
  };
}

export interface AdminReply {
  status: number;
  body: unknown;
  /** A 405's Allow header: the method the path takes. */
  allow?: string;
}

/** Under the CLI's 30 s deadline for the whole exchange (admin-cli.ts). */
const ANSWER_WITHIN_MS = 20_000;

const bad = (reason: string): AdminReply => ({ status: 400, body: { reason } });

/** The body the HTTP layer could not parse: judged after the route and method (404/405 first). */
export const NOT_JSON: unique symbol = Symbol('not JSON');

/** The fields each change takes: any other is refused (a misspelt `ttl` must not make a permanent override). */
const FIELDS: Record<string, readonly string[]> = {
  '/v1/scale': ['service', 'replicas', 'node', 'ttlS', 'reason', 'by'],
  '/v1/scale/release': ['service', 'reason', 'by'],
  '/v1/nodes/hold': ['node', 'reason', 'by'],
  '/v1/nodes/readmit': ['node', 'reason', 'by'],
  '/v1/weights/rollback': ['to', 'reason', 'by'],
  '/v1/weights/freeze': ['reason', 'by'],
  '/v1/weights/unfreeze': ['reason', 'by'],
};

/** Shortest override: one that ends before a step could apply it would replace the old one for nothing. */
const MIN_TTL_S = 1;
/** C0 and C1 control characters (newlines, escapes), DEL included: refused in reason/by, masked by kais status. */
// eslint-disable-next-line no-control-regex
export const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

export class AdminApi {
  private readonly numNodes: number;

  constructor(private readonly d: AdminDeps) {
    this.numNodes = topologyOf(d.scenario).numNodes;
  }

  async handle(method: string, path: string, query: URLSearchParams, body: unknown): Promise<AdminReply> {
    if (method === 'GET' && path === '/v1/status') return { status: 200, body: this.d.status() };
    if (method === 'GET' && path === '/v1/forecast') return { status: 200, body: { arrivalsPerS: this.d.forecast() } };
    if (method === 'GET' && path === '/v1/events') {
      const since = Number(query.get('since') ?? 0);
      const limit = Number(query.get('limit') ?? 1000);
      if (!Number.isFinite(since) || since < 0) return bad('since: must be a time in ms >= 0');
      if (!Number.isInteger(limit) || limit < 1 || limit > 1000) return bad('limit: must be an integer in 1..1000');
      return { status: 200, body: { events: this.d.events({ sinceMs: since, kind: query.get('kind') ?? undefined, limit }) } };
    }
    // the route first: a known path with the wrong method is 405, an unknown one 404, before the body is judged
    const gets = ['/v1/status', '/v1/forecast', '/v1/events'];
    const posts = Object.keys(FIELDS);
    const allowed = gets.includes(path) ? 'GET' : posts.includes(path) ? 'POST' : null;
    if (allowed === null) return { status: 404, body: { reason: `no ${path} here (known: ${[...gets, ...posts].join(', ')})` } };
    if (method !== allowed) return { status: 405, body: { reason: `${path} takes ${allowed}, not ${method}` }, allow: allowed };
    if (body === NOT_JSON) return bad('body: not JSON');
    if (typeof body !== 'object' || body === null || Array.isArray(body)) return bad('body: must be a JSON object');
    const b = body as Record<string, unknown>;
    const known = FIELDS[path];
    const stray = Object.keys(b).find((k) => !known.includes(k));
    if (stray !== undefined) return bad(`${stray.slice(0, 40)}: not a field of ${path} (its fields: ${known.join(', ')})`);
    const reason = b.reason;
    if (typeof reason !== 'string' || reason.trim() === '' || reason.length > 500) return bad('reason: say why, in 1..500 characters');
    // kept in events and printed by kais status: no line breaks or terminal escapes
    if (CONTROL.test(reason)) return bad('reason: one line of text (no control characters)');
    const by = b.by === undefined ? 'admin' : b.by;
    if (typeof by !== 'string' || by.trim() === '' || by.length > 100) return bad('by: who, in 1..100 characters');
    if (CONTROL.test(by)) return bad('by: one line of text (no control characters)');
    const int = (k: string, lo: number, hi: number): number | string =>
      Number.isInteger(b[k]) && (b[k] as number) >= lo && (b[k] as number) <= hi
        ? (b[k] as number)
        : `${k}: must be an integer in ${lo}..${hi}`;
    if (path.startsWith('/v1/weights/')) return this.weights(path, b, reason, by);
    const W = this.d.scenario.services.length;
    const s = this.d.state;
    const before = s.snapshot();
    if (this.d.cluster === false)
      return {
        status: 409,
        body: { reason: 'this orchestrator has no executor (its config names none): an override or a hold would act on no cluster' },
      };
    if (path === '/v1/scale') {
      const service = int('service', 0, W - 1);
      if (typeof service === 'string') return bad(service);
      const node = b.node === undefined || b.node === null ? null : int('node', 0, this.numNodes - 1);
      if (typeof node === 'string') return bad(node);
      // a held node takes no replica: the override would be accepted and never applied
      if (node !== null && s.isHeld(node))
        return { status: 409, body: { reason: `node: node ${node} is held out (re-admit it first: kais nodes --readmit ${node})` } };
      const max = node === null ? this.d.scenario.maxReplicasPerService : 1000;
      const replicas = int('replicas', node === null ? 1 : 0, max);
      if (typeof replicas === 'string') return bad(replicas);
      let untilMs: number | null = null;
      if (b.ttlS !== undefined && b.ttlS !== null) {
        if (typeof b.ttlS !== 'number' || !(b.ttlS >= MIN_TTL_S && b.ttlS <= 30 * 86400))
          return bad(`ttlS: must be seconds in ${MIN_TTL_S}..2592000`);
        untilMs = Date.now() + b.ttlS * 1000;
      }
      s.setOverride({ service, replicas, node, untilMs, reason, by, setMs: Date.now() });
      return this.changed(
        before,
        'admin-scale',
        `${by}: service ${service} to ${replicas} replica(s)${node === null ? ' in total' : ` on node ${node}`}${untilMs ? ` until ${new Date(untilMs).toISOString()}` : ''}: ${reason}`,
      );
    }
    if (path === '/v1/scale/release') {
      const service = int('service', 0, W - 1);
      if (typeof service === 'string') return bad(service);
      if (!s.release(service)) return { status: 404, body: { reason: `service ${service} has no override` } };
      return this.changed(before, 'admin-release', `${by}: service ${service} back to the policy: ${reason}`);
    }
    if (path === '/v1/nodes/hold' || path === '/v1/nodes/readmit') {
      const node = int('node', 0, this.numNodes - 1);
      if (typeof node === 'string') return bad(node);
      if (path === '/v1/nodes/hold') {
        // an override pinned to the node would stay listed and never be applied, and the policy's
        // orders for its service are dropped while it stands: the service would lose that node's replicas for good
        const pinned = s.snapshot().overrides.find((o) => o.node === node);
        if (pinned)
          return {
            status: 409,
            body: {
              reason: `node: node ${node} carries the override of service ${pinned.service} (release it first: kais scale --release ${pinned.service})`,
            },
          };
        s.hold({ node, reason, by, setMs: Date.now() });
        return this.changed(before, 'admin-hold', `${by}: node ${node} held out: ${reason}`);
      }
      if (!s.readmit(node)) return { status: 404, body: { reason: `node ${node} is not held` } };
      return this.changed(before, 'admin-readmit', `${by}: node ${node} re-admitted: ${reason}`);
    }
    return { status: 404, body: { reason: `no POST ${path} here` } };
  }

  /** /v1/weights/*: the weights' admin answers; a success carries the status as it stands after it. */
  private weights(path: string, b: Record<string, unknown>, reason: string, by: string): AdminReply {
    const w = this.d.weights;
    if (!w) return { status: 409, body: { reason: 'this orchestrator serves no weights (no model, no learner)' } };
    let r: WeightsReply;
    if (path === '/v1/weights/rollback') {
      const to = b.to === undefined || b.to === null ? null : b.to;
      if (to !== null && !(Number.isInteger(to) && (to as number) >= 1))
        return bad('to: must be a stored weight version (an integer >= 1)');
      r = w.rollback(to as number | null, reason, by);
    } else if (path === '/v1/weights/freeze') r = w.freeze(reason, by);
    else r = w.unfreeze(reason, by);
    // a success, and a change the store could not keep (503: nothing changed), carry the status as it stands
    return r.status === 200 || r.status === 503 ? { status: r.status, body: { ...r.body, ...this.d.status() } } : r;
  }

  private async changed(before: AdminSnapshot, kind: string, message: string): Promise<AdminReply> {
    // kept in the store before it acts, or not made at all: a change lost at the next restart is worse than one refused
    if (this.d.save(this.d.state.snapshot()) === false) {
      this.d.state.restore(before);
      return {
        status: 503,
        body: {
          ok: false,
          reason: 'not made: the store cannot be written now (see the orchestrator log); try again',
          message,
          ...this.d.status(),
        },
      };
    }
    this.d.event(kind, message);
    // a step on a slow cluster (Kubernetes, retrying) may outlast the CLI's deadline: the answer
    // then says the change is saved and still being applied, rather than nothing
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<null>((resolve) => {
      timer = setTimeout(() => resolve(null), this.d.answerWithinMs ?? ANSWER_WITHIN_MS);
      timer.unref();
    });
    const out = await Promise.race([this.d.stepNow(), late]);
    clearTimeout(timer);
    if (out === null) return { status: 202, body: { ok: true, pending: true, event: kind, message, ...this.d.status() } };
    const applied = { executed: out.executed, refused: out.refused };
    if (out.error !== undefined)
      return {
        status: 502,
        body: {
          ok: false,
          reason: `saved, but the cluster did not take it (${out.error}); the next placement step tries again`,
          event: kind,
          message,
          applied,
          ...this.d.status(),
        },
      };
    // the cluster took it and the agents were told; only the placement's record is missing
    const warning =
      out.stored === false
        ? {
            warning:
              'applied and pushed to the agents, but the store could not keep the placement (database or disk full): a restart resumes the last stored one',
          }
        : {};
    return { status: 200, body: { ok: true, event: kind, message, applied, ...warning, ...this.d.status() } };
  }
}
