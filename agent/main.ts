/**
 * Process wiring of `kais agent`: HTTP ingress + /metrics + /healthz, the dispatcher, the
 * orchestrator link (AgentLink -> AgentRuntime), the disk cache, and the batched experience and
 * telemetry frames (with the load this eAP sees, agent/load-report.ts; held in the bounded offline
 * buffer while the link is down, agent/outbox.ts). Nothing on the request path waits on the
 * orchestrator.
 *
 * HTTP:
 * - `POST /request` `{service, deadlineMs, payloadBytes, workCoreS?}` -> 200 `{target, latencyMs,
 *   procMs}` served; 503 `{reason}` refused (target full, draining); 504 `{reason}` not answered
 *   in time by the target or expired in the queue; 400 `{reason}` for a malformed request.
 * - `GET /metrics` Prometheus text (agent/metrics.ts); `GET /healthz` JSON (200, 503 while draining);
 *   `GET /readyz` 200 once a placement is held and not draining, else 503 with the reason.
 *
 * `drain()` (SIGTERM in the CLI): new requests get 503 `draining`, queued and in-flight ones are
 * finished and answered, the last experience is sent, the link closes.
 */
import * as http from 'node:http';
import { HTTP_SERVER_LIMITS, MAX_CONNECTIONS, SERVER_KEEP_ALIVE_MS } from '../shared/http-limits';
import * as https from 'node:https';
import type { TlsPair } from '../shared/tls';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import type { Scenario } from '../shared/scenario';
import { AgentLink } from './link';
import { AgentRuntime } from './runtime';
import { Dispatcher, type ExperienceMode, type IngressRequest, type Targets } from './dispatcher';
import { freshHealthState, healthJson, type HealthState } from './health';
import { AgentMetrics } from './metrics';
import { LocalClusterView } from './local-view';
import { StateCache } from './weights-cache';
import { NodeHealth } from './filters/node-health';
import { TelemetryPoller } from './telemetry-poller';
import { LoadSampler } from './load-report';
import { DEFAULT_OFFLINE_BUFFER, DEFAULT_OFFLINE_BUFFER_MIB, Outbox, type OutRecord } from './outbox';
import { MAX_DEVICE_WINDOWS, MAX_GUARD_SWITCHES, type GuardSwitchReport } from '../shared/protocol/envelope';
import { agentPolicySeed, type LivePolicyName } from '../shared/dispatch';
import type { RegimeGuardOptions } from '../shared/dispatch/guard';
import { guardSummary } from '../shared/dispatch/guard-options';
import { topologyOf } from '../shared/scenario';

export const AGENT_VERSION = '0.1.0';

export interface AgentOptions {
  scenario: Scenario;
  eap: number;
  orchestratorUrl: string;
  targets: Targets;
  token?: string;
  /** @defaultValue 0 */
  port?: number;
  /** @defaultValue '127.0.0.1' */
  host?: string;
  /** Certificate and key of the ingress: https instead of http (shared/tls.ts). @defaultValue plain http */
  tls?: TlsPair | null;
  /** CA (PEM) the wss:// orchestrator's certificate must chain to. @defaultValue Node's CA store */
  orchestratorCa?: string;
  /** Directory of the weights/placement cache; null: no cache. */
  cacheDir: string | null;
  /** Time scale of the replayed workload (see local-view.ts). @defaultValue 1 */
  speed?: number;
  /** Seed of the reconnect jitter. @defaultValue eap */
  seed?: number;
  actorHead?: 'relu1' | 'softplus1';
  /**
   * Dispatch policy: `cmmac` (the actor once weights arrive, lec before) or a heuristic of the
   * simulator (shared/dispatch), which then decides everything; weights are ignored. @defaultValue 'cmmac'
   */
  policy?: LivePolicyName;
  /** Run seed; the heuristic's reset seed is derived from it and the eAP (agentPolicySeed). @defaultValue 1 */
  policySeed?: number;
  /**
   * Share of decisions drawn from the policy (for a learning orchestrator), see Dispatcher.
   * @defaultValue 0, or 1 while the orchestrator's `welcome` says its model acts by sampling
   */
  explore?: number;
  /** Which decisions are sent as experience, see Dispatcher. @defaultValue 'explored' */
  experience?: ExperienceMode;
  /** The regime guard over cmmac (shared/dispatch/guard.ts); null: none. @defaultValue null */
  guard?: RegimeGuardOptions | null;
  /**
   * Device filters on the nodes' `/telemetry` and QoS isolation on this agent's outcomes
   * (agent/filters/node-health.ts): excluded nodes leave the context filter's mask. @defaultValue true
   */
  deviceFilters?: boolean;
  /** With the device filters: NodeHealth's L2 second stage on every window (agent/filters/l2-stage.ts, rule `device:l2`). @defaultValue false */
  secondStage?: boolean;
  /** Polls without a new telemetry sample after which a node with a filter is excluded (TelemetryPoller staleAfterPolls). @defaultValue 36 */
  telemetryStalePolls?: number;
  /** Telemetry sample period of the nodes, seconds of scenario time. @defaultValue 1 */
  telemetryPeriodS?: number;
  /** Experience and telemetry batch interval, ms. @defaultValue 1000 */
  batchMs?: number;
  /**
   * Records (telemetry intervals, experience frames of up to 64 transitions) held while the
   * orchestrator link is down, the oldest dropped (counted) beyond (agent/outbox.ts). @defaultValue 600
   */
  offlineBuffer?: number;
  /** The same buffer's bound in MiB of their estimated encoded size (agent/outbox.ts). @defaultValue 32 */
  offlineBufferMib?: number;
  /** Longest a drain waits for outstanding requests, ms. @defaultValue 30000 */
  drainTimeoutMs?: number;
  log?: (line: string) => void;
}

