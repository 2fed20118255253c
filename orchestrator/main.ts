/**
 * Process wiring of `kais orchestrator`: store (SQLite, WAL) -> hub (resumes the stored weights
 * and placement) -> model registry -> placement loop -> executor, plus what agents send:
 * `experience` batches go to the store's experience ring, `telemetry` to per-eAP metrics.
 *
 * Weights: on a fresh store, the initial cmmac actor weights are published (version 1) when the
 * config names a `kais train` checkpoint; otherwise none (agents use their heuristic fallback).
 * After a restart the stored latest version is served as is.
 *
 * Online learning (`"learner": "cmmac"`, the default): orchestrator/learner.ts reads the ring and,
 * every `learnBatch` actor decisions, updates the critic and the actor and publishes the next
 * weight version. It needs a model to start from (a `checkpoint`, or a stored version); agents of
 * a learning orchestrator should explore (`kais agent --explore 0.25`). `"learner": "none"` only stores experience.
 *
 * Config file (JSON), every field optional except none:
 * `{"scenario": "kais", "orchestration": "static"|"hpa", "token": "", "agentTokens": {"0": "..."},
 *   "frameS": <scenario seconds per frame, default slotS x slotsPerFrame>, "speed": 1,
 *   "executor": null | "http://<kais node admin>", "checkpoint": null | "<kais train db or actor .bin>",
 *   "actorHead": "softplus1", "heartbeatMs": 5000, "learner": "cmmac"|"none", "learnBatch": 2048,
 *   "detector": "vgru"|"none"}`
 *
 * Learned device detector (`"detector": "vgru"`, the default; orchestrator/detector.ts): fitted
 * on the healthy device-filter windows agents send, it scores their ambiguous windows and answers
 * with `verdicts` frames. It loads tfjs (in a worker) only once windows arrive.
 */
import * as fs from 'node:fs';
import type { Placement } from '../shared/domain';
import { UsageError } from '../shared/errors';
import { placementMatrix } from '../shared/protocol/envelope';
import { loadScenario, type Scenario } from '../shared/scenario';
import { initialPlacement } from './emulated-cluster';
import type { Hub } from './hub';
import { EmulatedExecutor, NullExecutor, ORCHESTRATION_NAMES, PlacementLoop, type OrchestrationName } from './placement-loop';
import { LearnedDetector } from './detector';
import type { OnlineLearner } from './learner';
import { ModelRegistry, startHub } from './registry';
import { Store, type MetricPoint } from './store';

export interface OrchestratorConfig {
  scenario: Scenario;
  orchestration: OrchestrationName;
  token: string;
  agentTokens: Record<number, string>;
  frameS: number;
  speed: number;
  executor: string | null;
  checkpoint: string | null;
  heartbeatMs: number;
  /** Head of the actor (an exported actor file's own head wins). */
  actorHead: 'relu1' | 'softplus1';
  learner: 'cmmac' | 'none';
  learnBatch: number;
  detector: 'vgru' | 'none';
}

