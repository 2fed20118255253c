/**
 * `kais eval`: every policy pair on the same requests and seed, the DESIGN.md section 4 report.
 *
 *   kais eval --scenario kais --workload p4 --seed 7 --frames 10 --json
 *
 * Options first, then setup (scenario, workload, faults), then one episode per policy pair, then
 * the report: a table on a terminal, or the JSON object with --json, and a plot with --plot.
 */
import * as fs from 'fs';
import * as path from 'path';
import type { Argv, CommandModule } from 'yargs';
import { flagOf, givenOptions, namingFlags, opt, resolveOptions, yargsOptions, type OptionsOf } from '../../shared/config';
import { MAX_FRAMES, MAX_LOAD } from './train-options';
import type { DequeueName } from '../../shared/dequeue';
import { DEQUEUE_NAMES } from '../../shared/dequeue';
import { loadBackend } from '../../shared/tf-backend';
import { UsageError } from '../../shared/errors';
import { checkpointHead, defaultGpgModelPath, defaultModelPath, modelAct } from '../../shared/nets/actor-file';
import type { DispatchPolicy, OrchestrationPolicy } from '../../shared/policy';
import type { CmmacDispatch } from '../../agent/actor-policy';
import { checkLoad, loadScenario, scenarioWithSlot } from '../../shared/scenario';
import type { Scenario } from '../../shared/scenario';
import { makeDispatch, makeOrchestration, parsePolicyPair } from '../baselines/registry';
import { guardedDispatch, type RegimeGuardOptions } from '../../shared/dispatch/guard';
import { GUARD_SPEC, guardFromFlags, guardSummary } from '../../shared/dispatch/guard-options';
import { frameDemand, HINDSIGHT_TARGETS, HindsightOrchestration, type FrameDemand } from '../baselines/hindsight';
import type { Fault } from '../sim/faults';
import { faultsFromRate, faultsFromServerEvents } from '../sim/faults';
import { DEFAULT_WORKLOAD, WORKLOAD_NAMES, openWorkload } from '../workload';
import type { WorkloadName } from '../workload';
import { isPlotWriteError, renderScatter, renderSvg, stackSvgs, writeSvg } from './plot';
import { round } from '../../shared/round';
import { runEpisode, type PolicyResult } from './rollout';
import { calibrationLines } from './calibration-table';
import { ORACLE_BYTES_PER_REQUEST, oracleBound } from './oracle';
import { alignedLines } from './text-table';
import { formatSeedsTable, parseSeeds, summariseSeeds, type EvalSeedsReport } from './eval-seeds';

/**
 * Above this many requests `kais eval` leaves the oracle out (`oracle: null`, the reason in
 * `oracleSkipped`): the bound needs all requests at once (ORACLE_BYTES_PER_REQUEST each, about
 * 300 MB here), while the episodes read them as they go.
 */
export const ORACLE_MAX_REQUESTS = 5_000_000;

/** Heuristic pairs worth comparing (the default of --policies, with cmmac/hpa when a model ships). */
export const DEFAULT_POLICIES = [
  'random/static',
  'round-robin/hpa',
  'jsq/static',
  'jsq/hpa',
  'p2c/hpa',
  'greedy/hpa',
  'onsocmax/hpa',
  'prob/hpa',
  'lec/static',
  'lec/hpa',
  'lec/gsp-ss',
  'greedy/gsp-ss',
];

// ------------------------------------------------------------------------------------ OPTIONS

