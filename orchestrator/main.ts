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
 * `{"scenario": "kais", "orchestration": "static"|"hpa"|"gsp-ss"|"gpg", "gpgModel": null (gpg: the shipped models/<scenario>-gpg.json) | "<GPG model .json>", "token": "", "agentTokens": {"0": "..."},
 *   "frameS": <scenario seconds per frame, default slotS x slotsPerFrame>, "speed": 1,
 *   "executor": null | "http://<kais node admin>" | "kubernetes", "executorToken": null | "<its adminToken>", "checkpoint": null | "<kais train db or actor .bin>",
 *   "kubernetes": {"kubeconfig": null (in-cluster) | "<file>", "namespace": "kais", "image": "<replica image>", "nodeLabel": "kais.io/node-index"},
 *   "actorHead": "softplus1", "heartbeatMs": 5000, "learner": "cmmac"|"none", "learnBatch": 2048,
 *   "detector": "vgru"|"none", "gate": null | true | {"margin": 0.01, "minRequests": 500, "arrivals": 20000, "seconds": 10, "heuristics": ["lec", "round-robin"]},
 *   "canary": null | true | {"share": 0.4, "windowS": 10, "maxWindows": 8, "margin": 0.03, "alpha": 0.05, "minRequests": 300, "settleS": 2, "baselineS": 120,
 *              "lagS": 1, "eaps": "first" | "rotate" | [eAP ids]},
 *   "tls": null | {"cert": "<PEM file>", "key": "<PEM file>"} (relative to this file; wss:// and https://),
 *   "prediction": null | "<file>" (the simulator's prediction of the run, relative to this file; orchestrator/prediction.ts)}`
 *
 * Bounds and trust (issue 14): `"limits"` caps the store's growing tables (experience MB and age,
 * metrics and events rows and age, weight and placement versions kept; pruned every `pruneS` in the background), `"intake"` the
 * per-session budget of learning input (orchestrator/intake.ts: transitions and frames per second,
 * invalid frames before a quarantine, the quarantine's length). Every refusal, quarantine, new
 * store epoch, refused or failed learner update and store failure is an event in the store's
 * `events` table (and a log line). A store that cannot be written (disk full, read-only) costs
 * the writes of a backoff interval (1 s doubling to 60 s) and a log line, never the process.
 * Numbers are range-checked: `heartbeatMs` 100..3,600,000, `speed` up to 1000, a frame
 * (`frameS / speed`) at least 0.1 s.
 *
 * Learned device detector (`"detector": "vgru"`, the default; orchestrator/detector.ts): fitted
 * on the healthy device-filter windows agents send, it scores their ambiguous windows and answers
 * with `verdicts` frames. It loads tfjs (in a worker) only once windows arrive.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { loadTlsPair, type TlsPair } from '../shared/tls';
import type { Placement } from '../shared/domain';
import { defaultGpgModelPath, deployableActor } from '../shared/nets/actor-file';
import { topologyOf } from '../shared/scenario';
import { Intake, type IntakeEvent } from './intake';
import { UsageError } from '../shared/errors';
import { isBearerToken } from '../shared/auth';
import { round } from '../shared/round';
import { loadBackend } from '../shared/tf-backend';
import { placementMatrix } from '../shared/protocol/envelope';
import { loadScenario, type Scenario } from '../shared/scenario';
import { initialPlacement } from '../shared/orchestration/placement';
import type { Hub } from './hub';
import { EmulatedExecutor, NullExecutor, type LiveExecutor } from './executors';
import { DEFAULT_NODE_LABEL, KubernetesExecutor } from './kubernetes-executor';
import { LoadBoard } from './load-board';
import { ORCHESTRATION_NAMES, PlacementLoop, type OrchestrationName } from './placement-loop';
import { LearnedDetector } from './detector';
import { OrchestratorHttp } from './http';
import { DEFAULT_GATE, gateConfigProblem, WeightGate, type GateConfig } from './gate';
import { CanaryRollout, canaryConfigProblem, DEFAULT_CANARY, type CanaryConfig } from './canary';
import { packLightActor, packWeights, unpackWeights, type WeightTensor } from '../shared/protocol/weights';
import type { ActorHeadName, LightActorBody } from '../shared/protocol/envelope';
import { Rng } from '../shared/rng';
import { DashboardFeed } from './dashboard';
import { WeightsAdmin } from './weights-admin';
import { PredictionFile, readPrediction, type Prediction } from './prediction';
import { AdminState, type AdminSnapshot } from './admin';
import { AdminApi } from './admin-api';
import type { OnlineLearner } from './learner';
import { ModelRegistry, startHub } from './registry';
import {
  DEFAULT_STORE_LIMITS,
  isStoreWriteError,
  Store,
  StoreError,
  type MetricPoint,
  type RejectedModelRecord,
  type StoreLimits,
} from './store';

/**
 * Refusals any peer can provoke unauthenticated (refused hellos, failed TLS handshakes) make an
 * event at most once per this window, ms, per kind and address (startOrchestrator's
 * `refusalWindowMs` overrides it).
 */
export const REFUSAL_WINDOW_MS = 60_000;
/** Addresses with a refusal window open at once; refusals from further ones share one entry per kind. */
export const REFUSAL_ADDRESSES = 10_000;

export interface OrchestratorConfig {
  scenario: Scenario;
  orchestration: OrchestrationName;
  /** Token of the admin API on the HTTP port (null: the admin API is off). Never an agent's. */
  adminToken: string | null;
  /** The GPG model (JSON) of `orchestration: "gpg"`. */
  gpgModel: string | null;
  token: string;
  agentTokens: Record<number, string>;
  frameS: number;
  speed: number;
  /** null, the http:// URL of a kais node admin server (the emulated cluster), or "kubernetes". */
  executor: string | null;
  /** The Kubernetes executor's settings (orchestrator/kubernetes-executor.ts) when executor is "kubernetes". */
  kubernetes: { kubeconfig: string | null; namespace: string; image: string; nodeLabel: string } | null;
  /** Token of the kais node admin server at `executor` (its ready line's adminToken). */
  executorToken: string | null;
  checkpoint: string | null;
  heartbeatMs: number;
  /** Head of the actor (an exported actor file's own head wins). */
  actorHead: 'relu1' | 'softplus1';
  learner: 'cmmac' | 'none';
  learnBatch: number;
  detector: 'vgru' | 'none';
  /** Store bounds (orchestrator/store.ts StoreLimits). */
  limits: StoreLimits;
  /** Background prune interval, seconds. */
  pruneS: number;
  /** Per-session budget of learning input (orchestrator/intake.ts). */
  intake: { maxTransitionsPerS: number; maxFramesPerS: number; maxMBPerS: number; quarantineAfter: number; quarantineS: number };
  /** The weight gate before every learned version is published (orchestrator/gate.ts); null: off. */
  gate: GateConfig | null;
  /** Canary rollout of every new version (orchestrator/canary.ts); null: off (every version to every agent at once). */
  canary: CanaryConfig | null;
  /**
   * Fault drill (`kais up --inject bad-weights`): this many seconds after the start, a version of
   * random weights (the stored model's shapes) is handed to the publish path as if learned: the
   * gate judges it when on (once it holds `minRequests` live arrivals: the drill waits for them),
   * else it is published. null: no drill.
   */
  injectBadWeightsAfterS: number | null;
  /**
   * The false-alarm drill (`kais up --inject same-weights`): this many seconds after the start, a
   * copy of the stored version's weights is handed to the publish path as a new version, as if
   * learned: the gate must pass it and the canary promote it. null: no drill.
   */
  injectSameWeightsAfterS: number | null;
  /** Certificate and key (PEM, read and checked at start): wss:// for agents, https:// on the HTTP port; null: plain. */
  tls: TlsPair | null;
  /**
   * The simulator's prediction of the run (`kais up` writes it; orchestrator/prediction.ts), read
   * and checked at start, read again when the file changes; the dashboard plots live throughput
   * against it. null: none.
   */
  prediction: { file: string; initial: Prediction } | null;
}

/** The config's `gate` section: null/false/absent = off, true = the defaults, an object = the defaults overridden. */
function readGateSection(v: unknown, fail: (field: string, why: string) => never): GateConfig | null {
  if (v === undefined || v === null || v === false) return null;
  if (v === true) return { ...DEFAULT_GATE };
  if (typeof v !== 'object' || Array.isArray(v)) return fail('gate', 'must be true, false, null or an object');
  const o = v as Record<string, unknown>;
  const known = Object.keys(DEFAULT_GATE);
  for (const k of Object.keys(o)) if (!known.includes(k)) fail(`gate.${k}`, `is not a field of gate (known: ${known.join(', ')})`);
  const c = { ...DEFAULT_GATE, ...o } as GateConfig;
  const problem = gateConfigProblem(c);
  if (problem) fail(`gate.${problem.field}`, problem.why);
  return c;
}

/** The config's `canary` section: null/false/absent = off, true = the defaults, an object = the defaults overridden. */
function readCanarySection(v: unknown, numEaps: number, fail: (field: string, why: string) => never): CanaryConfig | null {
  if (v === undefined || v === null || v === false) return null;
  if (v !== true && (typeof v !== 'object' || Array.isArray(v))) return fail('canary', 'must be true, false, null or an object');
  if (numEaps < 2) return fail('canary', `needs at least 2 eAPs (canary and control), the scenario has ${numEaps}`);
  if (v === true) return { ...DEFAULT_CANARY };
  const o = v as Record<string, unknown>;
  const known = Object.keys(DEFAULT_CANARY);
  for (const k of Object.keys(o)) if (!known.includes(k)) fail(`canary.${k}`, `is not a field of canary (known: ${known.join(', ')})`);
  const c = { ...DEFAULT_CANARY, ...o } as CanaryConfig;
  const problem = canaryConfigProblem(c, numEaps);
  if (problem) fail(`canary.${problem.field}`, problem.why);
  if (Array.isArray(c.eaps) && o.share !== undefined)
    fail('canary.share', 'is not read with a list of canary.eaps (the list is the canary group): give one of them');
  return c;
}

/** The config's `kubernetes` section (only with executor "kubernetes"; every field optional). */
function readKubernetesSection(v: unknown, on: boolean, fail: (field: string, why: string) => never): OrchestratorConfig['kubernetes'] {
  if (v === undefined || v === null)
    return on ? { kubeconfig: null, namespace: 'kais', image: 'kais:latest', nodeLabel: DEFAULT_NODE_LABEL } : null;
  if (!on) return fail('kubernetes', 'is read only with executor "kubernetes"');
  if (typeof v !== 'object' || Array.isArray(v)) return fail('kubernetes', 'must be an object');
  const o = v as Record<string, unknown>;
  const known = ['kubeconfig', 'namespace', 'image', 'nodeLabel'];
  for (const k of Object.keys(o))
    if (!known.includes(k)) fail(`kubernetes.${k}`, `is not a field of kubernetes (known: ${known.join(', ')})`);
  const str = (k: string, d: string): string =>
    o[k] === undefined
      ? d
      : typeof o[k] === 'string' && o[k] !== ''
        ? (o[k] as string)
        : fail(`kubernetes.${k}`, 'must be a non-empty string');
  const kubeconfig = o.kubeconfig === undefined || o.kubeconfig === null ? null : str('kubeconfig', '');
  if (kubeconfig !== null && !fs.existsSync(kubeconfig)) fail('kubernetes.kubeconfig', `${kubeconfig} does not exist (null: in-cluster)`);
  if (kubeconfig !== null && !fs.statSync(kubeconfig).isFile()) fail('kubernetes.kubeconfig', `${kubeconfig} is not a file`);
  const namespace = str('namespace', 'kais');
  if (!/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(namespace))
    fail('kubernetes.namespace', `must be a DNS-1123 label, got ${JSON.stringify(namespace)}`);
  const nodeLabel = str('nodeLabel', DEFAULT_NODE_LABEL);
  if (!/^([a-z0-9.-]+\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/.test(nodeLabel))
    fail('kubernetes.nodeLabel', `is not a label key: ${JSON.stringify(nodeLabel)}`);
  return { kubeconfig, namespace, image: str('image', 'kais:latest'), nodeLabel };
}

/** The executor the config names (started: a Kubernetes one has listed its Deployments). */
async function makeExecutor(
  cfg: OrchestratorConfig,
  log: (line: string) => void,
  load: LoadBoard | null,
): Promise<LiveExecutor & { close?: () => Promise<void> }> {
  if (cfg.executor === 'kubernetes') {
    const k = cfg.kubernetes!;
    const ex = new KubernetesExecutor({ scenario: cfg.scenario, ...k, speed: cfg.speed, log, ...(load ? { load } : {}) });
    if (load) load.ready = () => ex.readyPlacement();
    await ex.start();
    log(`executor: kubernetes, namespace ${k.namespace}, ${k.kubeconfig ? `kubeconfig ${k.kubeconfig}` : 'in-cluster'}`);
    return ex;
  }
  if (cfg.executor) return new EmulatedExecutor(cfg.executor, cfg.scenario, undefined, undefined, cfg.executorToken);
  return new NullExecutor();
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
  const known = [
    'scenario',
    'orchestration',
    'gpgModel',
    'adminToken',
    'token',
    'agentTokens',
    'frameS',
    'speed',
    'executor',
    'executorToken',
    'kubernetes',
    'checkpoint',
    'heartbeatMs',
    'actorHead',
    'learner',
    'learnBatch',
    'detector',
    'limits',
    'pruneS',
    'intake',
    'gate',
    'canary',
    'injectBadWeightsAfterS',
    'injectSameWeightsAfterS',
    'tls',
    'prediction',
  ];
  for (const k of Object.keys(o)) if (!known.includes(k)) fail(k, `is not a config field (known: ${known.join(', ')})`);
  const str = (k: string, d: string): string =>
    o[k] === undefined ? d : typeof o[k] === 'string' ? (o[k] as string) : fail(k, 'must be a string');
  /** A drill's start: null, or seconds after the orchestrator's start. */
  const injectAfter = (k: string): number | null =>
    o[k] === undefined || o[k] === null
      ? null
      : typeof o[k] === 'number' && (o[k] as number) >= 0 && (o[k] as number) <= 86_400
        ? (o[k] as number)
        : fail(k, `must be null or a number of seconds in [0, 86400], got ${JSON.stringify(o[k])}`);
  const strOrNull = (k: string): string | null =>
    o[k] === undefined || o[k] === null ? null : typeof o[k] === 'string' ? (o[k] as string) : fail(k, 'must be a string or null');
  const pos = (k: string, d: number): number => {
    const v = o[k] === undefined ? d : o[k];
    return typeof v === 'number' && Number.isFinite(v) && v > 0 ? v : fail(k, `must be a positive number, got ${JSON.stringify(v)}`);
  };
  // the config's field, not a --scenario flag this command does not have
  let scenario: Scenario;
  try {
    scenario = loadScenario(str('scenario', 'kais'));
  } catch (e) {
    return fail('scenario', (e as Error).message.replace(/^--scenario: /, ''));
  }
  const orchestration = str('orchestration', 'static');
  if (!(ORCHESTRATION_NAMES as string[]).includes(orchestration)) fail('orchestration', `must be one of ${ORCHESTRATION_NAMES.join(', ')}`);
  const adminToken = strOrNull('adminToken');
  if (adminToken !== null && adminToken.length < 16) fail('adminToken', 'must be at least 16 characters (or null: the admin API off)');
  // what an Authorization: Bearer header can carry: printable ASCII, no spaces
  if (adminToken !== null && !isBearerToken(adminToken)) fail('adminToken', 'must be printable ASCII without spaces (a Bearer token)');
  // gpg without a model: the one that ships for the scenario (models/<scenario>-gpg.json), as kais eval's and kais up's
  const gpgModel = strOrNull('gpgModel') ?? (orchestration === 'gpg' ? defaultGpgModelPath(scenario) : null);
  if (orchestration === 'gpg' && gpgModel === null)
    fail(
      'gpgModel',
      `must name a GPG model file (scripts/train-gpg.ts) when orchestration is "gpg": none ships for scenario "${scenario.name}"`,
    );
  if (gpgModel !== null && !(fs.existsSync(gpgModel) && fs.statSync(gpgModel).isFile())) fail('gpgModel', `${gpgModel} is not a file`);
  if (gpgModel !== null && fs.statSync(gpgModel).size > 64 * 1048576) fail('gpgModel', `${gpgModel} is over 64 MiB`);
  if (o.gpgModel !== undefined && o.gpgModel !== null && orchestration !== 'gpg')
    fail('gpgModel', `is read only with orchestration "gpg" (this config: "${orchestration}")`);
  const agentTokens: Record<number, string> = {};
  if (o.agentTokens !== undefined) {
    if (typeof o.agentTokens !== 'object' || o.agentTokens === null || Array.isArray(o.agentTokens))
      fail('agentTokens', 'must be an object {eapId: token}');
    const numEaps = topologyOf(scenario).numEaps;
    for (const [k, v] of Object.entries(o.agentTokens as object)) {
      if (!/^\d+$/.test(k) || typeof v !== 'string') fail(`agentTokens.${k}`, 'must map an eAP id to a string token');
      if (Number(k) >= numEaps) fail(`agentTokens.${k}`, `names no eAP of scenario ${scenario.name} (eAPs 0..${numEaps - 1})`);
      if ((v as string).trim() === '') fail(`agentTokens.${k}`, 'is empty: no agent could present it');
      agentTokens[Number(k)] = v as string;
    }
  }
  const heartbeatMs = pos('heartbeatMs', 5000);
  if (!Number.isInteger(heartbeatMs) || heartbeatMs < 100 || heartbeatMs > 3_600_000)
    fail('heartbeatMs', `must be an integer number of ms in 100..3600000, got ${heartbeatMs}`);
  const executor = strOrNull('executor');
  if (executor !== null && executor !== 'kubernetes' && !(/^https?:\/\//.test(executor) && URL.canParse(executor)))
    fail('executor', `must be an http:// URL of a kais node admin server, "kubernetes" or null, got ${JSON.stringify(executor)}`);
  const kubernetes = readKubernetesSection(o.kubernetes, executor === 'kubernetes', fail);
  const executorToken = strOrNull('executorToken');
  if (executorToken !== null && (executor === null || executor === 'kubernetes'))
    fail('executorToken', 'is read only with an executor URL (the kais node admin server it authenticates to)');
  const checkpoint = strOrNull('checkpoint');
  if (checkpoint !== null && !fs.existsSync(checkpoint)) fail('checkpoint', `${checkpoint} does not exist`);
  if (checkpoint !== null && !fs.statSync(checkpoint).isFile()) fail('checkpoint', `${checkpoint} is not a file`);
  const actorHead = str('actorHead', 'softplus1');
  if (actorHead !== 'relu1' && actorHead !== 'softplus1') fail('actorHead', `must be relu1 or softplus1, got ${JSON.stringify(actorHead)}`);
  const learner = str('learner', 'cmmac');
  if (learner !== 'cmmac' && learner !== 'none') fail('learner', `must be "cmmac" or "none", got ${JSON.stringify(learner)}`);
  const learnBatch = pos('learnBatch', 2048);
  if (!Number.isInteger(learnBatch)) fail('learnBatch', 'must be an integer');
  if (learnBatch > 1_000_000) fail('learnBatch', `must be at most 1000000, got ${learnBatch}`);
  const speed = pos('speed', 1);
  if (speed > 1000) fail('speed', `must be at most 1000, got ${speed}`);
  const frameS = pos('frameS', scenario.slotS * scenario.slotsPerFrame);
  if (frameS > 86_400) fail('frameS', `must be at most 86400 s, got ${frameS}`);
  if (frameS / speed < 0.1)
    fail('speed', `makes a frame of ${((frameS / speed) * 1000).toFixed(3)} ms (frameS ${frameS} / speed ${speed}); at least 100 ms`);
  // a nested object of non-negative numbers, each known; missing ones take the default
  const section = <T extends Record<string, number>>(key: string, defaults: T, max: Partial<Record<keyof T, number>> = {}): T => {
    const v = o[key];
    if (v === undefined) return { ...defaults };
    if (typeof v !== 'object' || v === null || Array.isArray(v)) return fail(key, 'must be an object');
    const out = { ...defaults } as Record<string, number>;
    for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
      if (!(k in defaults)) fail(`${key}.${k}`, `is not a field of ${key} (known: ${Object.keys(defaults).join(', ')})`);
      const hi = (max as Record<string, number | undefined>)[k] ?? 1e15;
      if (typeof x !== 'number' || !Number.isFinite(x) || x <= 0 || x > hi)
        fail(`${key}.${k}`, `must be a positive number up to ${hi}, got ${JSON.stringify(x)}`);
      out[k] = x as number;
    }
    return out as T;
  };
  const lim = section(
    'limits',
    {
      experienceMaxMB: DEFAULT_STORE_LIMITS.experienceMaxBytes / 1048576,
      experienceMaxAgeS: DEFAULT_STORE_LIMITS.experienceMaxAgeMs / 1000,
      metricsMaxRows: DEFAULT_STORE_LIMITS.metricsMaxRows,
      metricsMaxAgeS: DEFAULT_STORE_LIMITS.metricsMaxAgeMs / 1000,
      eventsMaxRows: DEFAULT_STORE_LIMITS.eventsMaxRows,
      eventsMaxAgeS: DEFAULT_STORE_LIMITS.eventsMaxAgeMs / 1000,
      modelsMaxRows: DEFAULT_STORE_LIMITS.modelsMaxRows,
      placementsMaxRows: DEFAULT_STORE_LIMITS.placementsMaxRows,
      fileMaxMB: DEFAULT_STORE_LIMITS.fileMaxBytes / 1048576,
    },
    {
      experienceMaxMB: 1e6,
      experienceMaxAgeS: 3.2e7,
      metricsMaxAgeS: 3.2e8,
      eventsMaxAgeS: 3.2e8,
      metricsMaxRows: 1e10,
      eventsMaxRows: 1e10,
      modelsMaxRows: 1e7,
      placementsMaxRows: 1e10,
      fileMaxMB: 1e7,
    },
  );
  // row counts are whole; a limit that rounds to 0 would be no limit at all (the store's 0)
  for (const k of ['metricsMaxRows', 'eventsMaxRows', 'modelsMaxRows', 'placementsMaxRows'] as const)
    if (!Number.isInteger(lim[k])) fail(`limits.${k}`, `must be a whole number of rows >= 1, got ${lim[k]}`);
  for (const k of ['experienceMaxMB', 'fileMaxMB'] as const)
    if (Math.round(lim[k] * 1048576) < 1) fail(`limits.${k}`, `must be at least one byte, got ${lim[k]} MB`);
  const intake = section(
    'intake',
    { maxTransitionsPerS: 2000, maxFramesPerS: 200, maxMBPerS: 16, quarantineAfter: 10, quarantineS: 60 },
    { maxTransitionsPerS: 1e6, maxFramesPerS: 1e5, maxMBPerS: 1e4, quarantineAfter: 1e6, quarantineS: 86_400 },
  );
  const pruneS = pos('pruneS', 5);
  if (pruneS < 0.05 || pruneS > 3600) fail('pruneS', `must be in 0.05..3600 s, got ${pruneS}`);
  const detector = str('detector', 'vgru');
  if (detector !== 'vgru' && detector !== 'none') fail('detector', `must be "vgru" or "none", got ${JSON.stringify(detector)}`);
  const injectBadWeightsAfterS = injectAfter('injectBadWeightsAfterS');
  const injectSameWeightsAfterS = injectAfter('injectSameWeightsAfterS');
  if (injectBadWeightsAfterS !== null && injectSameWeightsAfterS !== null)
    fail('injectSameWeightsAfterS', 'cannot be set together with injectBadWeightsAfterS (one drill a run)');
  // the drill goes through the publish path, which only the learner or the canary runs
  if ((injectBadWeightsAfterS ?? injectSameWeightsAfterS) !== null && learner === 'none' && (o.canary ?? false) === false)
    fail(
      injectBadWeightsAfterS !== null ? 'injectBadWeightsAfterS' : 'injectSameWeightsAfterS',
      'needs "learner": "cmmac" or a canary (the drill goes through their publish path)',
    );
  return {
    scenario,
    orchestration: orchestration as OrchestrationName,
    gpgModel,
    adminToken,
    token: str('token', ''),
    agentTokens,
    frameS,
    speed,
    executor,
    kubernetes,
    executorToken,
    checkpoint,
    heartbeatMs,
    actorHead: actorHead as 'relu1' | 'softplus1',
    learner: learner as 'cmmac' | 'none',
    learnBatch,
    detector: detector as 'vgru' | 'none',
    limits: {
      experienceMaxBytes: Math.round(lim.experienceMaxMB * 1048576),
      experienceMaxAgeMs: lim.experienceMaxAgeS * 1000,
      metricsMaxRows: Math.round(lim.metricsMaxRows),
      metricsMaxAgeMs: lim.metricsMaxAgeS * 1000,
      eventsMaxRows: Math.round(lim.eventsMaxRows),
      eventsMaxAgeMs: lim.eventsMaxAgeS * 1000,
      modelsMaxRows: Math.round(lim.modelsMaxRows),
      placementsMaxRows: Math.round(lim.placementsMaxRows),
      fileMaxBytes: Math.round(lim.fileMaxMB * 1048576),
    },
    pruneS,
    intake: { ...intake, quarantineAfter: Math.max(1, Math.round(intake.quarantineAfter)) },
    gate: readGateSection(o.gate, fail),
    canary: readCanarySection(o.canary, topologyOf(scenario).numEaps, fail),
    injectBadWeightsAfterS,
    injectSameWeightsAfterS,
    tls: readTlsSection(o.tls, file, fail),
    prediction: readPredictionField(o.prediction, file, fail),
  };
}

/** The config's `prediction`: a file (relative to the config file's folder) checked now, or null/absent: none. */
function readPredictionField(v: unknown, file: string, fail: (field: string, why: string) => never): OrchestratorConfig['prediction'] {
  if (v === undefined || v === null) return null;
  if (typeof v !== 'string' || v === '') return fail('prediction', 'must be null or the path of a prediction file (JSON)');
  const at = path.resolve(path.dirname(file), v);
  if (!fs.existsSync(at) || !fs.statSync(at).isFile()) return fail('prediction', `${at} is not a file`);
  if (fs.statSync(at).size > 64 * 1048576) return fail('prediction', `${at} is over 64 MiB`);
  return { file: at, initial: readPrediction(at, `${file}: field "prediction": ${at}`) };
}

/** The config's `tls` section: {cert, key} file paths (relative to the config file's folder), or null/absent: plain. */
function readTlsSection(v: unknown, file: string, fail: (field: string, why: string) => never): TlsPair | null {
  if (v === undefined || v === null) return null;
  if (typeof v !== 'object' || Array.isArray(v)) return fail('tls', 'must be null or {"cert": "<PEM file>", "key": "<PEM file>"}');
  const o = v as Record<string, unknown>;
  for (const k of Object.keys(o)) if (k !== 'cert' && k !== 'key') fail(`tls.${k}`, 'is not a field of tls (known: cert, key)');
  for (const k of ['cert', 'key']) if (typeof o[k] !== 'string' || o[k] === '') fail(`tls.${k}`, 'must be a file path');
  const at = (p: string) => path.resolve(path.dirname(file), p);
  return loadTlsPair({ cert: at(o.cert as string), key: at(o.key as string) }, `${file}: field "tls"`);
}

/**
 * The learned orchestration (GPG, greedy) of `orchestration: "gpg"`, from its model file. tfjs
 * loads here, only for gpg; a model that does not fit the scenario is the config's error (exit 2).
 */
async function learnedOrchestration(
  cfg: OrchestratorConfig,
  log: (line: string) => void,
): Promise<import('../shared/policy').OrchestrationPolicy & { summary: string; lightActor: string | null }> {
  await loadBackend();
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { loadGpgOrchestration } = require('../critic/gpg/load') as typeof import('../critic/gpg/load');
  const policy = loadGpgOrchestration(cfg.gpgModel!, cfg.scenario, 'field "gpgModel"', cfg.frameS);
  log(`orchestration: ${policy.summary}`);
  return policy;
}

/** Whether a stored version's light actor is the one this start publishes (both none, or the same tensors and head). */
function sameLightActor(stored: LightActorBody | undefined, wanted: LightActorBody | undefined): boolean {
  if (stored === undefined || wanted === undefined) return stored === wanted;
  return stored.checksum === wanted.checksum && stored.head === wanted.head;
}

/** The stored admin state (JSON text), or none when absent or unreadable (logged: the admin sets it again). */
/** The newest `n` stored weight versions, newest first, each with when it was stored and who rejected it (null: nobody). */
function storedVersions(
  store: Store,
  rejected: readonly RejectedModelRecord[],
  n: number,
): { version: number; createdMs: number; rejectedBy: string | null }[] {
  const by = new Map(rejected.map((r) => [r.version, r.source]));
  return store
    .models()
    .slice(-n)
    .reverse()
    .map((m) => ({ version: m.version, createdMs: m.createdMs, rejectedBy: by.get(m.version) ?? null }));
}

function readAdminState(text: string | null, log: (line: string) => void): AdminSnapshot | null {
  if (text === null) return null;
  try {
    const s = JSON.parse(text) as AdminSnapshot;
    if (Array.isArray(s.overrides) && Array.isArray(s.holds)) return s;
  } catch {
    // falls through
  }
  log('the stored admin state is unreadable: starting without overrides or holds');
  return null;
}

/**
 * Store writes that may fail for reasons outside the program (disk full, read-only file, I/O
 * error): a failure costs the writes of a backoff interval (1 s, doubling up to 60 s, back to 1 s
 * after a success) and one log line per failure, never the process.
 */
export class StoreGuard {
  failures = 0;
  dropped = 0;
  private backoffMs = 0;
  private until = 0;

  constructor(
    private readonly log: (line: string) => void,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * Runs `write` unless in a backoff (`always`: even then, for a rare write whose loss a user would
   * see, an admin change); returns whether it ran and succeeded. Other errors are thrown.
   */
  run(what: string, write: () => void, always = false): boolean {
    const now = this.now();
    if (now < this.until && !always) {
      this.dropped++;
      return false;
    }
    try {
      write();
      this.backoffMs = 0;
      this.until = 0;
      return true;
    } catch (e) {
      if (!isStoreWriteError(e)) throw e;
      this.failures++;
      this.backoffMs = Math.min(60_000, this.backoffMs === 0 ? 1000 : 2 * this.backoffMs);
      this.until = now + this.backoffMs;
      this.log(
        `store write failed (${(e as { code?: string }).code}: ${(e as Error).message}) writing ${what}; writes paused for ${this.backoffMs / 1000} s`,
      );
      return false;
    }
  }
}

export interface RunningOrchestrator {
  readonly hub: Hub;
  readonly store: Store;
  readonly registry: ModelRegistry;
  readonly loop: PlacementLoop;
  /** null with `"learner": "none"`. */
  readonly learner: OnlineLearner | null;
  /** The weight gate; null unless `"gate"` is set (and the learner is on). */
  readonly gate: WeightGate | null;
  /** The canary rollout; null unless `"canary"` is set. */
  readonly canary: CanaryRollout | null;
  /** null with `"detector": "none"`. */
  readonly detector: LearnedDetector | null;
  readonly port: number;
  /** The plain-HTTP port of /metrics, /healthz and /readyz (null: not opened). */
  readonly httpPort: number | null;
  /** The learning-input door: validation, rate limits, quarantines. */
  readonly intake: Intake;
  /** Store writes that failed or were skipped in a backoff. */
  readonly storeGuard: StoreGuard;
  /** Whether this start resumed a stored placement (restart) rather than publishing the initial one. */
  readonly resumed: boolean;
  close(): Promise<void>;
}

export async function startOrchestrator(
  cfg: OrchestratorConfig,
  opts: {
    port?: number;
    host?: string;
    dbPath: string;
    log?: (line: string) => void;
    httpPort?: number | null;
    httpHost?: string;
    /** The window of the refusal events (refused hellos, failed TLS handshakes), ms; REFUSAL_WINDOW_MS unless a test sets it shorter. */
    refusalWindowMs?: number;
    /** At most this many addresses with a refusal window open at once (REFUSAL_ADDRESSES); set lower by tests. */
    refusalAddresses?: number;
  },
): Promise<RunningOrchestrator> {
  const log = opts.log ?? (() => undefined);
  // the checkpoint's actor, read once and checked against the scenario before anything starts
  const ck = cfg.checkpoint ? deployableActor(cfg.checkpoint, cfg.scenario) : null;
  // the GPG model and the executor (a Kubernetes one lists its Deployments) before the store is
  // opened: a config they refuse leaves no new store behind
  const policy = cfg.orchestration === 'gpg' ? await learnedOrchestration(cfg, log) : cfg.orchestration;
  // the actor switch: the GPG model's light actor, carried by every weights version beside the main one
  // (a UsageError naming the model when it does not fit the scenario)
  const lightFile = typeof policy === 'string' ? null : policy.lightActor;
  let lightActor: LightActorBody | undefined;
  if (lightFile !== null) {
    let light: ReturnType<typeof deployableActor>;
    try {
      light = deployableActor(lightFile, cfg.scenario);
    } catch (e) {
      throw new UsageError(`field "gpgModel": ${cfg.gpgModel}: its light actor: ${(e as Error).message}`);
    }
    lightActor = packLightActor(light.tensors, light.head ?? cfg.actorHead);
  }
  // an executor that cannot see load on its cluster (Kubernetes) takes it from the agents' telemetry
  const loadBoard = cfg.executor === 'kubernetes' ? new LoadBoard({ scenario: cfg.scenario, speed: cfg.speed }) : null;
  const executor = await makeExecutor(cfg, log, loadBoard);
  let store: Store;
  try {
    store = Store.open(opts.dbPath, { limits: cfg.limits });
  } catch (e) {
    await executor.close?.();
    if (e instanceof StoreError) throw new UsageError(`--db: ${e.message}`);
    throw e;
  }
  // one store, one cluster: the stored placement, overrides and holds index this scenario's services and nodes
  const shape = topologyOf(cfg.scenario);
  const boundTo = store.bindScenario(`${cfg.scenario.name} (${shape.numServices} services x ${shape.numNodes} nodes)`);
  if (boundTo !== null) {
    store.close();
    await executor.close?.();
    throw new UsageError(
      `--db ${opts.dbPath}: holds the state of scenario ${boundTo}; this config runs ${cfg.scenario.name} (use another --db)`,
    );
  }
  const guard = new StoreGuard(log);
  const eventTotals: Record<string, number> = {};
  let dashboard: DashboardFeed | null = null;
  /** Stored (when the store takes it) and logged, not counted (a refusal window's closing event: its refusals were counted as they came). */
  const record = (kind: string, message: string, eap: number | null = null, session: string | null = null) => {
    dashboard?.event({ tsMs: Date.now(), kind, eap, message });
    log(`event ${kind}${eap !== null ? ` eAP ${eap}` : ''}${session !== null ? ` session ${session}` : ''}: ${message}`);
    guard.run('an event', () => store.recordEvent({ kind, eap, session, message }));
  };
  /** Counted (kais_orchestrator_events_total), stored and logged. */
  const event = (kind: string, message: string, eap: number | null = null, session: string | null = null) => {
    eventTotals[kind] = (eventTotals[kind] ?? 0) + 1;
    record(kind, message, eap, session);
  };
  if (store.createdNow) {
    event(
      'epoch',
      `new store ${opts.dbPath}: epoch ${store.epoch}; weight and placement versions start again at 1, agents holding another epoch's versions adopt this one's`,
    );
  } else {
    log(`store ${opts.dbPath}: epoch ${store.epoch}`);
  }
  if (cfg.token === '' && Object.keys(cfg.agentTokens).length === 0) {
    log('auth is off (no "token" or "agentTokens" in the config): any client can speak for any eAP');
  }
  let registryRef: ModelRegistry | null = null;
  const intake = new Intake({
    scenario: cfg.scenario,
    weightVersion: () => registryRef?.weightVersion ?? store.latestModelVersion(),
    maxTransitionsPerS: cfg.intake.maxTransitionsPerS,
    maxFramesPerS: cfg.intake.maxFramesPerS,
    maxBytesPerS: Math.round(cfg.intake.maxMBPerS * 1048576),
    quarantineAfter: cfg.intake.quarantineAfter,
    onEvent: (e: IntakeEvent) => event(e.kind, e.message, e.eap, e.session),
  });
  const hub = await startHub(store, {
    port: opts.port ?? 0,
    host: opts.host,
    token: cfg.token,
    agentTokens: cfg.agentTokens,
    heartbeatMs: cfg.heartbeatMs,
    numEaps: topologyOf(cfg.scenario).numEaps,
    inspect: intake.inspect,
    admitBytes: intake.admitBytes,
    quarantineMs: Math.round(cfg.intake.quarantineS * 1000),
    tls: cfg.tls,
    // a model chosen sampling (kais train --eval-act sample) is run sampling: agents learn it from welcome
    act: ck?.act ?? 'argmax',
  }).catch((e: unknown) => {
    store.close();
    throw e;
  });
  // a placement the store cannot keep is still pushed (the executor has changed the cluster), and logged
  const registry = new ModelRegistry(store, hub, {
    storeWrite: (what, write) => guard.run(what, write, true),
    ...(lightActor ? { lightActor } : {}),
  });
  registryRef = registry;
  // refusals any peer can provoke before it is authenticated (a failed TLS handshake, a refused
  // hello): an event (stored, logged) at most once a window (a minute) per kind and address; the
  // ones in between are counted (kais_orchestrator_events_total) and their number is carried by the
  // next event. A window in which refusals were left out ends with one closing event (at warn) with
  // their number, and every entry is dropped when its window ends: the map holds only the addresses
  // refused within the last window, and at most REFUSAL_ADDRESSES of them (refusals from further
  // addresses share one entry per kind, "other addresses")
  const refusalWindowMs = opts.refusalWindowMs ?? REFUSAL_WINDOW_MS;
  const refusalAddresses = opts.refusalAddresses ?? REFUSAL_ADDRESSES;
  const windowText = refusalWindowMs === 60_000 ? 'a minute' : `${refusalWindowMs / 1000} s`;
  const refusalSeen = new Map<string, { atMs: number; suppressed: number; timer: NodeJS.Timeout }>();
  // the end of a window, by Date.now (a timer that runs early, or under a clock a test holds, waits again)
  const closeWhenOver = (key: string, kind: string, from: string, delayMs: number): NodeJS.Timeout => {
    const timer = setTimeout(() => {
      const seen = refusalSeen.get(key);
      if (!seen || seen.timer !== timer) return;
      const left = seen.atMs + refusalWindowMs - Date.now();
      if (left > 0) {
        seen.timer = closeWhenOver(key, kind, from, left);
        return;
      }
      refusalSeen.delete(key);
      // stored and logged, not counted again: its refusals were counted as they came
      if (seen.suppressed > 0)
        record(
          kind,
          `${seen.suppressed} more refused from ${from} within ${windowText} of the previous ${kind} event (counted, not logged one by one); none since`,
        );
    }, delayMs);
    timer.unref();
    return timer;
  };
  const limitedEvent = (kind: string, remote: string | null, message: string, eap: number | null = null, session: string | null = null) => {
    let from = remote ?? '?';
    let key = `${kind} ${from}`;
    if (!refusalSeen.has(key) && refusalSeen.size >= refusalAddresses) {
      from = 'other addresses';
      key = `${kind} ${from}`;
    }
    const now = Date.now();
    const seen = refusalSeen.get(key);
    if (seen && now - seen.atMs < refusalWindowMs) {
      seen.suppressed++;
      eventTotals[kind] = (eventTotals[kind] ?? 0) + 1;
      return;
    }
    // the window is over but its timer has not run yet: this one carries the count instead
    if (seen) clearTimeout(seen.timer);
    refusalSeen.set(key, { atMs: now, suppressed: 0, timer: closeWhenOver(key, kind, from, refusalWindowMs) });
    event(kind, seen?.suppressed ? `${message} (and ${seen.suppressed} more from ${from} since the previous one)` : message, eap, session);
  };
  const helloRefusals = new Set<string>(['auth', 'unknown-eap', 'duplicate-hello']);
  hub.on('denied', (d) =>
    helloRefusals.has(d.kind)
      ? limitedEvent(d.kind, d.remote, `hello refused: ${d.message}`, d.eapId, d.sessionId)
      : event(d.kind, d.message, d.eapId, d.sessionId),
  );
  // a client that does not trust the certificate (or speaks ws:// to wss://)
  hub.on('tlsError', (f) =>
    limitedEvent(
      'tls-refused',
      f.remote,
      `TLS handshake from ${f.remote ?? '?'} failed: ${f.reason} (further ones from it within a minute are counted, not logged)`,
    ),
  );
  hub.on('sessionClosed', (s) => intake.sessionClosed(s.sessionId));
  // the actor switch needs agents that hold the light actor and follow the placement's actor; an
  // older agent ignores both and dispatches with the main actor in every frame (unlike the prediction)
  if (lightActor)
    hub.on('session', (s, hello) => {
      if (!(hello.features ?? []).includes('actor-switch'))
        event(
          'agent-no-actor-switch',
          `eAP ${s.eapId}: agent ${hello.agentVersion || '(no version)'} does not announce the actor switch: it dispatches with the main actor in every frame, not with ${cfg.gpgModel}'s light actor`,
          s.eapId,
          s.sessionId,
        );
    });
  // frames the codec or the hub refused before the intake saw them (NaN rewards): counted and named too
  hub.on('refused', (info, body) => intake.refusedUpstream(info, body));

  const head = ck?.head ?? cfg.actorHead;
  if (store.latestModelVersion() === null && ck) {
    const body = registry.publishWeights(ck.tensors, head);
    log(`published initial cmmac weights v${body.version} from ${cfg.checkpoint}`);
  } else if (store.latestModelVersion() !== null) {
    log(`serving stored weights v${store.latestModelVersion()}`);
  } else {
    log('no model: agents dispatch with their heuristic fallback');
  }

  // ---- canary rollout (issue 17 item 2): every later version goes to a share of the eAPs first ----
  let learnerRef: OnlineLearner | null = null;
  let loopRef: PlacementLoop | null = null;
  /** Under the actor switch: the held placement published again naming the main actor (when it named the light one), and why, as an event. */
  const nameMainActor = (why: string): void =>
    void loopRef?.refreshActor().then((published) => {
      if (published && loopRef)
        event('canary-actor', `placement frame ${loopRef.currentFrame} published again naming the main actor: ${why}`);
    });
  const canary = cfg.canary
    ? new CanaryRollout({
        config: cfg.canary,
        numEaps: topologyOf(cfg.scenario).numEaps,
        registry,
        store: {
          putCanaryState: (st) => void guard.run('the canary state', () => store.putCanaryState(st)),
          putRejectedModel: (r) => void guard.run('a rejected version', () => store.putRejectedModel(r)),
        },
        current: store.latestModelVersion(),
        event: (kind, message) => event(kind, message),
        log,
        onStarted: (body, source) => {
          if (source === 'learned') learnerRef?.noteVersion(body.version);
          // the actor switch: the canary's eAPs and the control dispatch with the main actor (the one a
          // version changes) until the verdict, or a canary started in a light frame would judge the light one
          nameMainActor(`weights v${body.version}'s canary judges the actor a version changes`);
        },
        onRolledBack: (restored) => learnerRef?.reload(restored.version),
        // the actor switch: the baseline too is measured under the main actor (docs/safe-learning.md,
        // "The canary under the actor switch"); a version proposed while the light one dispatches waits for it
        // (null, the light actor named, is an answer: not `?? -Infinity`)
        mainActorSinceMs: () => (loopRef ? loopRef.mainActorSinceMs() : -Infinity),
        onBaselineStarted: () => nameMainActor("the next canary's baseline is measured under it"),
        // the placement held still during the canary (one change at a time): its deferred step runs now
        onFinished: () => void loopRef?.resume(),
      })
    : null;
  if (canary) {
    hub.on('applied', (s, kind, version) => {
      if (kind === 'weights') canary.applied(s.eapId, version);
    });
    const interrupted = store.canaryState();
    if (interrupted) canary.resumeInterrupted(interrupted, store.latestModelVersion());
  }
  // The actor switch on a stored version (after the canary above: a version it was judging is rolled
  // back first, never republished to every agent): a store from before the model's switch, with
  // another light actor (tensors or head), or with one the model no longer names gets its main actor
  // again as a new version, with this model's light actor or none.
  const storedModel = store.latestModel();
  if (storedModel && !sameLightActor(storedModel.light, lightActor)) {
    const body = registry.publishWeights(unpackWeights(storedModel), storedModel.head);
    canary?.adoptGood(body.version);
    log(
      lightActor
        ? `published weights v${body.version}: stored v${storedModel.version}'s actor with the light actor of ${cfg.gpgModel}`
        : `published weights v${body.version}: stored v${storedModel.version}'s actor without its light actor (the orchestration names none)`,
    );
  }
  /** Where a new version goes: the canary when on, else every agent at once. */
  const publishNew = (tensors: WeightTensor[], head: ActorHeadName, source: string) =>
    canary ? canary.propose(tensors, head, source) : registry.publishWeights(tensors, head);

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
    cfg.detector === 'vgru' ? new LearnedDetector({ store, send: (eap, body) => void hub.sendTo(eap, 'verdicts', body), log }) : null;
  if (detector && store.detectors().length > 0) {
    detector.start().then(
      () => log(`detector: on, stored shapes ${detector.fittedShapes().join(', ')}`),
      (e: Error) => log(`detector: could not start (${e.message}); ambiguous windows stay undecided`),
    );
  }

  /** The weight gate (set below when the learner is on and the config has `gate`): sees every arrival. */
  let gate: WeightGate | null = null;
  hub.on('frame', (session, frame) => {
    if (frame.type === 'experience') {
      gate?.observe(frame.body);
      if (dashboard?.viewers) dashboard.experience(frame.body);
      guard.run('experience', () => store.appendExperience(frame.body));
    } else if (frame.type === 'telemetry') {
      dashboard?.telemetry(frame.body);
      canary?.observe(session.eapId, frame.body.samples);
      // the agent's regime guard switched (shared/dispatch/guard.ts): an event per switch
      for (const g of frame.body.guard ?? [])
        event(
          'guard-switch',
          `regime guard: ${g.policy} decides from decision ${g.decision} (late share ${g.lateShare.toFixed(3)}${g.level === 0 ? ', back to the learned policy' : ''})`,
          session.eapId,
          session.sessionId,
        );
      if (detector && frame.body.windows) detector.add(session.eapId, frame.body.windows);
      if (loadBoard && frame.body.load) loadBoard.add(session.eapId, frame.body.load, frame.ts);
      let requests = 0;
      let inDeadline = 0;
      for (const s of frame.body.samples) {
        requests += s.requests;
        inDeadline += s.inDeadline;
      }
      // an interval the agent held while its link was down is filed at its own time, not the arrival's
      const tsMs = Date.now() - (frame.body.load ? Math.max(0, frame.ts - frame.body.load.endTs) : 0);
      const points: MetricPoint[] = [
        { tsMs, name: 'agent/requests', eap: session.eapId, value: requests },
        { tsMs, name: 'agent/in_deadline', eap: session.eapId, value: inDeadline },
      ];
      guard.run('telemetry metrics', () => store.recordMetrics(points));
    }
  });

  // ---- bounded storage: prune in the background; notice a store file deleted or replaced ----
  let fileProblemLogged = false;
  const pruneTimer = setInterval(() => {
    try {
      guard.run('a prune', () => {
        const n = store.prune();
        if (n.experience + n.metrics + n.events > 1000)
          log(
            `pruned ${n.experience} experience batches, ${n.metrics} metric points, ${n.events} events, ${n.models} weight versions, ${n.placements} placements`,
          );
      });
      const problem = store.fileProblem();
      if (problem && !fileProblemLogged) {
        fileProblemLogged = true;
        log(`error: ${problem}; what is written from now on is lost at the next start, which begins a new epoch (agents follow it)`);
      }
    } catch (e) {
      log(`prune failed: ${(e as Error).message}`);
    }
  }, cfg.pruneS * 1000);
  pruneTimer.unref();

  // the admin's overrides and holds, as the store kept them (orchestrator/admin.ts)
  const adminState = new AdminState(readAdminState(store.adminState(), log));
  // an admin change is tried whatever the backoff: the API answers whether it was saved
  const saveAdmin = () => guard.run('the admin state', () => store.putAdminState(JSON.stringify(adminState.snapshot())), true);
  const loop = new PlacementLoop({
    scenario: cfg.scenario,
    registry,
    executor,
    policy,
    start,
    startFrame: resumed ? stored!.frame : 0,
    publishStart: !resumed,
    // the actor switch: the agents dispatch with the stored placement's actor until the next step
    ...(resumed ? { startActor: stored!.actor ?? 'main' } : {}),
    frameMs: (cfg.frameS * 1000) / cfg.speed,
    speed: cfg.speed,
    log,
    // stored and counted (kais_orchestrator_events_total{kind="placement-failed"}): it was a log line only
    onStepFailed: (error) => event('placement-failed', `placement step failed: ${error}`),
    admin: {
      state: adminState,
      onExpired: (o) => {
        saveAdmin();
        event('admin-expired', `service ${o.service}'s override (${o.replicas} replica(s), set by ${o.by}: ${o.reason}) ended`);
      },
    },
    // a canary measures the weights alone: the policy's placement steps wait for its verdict
    holdWhile: () =>
      canary?.running
        ? `weights v${canary.running.version} are under canary`
        : canary?.waiting
          ? `${canary.waiting.source} weights wait for their canary's baseline`
          : null,
    // under the actor switch a canary judges the main actor: every placement names it while one runs,
    // and while a version waits for its baseline (docs/safe-learning.md, "The canary under the actor switch")
    actorOverride: () => (canary?.running || canary?.waiting ? 'main' : null),
  });
  loopRef = loop;
  await loop.start();
  if (!adminState.empty) await loop.stepNow(); // overrides and holds kept over a restart apply at once

  let learner: OnlineLearner | null = null;
  let injectTimer: NodeJS.Timeout | null = null;
  /**
   * The fault drills: `bad`, random weights of the stored model's shapes (must be rejected or
   * rolled back); `same`, a copy of the stored version (must be passed and promoted: a rollback
   * of it is a false alarm). Either goes through the gate when on, then to the publish path.
   */
  let injectWaited = false;
  const inject = async (kind: 'bad' | 'same'): Promise<void> => {
    const name = kind === 'bad' ? 'bad-weights' : 'same-weights';
    const minRequests = cfg.gate?.minRequests ?? 0;
    if (gate && gate.arrivalsHeld < minRequests) {
      // the gate needs live arrivals to measure the drill's version: none come while nothing is
      // explored (the light actor dispatches, or the agents have not started), and a verdict of
      // "too few arrivals" would test nothing; so the drill waits for them
      if (!injectWaited)
        event(
          'inject',
          `${name} drill waits for the gate's live arrivals (${gate.arrivalsHeld} of minRequests ${minRequests} held: the agents send only explored decisions, and none while the light actor dispatches)`,
        );
      injectWaited = true;
      injectTimer = setTimeout(() => void inject(kind), 1000);
      injectTimer.unref();
      return;
    }
    const stored = store.latestModel();
    if (!stored) return event('inject', `${name} drill skipped: no stored model to take the shapes of`);
    const current = unpackWeights(stored);
    const rng = new Rng(stored.version * 7919 + 17);
    const draw = kind === 'bad' ? () => 2 * rng.next() - 1 : null;
    const weights = current.map((t) => ({ shape: t.shape, data: draw ? Float32Array.from(t.data, draw) : Float32Array.from(t.data) }));
    const head = (stored.head ?? cfg.actorHead) as 'relu1' | 'softplus1';
    const version = stored.version + 1;
    const what = kind === 'bad' ? 'random weights' : `a copy of weights v${stored.version}`;
    event(
      'inject',
      `${name} drill: ${what} handed to the publish path as weights v${version}${gate ? ' (through the gate)' : canary ? ' (no gate: to the canary)' : ' (no gate, no canary: published to every agent)'}`,
    );
    if (gate) {
      const v = await gate.check(
        { version, head, arrays: weights.map((t) => t.data) },
        { version: stored.version, head, arrays: current.map((t) => t.data) },
      );
      if (!v.pass) return;
    }
    publishNew(weights, head, `injected (${name} drill)`);
  };
  if (cfg.learner === 'cmmac' && cfg.gate) {
    // the shadow evaluation runs in its own worker (the simulator never loads on the hub's thread)
    gate = new WeightGate({
      config: cfg.gate,
      scenario: cfg.scenario,
      act: ck?.act ?? 'argmax', // a sampling model is judged sampling, as the agents run it
      placement: () => loopRef?.placement ?? null, // the replay's: what the agents dispatch on now
      onVerdict: (v) => {
        event(v.pass ? 'gate-pass' : 'gate-reject', `weights v${v.candidate} (current v${v.current ?? 'none'}): ${v.reason}`);
        if (v.pass) return;
        // kept in the store with the reason (the candidate's weights, which were never published)
        const r = gate?.rejected[0];
        const shapes = store.latestModel()?.shapes;
        const body =
          r && r.verdict === v && shapes && shapes.length === r.arrays.length
            ? packWeights(
                r.arrays.map((data, i) => ({ shape: shapes[i], data })),
                v.candidate,
                r.head,
              )
            : null;
        guard.run('a rejected version', () =>
          store.putRejectedModel({ version: v.candidate, basedOn: v.current, source: 'gate', reason: v.reason, body }),
        );
      },
    });
  }
  if (cfg.learner === 'cmmac') {
    // tfjs and the learner load only when learning is on
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const { OnlineLearner: L } = require('./learner') as typeof import('./learner');
    learner = new L({
      scenario: cfg.scenario,
      store,
      registry,
      head,
      batch: cfg.learnBatch,
      log,
      gate,
      publish: canary ? (tensors, h) => canary.propose(tensors, h, 'learned') : null,
      onEvent: (e) => event(e.kind, e.message),
    });
    learnerRef = learner;
    // not awaited: agents are served while the learner's worker loads tfjs (a second or more)
    const started = learner;
    started.start().then(
      () =>
        log(
          started.weightVersion === null
            ? 'learner: waiting for a model to start from'
            : `learner: on, from weights v${started.weightVersion}, every ${cfg.learnBatch} decisions`,
        ),
      (e: Error) => log(`learner: could not start (${e.message}); experience is still stored`),
    );
  }

  // the admin's rollback and learning freeze (kais weights; a freeze kept in the store holds from the start)
  const weightsAdmin = new WeightsAdmin({
    store,
    registry,
    canary,
    learner,
    event: (kind, message) => event(kind, message),
    log,
  });

  const drillAfterS = cfg.injectBadWeightsAfterS ?? cfg.injectSameWeightsAfterS;
  if (drillAfterS !== null && (learner !== null || canary !== null)) {
    const kind = cfg.injectBadWeightsAfterS !== null ? 'bad' : 'same';
    const timer = setTimeout(() => void inject(kind), drillAfterS * 1000);
    timer.unref();
    injectTimer = timer;
  }

  // the operator's plain-HTTP port: /metrics, /healthz, /readyz (orchestrator/http.ts)
  let httpPort: number | null = null;
  const gateStatus = () =>
    gate
      ? {
          ...gate.stats,
          config: cfg.gate,
          recent: gate.recent
            .slice(0, 5)
            .map((v) => ({ candidate: v.candidate, current: v.current, pass: v.pass, reason: v.reason, atMs: v.atMs })),
          rejected: gate.rejected.map((r) => ({ candidate: r.verdict.candidate, reason: r.verdict.reason })),
        }
      : null;
  const canaryStatus = () =>
    canary
      ? {
          ...canary.stats,
          config: cfg.canary,
          running: canary.running
            ? { ...canary.running, evidence: canary.evidence(), perEap: canary.perEap(), last: canary.running.last?.reason ?? null }
            : null,
          waiting: canary.waiting,
          goodVersion: canary.goodVersion,
          recent: canary.recent.slice(0, 5),
        }
      : null;
  // what kais status and the dashboard's safe-learning panel read (orchestrator/status-lines.ts)
  const safeLearningStatus = () => {
    const rejected = store.rejectedModels(); // the newest 100 at most
    return {
      learner: learner ? { ...learner.stats, frozen: weightsAdmin.frozen } : null,
      gate: gateStatus(),
      canary: canaryStatus(),
      rejectedVersions: rejected.slice(0, 20),
      // the newest stored weight versions (what kais weights --rollback --to can name), rejected or not
      storedVersions: storedVersions(store, rejected, 10),
    };
  };
  const adminStatus = () => ({
    epoch: store.epoch,
    orchestration: cfg.orchestration,
    // what places the replicas: the policy, or what the GPG model runs (its file, H, the scale-in)
    orchestrationRuns: typeof policy === 'string' ? policy : policy.summary,
    agents: hub
      .sessions()
      .map((s) => ({ eap: s.eapId, session: s.sessionId, weightVersion: s.weightVersion, placementVersion: s.placementVersion })),
    weightVersion: registry.weightVersion,
    placementVersion: registry.placementVersion,
    frame: loop.currentFrame,
    placement: loop.placement,
    // the actor switch: the actor the placements name now (null: no switch; `main` during a canary)
    actor: loop.actorNamed,
    // a policy step held while a weights canary runs (placement-loop.ts holdWhile): why, and how many since the start
    placementDeferred: { waitingFor: loop.waitingFor, steps: loop.deferredSteps },
    ...adminState.snapshot(), // overrides, holds
    ...safeLearningStatus(),
  });
  const adminApi = new AdminApi({
    scenario: cfg.scenario,
    state: adminState,
    save: () => saveAdmin(),
    event: (kind, message) => event(kind, message),
    stepNow: () => loop.stepNow(),
    cluster: !(executor instanceof NullExecutor),
    status: adminStatus,
    events: (q) => store.events(q),
    forecast: () => (loop.forecast ? Array.from(loop.forecast, (x) => round(x, 3)) : null),
    weights: weightsAdmin,
  });
  // the dashboard under /dashboard (orchestrator/dashboard.ts): the last hour's events, then the live ones;
  // live throughput against the simulator's prediction when the config names one
  const prediction = cfg.prediction ? new PredictionFile(cfg.prediction.file, cfg.prediction.initial, log) : null;
  if (cfg.prediction)
    log(
      `prediction: ${cfg.prediction.initial.policy}, throughput rate ${cfg.prediction.initial.throughputRate} over ${cfg.prediction.initial.completedInTimePerFrame.length} frames (${cfg.prediction.file})`,
    );
  // the placement steps on the run's scenario clock once the prediction says when scenario time 0 is
  // (kais up writes startMs ahead of its load generator's start): PlacementLoop.alignTo
  let alignTimer: NodeJS.Timeout | null = null;
  if (prediction) {
    const alignWhenKnown = (): boolean => {
      const startMs = prediction.current().startMs;
      if (startMs === null) return false;
      loop.alignTo(startMs);
      if (alignTimer) clearInterval(alignTimer);
      alignTimer = null;
      return true;
    };
    if (!alignWhenKnown()) alignTimer = setInterval(alignWhenKnown, 250);
  }
  dashboard = new DashboardFeed({
    scenario: cfg.scenario,
    speed: cfg.speed,
    orchestration: cfg.orchestration,
    sessions: () =>
      hub
        .sessions()
        .map((s) => ({ eap: s.eapId, session: s.sessionId, weightVersion: s.weightVersion, placementVersion: s.placementVersion })),
    placementVersion: () => registry.placementVersion,
    weightVersion: () => registry.weightVersion,
    placement: () => loop.placement,
    frame: () => loop.currentFrame,
    holds: () => adminState.snapshot().holds,
    overrides: () => adminState.snapshot().overrides,
    forecast: () => (loop.forecast ? Array.from(loop.forecast) : null),
    prediction: prediction ? () => prediction.current() : undefined,
    learner: () => learner?.stats ?? null,
    safeLearning: safeLearningStatus,
  });
  for (const e of store.events({ sinceMs: Date.now() - 3600_000, limit: 10_000 }).slice(-100)) dashboard.event(e);
  const web = new OrchestratorHttp(
    {
      agentsConnected: () => hub.sessions().length,
      weightVersion: () => registry.weightVersion,
      placementVersion: () => registry.placementVersion,
      eventTotals: () => eventTotals,
      intake: () => intake.stats,
      learner: () => learner?.stats ?? null,
      learningFrozen: () => weightsAdmin.frozen !== null,
      gate: () => gate?.stats ?? null,
      canary: () => (canary ? { ...canary.stats, running: canary.running?.version ?? null } : null),
      placementOrders: () => ({
        executed: loop.executed,
        refused: loop.refused,
        deferredSteps: loop.deferredSteps,
        failedSteps: loop.failedSteps,
      }),
      storeWriteFailures: () => guard.failures,
      notReady: () => {
        const problem = store.fileProblem();
        return problem ? `store: ${problem}` : registry.placementVersion === null ? 'no placement published yet' : null;
      },
      health: () => ({
        epoch: store.epoch,
        agents: hub.sessions().length,
        weightVersion: registry.weightVersion,
        placementVersion: registry.placementVersion,
        orchestration: cfg.orchestration,
        // the actor switch: the actor the placements name now (null: no switch; `main` during a canary)
        actor: loop.actorNamed,
        lightActor: lightFile,
        learner: learner ? { ...learner.stats } : null,
        storeWriteFailures: guard.failures,
        // placements pushed to the agents that the store could not keep (disk full): a restart resumes an older one
        placementsUnstored: registry.unstoredPlacements,
      }),
    },
    { api: adminApi, token: cfg.adminToken },
    dashboard,
  );
  if (opts.httpPort !== undefined && opts.httpPort !== null) httpPort = await web.listen(opts.httpPort, opts.httpHost, cfg.tls);

  let closing: Promise<void> | null = null;
  return {
    hub,
    httpPort,
    store,
    registry,
    loop,
    learner,
    gate,
    canary,
    detector,
    port: hub.port,
    intake,
    storeGuard: guard,
    resumed,
    close: () => {
      closing ??= (async () => {
        clearInterval(pruneTimer);
        if (injectTimer) clearTimeout(injectTimer);
        if (alignTimer) clearInterval(alignTimer);
        await web.close();
        await loop.stop();
        await executor.close?.();
        learner?.dispose();
        gate?.dispose();
        canary?.dispose();
        detector?.dispose();
        registry.dispose();
        await hub.close();
        // no refusal comes after the hub: the windows still open end without their closing events
        for (const seen of refusalSeen.values()) clearTimeout(seen.timer);
        refusalSeen.clear();
        store.close();
      })();
      return closing;
    },
  };
}

function hubNodes(s: Scenario): number {
  return s.eaps.reduce((a, e) => a + e.nodes.length, 0);
}