/** Reads and validates the config file; UsageError naming the file and field for anything wrong. */
export function readConfig(file: string): OrchestratorConfig {
  let raw: unknown;
  try {
    raw = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (e) {
    throw new UsageError(`--config: cannot read ${file} as JSON (${(e as Error).message})`);
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new UsageError(`${file}: must hold a JSON object`);
  const o = raw as Record<string, unknown>;
  const fail = (field: string, why: string): never => {
    throw new UsageError(`${file}: field "${field}" ${why}`);
  };
  const known = ['scenario', 'orchestration', 'token', 'agentTokens', 'frameS', 'speed', 'executor', 'checkpoint', 'heartbeatMs', 'actorHead', 'learner', 'learnBatch', 'detector'];
  for (const k of Object.keys(o)) if (!known.includes(k)) fail(k, `is not a config field (known: ${known.join(', ')})`);
  const str = (k: string, d: string): string => (o[k] === undefined ? d : typeof o[k] === 'string' ? (o[k] as string) : fail(k, 'must be a string'));
  const strOrNull = (k: string): string | null => (o[k] === undefined || o[k] === null ? null : typeof o[k] === 'string' ? (o[k] as string) : fail(k, 'must be a string or null'));
  const pos = (k: string, d: number): number => {
    const v = o[k] === undefined ? d : o[k];
    return typeof v === 'number' && Number.isFinite(v) && v > 0 ? v : fail(k, `must be a positive number, got ${JSON.stringify(v)}`);
  };
  const scenario = loadScenario(str('scenario', 'kais'));
  const orchestration = str('orchestration', 'static');
  if (!(ORCHESTRATION_NAMES as string[]).includes(orchestration)) fail('orchestration', `must be one of ${ORCHESTRATION_NAMES.join(', ')} (gpg is not wired in yet)`);
  const agentTokens: Record<number, string> = {};
  if (o.agentTokens !== undefined) {
    if (typeof o.agentTokens !== 'object' || o.agentTokens === null) fail('agentTokens', 'must be an object {eapId: token}');
    for (const [k, v] of Object.entries(o.agentTokens as object)) {
      if (!/^\d+$/.test(k) || typeof v !== 'string') fail(`agentTokens.${k}`, 'must map an eAP id to a string token');
      agentTokens[Number(k)] = v as string;
    }
  }
  const heartbeatMs = pos('heartbeatMs', 5000);
  if (!Number.isInteger(heartbeatMs)) fail('heartbeatMs', 'must be an integer');
  const executor = strOrNull('executor');
  if (executor !== null && !/^https?:\/\//.test(executor)) fail('executor', 'must be an http:// URL of a kais node admin server');
  const checkpoint = strOrNull('checkpoint');
  if (checkpoint !== null && !fs.existsSync(checkpoint)) fail('checkpoint', `${checkpoint} does not exist`);
  const actorHead = str('actorHead', 'softplus1');
  if (actorHead !== 'relu1' && actorHead !== 'softplus1') fail('actorHead', `must be relu1 or softplus1, got ${JSON.stringify(actorHead)}`);
  const learner = str('learner', 'cmmac');
  if (learner !== 'cmmac' && learner !== 'none') fail('learner', `must be "cmmac" or "none", got ${JSON.stringify(learner)}`);
  const learnBatch = pos('learnBatch', 2048);
  if (!Number.isInteger(learnBatch)) fail('learnBatch', 'must be an integer');
  const detector = str('detector', 'vgru');
  if (detector !== 'vgru' && detector !== 'none') fail('detector', `must be "vgru" or "none", got ${JSON.stringify(detector)}`);
  return {
    scenario,
    orchestration: orchestration as OrchestrationName,
    token: str('token', ''),
    agentTokens,
    frameS: pos('frameS', scenario.slotS * scenario.slotsPerFrame),
    speed: pos('speed', 1),
    executor,
    checkpoint,
    heartbeatMs,
    actorHead: actorHead as 'relu1' | 'softplus1',
    learner: learner as 'cmmac' | 'none',
    learnBatch,
    detector: detector as 'vgru' | 'none',
  };
}

export interface RunningOrchestrator {
  readonly hub: Hub;
  readonly store: Store;
  readonly registry: ModelRegistry;
  readonly loop: PlacementLoop;
  /** null with `"learner": "none"`. */
  readonly learner: OnlineLearner | null;
  /** null with `"detector": "none"`. */
  readonly detector: LearnedDetector | null;
  readonly port: number;
  /** Whether this start resumed a stored placement (restart) rather than publishing the initial one. */
  readonly resumed: boolean;
  close(): Promise<void>;
}

export async function startOrchestrator(
  cfg: OrchestratorConfig,
  opts: { port?: number; dbPath: string; log?: (line: string) => void },
): Promise<RunningOrchestrator> {
  const log = opts.log ?? (() => undefined);
  const store = Store.open(opts.dbPath);
  const hub = await startHub(store, { port: opts.port ?? 0, token: cfg.token, agentTokens: cfg.agentTokens, heartbeatMs: cfg.heartbeatMs });
  const registry = new ModelRegistry(store, hub);

  // the checkpoint's actor, read once (training code loads only when there is one)
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const ck = cfg.checkpoint ? (require('../training/jobs/checkpoint') as typeof import('../training/jobs/checkpoint')).checkpointActor(cfg.checkpoint) : null;
  const head = ck?.head ?? cfg.actorHead;
  if (store.latestModelVersion() === null && ck) {
    const body = registry.publishWeights(ck.tensors, head);
    log(`published initial cmmac weights v${body.version} from ${cfg.checkpoint}`);
  } else if (store.latestModelVersion() !== null) {
    log(`serving stored weights v${store.latestModelVersion()}`);
  } else {
    log('no model: agents dispatch with their heuristic fallback');
  }

  const stored = store.latestPlacement();
  let start: Placement;
  let resumed = false;
  if (stored && stored.numNodes === hubNodes(cfg.scenario) && stored.numServices === cfg.scenario.services.length) {
    start = placementMatrix(stored);
    resumed = true;
    log(`resuming placement v${stored.version} (frame ${stored.frame})`);
  } else {
    start = initialPlacement(cfg.scenario);
  }

  const detector =
    cfg.detector === 'vgru'
      ? new LearnedDetector({ store, send: (eap, body) => void hub.sendTo(eap, 'verdicts', body), log })
      : null;
  if (detector && store.detectors().length > 0) {
    detector.start().then(
      () => log(`detector: on, stored shapes ${detector.fittedShapes().join(', ')}`),
      (e: Error) => log(`detector: could not start (${e.message}); ambiguous windows stay undecided`),
    );
  }

  hub.on('frame', (session, frame) => {
    if (frame.type === 'experience') {
      store.appendExperience(frame.body);
    } else if (frame.type === 'telemetry') {
      if (detector && frame.body.windows) detector.add(session.eapId, frame.body.windows);
      let requests = 0;
      let inDeadline = 0;
      for (const s of frame.body.samples) {
        requests += s.requests;
        inDeadline += s.inDeadline;
      }
      const tsMs = Date.now();
      const points: MetricPoint[] = [
        { tsMs, name: 'agent/requests', eap: session.eapId, value: requests },
        { tsMs, name: 'agent/in_deadline', eap: session.eapId, value: inDeadline },
      ];
      store.recordMetrics(points);
    }
  });

  const loop = new PlacementLoop({
    scenario: cfg.scenario,
    registry,
    executor: cfg.executor ? new EmulatedExecutor(cfg.executor) : new NullExecutor(),
    policy: cfg.orchestration,
    start,
    startFrame: resumed ? stored!.frame : 0,
    publishStart: !resumed,
    frameMs: (cfg.frameS * 1000) / cfg.speed,
    speed: cfg.speed,
    log,
  });
  await loop.start();

  let learner: OnlineLearner | null = null;
  if (cfg.learner === 'cmmac') {
    // tfjs and the learner load only when learning is on
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const { OnlineLearner: L } = require('./learner') as typeof import('./learner');
    learner = new L({ scenario: cfg.scenario, store, registry, head, batch: cfg.learnBatch, log });
    // not awaited: agents are served while the learner's worker loads tfjs (a second or more)
    const started = learner;
    started.start().then(
      () => log(started.weightVersion === null ? 'learner: waiting for a model to start from' : `learner: on, from weights v${started.weightVersion}, every ${cfg.learnBatch} decisions`),
      (e: Error) => log(`learner: could not start (${e.message}); experience is still stored`),
    );
  }

  let closing: Promise<void> | null = null;
  return {
    hub,
    store,
    registry,
    loop,
    learner,
    detector,
    port: hub.port,
    resumed,
    close: () => {
      closing ??= (async () => {
        await loop.stop();
        learner?.dispose();
        detector?.dispose();
        registry.dispose();
        await hub.close();
        store.close();
      })();
      return closing;
    },
  };
}

function hubNodes(s: Scenario): number {
  return s.eaps.reduce((a, e) => a + e.nodes.length, 0);
}