/** The options of `kais eval`, declared once (shared/config.ts makes the flags, checks and docs). */
export const EVAL_SPEC = {
  scenario: opt.string({ default: 'kais', describe: 'built-in scenario (tiny, small, kais, large) or a .json file' }),
  workload: opt.choice(WORKLOAD_NAMES, { default: DEFAULT_WORKLOAD, describe: 'synthetic arrival pattern (ignored with --trace)' }),
  trace: opt.file({ dir: true, describe: 'Alibaba batch_task CSV (v2017 or v2018), or a folder holding batch_task.csv' }),
  policies: opt.optString({
    describe:
      'comma-separated dispatch/orchestration pairs (default: the heuristic pairs, and cmmac/hpa when a cMMAC model ships, cmmac/gpg when a GPG model ships too); dispatch cmmac+guard runs cmmac behind the regime guard (docs/safe-learning.md); orchestration x/gpg runs the --gpg model (or the shipped one), x/hindsight the best of placement rules that know each next frame (docs/simulator.md)',
  }),
  checkpoint: opt.file({
    describe: 'the actor cmmac runs: a kais train checkpoint (SQLite) or an exported actor (.bin with its .json)',
    defaultText: 'the model shipped for the scenario and the orchestration',
  }),
  cmmacAct: opt.choice(['argmax', 'sample'] as const, {
    defaultText: "the model's (its act field; argmax when it has none)",
    describe:
      'how cmmac picks a target: argmax (the most likely) or sample (drawn from the policy, seeded per run: as kais agent --explore 1; docs/cmmac.md)',
  }),
  ...GUARD_SPEC,
  gpg: opt.file({
    describe:
      'GPG model (JSON, scripts/train-gpg.ts) for the gpg orchestration (x/gpg pairs), run with the hpa scale-in its scaleIn field names (docs/gpg.md); default: the one that ships for the scenario (models/<scenario>-gpg.json)',
  }),
  frames: opt.integer({ default: 20, min: 1, max: MAX_FRAMES, describe: 'frames to simulate (100 slots of 0.25 s each)' }),
  seed: opt.integer({ default: 1, describe: 'random seed (same seed, same numbers)' }),
  jobs: opt.integer({
    default: 1,
    min: 1,
    max: 256,
    describe: 'with --seeds: how many seeds run at once, each in a worker thread (the numbers do not depend on it; each takes one core)',
  }),
  seeds: opt.custom<number[] | undefined>(
    'a-b or a,b,...',
    {
      describe:
        "instead of --seed: the same evaluation on each of these seeds (at least 2), and each pair's mean, its standard error and the first pair's paired ratio to it (docs/simulator.md)",
    },
    parseSeeds,
  ),
  load: opt.number({ default: 1, min: 0, minExclusive: true, max: MAX_LOAD, describe: 'multiplier on arrival rates' }),
  /** 'agent': the live agent's view (rollout.ts EpisodeOptions.view); 'global': the whole cluster's true state. */
  view: opt.choice(['agent', 'global'] as const, {
    default: 'agent',
    describe:
      "what each eAP's policy decides on: agent (what the live agent can know: its own requests, the targets' load reports, placement; a full node's 503 retried on the cloud) or global (the cluster's true state, which no live agent has)",
  }),
  slot: opt.number({
    min: 0,
    minExclusive: true,
    max: 3600,
    defaultText: "the scenario's (0.25 on kais)",
    describe:
      'learning slot in seconds: how often rewards are computed and queues swept; requests are dispatched on arrival whatever the slot',
  }),
  dequeue: opt.choice(DEQUEUE_NAMES, { default: 'edf', describe: "the nodes' queue order (requests are dispatched on arrival)" }),
  nodeDequeue: opt.choice(DEQUEUE_NAMES, { defaultText: '--dequeue', describe: 'node queue order' }),
  faultRate: opt.number({ default: 0, min: 0, max: 1e6, describe: 'node failures per node per hour of simulated time' }),
  faultEvents: opt.file({ describe: 'v2017_server_event.csv: fail nodes at the real softerror times' }),
  faultDurationS: opt.number({
    flag: 'fault-duration',
    default: 60,
    min: 0,
    minExclusive: true,
    max: 1e7,
    describe: 'seconds a failed node stays down',
  }),
  filters: opt.boolean({ default: false, describe: 'run the device filters on simulated node telemetry' }),
  /** With --filters: 'vgru' runs the learned stage on the ambiguous windows, as the orchestrator does live. */
  detector: opt.choice(['none', 'vgru', 'l2'] as const, {
    default: 'none',
    describe:
      "with --filters: 'vgru' lets the learned detector decide the ambiguous windows, as the orchestrator does live (loads tfjs; slower); 'l2' adds the agent's L2 second stage on every window (kais agent --second-stage l2; docs/detect.md)",
  }),
  timing: opt.boolean({ default: false, describe: 'measure decision latency (decisionP99Us; not reproducible)' }),
  calibration: opt.boolean({
    default: false,
    describe:
      "score each decision's view against what happened: per pair, for the requests sent to the edge and to the cloud, how often the chosen target's expected completion time met the deadline and how often it then did (viewCalibration; docs/simulator.md)",
  }),
  json: opt.boolean({ default: false, describe: 'print the JSON report on stdout' }),
  plot: opt.outFile({
    ext: /\.(svg|png)$/i,
    extText: 'a file ending in .svg or .png',
    describe: 'write the per-frame throughput per policy, and throughput against replica-seconds, to a .svg or .png file',
  }),
};

export type EvalArgs = OptionsOf<typeof EVAL_SPEC> & {
  /** Leave the oracle out above this many requests (no CLI flag; tests). @defaultValue ORACLE_MAX_REQUESTS */
  oracleMaxRequests?: number;
};