export interface RunningAgent {
  readonly port: number;
  readonly dispatcher: Dispatcher;
  readonly runtime: AgentRuntime;
  readonly link: AgentLink;
  health(): Record<string, unknown>;
  /** Stops accepting, answers everything outstanding, closes. Idempotent. */
  drain(): Promise<void>;
}

const MAX_BODY_BYTES = 64 * 1024;

export async function startAgent(o: AgentOptions): Promise<RunningAgent> {
  const log = o.log ?? (() => undefined);
  const view = new LocalClusterView(o.scenario, o.eap, o.speed ?? 1);
  const policy = o.policy ?? 'cmmac';
  const heuristic = policy !== 'cmmac';
  const dispatcher = new Dispatcher({
    scenario: o.scenario,
    view,
    targets: o.targets,
    actorHead: o.actorHead,
    explore: o.explore,
    experience: o.experience,
    actSeed: o.seed ?? o.eap,
    policy,
    policySeed: agentPolicySeed(o.policySeed ?? 1, o.eap),
    guard: o.guard ?? null,
  });
  /** The regime guard's switches not yet sent (the next telemetry frame carries them). */
  const guardSwitches: GuardSwitchReport[] = [];
  const takeGuardSwitches = (): { guard?: GuardSwitchReport[] } => (guardSwitches.length > 0 ? { guard: guardSwitches.splice(0) } : {});
  if (o.guard && !heuristic) {
    const m = o.guard.mid;
    log(`regime guard: ${guardSummary(o.guard)}`);
    const names = ['cmmac', m?.fallback ?? '', o.guard.fallback];
    dispatcher.onGuardSwitch = (s) => {
      log(`regime guard: to ${names[s.level]} at decision ${s.decision} (late share ${s.lateShare.toFixed(3)})`);
      // reported to the orchestrator with the next telemetry frame (an event there); the newest kept
      guardSwitches.push({
        ts: Date.now(),
        level: s.level,
        policy: names[s.level],
        lateShare: Math.min(1, Math.max(0, s.lateShare)),
        decision: s.decision,
      });
      if (guardSwitches.length > MAX_GUARD_SWITCHES) guardSwitches.shift();
    };
  }
  // the cache folder first: a refused --cache is the only line (the explore line came before it)
  const cache = o.cacheDir ? new StateCache(o.cacheDir) : null;
  if (heuristic) {
    log(
      `policy ${policy}: every decision is ${policy}'s, actor weights are ignored${o.guard ? ', --guard is ignored (it guards cmmac)' : ''}; ` +
        ((o.experience ?? 'explored') === 'all'
          ? 'every decision is sent as experience without a weight version (the online learner skips those)'
          : 'no experience is sent'),
    );
  } else if ((o.explore ?? 0) === 0 && (o.experience ?? 'explored') === 'explored') {
    log(
      `explore 0${o.explore === undefined ? " (1 if the orchestrator's model acts by sampling)" : ''}: no experience is sent (the online learner learns from drawn decisions; --explore <share>, or --experience all)`,
    );
  }

  // ---- node health: device filters on telemetry, QoS isolation on outcomes ----
  let nodeHealth: NodeHealth | null = null;
  let poller: TelemetryPoller | null = null;
  if (o.deviceFilters ?? true) {
    const nodes = o.scenario.eaps.flatMap((e) => e.nodes);
    const nodeEap = topologyOf(o.scenario).nodeEap;
    const health = new NodeHealth(
      nodes.map((n) => `${n.cpuCores}/${n.memGB}`),
      nodeEap,
      // QoS on failures only (Dispatcher.countHealth): latency at the eAP is mostly queueing, i.e.
      // load, which the context filter handles; isolating busy nodes would shed capacity under load
      // the learned stage: ambiguous windows (and some healthy ones of this eAP's nodes, to learn
      // from) go to the orchestrator's detector, whose verdicts come back (onVerdicts below)
      {
        qos: { maxLatencyMs: Number.MAX_VALUE },
        windows: { sampleHealthy: (n) => nodeEap[n] === o.eap },
        second: o.secondStage ? {} : null,
      },
      (e) =>
        log(
          `node ${e.node} ${e.kind === 'readmit' ? 're-admitted' : e.kind === 'exclude' || e.kind === 'isolate' ? 'excluded' : 'kept in service'} (${e.rule}): ${e.reason}`,
        ),
    );
    nodeHealth = health;
    view.excluded = (n) => health.excluded(n);
    poller = new TelemetryPoller({
      nodeUrls: o.targets.nodes,
      health,
      periodMs: ((o.telemetryPeriodS ?? 1) * 1000) / (o.speed ?? 1),
      nowS: () => view.nowS(),
      staleAfterPolls: o.telemetryStalePolls ?? 36,
      log,
    });
    poller.start();
  }
  const state: HealthState = {
    ...freshHealthState(o.eap),
    tls: !!o.tls,
    tlsFailures: 0,
    nodeHealth,
    epoch: null,
    epochChanges: 0,
  };

  // Cached state first: the agent dispatches with it before (or without) the orchestrator.
  const cacheIgnored = (why: string) => log(`cache file ignored: ${why}`);
  let cachedWeights = heuristic ? null : (cache?.loadWeights(cacheIgnored) ?? null);
  let cachedPlacement = cache?.loadPlacement(cacheIgnored) ?? null;
  if (cachedWeights) {
    try {
      dispatcher.setWeights(cachedWeights);
      log(`using cached weights v${cachedWeights.version}`);
    } catch (e) {
      log(`cached weights ignored: ${(e as Error).message}`);
      cachedWeights = null;
    }
  }
  if (cachedPlacement) {
    try {
      view.applyPlacement(cachedPlacement);
    } catch (e) {
      // said, as for the weights: a cache of another cluster was dropped in silence
      log(`cached placement ignored: ${(e as Error).message}`);
      cachedPlacement = null;
    }
  }

  let runtime: AgentRuntime | null = null;
  const link = new AgentLink({
    url: o.orchestratorUrl,
    seed: o.seed ?? o.eap,
    hello: () => runtime!.helloBody(o.token ?? '', AGENT_VERSION),
    backoff: { initialMs: 200, maxMs: 5000 },
    ...(o.orchestratorCa !== undefined ? { ca: o.orchestratorCa } : {}),
  });
  const rt = new AgentRuntime(link.send.bind(link), link.onFrame.bind(link), {
    eapId: o.eap,
    weights: cachedWeights,
    placement: cachedPlacement,
    // this process's id: only it may take over its own live session at the hub (a reconnect over a half-dead socket)
    instance: randomBytes(8).toString('hex'),
    onWeights: (body) => {
      if (!dispatcher.setWeights(body)) return; // a heuristic policy: not used, not cached
      try {
        cache?.saveWeights(body);
      } catch (e) {
        log(`weights cache not written: ${(e as Error).message}`);
      }
    },
    onVerdicts: (body) => {
      if (!nodeHealth) return;
      const nowS = view.nowS();
      for (const v of body.verdicts) nodeHealth.learnedVerdict(v.node, v.id, v.anomalous, v.score, nowS);
    },
    onPlacement: (body) => {
      // the nodes whose replicas change: their device filters mark a break (a replica moves a node's metrics by a step)
      nodeHealth?.placementChanged(view.applyPlacement(body));
      try {
        cache?.savePlacement(body);
      } catch (e) {
        log(`placement cache not written: ${(e as Error).message}`);
      }
    },
  });
  runtime = rt;
  state.framesRefused = () => ({ total: rt.stats.refused, unanswered: rt.stats.refusedUnanswered });
  const sync = () => {
    // a heuristic policy holds no weights, whatever the orchestrator sent
    state.weightVersion = heuristic ? null : rt.weightVersion;
    state.placementVersion = rt.placementVersion;
    state.weightsApplied = heuristic ? 0 : rt.stats.weightsApplied;
    state.placementsApplied = rt.stats.placementsApplied;
  };
  rt.on('weights', (b) => {
    sync();
    log(heuristic ? `weights v${b.version} received, not used (policy ${policy})` : `weights v${b.version} applied`);
  });
  rt.on('placement', () => sync());
  rt.on('refused', (e, folded, quiet) => {
    const before = [
      ...(folded > 0 ? [`${folded} past the reply budget, not answered`] : []),
      ...(quiet > 0 ? [`${quiet} answered, not logged`] : []),
    ];
    log(
      `refused a frame from the orchestrator: ${e.code} ${e.message}${before.length > 0 ? ` (and before it: ${before.join('; ')})` : ''}`,
    );
  });
  rt.on('epoch', (c) => {
    state.epochChanges = (state.epochChanges ?? 0) + 1;
    log(`orchestrator epoch ${c.to} (held ${c.from ?? 'none'}): ${c.reason}; adopting its weights and placement whatever their versions`);
  });
  rt.on('welcome', (w) => {
    state.epoch = w.epoch ?? null;
    // without an explicit --explore, the agent acts as the orchestrator's model is meant to act
    if (o.explore === undefined && !heuristic) {
      const explore = w.act === 'sample' ? 1 : 0;
      if (explore !== dispatcher.explore) {
        dispatcher.explore = explore;
        log(
          explore === 1
            ? "the orchestrator's model acts by sampling (act: sample): every decision is drawn from the policy (explore 1)"
            : "the orchestrator's model acts argmax: explore 0",
        );
      }
    }
  });
  link.on('ready', () => {
    state.connected = true;
    state.linkProblem = null;
    loggedProblem = null;
    if (link.connections > 1) state.reconnects++;
    log(`connected to ${o.orchestratorUrl}`);
  });
  link.on('down', (code, reason) => {
    state.connected = false;
    const why = `${code}${reason ? `: ${reason}` : ''}`;
    log(state.draining ? `orchestrator link closed (${why})` : `orchestrator link down (${why}); dispatching on`);
  });
  // why the orchestrator is not reached, said (it was silent: a wrong port or a refused hello looked
  // like a link still coming up): a new reason at once, the same one at attempts 1, 2, 4, 8, ...
  let loggedProblem: string | null = null;
  link.on('retry', (delayMs, attempt, problem) => {
    if (problem === null) return;
    state.linkProblem = problem;
    if (problem === loggedProblem && (attempt & (attempt - 1)) !== 0) return;
    loggedProblem = problem;
    log(
      `orchestrator ${o.orchestratorUrl} not reached (attempt ${attempt}): ${problem}; retrying in ${(delayMs / 1000).toFixed(1)} s, dispatching on`,
    );
  });
  // an error frame after welcome (KAIS_ERR_QUARANTINED: what the orchestrator holds against this
  // agent): logged once per code a minute, the ones in between counted into the next line
  const peerErrors = new Map<string, { atMs: number; unlogged: number }>();
  rt.on('peerError', (e) => {
    const now = Date.now();
    const seen = peerErrors.get(e.code);
    if (seen && now - seen.atMs < 60_000) {
      seen.unlogged++;
      return;
    }
    const more = seen && seen.unlogged > 0 ? ` (and ${seen.unlogged} more of ${e.code} since the last line)` : '';
    if (peerErrors.size >= 64) peerErrors.clear(); // codes are the peer's words: the map stays small
    peerErrors.set(e.code, { atMs: now, unlogged: 0 });
    log(`orchestrator says ${e.code}: ${e.message}${more}`);
  });
  link.on('refused', (e) => {
    state.linkRefused = e.message;
    log(`orchestrator refused hello: ${e.message}; the link stops (restart the agent with the right token)`);
  });
  link.on('tlsError', (reason) => {
    state.tlsFailures = (state.tlsFailures ?? 0) + 1;
    log(`orchestrator certificate refused (${o.orchestratorUrl}): ${reason}; check --tls-ca; retrying`);
  });
  sync();
  link.start();

  // ---- batched experience and telemetry ----
  const batchMs = o.batchMs ?? 1000;
  // the load this eAP sees, sampled through each interval: the orchestrator's view of load when its
  // executor cannot see it (Kubernetes; agent/load-report.ts)
  const loadSampler = new LoadSampler(o.scenario, view);
  const sampleTimer = setInterval(() => loadSampler.sample(), Math.max(50, Math.min(250, batchMs / 4)));
  sampleTimer.unref();
  let lastBatch = performance.now();
  // Experience goes out in frames of EXPERIENCE_CHUNK transitions, one frame per macrotask: encoding
  // a second's worth at once (1000 transitions x 612 floats at 1000 req/s, ~2.4 MB) held the event
  // loop for tens of ms, and every request arriving meanwhile waited (the ingress p99).
  const EXPERIENCE_CHUNK = 64;
  const EXPERIENCE_PER_FLUSH = 4096;
  // While the link is down, or its socket holds more than SOCKET_BACKLOG_BYTES (a link gone silent
  // without closing), telemetry and experience wait in the bounded offline buffer (agent/outbox.ts)
  // and go out after it, in order, OUTBOX_FRAMES_PER_TICK frames (or a chunk's transitions) per
  // OUTBOX_TICK_MS: 80 frames/s, 1280 transitions/s, under the orchestrator's intake budget
  // (200 frames/s, 2000 transitions/s per session, orchestrator/intake.ts).
  const SOCKET_BACKLOG_BYTES = 1 << 20;
  const OUTBOX_TICK_MS = 50;
  const OUTBOX_FRAMES_PER_TICK = 4;
  // The last records of a drain go out at the same pace for at most this long (then the rest is
  // dropped, counted): sent at once, past the intake's burst (2 s of its budget), they were refused.
  const FINAL_FLUSH_MS = 5000;
  const outbox = new Outbox(
    o.offlineBuffer ?? DEFAULT_OFFLINE_BUFFER,
    Math.floor((o.offlineBufferMib ?? DEFAULT_OFFLINE_BUFFER_MIB) * 1024 * 1024),
  );
  state.offline = outbox;
  const writable = () => link.ready && link.bufferedAmount < SOCKET_BACKLOG_BYTES;
  const sendRecord = (r: OutRecord): boolean => {
    if (r.type === 'telemetry') {
      if (!rt.sendFrame('telemetry', r.body)) return false;
      state.telemetrySent++;
    } else {
      if (!rt.sendFrame('experience', r.body)) return false;
      state.experienceSent++;
    }
    return true;
  };
  let outboxTimer: NodeJS.Timeout | null = null;
  /** Sends one tick's worth of the oldest held records while the link takes them. */
  const outboxTick = (): void => {
    let frames = 0;
    let transitions = 0;
    while (outbox.length > 0 && writable() && frames < OUTBOX_FRAMES_PER_TICK && transitions < EXPERIENCE_CHUNK) {
      const r = outbox.peek()!;
      if (!sendRecord(r)) break;
      outbox.shift();
      outbox.stats.flushed++;
      frames++;
      if (r.type === 'experience') transitions += r.body.transitions.length;
    }
  };
  /** Sends the oldest held records, paced, while the link takes them; again in OUTBOX_TICK_MS while any are left. */
  const drainOutbox = (): void => {
    outboxTimer = null;
    outboxTick();
    if (outbox.length > 0 && link.ready && !state.draining) outboxTimer = setTimeout(drainOutbox, OUTBOX_TICK_MS);
  };
  const drainOutboxSoon = (): void => {
    if (!outboxTimer && outbox.length > 0 && link.ready) outboxTimer = setTimeout(drainOutbox, 0);
  };
  link.on('ready', drainOutboxSoon);
  // a new store (or one rolled back): held experience names weight versions it never published, and
  // its intake would refuse it (and quarantine a session that sends much of it); telemetry stays
  rt.on('epoch', (c) => {
    // only when the held weights are distrusted: a same-store resync of the placement alone leaves
    // the weights, and what they decided, valid (the hub sends no new weights then)
    if (!c.weights) return;
    const n = outbox.dropAll('experience');
    if (n > 0) log(`${n} held experience frame(s) dropped: they belong to the orchestrator's previous store`);
    // and what the dispatcher still holds or has in flight, decided on the distrusted weights
    const k = dispatcher.retireExperience();
    if (k > 0) log(`${k} transition(s) decided on the previous store's weights dropped`);
  });
  /** Moves the experience the dispatcher holds into the offline buffer (its one bound while offline). */
  const holdExperience = (): void => {
    for (;;) {
      const transitions = dispatcher.takeExperience(EXPERIENCE_CHUNK);
      if (transitions.length === 0) return;
      outbox.push({ type: 'experience', body: { eap: o.eap, transitions } });
    }
  };
  let sendingExperience = false;
  const sendExperienceChunk = (): number => {
    const transitions = dispatcher.takeExperience(EXPERIENCE_CHUNK);
    if (transitions.length === 0) return 0;
    const r: OutRecord = { type: 'experience', body: { eap: o.eap, transitions } };
    // the link went away (or backed up) since the flush began: held, not lost
    if (outbox.length > 0 || !writable() || !sendRecord(r)) {
      outbox.push(r);
      drainOutboxSoon();
    }
    return transitions.length;
  };
  const sendExperienceSoon = (budget: number): void => {
    if (budget <= 0 || !writable() || outbox.length > 0 || drained) {
      sendingExperience = false;
      return;
    }
    let sent = 0;
    try {
      sent = sendExperienceChunk();
    } catch (e) {
      log(`experience not sent: ${(e as Error).message}`);
    }
    if (sent === 0) sendingExperience = false;
    else setImmediate(() => sendExperienceSoon(budget - sent));
  };
  /** Telemetry of the interval, then the experience: spread over macrotasks, or (`hold`, when draining) into the offline buffer. */
  const flush = (hold = false) => {
    const t = performance.now();
    const intervalS = (t - lastBatch) / 1000;
    lastBatch = t;
    const samples = dispatcher.takeTelemetry(intervalS);
    const load = loadSampler.take();
    if (nodeHealth) {
      const nowS = view.nowS();
      for (const x of dispatcher.takeNodeOutcomes()) {
        const n = x.served + x.failed;
        nodeHealth.observe(x.node, { requests: n, successRate: x.served / n, latencyMs: 0 }, nowS);
      }
      nodeHealth.tick(nowS);
    }
    if (hold || !writable() || outbox.length > 0) {
      // offline, or held records ahead of this interval: it waits behind them (the device-filter
      // windows stay in NodeHealth's own bounded queue: a verdict on an old window is of no use)
      outbox.push({ type: 'telemetry', body: { eap: o.eap, samples, load, ...takeGuardSwitches() } });
      holdExperience();
      drainOutboxSoon();
      return;
    }
    const windows = nodeHealth?.takeWindows(MAX_DEVICE_WINDOWS) ?? [];
    const body = { eap: o.eap, samples, ...(windows.length > 0 ? { windows } : {}), load, ...takeGuardSwitches() };
    try {
      if (rt.sendFrame('telemetry', body)) state.telemetrySent++;
    } catch (e) {
      // a body that cannot be encoded costs this interval's telemetry, never the experience after it
      log(`telemetry not sent: ${(e as Error).message}`);
    }
    if (!sendingExperience) {
      sendingExperience = true;
      sendExperienceSoon(EXPERIENCE_PER_FLUSH);
    }
  };
  const batchTimer = setInterval(() => {
    try {
      flush();
    } catch (e) {
      log(`batch not sent: ${(e as Error).message}`);
    }
  }, batchMs);

  // ---- HTTP ----
  const metrics = new AgentMetrics(dispatcher, () => state);
  const handler = (req: http.IncomingMessage, res: http.ServerResponse) => {
    // routes are paths: a query string does not change which
    const url = (req.url ?? '/').split('?')[0];
    const allowed = url === '/request' ? 'POST' : url === '/healthz' || url === '/readyz' || url === '/metrics' ? 'GET' : null;
    if (allowed !== null && req.method !== allowed) {
      send(res, 405, { reason: `${url} takes ${allowed}, not ${req.method}` });
      return;
    }
    if (req.method === 'GET' && url === '/healthz') {
      send(res, state.draining ? 503 : 200, healthJson(dispatcher, state));
      return;
    }
    if (req.method === 'GET' && url === '/readyz') {
      // ready to dispatch: not draining and a placement held (from the orchestrator or the cache)
      const why = state.draining ? 'draining' : state.placementVersion === null ? 'no placement yet' : null;
      send(res, why ? 503 : 200, why ? { ready: false, reason: why } : { ready: true });
      return;
    }
    if (req.method === 'GET' && url === '/metrics') {
      metrics.text().then(
        (text) => {
          res.writeHead(200, { 'content-type': metrics.contentType() });
          res.end(text);
        },
        (e: Error) => send(res, 500, { reason: `metrics: ${e.message}` }),
      );
      return;
    }
    if (req.method === 'POST' && url === '/request') {
      readBody(req, (err, body, status) => {
        if (err && status === 413) {
          // the rest of the body is not read: the answer closes the connection, and the socket goes
          // once it is out (reading on, a Content-Length of 1e11 cost a core for minutes)
          res.once('finish', () => req.socket.destroy());
          return send(res, 413, { reason: err }, { connection: 'close' });
        }
        if (err) return send(res, status ?? 400, { reason: err });
        if (state.draining) return send(res, 503, { reason: 'draining' });
        const parsed = parseIngress(body!, o.scenario.services.length);
        if (typeof parsed === 'string') return send(res, 400, { reason: parsed });
        loadSampler.arrival(parsed.service, parsed.workCoreS);
        void dispatcher.submit(parsed).then((r) => {
          loadSampler.answered(parsed.service, r.status === 200 && r.latencyMs <= parsed.deadlineMs);
          const { status, ...rest } = r;
          send(res, status, rest);
        });
      });
      return;
    }
    send(res, 404, { reason: `no route ${req.method} ${url}` });
  };
  const server: http.Server = o.tls
    ? https.createServer({ ...HTTP_SERVER_LIMITS, cert: o.tls.cert, key: o.tls.key, minVersion: 'TLSv1.2' }, handler)
    : http.createServer(HTTP_SERVER_LIMITS, handler);
  server.keepAliveTimeout = SERVER_KEEP_ALIVE_MS;
  server.maxConnections = MAX_CONNECTIONS.ingress;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(o.port ?? 0, o.host ?? '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;

  let drained: Promise<void> | null = null;
  const drain = (): Promise<void> => {
    if (drained) return drained;
    state.draining = true;
    drained = (async () => {
      server.close(); // no new connections; open ones get 503 draining
      const deadline = new Promise<'late'>((resolve) => setTimeout(() => resolve('late'), o.drainTimeoutMs ?? 30_000).unref());
      if ((await Promise.race([dispatcher.idle(), deadline])) === 'late') {
        // what is still open gets an answer before the sockets close (it got a connection reset)
        const n = dispatcher.answerAll('draining: the agent is stopping');
        if (n > 0) log(`drain: ${n} request(s) still open after ${(o.drainTimeoutMs ?? 30_000) / 1000} s answered 503`);
        await new Promise((resolve) => setTimeout(resolve, 100).unref()); // let those answers leave
      }
      clearInterval(batchTimer);
      clearInterval(sampleTimer);
      if (outboxTimer) clearTimeout(outboxTimer);
      try {
        // the last interval and every transition held, behind what the buffer holds, paced as after a cut
        flush(true);
        // flush() may have scheduled a tick of its own: this loop paces them all
        if (outboxTimer) clearTimeout(outboxTimer);
        outboxTimer = null;
        const until = performance.now() + FINAL_FLUSH_MS;
        while (outbox.length > 0 && link.ready && performance.now() < until) {
          outboxTick();
          if (outbox.length > 0) await new Promise((resolve) => setTimeout(resolve, OUTBOX_TICK_MS));
        }
        const lost = outbox.length;
        if (lost > 0) {
          outbox.dropAll('telemetry');
          outbox.dropAll('experience');
          log(
            `drain: ${lost} held record(s) not sent (${link.ready ? `not all out in ${FINAL_FLUSH_MS / 1000} s` : 'the orchestrator link is down'}): dropped, counted`,
          );
        }
      } catch {
        // best effort: the last batch is lost, not the requests
      }
      await link.close(1000, 'agent draining');
      poller?.stop();
      rt.dispose();
      dispatcher.close();
      server.closeAllConnections();
    })();
    return drained;
  };

  return {
    port,
    dispatcher,
    runtime: rt,
    link,
    health: () => healthJson(dispatcher, state),
    drain,
  };
}

function send(res: http.ServerResponse, status: number, body: unknown, headers: http.OutgoingHttpHeaders = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { ...headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function readBody(req: http.IncomingMessage, cb: (err: string | null, body: string | null, status?: number) => void): void {
  // a device's body is a few dozen bytes: one chunk, decoded as is
  let first: Buffer | null = null;
  let more: Buffer[] | null = null;
  let size = 0;
  let failed = false;
  // a declared length over the cap is refused before a byte of it is read
  if (Number(req.headers['content-length'] ?? 0) > MAX_BODY_BYTES) {
    cb(`body over ${MAX_BODY_BYTES} bytes`, null, 413);
    return;
  }
  req.on('data', (c: Buffer) => {
    size += c.length;
    if (size > MAX_BODY_BYTES && !failed) {
      failed = true;
      cb(`body over ${MAX_BODY_BYTES} bytes`, null, 413);
      return;
    }
    if (failed) return;
    if (first === null) first = c;
    else (more ??= [first]).push(c);
  });
  req.on('end', () => {
    if (failed) return;
    const bytes: Buffer | null = more ? Buffer.concat(more) : first;
    cb(null, bytes ? bytes.toString('utf8') : '');
  });
  req.on('error', () => {
    if (!failed) {
      failed = true;
      cb('request stream error', null);
    }
  });
}

/** The largest payload a request may declare (10 GB). */
const MAX_PAYLOAD_BYTES = 1e10;

/** The ingress body, or one line saying what is wrong with it. */
export function parseIngress(text: string, numServices: number): IngressRequest | string {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return 'body is not JSON';
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return 'body must be a JSON object';
  const o = raw as Record<string, unknown>;
  const { service, deadlineMs, payloadBytes, workCoreS } = o;
  if (!Number.isInteger(service) || (service as number) < 0 || (service as number) >= numServices) {
    return `service must be an integer in 0..${numServices - 1}, got ${JSON.stringify(service)}`;
  }
  if (typeof deadlineMs !== 'number' || !Number.isFinite(deadlineMs) || deadlineMs <= 0 || deadlineMs > 3_600_000) {
    return `deadlineMs must be a number in (0, 3600000], got ${JSON.stringify(deadlineMs)}`;
  }
  // bounded: the emulated transfer of a larger payload overflows the timers (and no device sends 10 GB)
  if (typeof payloadBytes !== 'number' || !Number.isFinite(payloadBytes) || payloadBytes < 0 || payloadBytes > MAX_PAYLOAD_BYTES) {
    return `payloadBytes must be a number in [0, ${MAX_PAYLOAD_BYTES}], got ${JSON.stringify(payloadBytes)}`;
  }
  if (workCoreS !== undefined && (typeof workCoreS !== 'number' || !Number.isFinite(workCoreS) || workCoreS < 0 || workCoreS > 3600)) {
    return `workCoreS must be a number in [0, 3600], got ${JSON.stringify(workCoreS)}`;
  }
  return { service: service as number, deadlineMs, payloadBytes, ...(workCoreS !== undefined ? { workCoreS: workCoreS as number } : {}) };
}