export interface EvalReport {
  scenario: string;
  workload: string | null;
  trace: string | null;
  seed: number;
  frames: number;
  load: number;
  dequeue: string;
  /** Decision slot length the simulator ran with (s). */
  slotS: number;
  /** What the policies decided on: 'global' (the whole cluster's true state) or 'agent' (the live agent's view). */
  view: 'global' | 'agent';
  faults: number;
  filters: boolean;
  /** Present with `--detector vgru` or `l2` only. */
  detector?: 'vgru' | 'l2';
  /**
   * Present only when every cmmac pair drew its targets from its policy (`--cmmac-act sample`, or
   * models whose act is sample); each such pair's result carries `cmmacAct: 'sample'` too.
   */
  cmmacAct?: 'sample';
  results: PolicyResult[];
  /**
   * Present when an x/gpg pair ran: what the GPG model runs (the file, H and the scale-in:
   * critic/gpg/load.ts gpgSummary, the line `kais up` and the orchestrator log).
   */
  gpg?: string;
  /** Present when a cmmac+guard pair ran: its guard (the --guard-* flags) in one line (guard-options.ts guardSummary). */
  guard?: string;
  /** An upper bound on the throughput rate no policy can pass on these requests (training/jobs/oracle.ts, ORACLE_RULE); null above ORACLE_MAX_REQUESTS requests. */
  oracle: { throughputRate: number; completedInTime: number; feasibleRate: number } | null;
  /** Present when oracle is null: why. */
  oracleSkipped?: string;
}

/**
 * `cmmac` is the learned dispatcher: from `--checkpoint` (a `kais train` output or an exported
 * actor), else the model the project ships for the scenario. Loaded lazily so that heuristic-only runs never load
 * the learned-policy code.
 */
function makeAnyDispatch(
  name: string,
  scenario: Scenario,
  checkpoint: string | undefined,
  modelScenario: Scenario = scenario,
  act?: 'argmax' | 'sample',
  orchestration?: string,
  guard?: RegimeGuardOptions,
  lightActor: string | null = null,
): DispatchPolicy {
  if (name === 'cmmac+guard') {
    // the learned dispatcher behind the regime guard (shared/dispatch/guard.ts), as the agent runs it with --guard and the same --guard-* flags
    const learned = makeAnyDispatch('cmmac', scenario, checkpoint, modelScenario, act, orchestration, undefined, lightActor);
    return guardedDispatch(learned, scenario, guard);
  }
  if (name !== 'cmmac') return makeDispatch(name, scenario);
  const main = makeCmmac(scenario, checkpoint, modelScenario, act, orchestration);
  if (lightActor === null) return main;
  // the actor switch: the GPG model's light actor (scaleIn.light.actor), held beside the main one, which
  // dispatches while the orchestration names it (agent/actor-policy.ts), as an agent holds a weights body's light actor
  const light = makeCmmac(scenario, lightActor, modelScenario, act, orchestration, "the GPG model's light actor");
  try {
    main.setLightFrom(light);
  } catch (e) {
    throw new UsageError(`the GPG model's light actor ${lightActor}: ${(e as Error).message}`);
  }
  return main;
}

/** The cMMAC dispatch of a checkpoint or exported actor (`source` names its flag), else the one shipped for the pair's orchestration. */
function makeCmmac(
  scenario: Scenario,
  checkpoint: string | undefined,
  modelScenario: Scenario,
  act: 'argmax' | 'sample' | undefined,
  orchestration: string | undefined,
  source = '--checkpoint',
): CmmacDispatch {
  // a model is checked against the scenario it was trained on (the slot length does not change its inputs)
  scenario = modelScenario;
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const ck = require('./checkpoint') as typeof import('./checkpoint');
  if (checkpoint) {
    if (!fs.existsSync(checkpoint)) throw new UsageError(`${source}: ${checkpoint} does not exist`);
    // the file's head checked first (an unknown one is refused, not run as relu1: actor-file.ts actorHeadOf)
    checkpointHead(checkpoint);
    return ck.loadCmmacCheckpoint(checkpoint, scenario, { mode: act });
  }
  // the shipped actor for the pair's orchestration (shared/nets/actor-file.ts defaultModelPath: kais-cmmac.bin for every one today)
  const shipped = ck.loadDefaultCmmac(scenario, { mode: act, orchestration });
  if (!shipped) {
    throw new UsageError(`--policies: cmmac needs --checkpoint <db or actor .bin>: no trained model ships for scenario "${scenario.name}"`);
  }
  return shipped;
}

/**
 * `gpg` is the learned orchestration (critic/gpg/), greedy, from `--gpg <model.json>` or the model
 * the project ships for the scenario (models/<scenario>-gpg.json); the other names are the shared
 * heuristics. A GPG policy holds tfjs variables: dispose() frees them.
 */
export function makeAnyOrchestration(
  name: string,
  scenario: Scenario,
  gpgFile: string | undefined,
): OrchestrationPolicy & { dispose?: () => void; summary?: string; lightActor?: string | null } {
  if (name !== 'gpg') return makeOrchestration(name, scenario);
  const file = gpgFile ?? defaultGpgModelPath(scenario);
  if (file === null)
    throw new UsageError(
      `--policies: gpg needs --gpg <model.json>: no GPG model ships for scenario "${scenario.name}" (scripts/train-gpg.ts makes one)`,
    );
  // loaded here, not at the top: tfjs loads only for a gpg pair (the heuristic pairs never need it)
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { loadGpgOrchestration } = require('../../critic/gpg/load') as typeof import('../../critic/gpg/load');
  return loadGpgOrchestration(file, scenario, gpgFile ? '--gpg' : 'the shipped GPG model');
}

/**
 * The heuristic pairs, plus cmmac/hpa when the project ships a cMMAC model that fits the scenario,
 * and cmmac/gpg when it ships a GPG model for it too (models/<scenario>-gpg.json: the learned pair).
 */
function defaultPolicies(scenario: Scenario): string[] {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const ck = require('./checkpoint') as { loadDefaultCmmac?: (s: Scenario) => DispatchPolicy | null };
    if (ck.loadDefaultCmmac?.(scenario))
      return [...(defaultGpgModelPath(scenario) !== null ? ['cmmac/gpg'] : []), 'cmmac/hpa', ...DEFAULT_POLICIES];
  } catch {
    // a shipped model for another version of this scenario: the heuristics alone
  }
  return DEFAULT_POLICIES;
}

/** A GPG model ships for `--scenario` (the defaults may then hold cmmac/gpg); false for one that does not load (runEval says why). */
function shipsGpg(scenarioName: string): boolean {
  try {
    return defaultGpgModelPath(loadScenario(scenarioName)) !== null;
  } catch {
    return false;
  }
}

function positiveInt(flag: string, v: unknown): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1) throw new UsageError(`${flag}: must be a positive integer, got ${String(v)}`);
  return v;
}

function dequeueName(flag: string, v: string): DequeueName {
  if (!(DEQUEUE_NAMES as string[]).includes(v))
    throw new UsageError(`${flag}: unknown dequeue strategy "${v}" (valid: ${DEQUEUE_NAMES.join(', ')})`);
  return v as DequeueName;
}

/** Runs the evaluation; progress lines go to `progress` (stderr in the CLI). */
export function runEval(a: EvalArgs, progress: (line: string) => void = () => {}): EvalReport {
  // SETUP
  const frames = positiveInt('--frames', a.frames);
  if (!Number.isInteger(a.seed)) throw new UsageError(`--seed: must be an integer, got ${String(a.seed)}`);
  const base = loadScenario(a.scenario);
  const scenario = a.slot === undefined ? base : scenarioWithSlot(base, a.slot);
  checkLoad(scenario, a.load);
  const pairs = (a.policies ?? defaultPolicies(base).join(','))
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
  if (pairs.length === 0) throw new UsageError('--policies: empty list');
  const twice = pairs.find((p, k) => pairs.indexOf(p) !== k);
  if (twice !== undefined) throw new UsageError(`--policies: ${twice} is listed twice`);
  const guard = guardFromFlags(a);
  // validate every policy name before the long part starts
  for (const p of pairs) {
    const { dispatch, orchestration } = parsePolicyPair(p);
    const orch = orchestration !== 'hindsight' ? makeAnyOrchestration(orchestration, scenario, a.gpg) : null;
    makeAnyDispatch(dispatch, scenario, a.checkpoint, base, a.cmmacAct, orchestration, guard, orch?.lightActor ?? null);
    orch?.dispose?.();
  }
  // a model flag no pair uses is said to be ignored, not dropped in silence
  const parsed = pairs.map((p) => parsePolicyPair(p));
  const usesCmmac = parsed.some((p) => p.dispatch.startsWith('cmmac'));
  const ignored = [
    ...(a.checkpoint !== undefined && !usesCmmac ? ['--checkpoint (no cmmac pair)'] : []),
    ...(a.cmmacAct !== undefined && !usesCmmac ? ['--cmmac-act (no cmmac pair)'] : []),
    ...(a.gpg !== undefined && !parsed.some((p) => p.orchestration === 'gpg') ? ['--gpg (no gpg pair)'] : []),
  ];
  if (ignored.length > 0) progress(`ignored: ${ignored.join(', ')}`);
  // how cmmac acts in a pair: --cmmac-act, else as its model says (kais train --eval-act sample exports
  // act: sample); the shipped model can differ by orchestration (defaultModelPath)
  const actOf = (orchestration: string): 'argmax' | 'sample' =>
    a.cmmacAct ?? modelAct(a.checkpoint ?? defaultModelPath(base, orchestration)!);
  const cmmacActs: ('argmax' | 'sample')[] = [];
  const view = a.view ?? 'agent';
  if (view !== 'global' && view !== 'agent') throw new UsageError(`--view: global or agent, got "${view}"`);
  // the nodes' queue order (requests are dispatched on arrival: eAPs hold no queue in the simulator)
  const nodeDequeue = a.nodeDequeue !== undefined ? dequeueName('--node-dequeue', a.nodeDequeue) : dequeueName('--dequeue', a.dequeue);
  if (!Number.isFinite(a.faultRate) || a.faultRate < 0) throw new UsageError(`--fault-rate: must be a number >= 0, got ${a.faultRate}`);
  if (!Number.isFinite(a.faultDurationS) || a.faultDurationS <= 0) {
    throw new UsageError(`--fault-duration: must be a positive number of seconds, got ${a.faultDurationS}`);
  }
  const durationS = frames * scenario.slotsPerFrame * scenario.slotS;
  // the requests as a stream: every episode reads them as it goes (memory bounded by the requests in the system)
  const requests = openWorkload({
    scenario,
    workload: a.workload as WorkloadName,
    tracePath: a.trace ?? null,
    seed: a.seed,
    load: a.load,
    durationS,
    // the workload's lines carry their "kais: " already; progress adds its own (one, not two)
    warn: (line) => progress(line.replace(/^kais: /, '')),
  });
  const numNodes = scenario.eaps.reduce((s, e) => s + e.nodes.length, 0);
  let faults: Fault[] = [];
  if (a.faultEvents) faults = faultsFromServerEvents(a.faultEvents, numNodes, durationS, a.faultDurationS);
  else if (a.faultRate > 0) faults = faultsFromRate(numNodes, durationS, a.faultRate / 3600, a.faultDurationS, a.seed);

  const learned = learnedDetectorOf(a);
  // RUN: every pair on the same requests and seed
  const results: PolicyResult[] = [];
  const t0 = Date.now();
  const frameS = scenario.slotsPerFrame * scenario.slotS;
  let demand: FrameDemand | null = null;
  // what the GPG model runs (one --gpg file for every x/gpg pair)
  let gpgRuns: string | undefined;
  pairs.forEach((p, k) => {
    const { dispatch, orchestration } = parsePolicyPair(p);
    const act = dispatch.startsWith('cmmac') ? actOf(orchestration) : undefined;
    if (act) cmmacActs.push(act);
    const episode = (orch: OrchestrationPolicy & { lightActor?: string | null }) =>
      runEpisode({
        scenario,
        requests,
        frames,
        seed: a.seed,
        dispatch: makeAnyDispatch(dispatch, scenario, a.checkpoint, base, act, orchestration, guard, orch.lightActor ?? null),
        orchestration: orch,
        nodeDequeue,
        view,
        faults,
        timing: a.timing,
        calibration: a.calibration,
        deviceFilters: a.filters,
        learnedDetector: learned,
        secondStage: a.detector === 'l2',
      });
    let r: PolicyResult;
    if (orchestration === 'hindsight') {
      // the best of the future-knowing placement rules (training/baselines/hindsight.ts)
      demand ??= frameDemand(requests, scenario.services.length, frameS, frames);
      const d = demand;
      const runs = HINDSIGHT_TARGETS.map((u) => episode(new HindsightOrchestration(d, frameS, u)));
      r = runs.reduce((b, x) =>
        x.throughputRate > b.throughputRate || (x.throughputRate === b.throughputRate && x.replicaSeconds < b.replicaSeconds) ? x : b,
      );
    } else {
      const orch = makeAnyOrchestration(orchestration, scenario, a.gpg);
      gpgRuns ??= orch.summary;
      r = episode(orch);
      orch.dispose?.();
    }
    results.push(act === 'sample' ? { ...r, cmmacAct: 'sample' } : r);
    if (Date.now() - t0 > 2000)
      progress(
        `[${k + 1}/${pairs.length}] ${r.policy}: throughput rate ${r.throughputRate.toFixed(3)} (${((Date.now() - t0) / 1000).toFixed(1)} s)`,
      );
  });
  const count = requests.count;
  const oracleMax = a.oracleMaxRequests ?? ORACLE_MAX_REQUESTS;
  const ob = count <= oracleMax ? oracleBound(scenario, requests, durationS) : null;
  return {
    scenario: scenario.name,
    workload: a.trace ? null : a.workload,
    trace: a.trace ?? null,
    seed: a.seed,
    frames,
    load: a.load,
    dequeue: nodeDequeue,
    slotS: scenario.slotS,
    view,
    faults: faults.length,
    filters: !!a.filters,
    ...(learned ? { detector: 'vgru' as const } : a.detector === 'l2' ? { detector: 'l2' as const } : {}),
    // every cmmac pair sampled (each sampling pair's result says so too)
    ...(cmmacActs.length > 0 && cmmacActs.every((x) => x === 'sample') ? { cmmacAct: 'sample' as const } : {}),
    results,
    ...(gpgRuns !== undefined ? { gpg: gpgRuns } : {}),
    ...(pairs.some((p) => parsePolicyPair(p).dispatch === 'cmmac+guard') ? { guard: guardSummary(guard) } : {}),
    oracle: ob
      ? { throughputRate: round(ob.throughputRate, 4), completedInTime: ob.completedInTime, feasibleRate: round(ob.feasibleRate, 4) }
      : null,
    ...(ob
      ? {}
      : {
          oracleSkipped: `${count} requests, more than ${oracleMax}: the bound holds all of them at once (~${ORACLE_BYTES_PER_REQUEST} bytes each) while the episodes stream them`,
        }),
  };
}

/** `kais eval --seeds`: runEval on every seed (one progress line per seed), and the per-pair means (eval-seeds.ts). */
export function runEvalSeeds(
  a: EvalArgs,
  seeds: readonly number[],
  progress: (line: string) => void = () => {},
): EvalSeedsReport<EvalReport> {
  if (seeds.length < 2) throw new UsageError('--seeds: give at least 2 seeds (for one seed: --seed)');
  const runs: EvalReport[] = [];
  const t0 = Date.now();
  for (const [k, seed] of seeds.entries()) {
    runs.push(runEval({ ...a, seed }, progress));
    progress(`seed ${seed} done (${k + 1}/${seeds.length}, ${((Date.now() - t0) / 1000).toFixed(1)} s)`);
  }
  return seedsReport(seeds, runs);
}

/**
 * `--seeds` with `--jobs N`: the seeds run N at a time, each in a worker thread (eval-worker.ts)
 * that runs the same runEval; the report is the same as runEvalSeeds' (a test compares them).
 */
export async function runEvalSeedsParallel(
  a: EvalArgs,
  seeds: readonly number[],
  jobs: number,
  backend: boolean,
  progress: (line: string) => void = () => {},
): Promise<EvalSeedsReport<EvalReport>> {
  if (seeds.length < 2) throw new UsageError('--seeds: give at least 2 seeds (for one seed: --seed)');
  // loaded here: only a parallel run starts worker threads
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { SerialWorker } = require('../../orchestrator/serial-worker') as typeof import('../../orchestrator/serial-worker');
  type Reply = { ok: true; report: EvalReport; lines: string[] } | { ok: false; error: string };
  const workers = Array.from(
    { length: Math.min(jobs, seeds.length) },
    () => new SerialWorker<unknown, Reply>(path.join(__dirname, 'eval-worker.js'), 'kais eval'),
  );
  const runs: EvalReport[] = new Array<EvalReport>(seeds.length);
  const t0 = Date.now();
  let next = 0;
  let done = 0;
  try {
    await Promise.all(
      workers.map(async (w) => {
        while (next < seeds.length) {
          const k = next++;
          const r = (await w.call({ args: a, seed: seeds[k], backend })) as Extract<Reply, { ok: true }>;
          runs[k] = r.report;
          for (const line of r.lines) progress(line);
          done++;
          progress(`seed ${seeds[k]} done (${done}/${seeds.length}, ${((Date.now() - t0) / 1000).toFixed(1)} s)`);
        }
      }),
    );
  } catch (e) {
    const msg = (e as Error).message;
    if (msg.startsWith('UsageError: ')) throw new UsageError(msg.slice('UsageError: '.length));
    throw e;
  } finally {
    for (const w of workers) w.dispose();
  }
  return seedsReport(seeds, runs);
}

function seedsReport(seeds: readonly number[], runs: EvalReport[]): EvalSeedsReport<EvalReport> {
  const r0 = runs[0];
  return {
    scenario: r0.scenario,
    workload: r0.workload,
    trace: r0.trace,
    seeds: [...seeds],
    frames: r0.frames,
    load: r0.load,
    dequeue: r0.dequeue,
    slotS: r0.slotS,
    view: r0.view,
    filters: r0.filters,
    ...summariseSeeds(runs),
    ...(r0.gpg !== undefined ? { gpg: r0.gpg } : {}),
    ...(r0.guard !== undefined ? { guard: r0.guard } : {}),
    runs,
  };
}

/** `--detector`: whether the learned stage runs (UsageError for a bad value or without --filters). */
export function learnedDetectorOf(a: Pick<EvalArgs, 'detector' | 'filters'>): boolean {
  const d = a.detector ?? 'none';
  if (d !== 'vgru' && d !== 'none' && d !== 'l2') throw new UsageError(`--detector: must be vgru, l2 or none, got ${JSON.stringify(d)}`);
  if (d === 'vgru' && !a.filters)
    throw new UsageError("--detector vgru: needs --filters (the learned stage decides the device filters' ambiguous windows)");
  if (d === 'l2' && !a.filters) throw new UsageError('--detector l2: needs --filters (the second stage runs beside the device filters)');
  return d === 'vgru';
}

/** `--plot`: throughput rate per frame, and each pair's throughput rate against the edge replica-seconds it held. */
export function evalPlot(r: EvalReport): string {
  return stackSvgs([
    renderSvg(
      `throughput rate per frame: ${r.scenario}`,
      r.results.map((x) => ({ name: x.policy, values: x.throughputPerFrame })),
    ),
    renderScatter(
      `throughput rate vs resource cost: ${r.scenario}`,
      r.results.map((x) => ({ name: `${x.policy} (${x.schedulingCost} ops)`, x: x.replicaSeconds, y: x.throughputRate })),
      'edge replica-seconds held (replicaSeconds)',
      'throughput rate',
    ),
  ]);
}

/** `--plot` with `--seeds`: each pair's throughput rate per frame and its place against replica-seconds, both as means over the seeds. */
export function evalSeedsPlot(r: EvalSeedsReport<EvalReport>): string {
  const n = r.runs.length;
  const perFrame = (k: number): number[] =>
    r.runs[0].results[k].throughputPerFrame.map((_, f) => r.runs.reduce((sum, run) => sum + run.results[k].throughputPerFrame[f], 0) / n);
  const seeds = `${n} seeds`;
  return stackSvgs([
    renderSvg(
      `throughput rate per frame, mean over ${seeds}: ${r.scenario}`,
      r.summary.map((x, k) => ({ name: x.policy, values: perFrame(k) })),
    ),
    renderScatter(
      `throughput rate vs resource cost, means over ${seeds}: ${r.scenario}`,
      r.summary.map((x) => ({
        name: `${x.policy} (${x.schedulingCost.mean.toFixed(1)} ops)`,
        x: x.replicaSeconds.mean,
        y: x.throughputRate.mean,
      })),
      'edge replica-seconds held (replicaSeconds)',
      'throughput rate',
    ),
  ]);
}

/** The readable table printed on a terminal. */
export function formatTable(r: EvalReport): string {
  const timed = r.results.some((x) => x.decisionP99Us !== null);
  const filtered = r.results.some((x) => x.falseExclusionRate !== null);
  const head = [
    'policy',
    'throughput',
    'in time',
    'late',
    'dropped',
    'queued',
    'cost',
    'replica-s',
    'mean ms',
    'p99 ms',
    'cloud',
    'imbalance',
  ];
  if (r.faults > 0) head.push('lost to failures');
  if (filtered) head.push('false excl');
  if (timed) head.push('decision p99 us');
  const sorted = [...r.results].sort((x, y) => y.throughputRate - x.throughputRate);
  const rows = sorted.map((x) => [
    x.policy,
    x.throughputRate.toFixed(3),
    String(x.completedInTime),
    String(x.late),
    String(x.dropped),
    String(x.queuedAtEnd),
    String(x.schedulingCost),
    x.replicaSeconds.toFixed(0),
    x.meanLatencyMs.toFixed(0),
    x.p99LatencyMs.toFixed(0),
    x.cloudShare.toFixed(2),
    x.edgeImbalance.toFixed(2),
    ...(r.faults > 0 ? [String(x.lostToFailedNodes)] : []),
    ...(filtered ? [x.falseExclusionRate === null ? '-' : x.falseExclusionRate.toFixed(3)] : []),
    ...(timed ? [x.decisionP99Us === null ? '-' : x.decisionP99Us.toFixed(1)] : []),
  ]);
  const src = r.trace ? `trace ${r.trace}` : `workload ${r.workload}`;
  const arrived = r.results[0]?.arrived ?? 0;
  return [
    `scenario ${r.scenario}, ${src}, seed ${r.seed}, ${r.frames} frames, load ${r.load}, ${arrived} requests, dequeue ${r.dequeue}, ${r.slotS} s slots${r.faults ? `, ${r.faults} node failures` : ''}`,
    ...alignedLines(head, rows),
    r.oracle
      ? `oracle (upper bound)  ${r.oracle.throughputRate.toFixed(3)}  (${r.oracle.completedInTime} in time at most; ${(100 * r.oracle.feasibleRate).toFixed(1)}% of requests could be in time on an empty cluster; docs/simulator.md)`
      : `oracle (upper bound)  -  (not computed: ${r.oracleSkipped ?? 'skipped'})`,
    ...(r.gpg !== undefined ? [`orchestration: ${r.gpg}`] : []),
    ...(r.guard !== undefined ? [`cmmac+guard: ${r.guard}`] : []),
    ...calibrationLines(sorted),
  ].join('\n');
}

export const evalCommand: CommandModule<object, object> = {
  command: 'eval',
  describe: 'evaluate dispatch/orchestration policy pairs on the simulator',
  builder: (y: Argv<object>) =>
    yargsOptions(y.example('$0 eval --scenario kais --frames 2', 'every heuristic pair (and the shipped model) on 2 frames'), EVAL_SPEC),
  handler: namingFlags(EVAL_SPEC, async (argv) => {
    const args: EvalArgs = resolveOptions(EVAL_SPEC, argv);
    const given = givenOptions(EVAL_SPEC, argv);
    if (args.seeds !== undefined && given.seed !== undefined) throw new UsageError('--seeds: give --seed or --seeds, not both');
    if (args.seeds === undefined && given.jobs !== undefined) throw new UsageError('--jobs: runs seeds side by side; give --seeds too');
    // an entry point picks the backend: for a gpg pair, named or among the defaults (cmmac/gpg where a GPG model ships)
    const gpgPair = args.policies ? args.policies.split(',').some((p) => p.trim().endsWith('/gpg')) : shipsGpg(args.scenario);
    const backend = learnedDetectorOf(args) || gpgPair;
    const parallel = args.seeds !== undefined && args.jobs > 1;
    if (backend && !parallel) await loadBackend(); // a parallel run's workers load their own
    const progress = (line: string) => process.stderr.write(`kais: ${line}\n`);
    // a --guard-* flag without a cmmac+guard pair (named or among the defaults) changes nothing: say so
    guardFromFlags(args); // a wrong guard flag is the one line, before any notice
    const guardGiven = Object.keys(GUARD_SPEC).filter((k) => given[k as keyof typeof given] !== undefined);
    const pairsText = args.policies ?? defaultPolicies(loadScenario(args.scenario)).join(',');
    if (guardGiven.length > 0 && !pairsText.includes('+guard'))
      progress(
        `ignored: ${guardGiven.map((k) => `--${flagOf(k, GUARD_SPEC[k as keyof typeof GUARD_SPEC])}`).join(', ')} (no cmmac+guard pair)`,
      );
    if (args.seeds !== undefined) {
      const many = parallel
        ? await runEvalSeedsParallel(args, args.seeds, args.jobs, backend, progress)
        : runEvalSeeds(args, args.seeds, progress);
      process.stdout.write((args.json ? JSON.stringify(many) : formatSeedsTable(many)) + '\n');
      if (args.plot) writePlotAfterReport(args.plot, () => evalSeedsPlot(many), args.json);
      return;
    }
    const report = runEval(args, progress);
    if (args.json) process.stdout.write(JSON.stringify(report) + '\n');
    else process.stdout.write(formatTable(report) + '\n');
    if (args.plot) writePlotAfterReport(args.plot, () => evalPlot(report), args.json);
  }),
};

/**
 * `--plot`, once the report is out: a plot that cannot be written (a full disk) does not take the
 * results with it. Its failure is one line and exit code 1 (the file system's, not a usage error);
 * writeSvg leaves no part-written file. Success says "wrote <file>" (on stderr with --json: stdout
 * holds only the JSON).
 */
function writePlotAfterReport(file: string, svg: () => string, json: boolean): void {
  try {
    writeSvg(file, svg());
  } catch (e) {
    if (!isPlotWriteError(e)) throw e;
    process.stderr.write(`kais: ${e.message}\n`);
    process.exitCode = 1;
    return;
  }
  (json ? process.stderr : process.stdout).write(`wrote ${file}\n`);
}
