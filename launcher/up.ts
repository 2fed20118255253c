/**
 * `kais up [--duration S] [--json] [--speed x] [--scenario kais] [--workload p4] [--load x] [--policy cmmac|jsq|...]`:
 * the whole system on one machine, on loopback, as real processes on free ports:
 *   1. `kais node` (the emulated edge nodes and cloud),
 *   2. `kais orchestrator` (config written to a temporary folder, SQLite state there too),
 *   3. one `kais agent` per eAP,
 *   4. this process as the load generator: the built-in workload (or `--trace`) replayed at real
 *      time x `--speed`, each request POSTed to its eAP's agent.
 * A live summary goes to stderr every 2 s; after `--duration` seconds of load it waits for every
 * answer (at most 30 s), stops the processes (SIGTERM: agents drain) and prints the summary (the
 * DESIGN.md JSON with `--json`). Ctrl-C (SIGINT) or SIGTERM, at any time from the prediction on: a
 * partial summary of what ran so far (elapsed time, the counts, the throughput rate so far;
 * PartialSummary, valid JSON with `--json`, `beforeLoad` when no request was sent yet), then the
 * processes stop, the temporary folder is removed and it exits with 130; a repeated signal while
 * that runs only says "stopping..." once.
 *
 * A child that exits by itself during the run (killed, crashed) gets one line quoting its last one
 * and an entry in the summary's `childExits`; the progress line shows a dead agent's rate as `down`.
 *
 * Accounting, from the device's side (the generator): a request is `completedInTime` (200 within
 * its deadline), `late` (200 after it), `refused` (any other answer; `refusedReasons` counts the
 * reasons: target full, timeout, expired in the queue...) or `unanswered` (no HTTP answer at all:
 * connection error, or still open when the generator gave up). sent = the sum of the four.
 *
 * `--faults k` plays k node failures (seeded nodes and times after the first 70 s of scenario time:
 * 20 s of abnormal telemetry, then 30 s down) and reports what the failed nodes refused or held
 * and how often the agents excluded a node; `--no-device-filters` runs the agents without their
 * device filters and QoS isolation, for the comparison.
 *
 * `--policy` is the agents' dispatch policy (`kais agent --policy`): `cmmac` (default: the model's
 * actor, learning online), or a heuristic of the simulator (shared/dispatch: lec, jsq, p2c, ...),
 * which the agents then run for every decision, with no model published and nothing learned; the
 * prediction runs the same policy on the same requests, one instance per eAP as the agents hold
 * it (PerEapDispatch), so live / predicted compares like with like across policies.
 *
 * If the orchestrator process dies during the run (a crash, or SIGKILL from a test: its pid is on
 * stderr), it is restarted on the same ports (WebSocket and HTTP: the admin and dashboard lines
 * stay valid) with the same SQLite file after 1 s, doubling up to
 * 30 s while it keeps dying within 30 s of its start; one that refuses to start (exit 2: an
 * unusable store or config) is not restarted, with its one line in the log
 * (`--no-restart-orchestrator` turns restarts off); agents keep dispatching meanwhile.
 *
 * Identity: every eAP gets a random token of its own (the config's `agentTokens`, in the run's
 * private temporary folder; each agent reads its token from $KAIS_AGENT_TOKEN, never its command
 * line), so an agent speaks only for its eAP and nothing else on the machine speaks for any.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as crypto from 'node:crypto';
import * as http from 'node:http';
import * as https from 'node:https';
import * as os from 'node:os';
import * as path from 'node:path';
import * as readline from 'node:readline';
import type { Argv, CommandModule } from 'yargs';
import { namingFlags, opt, resolveOptions, yargsOptions, type OptionsOf } from '../shared/config';
import { MAX_LOAD } from '../training/jobs/train-options';
import { SPEED_RANGE, type Request } from '../shared/domain';
import { UsageError } from '../shared/errors';
import { AGENT_TOKEN_ENV } from '../agent/cli';
import { ADMIN_TOKEN_ENV } from '../orchestrator/admin-cli';
import { canaryConfigProblem, canaryLongestS, DEFAULT_CANARY, type CanaryConfig, type CanaryEapChoice } from '../orchestrator/canary';
import { NODE_ADMIN_TOKEN_ENV } from '../orchestrator/node-cli';
import { checkLoad, loadScenario, topologyOf, type Scenario } from '../shared/scenario';
import { DEFAULT_WORKLOAD, drain, isWorkloadName, openWorkload, WORKLOAD_NAMES } from '../training/workload';
import { checkpointHead, defaultGpgModelPath, defaultModelPath, isActorFile, modelAct } from '../shared/nets/actor-file';
import { scenarioFingerprint } from '../shared/nets/checkpoint-db';
import type { Fault } from '../shared/faults';
import type { OrchestrationPolicy } from '../shared/policy';
import { guardedDispatch } from '../shared/dispatch/guard';
import { GUARD_SPEC, guardFlags, guardFromFlags } from '../shared/dispatch/guard-options';
import { isOrchestrationPolicy, ORCHESTRATION_POLICIES } from '../shared/orchestration';
import { Rng } from '../shared/rng';
import { humanLine } from '../shared/log';
import { writePrediction, type Prediction } from '../orchestrator/prediction';
import { Store } from '../orchestrator/store';
import { placementOf } from '../shared/orchestration/placement';
import { Replay } from './replay';
import { TALLY_KEYS, type TargetTally } from '../shared/tally';
import { writeSelfSignedPair } from '../shared/tls';
import {
  checkLivePolicy,
  DISPATCH_HEURISTICS,
  isDispatchHeuristic,
  makeHeuristicDispatch,
  PerEapDispatch,
  type LivePolicyName,
} from '../shared/dispatch';

/** Most requests one kais up replays (about 850 MB with its prediction: a 2-hour run of kais at load 1 is 3.7 million). */
export const MAX_UP_REQUESTS = 4_000_000;

/**
 * The shortest run, to the next 10 s, whose drill has its verdict before the end with canary config
 * `c`: the drill comes at a third of the run, and with `kais up --canary` its verdict comes at most
 * canaryLongestS(c, true) seconds after it (the baseline wait included: at load 1 every frame is light).
 */
function drillRunS(c: CanaryConfig): number {
  return Math.ceil((1.5 * canaryLongestS(c, true)) / 10) * 10;
}

/** The options of `kais up`, declared once (shared/config.ts makes the flags, checks and docs). */
export const UP_SPEC = {
  duration: opt.number({
    default: 60,
    min: 0,
    minExclusive: true,
    max: 7 * 86400,
    describe: `seconds of load (real time); at most ${MAX_UP_REQUESTS.toLocaleString('en')} requests (kais at load 1: about 2 h)`,
  }),
  json: opt.boolean({ default: false, describe: 'print the JSON summary on stdout' }),
  speed: opt.number({
    default: 1,
    min: SPEED_RANGE.min,
    max: SPEED_RANGE.max,
    describe: 'replay speed: x times real time (service and network times scale too)',
  }),
  scenario: opt.string({ default: 'kais', describe: 'built-in scenario or a .json file' }),
  workload: opt.choice(WORKLOAD_NAMES, { default: DEFAULT_WORKLOAD, describe: 'synthetic arrival pattern' }),
  trace: opt.file({ dir: true, describe: 'Alibaba batch_task CSV to replay instead' }),
  seed: opt.integer({ default: 1, describe: 'workload seed' }),
  load: opt.number({ default: 1, min: 0, minExclusive: true, max: MAX_LOAD, describe: 'multiplier on the arrival rate' }),
  orchestration: opt.choice([...ORCHESTRATION_POLICIES, 'gpg'] as const, {
    describe:
      'placement policy (gpg: the learned one, from --gpg or the shipped model); default: gpg where a GPG model ships for the scenario (kais), else static',
  }),
  gpg: opt.file({
    describe:
      'GPG model (JSON, scripts/train-gpg.ts) for --orchestration gpg, run with the hpa scale-in its scaleIn field names (docs/gpg.md); default: the one that ships for the scenario (models/<scenario>-gpg.json)',
  }),
  policy: opt.string({
    default: 'cmmac',
    describe: `dispatch policy of every agent and of the prediction: cmmac (the model, learning online) or a heuristic of kais eval (${DISPATCH_HEURISTICS.join(', ')}), then without model or learning`,
  }),
  checkpoint: opt.file({
    describe:
      'kais train checkpoint or exported actor (.bin): its actor is published as weights v1 (default: the model shipped for the scenario)',
  }),
  learn: opt.boolean({ default: true, describe: 'the orchestrator learns online from the agents (needs a model)' }),
  learnBatch: opt.integer({ default: 512, min: 1, max: 1_000_000, describe: 'explored decisions per online update' }),
  explore: opt.number({
    default: 0.25,
    min: 0,
    minExclusive: true,
    max: 1,
    describe: 'share of decisions the agents draw from the policy while the orchestrator learns',
  }),
  restartOrchestrator: opt.boolean({ default: true, describe: 'restart the orchestrator if it dies' }),
  guard: opt.boolean({
    default: false,
    describe: 'agents run cmmac behind the regime guard, set by the --guard-* flags as on kais agent (docs/safe-learning.md)',
  }),
  ...GUARD_SPEC,
  gate: opt.boolean({
    default: false,
    describe:
      'the orchestrator replays every learned version in the simulator before publishing it (the weight gate, default settings; docs/safe-learning.md)',
  }),
  inject: opt.choice(['none', 'bad-weights', 'same-weights'] as const, {
    default: 'none',
    describe: `fault drill: bad-weights hands random weights to the publish path as if learned a third of the way into the run (judged by the gate with --gate, by the canary with --canary); same-weights hands a copy of the current version (the false-alarm drill: it must pass and be promoted); with --canary under the actor switch the canary first waits ${DEFAULT_CANARY.settleS + DEFAULT_CANARY.baselineS} s for a baseline under the main actor, so give the run ${drillRunS(DEFAULT_CANARY)} s or more (--canary-baseline shortens the wait, --canary-windows the canary)`,
  }),
  canary: opt.boolean({
    default: false,
    describe:
      'every new weight version goes to 40% of the eAPs first and is promoted or rolled back on their live throughput rate against the others (the canary, default settings; docs/safe-learning.md)',
  }),
  canaryEaps: opt.string({
    default: 'first',
    pattern: /^(first|rotate|\d+(,\d+)*)$/,
    patternText: 'first, rotate or eAP ids (0,3)',
    describe:
      "with --canary: which eAPs get a version first: the first 40% every time, the next ones in turn at each canary (rotate), or these eAPs (the orchestrator config's canary.eaps)",
  }),
  canaryBaseline: opt.number({
    default: DEFAULT_CANARY.baselineS,
    min: 0,
    max: 3600,
    describe: `with --canary: the seconds before a canary whose difference between its eAPs and the others is taken out of its verdict (the orchestrator config's canary.baselineS; 0: none). Under the actor switch a version first waits ${DEFAULT_CANARY.settleS} s + this for it under the main actor: a drill with 30 needs a run of ${drillRunS({ ...DEFAULT_CANARY, baselineS: 30 })} s`,
  }),
  canaryWindows: opt.integer({
    default: DEFAULT_CANARY.maxWindows,
    min: 1,
    max: 100,
    describe: `with --canary: the most windows of ${DEFAULT_CANARY.windowS} s a canary is judged over before its verdict (the orchestrator config's canary.maxWindows): more windows, fewer false alarms and later verdicts (docs/safe-learning.md)`,
  }),
  faults: opt.integer({
    default: 0,
    min: 0,
    describe:
      'node failures to play (seeded nodes and times after the first 70 s of scenario time; 20 s of abnormal telemetry, then 30 s down; at most the nodes of the scenario)',
  }),
  deviceFilters: opt.boolean({ default: true, describe: 'agents run the device filters and QoS isolation (--no-device-filters: off)' }),
  tls: opt.boolean({
    default: false,
    describe:
      "TLS everywhere the operator's traffic goes: a self-signed pair made for the run, the orchestrator on wss:// and https://, the agents' ingress on https:// (the emulated cluster stays plain)",
  }),
  verbose: opt.boolean({ default: false, describe: "forward the processes' logs to stderr" }),
  keepStore: opt.outFile({
    describe:
      "at the end (interrupted or not), copy the orchestrator's store to this new file: events, versions, placements and the agents' per-second telemetry (kais orchestrator --db reads it; scripts/canary-replay.ts replays the canary rule on it). The run folder is removed as before",
  }),
};

type UpArgs = OptionsOf<typeof UP_SPEC>;

export interface EapSummary {
  eap: number;
  sent: number;
  completedInTime: number;
  late: number;
  refused: number;
  unanswered: number;
  throughputRate: number;
  /** The agent's `--policy` (its /healthz policyOption; null if it did not answer). */
  policy: string | null;
  weightVersion: number | null;
  placementVersion: number | null;
  weightsApplied: number;
  placementsApplied: number;
  decisionsLearned: number;
  /** Of decisionsLearned, those drawn from the policy (explored, or every one when the model's act is sample). */
  decisionsDrawn: number;
  /** Of decisionsLearned, those of the light actor (the actor switch: frames whose placement named it). */
  decisionsLight: number;
  /** Decisions of the heuristic: cmmac's lec fallback, or the `--policy` heuristic. */
  decisionsFallback: number;
  /** Decisions that chose the cloud first (before any retry). */
  decidedToCloud: number;
}

export interface UpSummary {
  durationS: number;
  scenario: string;
  workload: string;
  speed: number;
  load: number;
  /** `--policy`: the agents' dispatch policy (`cmmac`, or the heuristic they all ran). */
  policy: string;
  sent: number;
  completedInTime: number;
  late: number;
  refused: number;
  unanswered: number;
  throughputRate: number;
  weightVersionsApplied: number;
  placementVersionsApplied: number;
  orchestratorRestarts: number;
  /**
   * Children that exited on their own during the run (killed, crashed: not stopped by kais up),
   * oldest first, each with its last stderr line; [] when none did. An orchestrator that exited is
   * here too (and restarted unless --no-restart-orchestrator); an agent or the emulated cluster is not restarted.
   */
  childExits: ChildExit[];
  /** Whether the orchestrator learned online (agents then explore `--explore` of their decisions). */
  learning: boolean;
  /**
   * With learning: what the online learner did over the run (its admin status at the end): explored
   * decisions it read, updates it ran and weight versions it published. Under the actor switch the
   * agents explore only where the main actor decides, so a run whose every window is light (kais at
   * load 1) reads none. null without learning, or when the status could not be read.
   */
  learner: { transitionsRead: number; updates: number; published: number } | null;
  /** `--keep-store`: the file the orchestrator's store was copied to at the end (null: not asked, or it failed: the log says why). */
  keptStore: string | null;
  /** Present only when the model acts by sampling (its act is sample): the agents and the prediction drew every decision from the policy. */
  cmmacAct?: 'sample';
  /** --tls: the orchestrator on wss:// and https://, the agents' ingress on https:// (a self-signed pair of the run). */
  tls: boolean;
  /**
   * What the simulator predicts for the same requests: the policy the run started with (with
   * `--policy cmmac` the model's actor, acting as its act says (argmax, or sampled: cmmacAct), or the agents' lec fallback without a model; else
   * the `--policy` heuristic, one instance per eAP seeded as the agents seed theirs), the same
   * orchestration, EDF queues, dispatch on arrival (the scenario's slot is evalSlotS), each eAP's
   * policy on its agent's view (kais eval's default). `evalPolicy` is `<dispatch>/<orchestration>`;
   * `vsEval` = throughputRate / evalThroughputRate.
   */
  evalPolicy: string;
  /**
   * What placed the replicas: the orchestration policy's name, and for gpg what its model runs (the
   * file, H and the scale-in: critic/gpg/load.ts gpgSummary, the line the orchestrator logs).
   */
  orchestration: string;
  evalSlotS: number;
  evalThroughputRate: number;
  vsEval: number;
  /** The same prediction with `kais eval --view global` (every policy reads the whole cluster's true state), and live / it. */
  evalGlobalViewThroughputRate: number;
  vsEvalGlobalView: number;
  /** Share of the agents' decisions that chose the cloud first, and the simulator's for the same requests. */
  cloudShare: number;
  evalCloudShare: number;
  /** Share of requests refused live (503/504), and the simulator's dropped share for the same requests. */
  refusedShare: number;
  evalDroppedShare: number;
  /**
   * Target by target (edge nodes, then the cloud): what happened live (the emulated cluster's counts,
   * `GET /tally`) beside the simulator's for the same requests (agent view); null when the cluster
   * did not answer. Counts as in shared/tally.ts.
   */
  perTarget: { target: string; live: TargetCounts; predicted: TargetCounts }[] | null;
  /**
   * Orchestration step by step (frame 0: the start placement; frame k: what the k-th step left), the
   * replicas by which the live orchestrator's placement differs from the simulator's at the same
   * step (summed |live - predicted| over services and nodes); frames the run reached.
   */
  placementVsPredicted: { frame: number; replicasDiffering: number }[];
  /** 1-minute load average and CPU count at the end: a live rate far below the prediction on a busy machine is CPU starvation. */
  loadAverage1m: number;
  cpus: number;
  refusedReasons: Record<string, number>;
  /** The orchestrator's safe-learning events of the run (gate verdicts, canary starts, promotions and rollbacks, the drill's injection, agents' guard switches), oldest first. */
  safeLearningEvents: { tsMs: number; kind: string; eap: number | null; message: string }[];
  /** With --canary: its baseline's seconds (`--canary-baseline`, the orchestrator config's canary.baselineS); null without a canary. */
  canaryBaselineS: number | null;
  /** With --canary: the most windows of its verdict (`--canary-windows`, the orchestrator config's canary.maxWindows); null without a canary. */
  canaryWindows: number | null;
  /**
   * Node failures played (`--faults`) and what they cost: requests the failed nodes refused or held
   * when they failed (the agents retry those on the cloud while their deadline allows), and the
   * agents' node exclusions (device filters and QoS isolation; `deviceFilters` says whether on).
   */
  faults: { planned: Fault[]; deviceFilters: boolean; refusedByFailedNodes: number; lostOnFailedNodes: number; exclusions: number } | null;
  /** Node exclusions by the agents' device filters and QoS isolation, summed over agents (with no --faults, every one is a false alarm). */
  nodeExclusions: number;
  /** The same, by rule (`device:faulty`, `device:learned` (the orchestrator's learned detector), `qos:...`). */
  nodeExclusionsByRule: Record<string, number>;
  /** The learned stage, summed over agents: windows sent to the orchestrator's detector and the verdicts that came back (agent/filters/node-health.ts LearnedStats). */
  learnedDetector: { ambiguousSent: number; trainSent: number; dropped: number; anomalous: number; normal: number; stale: number };
  meanLatencyMs: number;
  p99LatencyMs: number;
  perEap: EapSummary[];
}

/** The orchestrator's niceness under kais up (0: the others' priority, 19: the lowest). */
export const ORCHESTRATOR_NICE = 10;

/**
 * The environment of kais up's children without the secrets it makes for them: one inherited from
 * the operator's shell was used instead (a KAIS_NODE_ADMIN_TOKEN made the node refuse every
 * placement step of the orchestrator, 401, and the run still ended 0).
 */
function childEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const k of [AGENT_TOKEN_ENV, NODE_ADMIN_TOKEN_ENV, ADMIN_TOKEN_ENV]) delete env[k];
  return env;
}

/** A child `kais` process that announced itself with one JSON `ready` line on stdout. */
class Child {
  readonly proc: ChildProcess;
  readonly ready: Promise<Record<string, unknown>>;
  exited = false;
  /** It printed its ready line (an exit before it is said by the rejected `ready`, in one line). */
  wasReady = false;
  private readonly tail: string[] = [];

  constructor(
    readonly name: string,
    args: string[],
    verbose: boolean,
    onExit: (code: number | null, signal: NodeJS.Signals | null) => void,
    /** More environment (an agent's token: never on its command line, where `ps` shows it). */
    extraEnv: Record<string, string> = {},
  ) {
    this.proc = spawn(process.execPath, [...process.execArgv, process.argv[1], ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...childEnv(), KAIS_EXIT_WITH_PARENT: '1', ...extraEnv },
    });
    const errLines = readline.createInterface({ input: this.proc.stderr! });
    errLines.on('line', (json) => {
      const line = humanLine(json); // the children log JSON (shared/log.ts); this live view is text
      this.tail.push(line);
      if (this.tail.length > 20) this.tail.shift();
      if (verbose) process.stderr.write(`[${name}] ${line}\n`);
    });
    this.ready = new Promise((resolve, reject) => {
      const out = readline.createInterface({ input: this.proc.stdout! });
      out.on('line', (line) => {
        try {
          const msg = JSON.parse(line) as Record<string, unknown>;
          if (msg.ready) {
            this.wasReady = true;
            resolve(msg);
          }
        } catch {
          // not the ready line
        }
      });
      this.proc.once('exit', (code, signal) => {
        this.exited = true;
        // exit 2 is a child refusing what it was given (a flag combination kais up let through): the
        // user's one line, not a stack trace
        const refusal = code === 2 ? this.tail[this.tail.length - 1]?.replace(/^kais: /, '') : undefined;
        reject(
          refusal
            ? new UsageError(`${name} refused what kais up gave it: ${refusal}`)
            : new Error(`${name} exited (${signal ?? code}) before it was ready: ${this.tail.slice(-3).join(' | ')}`),
        );
        onExit(code, signal);
      });
    });
    this.ready.catch(() => undefined);
  }

  get pid(): number {
    return this.proc.pid ?? -1;
  }

  /** The last line it wrote to stderr ('' if none). */
  get lastLine(): string {
    return this.tail[this.tail.length - 1] ?? '';
  }

  /**
   * SIGTERM, then SIGKILL after `graceMs`; resolves once it exited. 40 s: an agent's drain takes at
   * most 30 s for open requests and 5 s for its last records (agent/main.ts), as the DaemonSet allows.
   */
  stop(graceMs = 40_000): Promise<void> {
    if (this.exited) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const t = setTimeout(() => this.proc.kill('SIGKILL'), graceMs);
      this.proc.once('exit', () => {
        clearTimeout(t);
        resolve();
      });
      this.proc.kill('SIGTERM');
    });
  }
}

/** The line of a restarted orchestrator's ready message (`v-`: no version yet). */
export function restartLine(pid: number, r: Record<string, unknown>): string {
  const v = (x: unknown) => (x === null || x === undefined ? '-' : String(x));
  return `orchestrator pid=${pid} back on ${String(r.url)} (weights v${v(r.weightVersion)}, placement v${v(r.placementVersion)}, resumed ${String(r.resumed)})`;
}

/** Event kinds `kais up` shows as lines and lists in its summary (issue 17 item 4; the weights admin's since session 51). */
const SAFE_LEARNING_KINDS = /^(gate-|canary-|inject$|guard-|admin-(rollback|freeze|unfreeze)$)/;

/** The online learner's counts from the orchestrator's admin status (null: not there). */
async function readLearner(base: string, ca?: string, bearer?: string): Promise<UpSummary['learner']> {
  const st = await getJson(`${base}/v1/status`, 2000, ca, bearer);
  const l = st?.learner as Record<string, unknown> | null | undefined;
  const n = (k: string) => (typeof l?.[k] === 'number' ? (l[k] as number) : null);
  const [transitionsRead, updates, published] = [n('transitionsRead'), n('updates'), n('published')];
  return transitionsRead === null || updates === null || published === null ? null : { transitionsRead, updates, published };
}

function getJson(url: string, timeoutMs = 2000, ca?: string, bearer?: string): Promise<Record<string, unknown> | null> {
  return new Promise((resolve) => {
    const get = url.startsWith('https:') ? https.get : http.get;
    const headers = bearer !== undefined ? { authorization: `Bearer ${bearer}` } : {};
    const req = get(url, { timeout: timeoutMs, headers, ...(ca !== undefined ? { ca } : {}) }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        try {
          resolve(JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>);
        } catch {
          resolve(null);
        }
      });
      res.on('error', () => resolve(null));
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(null));
  });
}

/** Scenario seconds before the first failure: the device filters pool 36 s of history, then need a 12-sample window. */
const FIRST_FAULT_S = 70;

/**
 * `count` node failures on distinct seeded nodes at seeded times in [70 s, end - 10 s] of scenario
 * time, each with 20 s of abnormal telemetry before and 30 s down (the simulator's precursor).
 */
export function planFaults(count: number, scenarioS: number, numNodes: number, seed: number): Fault[] {
  if (count === 0) return [];
  if (scenarioS < FIRST_FAULT_S + 10) {
    throw new UsageError(
      `--faults: needs --duration x --speed of at least ${FIRST_FAULT_S + 10} s (the device filters learn each node's baseline in the first 36 s), got ${scenarioS}`,
    );
  }
  const rng = Rng.derive(seed, 'up/faults');
  const nodes = Array.from({ length: numNodes }, (_, n) => n);
  for (let i = nodes.length - 1; i > 0; i--) {
    const j = rng.int(i + 1);
    [nodes[i], nodes[j]] = [nodes[j], nodes[i]];
  }
  return nodes
    .slice(0, count)
    .map((node) => ({
      node,
      startS: Math.round(FIRST_FAULT_S + rng.next() * (scenarioS - 10 - FIRST_FAULT_S)),
      durationS: 30,
      precursorS: 20,
    }))
    .sort((x, y) => x.startS - y.startS);
}

export async function runUp(a: UpArgs, log: (line: string) => void): Promise<UpSummary> {
  const scenario: Scenario = loadScenario(a.scenario);
  checkLoad(scenario, a.load);
  if (!(a.duration > 0) || !Number.isFinite(a.duration))
    throw new UsageError(`--duration: must be a positive number of seconds, got ${a.duration}`);
  if (!(a.speed > 0) || !Number.isFinite(a.speed)) throw new UsageError(`--speed: must be a positive number, got ${a.speed}`);
  if (!isWorkloadName(a.workload))
    throw new UsageError(`--workload: unknown workload "${a.workload}" (valid: ${WORKLOAD_NAMES.join(', ')})`);
  const gpgFlagGiven = a.gpg !== undefined;
  // --gpg names the model of the gpg orchestration: alone it means gpg; with another it contradicts it
  // (it was written to the orchestrator's config, which refused it after the prediction, as a stack trace)
  if (gpgFlagGiven && a.orchestration !== undefined && a.orchestration !== 'gpg')
    throw new UsageError(`--gpg: read only with --orchestration gpg (this run: --orchestration ${a.orchestration})`);
  if (gpgFlagGiven && a.orchestration === undefined) a = { ...a, orchestration: 'gpg' };
  const shipped = defaultGpgModelPath(scenario); // models/<scenario>-gpg.json, or null: looked up once
  if (a.orchestration === 'gpg' || (a.orchestration === undefined && shipped !== null)) {
    // before tfjs's first use: the backend kais eval runs gpg on, for the prediction (and no tfjs banner on stderr)
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    await (require('../shared/tf-backend') as typeof import('../shared/tf-backend')).loadBackend();
  }
  // the learned orchestration by default where its model ships, as kais eval's default pairs (static when none
  // ships, or the shipped one does not fit a scenario file of the same name); the shipped model is then loaded once
  let shippedLoaded = false;
  // what the GPG model runs, for the log (critic/gpg/load.ts gpgSummary)
  let gpgLine: string | null = null;
  if (a.orchestration === undefined) {
    const summary = shipped !== null ? gpgFits(shipped, scenario) : null;
    const fits = shipped !== null && summary !== null;
    a = { ...a, orchestration: fits ? 'gpg' : 'static', ...(fits && !gpgFlagGiven ? { gpg: shipped } : {}) };
    shippedLoaded = fits && !gpgFlagGiven;
    if (shippedLoaded) gpgLine = summary;
  }
  if (!isOrchestrationPolicy(a.orchestration) && a.orchestration !== 'gpg')
    throw new UsageError(`--orchestration: one of ${ORCHESTRATION_POLICIES.join(', ')}, gpg, got ${a.orchestration}`);
  if (a.orchestration === 'gpg' && !a.gpg) {
    // the model that ships for the scenario, as kais eval's x/gpg
    if (shipped === null)
      throw new UsageError(
        `--orchestration gpg: needs --gpg <model.json>: no GPG model ships for scenario "${scenario.name}" (scripts/train-gpg.ts makes one)`,
      );
    a = { ...a, gpg: shipped };
  }
  if (a.gpg && !shippedLoaded) {
    const p = gpgPolicy(a.gpg, scenario, gpgFlagGiven ? '--gpg' : 'the shipped GPG model');
    gpgLine = p.summary;
    p.dispose();
  }
  if (!(a.explore > 0 && a.explore <= 1)) throw new UsageError(`--explore: must be a share in (0, 1], got ${a.explore}`);
  if (!Number.isInteger(a.learnBatch) || a.learnBatch < 1)
    throw new UsageError(`--learn-batch: must be a positive integer, got ${a.learnBatch}`);
  const policy = checkLivePolicy(a.policy);
  const heuristic = policy !== 'cmmac';
  const guard = guardFromFlags(a); // checked with or without --guard, as kais agent does
  if (a.checkpoint && !fs.existsSync(a.checkpoint)) throw new UsageError(`--checkpoint: ${a.checkpoint} does not exist`);
  if (a.keepStore && fs.existsSync(a.keepStore))
    throw new UsageError(`--keep-store: ${a.keepStore} exists: kais up writes the store to a new file, it does not overwrite one`);
  const topo = topologyOf(scenario);
  if (!Number.isInteger(a.faults) || a.faults < 0 || a.faults > topo.numNodes)
    throw new UsageError(`--faults: must be an integer in 0..${topo.numNodes}, got ${a.faults}`);
  if (a.canary && !heuristic && topo.numEaps < 2)
    throw new UsageError(`--canary: needs at least 2 eAPs (canary and control); scenario ${scenario.name} has ${topo.numEaps}`);
  const canaryEaps: CanaryEapChoice =
    a.canaryEaps === 'first' || a.canaryEaps === 'rotate' ? a.canaryEaps : a.canaryEaps.split(',').map(Number);
  if (a.canaryEaps !== 'first') {
    if (!a.canary) throw new UsageError('--canary-eaps: read only with --canary');
    const problem = canaryConfigProblem({ ...DEFAULT_CANARY, eaps: canaryEaps }, topo.numEaps);
    if (problem) throw new UsageError(`--canary-eaps: ${problem.why}`);
  }
  if (a.canaryBaseline !== DEFAULT_CANARY.baselineS && !a.canary) throw new UsageError('--canary-baseline: read only with --canary');
  if (a.canaryWindows !== DEFAULT_CANARY.maxWindows && !a.canary) throw new UsageError('--canary-windows: read only with --canary');
  /** The canary's settings that differ from the defaults (the orchestrator config's `canary`; `true`: none do). */
  const canaryConfig = {
    ...(canaryEaps !== 'first' ? { eaps: canaryEaps } : {}),
    ...(a.canaryBaseline !== DEFAULT_CANARY.baselineS ? { baselineS: a.canaryBaseline } : {}),
    ...(a.canaryWindows !== DEFAULT_CANARY.maxWindows ? { maxWindows: a.canaryWindows } : {}),
  };
  const faultPlan = planFaults(a.faults, a.duration * a.speed, topo.numNodes, a.seed);
  // Ctrl-C (SIGINT) or SIGTERM from here on, the prediction included: a partial summary of what is
  // known (valid JSON with --json), the processes stop, the temporary folder goes, exit 130. A
  // repeated signal while that runs only says so once: it must not kill this process before the cleanup
  let dir: string | null = null;
  // the summary of a run that ended (the finally block below adds what --keep-store did)
  let summary: UpSummary | null = null;
  const children: Child[] = [];
  let stopping = false;
  let interrupted = false; // a signal came: onSignal stops everything and exits 130
  let finishing = false; // the run ended: its own cleanup runs, a signal only says so
  let saidStopping = false;
  let orchestratorRestarts = 0;
  // children that exited on their own during the run (killed, crashed), oldest first
  const childExits: ChildExit[] = [];
  const upStartMs = performance.now();
  // a child that exited by itself (not stopped by kais up): one line quoting its last one, and the summary's childExits
  const noteExit = (c: Child, code: number | null, signal: NodeJS.Signals | null): void => {
    if (stopping) return;
    childExits.push({
      name: c.name,
      pid: c.pid,
      code,
      signal,
      atS: +((performance.now() - upStartMs) / 1000).toFixed(1),
      lastLine: c.lastLine,
    });
    // one before its ready line is the rejected start's one line ("... refused what kais up gave it")
    if (c.wasReady && (c.name !== 'orchestrator' || !a.restartOrchestrator))
      log(`${c.name} (pid ${c.pid}) exited (${signal ?? code}${c.lastLine ? `: ${c.lastLine}` : ''}); not restarted`);
  };
  // the prediction once made (for the partial summary)
  let known: { policy: string; rate: number } | null = null;
  // what ran so far, for a Ctrl-C: set once the load generator starts
  let soFar: (() => PartialSummary) | null = null;
  const beforeLoad = (): PartialSummary => ({
    interrupted: true,
    elapsedS: 0,
    durationS: a.duration,
    scenario: scenario.name,
    workload: a.trace ? 'trace' : a.workload,
    speed: a.speed,
    policy,
    sent: 0,
    completedInTime: 0,
    late: 0,
    refused: 0,
    unanswered: 0,
    open: 0,
    throughputRate: 0,
    evalPolicy: known?.policy ?? null,
    evalThroughputRate: known?.rate ?? null,
    beforeLoad: true,
    ...afterStart(),
  });
  // what the partial summary adds when children exited or the orchestrator was restarted
  const afterStart = () => ({
    ...(childExits.length > 0 ? { childExits } : {}),
    ...(orchestratorRestarts > 0 ? { orchestratorRestarts } : {}),
  });
  const removeDir = () => {
    if (dir !== null) fs.rmSync(dir, { recursive: true, force: true });
  };
  // --keep-store: the orchestrator's store, copied out of the run folder before it goes (after the processes stopped)
  let keptStore: string | null = null;
  const keepStore = (): void => {
    if (!a.keepStore || dir === null) return;
    const db = path.join(dir, 'orchestrator.db');
    if (!fs.existsSync(db)) return log(`--keep-store: no store to keep: the orchestrator had not started`);
    try {
      copyStore(db, a.keepStore);
      keptStore = a.keepStore;
      log(`kept the orchestrator's store: ${a.keepStore}`);
    } catch (e) {
      log(`--keep-store: could not write ${a.keepStore}: ${(e as Error).message}`);
    }
  };
  const onSignal = (signal: NodeJS.Signals) => {
    if (interrupted || finishing) {
      if (!saidStopping) {
        saidStopping = true;
        log(`${signal}: stopping...`);
      }
      return;
    }
    interrupted = true;
    stopping = true;
    const p = soFar?.() ?? null;
    const withExits = p ? { ...p, ...afterStart() } : p;
    process.stdout.write(
      a.json ? `${JSON.stringify(withExits ?? beforeLoad())}\n` : `${formatPartial(withExits ?? beforeLoad(), a.duration)}\n`,
    );
    void Promise.allSettled(children.map((c) => c.stop(3000))).then(() => {
      try {
        keepStore();
        removeDir();
      } finally {
        process.exit(130);
      }
    });
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  // where the run stops once interrupted: onSignal cleans up and exits
  const halted = () => new Promise<never>(() => undefined);
  // lets a signal that came during synchronous work (the prediction) be handled
  const yieldToSignals = () => new Promise<void>((resolve) => setImmediate(resolve));

  try {
    // The orchestrator's weights frames carry the actor head; agents are also told it (--actor-head)
    // for a stored model published before heads were carried.
    // without --checkpoint, the learned policy the project ships for the scenario, when there is one
    // a heuristic policy needs no model: none is published (the agents would ignore it) and none learned
    // the requests first: a bad --trace is the only line, before anything is said or started
    const run = `--duration ${a.duration} at --speed ${a.speed} and --load ${a.load}`;
    const tooMany = (n: string) =>
      new UsageError(
        `${run}: ${n} requests, more than kais up holds (${MAX_UP_REQUESTS}: the replay and its prediction keep every one in memory); a shorter --duration`,
      );
    // far too many for a synthetic workload: said before a counting pass over them (minutes for a week)
    const expected = scenario.workload.ratePerS * a.load * a.duration * a.speed;
    if (!a.trace && expected > 2 * MAX_UP_REQUESTS) throw tooMany(`about ${Math.round(expected)}`);
    const source = openWorkload({
      scenario,
      workload: a.workload,
      tracePath: a.trace ?? null,
      seed: a.seed,
      load: a.load,
      durationS: a.duration * a.speed,
      warn: (line) => log(line.replace(/^kais: /, '')), // up's lines have their own prefix ("kais up: kais: ..." before)
    });
    // counted before they are made: the replay and its prediction hold every request in memory (a
    // week's --duration ran out of heap after minutes), and a run of none measured nothing (0.000)
    if (source.count === 0)
      throw new UsageError(`${run}: no request arrives in ${a.duration * a.speed} scenario seconds; a longer --duration`);
    if (source.count > MAX_UP_REQUESTS) throw tooMany(String(source.count));
    const requests: Request[] = drain(source);
    let checkpoint = heuristic ? undefined : a.checkpoint;
    let usingShipped: string | null = null;
    let shippedSkipped = false;
    if (heuristic) {
      // what only a learned policy uses is said to be ignored, not dropped in silence
      const ignored = [
        a.checkpoint ? `--checkpoint ${a.checkpoint}` : '',
        a.guard ? '--guard' : '',
        a.gate ? '--gate' : '',
        a.canary ? '--canary' : '',
        a.inject !== 'none' ? `--inject ${a.inject}` : '',
      ].filter((x) => x !== '');
      log(
        `--policy ${policy}: every agent dispatches with ${policy}; no model is published, nothing is learned${ignored.length > 0 ? ` (${ignored.join(', ')} ignored)` : ''}`,
      );
    } else if (!checkpoint) {
      // the actor shipped for the scenario and the orchestration (shared/nets/actor-file.ts defaultModelPath)
      const shipped = defaultModelPath(scenario, a.orchestration);
      // a scenario file that takes a built-in's name (another topology) does not fit the model shipped
      // for that name: lec then, said, as the shipped GPG model falls back to static (it was exit 2
      // naming a model the user never gave)
      if (shipped && !shippedActorFits(shipped, scenario)) {
        shippedSkipped = true;
        log(
          `the model shipped for "${scenario.name}" (${shipped}) was trained on another version of it: not used; the agents dispatch with their fallback, lec, and nothing learns (give --checkpoint to run a model)`,
        );
      } else if (shipped) checkpoint = usingShipped = shipped; // said below, once the flags are known to fit
    }
    const actorHead = checkpoint ? checkpointHead(checkpoint) : 'softplus1';

    const learning = a.learn && checkpoint !== undefined;
    // the drill goes through the learner's or the canary's publish path (the orchestrator refuses it otherwise)
    if (a.inject !== 'none' && !heuristic && !learning && !a.canary)
      throw new UsageError(
        `--inject ${a.inject}: needs learning (a model, without --no-learn) or --canary: the drill publishes through them${checkpoint ? '' : ` (no model for scenario ${scenario.name})`}`,
      );
    if (usingShipped) log(`using the shipped model ${usingShipped}`);
    if (!heuristic && !checkpoint && !shippedSkipped)
      log(`no cMMAC model ships for scenario ${scenario.name}: the agents dispatch with their fallback, lec, and nothing learns`);
    if (!heuristic) {
      // what needs a model or learning is said to be ignored without them, as for a heuristic --policy
      const ignored = [
        a.guard && !checkpoint ? '--guard (no model: lec decides)' : '',
        a.gate && !learning ? `--gate (nothing is learned${checkpoint ? ': --no-learn' : ''})` : '',
        a.canary && !learning && a.inject === 'none' ? '--canary (nothing new is published)' : '',
      ].filter((x) => x !== '');
      if (ignored.length > 0) log(`ignored: ${ignored.join(', ')}`);
    }
    // a model chosen sampling (kais train --eval-act sample: act "sample") is deployed sampling: every
    // agent draws every decision from the policy (--explore 1), as the prediction does
    const act = checkpoint ? modelAct(checkpoint) : 'argmax';
    if (act === 'sample')
      log(
        `the model acts by sampling (act: sample): the orchestrator tells the agents, which draw every decision from the policy (explore 1${learning ? `; --explore ${a.explore} is not used` : ''})`,
      );
    // the prediction, before any process starts (it takes the CPU for a moment)
    await yieldToSignals();
    if (interrupted) await halted();
    const predicted = predictRate(scenario, requests, a, policy, checkpoint);
    known = predicted;
    await yieldToSignals();
    if (interrupted) await halted();
    const predictedGlobalView = predictRate(scenario, requests, a, policy, checkpoint, 'global');
    log(
      `kais eval predicts ${predicted.policy}: ${predicted.rate.toFixed(3)} for these ${requests.length} requests ` +
        `(${predictedGlobalView.rate.toFixed(3)} with --view global)`,
    );
    if (a.orchestration === 'gpg' && gpgLine) log(`orchestration: ${gpgLine}`);

    if (interrupted) await halted();
    const runDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kais-up-'));
    dir = runDir;

    // 1. emulated cluster
    const node = new Child(
      'node',
      [
        'node',
        '--scenario',
        a.scenario,
        '--speed',
        String(a.speed),
        '--seed',
        String(a.seed),
        ...(faultPlan.length > 0 ? ['--faults', JSON.stringify(faultPlan)] : []),
      ],
      a.verbose,
      (code, signal) => noteExit(node, code, signal),
    );
    children.push(node);
    const nodeReady = await node.ready;
    log(`emulated cluster pid=${node.pid} admin=${String(nodeReady.admin)}`);
    const targetsFile = path.join(runDir, 'targets.json');
    fs.writeFileSync(targetsFile, JSON.stringify({ nodes: nodeReady.nodes, cloud: nodeReady.cloud }));

    // 2. orchestrator (restarted on the same port if it dies). Every eAP gets a token of its own
    // (random, in the config file of this run's private folder and in its agent's environment):
    // an agent speaks only for its eAP, and nothing else on this machine speaks for any
    const agentTokens = Object.fromEntries(
      Array.from({ length: topo.numEaps }, (_, b) => [b, crypto.randomBytes(24).toString('base64url')]),
    );
    const configFile = path.join(runDir, 'orchestrator.json');
    // --tls: one self-signed pair for the run (its own CA), for the orchestrator and the agents' ingress
    const tls = a.tls ? (await writeSelfSignedPair(path.join(runDir, 'tls'))).files : null;
    const ca = tls ? fs.readFileSync(tls.cert, 'utf8') : undefined;
    const web = tls ? 'https' : 'http';
    // the admin API's token (kais status / scale / nodes), in a file only this user reads
    const adminToken = crypto.randomBytes(24).toString('base64url');
    const adminTokenFile = path.join(runDir, 'admin-token');
    fs.writeFileSync(adminTokenFile, `${adminToken}\n`, { mode: 0o600 });
    // the simulator's prediction for the dashboard (orchestrator/prediction.ts): written again with
    // the start time once the load begins, so the orchestrator can lay its frames on the wall clock
    const predictionFile = path.join(runDir, 'prediction.json');
    const prediction: Prediction = {
      policy: predicted.policy,
      throughputRate: predicted.rate,
      frameS: predicted.frameS,
      arrivedPerFrame: predicted.arrivedPerFrame,
      completedInTimePerFrame: predicted.completedInTimePerFrame,
      startMs: null,
    };
    writePrediction(predictionFile, prediction);
    fs.writeFileSync(
      configFile,
      JSON.stringify({
        agentTokens,
        adminToken,
        scenario: a.scenario,
        orchestration: a.orchestration,
        gpgModel: a.gpg ? path.resolve(a.gpg) : null,
        speed: a.speed,
        executor: nodeReady.admin,
        executorToken: nodeReady.adminToken ?? null,
        checkpoint: checkpoint ? path.resolve(checkpoint) : null,
        actorHead,
        learner: learning ? 'cmmac' : 'none',
        learnBatch: a.learnBatch,
        ...(a.gate && !heuristic ? { gate: true } : {}),
        ...(a.canary && !heuristic ? { canary: Object.keys(canaryConfig).length === 0 ? true : canaryConfig } : {}),
        ...(a.inject === 'bad-weights' && !heuristic ? { injectBadWeightsAfterS: a.duration / 3 } : {}),
        ...(a.inject === 'same-weights' && !heuristic ? { injectSameWeightsAfterS: a.duration / 3 } : {}),
        ...(tls ? { tls } : {}),
        prediction: predictionFile,
      }),
      { mode: 0o600 },
    );
    const dbFile = path.join(runDir, 'orchestrator.db');
    let orchestratorPort = 0;
    // its HTTP port (admin API, dashboard, metrics) is kept across restarts too, so the admin and dashboard lines stay valid
    let orchestratorHttpPort = 0;
    // restarts back off: 1 s, doubling while the orchestrator keeps dying within 30 s of its start
    // (up to 30 s); one that refuses to start (exit 2: its store or config is unusable, e.g. an
    // unwritable or corrupt database) is not restarted, and its one line says why
    let restartDelayMs = 1000;
    const startOrchestrator = (): Child => {
      const startedMs = Date.now();
      const c = new Child(
        'orchestrator',
        [
          'orchestrator',
          '--config',
          configFile,
          '--db',
          dbFile,
          '--port',
          String(orchestratorPort),
          '--http-port',
          String(orchestratorHttpPort),
        ],
        a.verbose,
        (code, signal) => {
          noteExit(c, code, signal);
          if (stopping || !a.restartOrchestrator) return;
          if (code === 2) {
            if (orchestratorHttpPort !== 0 && /--http-port/.test(c.lastLine)) {
              // its HTTP port was taken meanwhile: a free one, and the admin and dashboard lines again once it is up
              log(`orchestrator could not take its HTTP port again (${c.lastLine}); restarting it on a free one`);
              orchestratorHttpPort = 0;
            } else {
              log(`orchestrator refused to start (exit 2): ${c.lastLine}; not restarting it (agents keep dispatching)`);
              return;
            }
          }
          restartDelayMs = Date.now() - startedMs > 30_000 ? 1000 : restartDelayMs;
          const delay = restartDelayMs;
          restartDelayMs = Math.min(30_000, restartDelayMs * 2);
          log(
            `orchestrator exited (${signal ?? code}${c.lastLine ? `: ${c.lastLine}` : ''}); restarting in ${delay / 1000} s on port ${orchestratorPort}`,
          );
          setTimeout(() => {
            if (stopping) return;
            orchestratorRestarts++;
            const next = startOrchestrator();
            children.push(next);
            next.ready.then(
              (r) => {
                log(restartLine(next.pid, r));
                // the same HTTP port as a rule; should it have taken another, the lines that name it
                if (r.httpPort && r.httpPort !== orchestratorHttpPort) {
                  orchestratorHttpPort = r.httpPort as number;
                  adminLines();
                }
              },
              // one that exits before it is ready was said by its exit (restarting, on a free HTTP port, or not): nothing more
              () => undefined,
            );
          }, delay);
        },
      );
      // The request path first: in production the orchestrator has a host of its own; here it shares
      // the cores with the agents, the emulated nodes and the load generator, and its learner's
      // updates took 5-6% of the live rate at --load 1.5 (docs/runtime.md, "The orchestrator's CPU
      // priority"). Nice 10 lets it use what they leave.
      if (c.proc.pid !== undefined) {
        try {
          os.setPriority(c.proc.pid, ORCHESTRATOR_NICE);
        } catch {
          // not permitted here (a container without CAP_SYS_NICE may refuse): it runs at the default priority
        }
      }
      return c;
    };
    // the admin and dashboard lines, for the orchestrator's HTTP port
    const adminLines = (): void => {
      if (!orchestratorHttpPort) return;
      log(
        `admin: kais status --orchestrator ${web}://127.0.0.1:${orchestratorHttpPort} --admin-token-file ${adminTokenFile}${tls ? ` --tls-ca ${tls.cert}` : ''}`,
      );
      log(
        `dashboard: ${web}://127.0.0.1:${orchestratorHttpPort}/dashboard (admin token: the first line of ${adminTokenFile}${tls ? `; the certificate is self-signed: ${tls.cert}` : ''})`,
      );
    };
    const orch = startOrchestrator();
    children.push(orch);
    const orchReady = await orch.ready;
    orchestratorPort = orchReady.port as number;
    orchestratorHttpPort = (orchReady.httpPort as number | undefined) ?? 0;
    log(
      `orchestrator pid=${orch.pid} url=${String(orchReady.url)}` +
        (orchReady.httpPort ? ` metrics ${web}://127.0.0.1:${String(orchReady.httpPort)}/metrics` : ''),
    );
    adminLines();

    // 3. agents
    const agents = Array.from({ length: topo.numEaps }, (_, b) => {
      const c = new Child(
        `agent ${b}`,
        [
          'agent',
          '--orchestrator',
          String(orchReady.url),
          '--eap',
          String(b),
          '--targets',
          targetsFile,
          '--scenario',
          a.scenario,
          '--speed',
          String(a.speed),
          '--cache',
          path.join(runDir, `agent-${b}`),
          '--actor-head',
          actorHead,
          // a sampling model: no --explore, the agents take explore 1 from the orchestrator's welcome (act: sample)
          ...(act === 'sample' ? [] : ['--explore', String(learning ? a.explore : 0)]),
          '--policy',
          policy,
          '--seed',
          String(a.seed),
          ...(a.deviceFilters ? [] : ['--no-device-filters']),
          ...(a.guard ? ['--guard', ...guardFlags(guard)] : []),
          ...(tls ? ['--tls-ca', tls.cert, '--tls-cert', tls.cert, '--tls-key', tls.key] : []),
        ],
        a.verbose,
        (code, signal) => noteExit(c, code, signal),
        { [AGENT_TOKEN_ENV]: agentTokens[b] },
      );
      children.push(c);
      return c;
    });
    const agentPorts = (await Promise.all(agents.map((c) => c.ready))).map((r) => r.port as number);
    log(
      `${agents.length} agents up (pids ${agents.map((c) => c.pid).join(' ')}; HTTP ports ${agentPorts.join(' ')}: POST /request, GET /metrics /healthz /readyz); replaying ${requests.length} requests over ${a.duration} s`,
    );

    // 4. load generator (launcher/replay.ts)
    const replay = new Replay({
      scenario,
      requests,
      speed: a.speed,
      durationS: a.duration,
      agentUrls: agentPorts.map((p) => `${web}://127.0.0.1:${p}`),
      ca,
      stopped: () => stopping,
    });
    const { total, per, reasons, latencies } = replay;

    // scenario time 0 is START_LEAD_MS from now, written ahead so that the orchestrator (which reads
    // the file at most once a second) starts its placement steps' clock at it (PlacementLoop.alignTo)
    const startMs = Date.now() + START_LEAD_MS;
    writePrediction(predictionFile, { ...prediction, startMs });
    await new Promise((r) => setTimeout(r, Math.max(0, startMs - Date.now())));
    const t0 = performance.now() - Math.max(0, Date.now() - startMs);
    soFar = () => ({
      interrupted: true,
      elapsedS: +((performance.now() - t0) / 1000).toFixed(1),
      durationS: a.duration,
      scenario: scenario.name,
      workload: a.trace ? 'trace' : a.workload,
      speed: a.speed,
      policy,
      ...total,
      open: replay.outstanding,
      throughputRate: total.sent > 0 ? total.completedInTime / total.sent : 0,
      evalPolicy: predicted.policy,
      evalThroughputRate: predicted.rate,
    });
    const health = async () => Promise.all(agentPorts.map((p) => getJson(`${web}://127.0.0.1:${p}/healthz`, 2000, ca)));
    // the orchestrator's safe-learning events (admin API), each shown once as a line
    const safeEvents: UpSummary['safeLearningEvents'] = [];
    let eventsSinceMs = 0;
    const pollEvents = async () => {
      if (!orchestratorHttpPort) return;
      const base = `${web}://127.0.0.1:${orchestratorHttpPort}/v1/events?since=${eventsSinceMs}&limit=1000`;
      const page = await getJson(base, 2000, ca, adminToken);
      const list = (page?.events ?? []) as { tsMs: number; kind: string; eap: number | null; message: string }[];
      for (const e of list) {
        if (!SAFE_LEARNING_KINDS.test(e.kind) || safeEvents.some((x) => x.tsMs === e.tsMs && x.kind === e.kind && x.message === e.message))
          continue;
        safeEvents.push({ tsMs: e.tsMs, kind: e.kind, eap: e.eap, message: e.message });
        log(`event ${e.kind}${e.eap !== null ? ` eAP ${e.eap}` : ''}: ${e.message}`);
      }
      if (list.length > 0) eventsSinceMs = list[list.length - 1].tsMs;
    };
    const live = setInterval(() => {
      // nothing after an interrupt's partial summary (a progress line printed after it)
      if (stopping) return;
      void pollEvents();
      void health().then((hs) => {
        if (stopping) return;
        const t = ((performance.now() - t0) / 1000).toFixed(0);
        const rates = per
          .map((c, b) =>
            agents[b].exited
              ? 'down'
              : c.sent - 0 > 0
                ? (c.completedInTime / Math.max(1, c.completedInTime + c.late + c.refused)).toFixed(2)
                : '-',
          )
          .join(' ');
        const wv = hs.map((h) => (h?.weightVersion ?? '-') as string).join(',');
        const pv = hs.map((h) => (h?.placementVersion ?? '-') as string).join(',');
        // nodes some agent leaves out now (device filters, QoS isolation)
        const out = new Set<number>();
        for (const h of hs)
          for (const x of ((h as Record<string, unknown> | null)?.nodes as { excluded?: { node: number }[] } | null)?.excluded ?? [])
            out.add(x.node);
        const outText = out.size > 0 ? ` | nodes out ${[...out].sort((x, y) => x - y).join(',')}` : '';
        log(
          `t=${t}s sent=${total.sent} inTime=${total.completedInTime} late=${total.late} refused=${total.refused} open=${replay.outstanding} | rate per eAP ${rates} | weights v${wv} | placement v${pv}${outText}`,
        );
      });
    }, 2000);

    await replay.run(t0);
    clearInterval(live);
    if (interrupted) await halted();
    await pollEvents();
    // what the online learner did (read before the orchestrator stops)
    const learnerStats =
      learning && orchestratorHttpPort ? await readLearner(`${web}://127.0.0.1:${orchestratorHttpPort}`, ca, adminToken) : null;
    replay.close();
    const hs = await health();
    const liveTally = (await getJson(`${String(nodeReady.admin)}/tally`)) as TargetTally | null;
    const losses =
      faultPlan.length > 0
        ? ((await getJson(`${String(nodeReady.admin)}/faults`)) as { refused: number; lostOnFailure: number } | null)
        : null;
    const byRule: Record<string, number> = {};
    const learned = { ambiguousSent: 0, trainSent: 0, dropped: 0, anomalous: 0, normal: 0, stale: 0 };
    for (const h of hs) {
      const nodes = (h as Record<string, unknown> | null)?.nodes as {
        exclusionsByRule?: Record<string, number>;
        learned?: Record<string, number>;
      } | null;
      for (const [rule, k] of Object.entries(nodes?.exclusionsByRule ?? {})) byRule[rule] = (byRule[rule] ?? 0) + k;
      for (const k of Object.keys(learned) as (keyof typeof learned)[]) learned[k] += nodes?.learned?.[k] ?? 0;
    }
    const exclusions = hs.reduce((sum, h) => {
      const ev = ((h as Record<string, unknown> | null)?.nodes as { events?: Record<string, number> } | null)?.events;
      return sum + (ev ? (ev.exclude ?? 0) + (ev.isolate ?? 0) : 0);
    }, 0);

    const answered = total.completedInTime + total.late;
    latencies.sort((x, y) => x - y);
    const perEap: EapSummary[] = per.map((c, b) => {
      const h = (hs[b] ?? {}) as Record<string, unknown>;
      const counters = (h.counters ?? {}) as Record<string, number>;
      return {
        eap: b,
        ...c,
        throughputRate: c.sent > 0 ? c.completedInTime / c.sent : 0,
        policy: (h.policyOption as string | undefined) ?? null,
        weightVersion: (h.weightVersion as number | null) ?? null,
        placementVersion: (h.placementVersion as number | null) ?? null,
        weightsApplied: (h.weightsApplied as number) ?? 0,
        placementsApplied: (h.placementsApplied as number) ?? 0,
        decisionsLearned: counters.decisionsLearned ?? 0,
        decisionsDrawn: counters.decisionsDrawn ?? 0,
        decisionsLight: counters.decisionsLight ?? 0,
        decisionsFallback: counters.decisionsFallback ?? 0,
        decidedToCloud: counters.decidedToCloud ?? 0,
      };
    });
    const decisions = perEap.reduce((s, e) => s + e.decisionsLearned + e.decisionsFallback, 0);
    const throughputRate = total.sent > 0 ? total.completedInTime / total.sent : 0;
    summary = {
      durationS: a.duration,
      scenario: scenario.name,
      workload: a.trace ? 'trace' : a.workload,
      speed: a.speed,
      load: a.load,
      policy,
      ...total,
      throughputRate,
      weightVersionsApplied: Math.max(0, ...perEap.map((e) => e.weightsApplied)),
      placementVersionsApplied: Math.max(0, ...perEap.map((e) => e.placementsApplied)),
      orchestratorRestarts,
      childExits,
      learning,
      learner: learnerStats,
      ...(act === 'sample' ? { cmmacAct: 'sample' as const } : {}),
      tls: a.tls,
      evalPolicy: predicted.policy,
      orchestration: a.orchestration === 'gpg' && gpgLine ? gpgLine : a.orchestration,
      evalSlotS: predicted.slotS,
      evalThroughputRate: predicted.rate,
      vsEval: predicted.rate > 0 ? throughputRate / predicted.rate : 0,
      evalGlobalViewThroughputRate: predictedGlobalView.rate,
      // where live and predicted differ (issue 13): the share of decisions sent to the cloud, and of requests dropped / refused
      cloudShare: decisions > 0 ? +(perEap.reduce((s, e) => s + e.decidedToCloud, 0) / decisions).toFixed(4) : 0,
      evalCloudShare: predicted.cloudShare,
      refusedShare: total.sent > 0 ? +(total.refused / total.sent).toFixed(4) : 0,
      evalDroppedShare: predicted.droppedShare,
      perTarget: liveTally ? compareTallies(liveTally, predicted.perTarget, predicted.perTarget.sent.length - 1) : null,
      placementVsPredicted: comparePlacements(storedPlacements(dbFile), predicted.placements),
      vsEvalGlobalView: predictedGlobalView.rate > 0 ? throughputRate / predictedGlobalView.rate : 0,
      loadAverage1m: +os.loadavg()[0].toFixed(2),
      cpus: os.cpus().length,
      refusedReasons: reasons,
      safeLearningEvents: safeEvents,
      canaryBaselineS: a.canary && !heuristic ? a.canaryBaseline : null,
      canaryWindows: a.canary && !heuristic ? a.canaryWindows : null,
      nodeExclusions: exclusions,
      nodeExclusionsByRule: byRule,
      learnedDetector: learned,
      faults:
        faultPlan.length > 0
          ? {
              planned: faultPlan,
              deviceFilters: a.deviceFilters,
              refusedByFailedNodes: losses?.refused ?? -1,
              lostOnFailedNodes: losses?.lostOnFailure ?? -1,
              exclusions,
            }
          : null,
      meanLatencyMs: answered > 0 ? latencies.reduce((s, x) => s + x, 0) / latencies.length : 0,
      p99LatencyMs: latencies.length > 0 ? latencies[Math.min(latencies.length - 1, Math.floor(0.99 * latencies.length))] : 0,
      perEap,
      keptStore: null,
    };
    return summary;
  } finally {
    // interrupted: onSignal prints the partial summary, stops the processes, removes the folder and exits 130
    if (interrupted) await halted();
    finishing = true;
    stopping = true;
    try {
      await Promise.all(children.map((c) => c.stop()));
    } finally {
      keepStore();
      if (summary) summary.keptStore = keptStore;
      removeDir();
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    }
  }
}

type TargetCounts = Record<(typeof TALLY_KEYS)[number], number>;

/** Live and predicted counts side by side, one row per target (`node <n>`, then `cloud`). */
export function compareTallies(
  live: TargetTally,
  predicted: TargetTally,
  numNodes: number,
): { target: string; live: TargetCounts; predicted: TargetCounts }[] {
  const row = (t: TargetTally, i: number) => Object.fromEntries(TALLY_KEYS.map((k) => [k, t[k]?.[i] ?? 0])) as TargetCounts;
  return predicted.sent.map((_, i) => ({ target: i < numNodes ? `node ${i}` : 'cloud', live: row(live, i), predicted: row(predicted, i) }));
}

/** How far ahead of its load generator's start `kais up` announces it (the prediction file's startMs). */
const START_LEAD_MS = 2000;

/** The orchestrator's GPG (greedy, one decision per frame) of --gpg, for the prediction (tfjs loads only here). */
function gpgPolicy(
  file: string,
  scenario: Scenario,
  source = '--gpg',
): import('../shared/policy').OrchestrationPolicy & { dispose: () => void; summary: string; lightActor: string | null } {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { loadGpgOrchestration } = require('../critic/gpg/load') as typeof import('../critic/gpg/load');
  return loadGpgOrchestration(file, scenario, source);
}

/**
 * Whether a GPG model file loads for this scenario (the shipped one may not fit a scenario file named
 * like a built-in): what it runs (gpgSummary), or null.
 */
function gpgFits(file: string, scenario: Scenario): string | null {
  try {
    const p = gpgPolicy(file, scenario);
    p.dispose();
    return p.summary;
  } catch {
    return null;
  }
}

/**
 * The simulator's throughput rate for the run's requests (what `kais eval` reports for them): the
 * agents' policy (a `--policy` heuristic, one instance per eAP with the agents' seeds; for cmmac
 * the argmax actor of `checkpoint`, or lec, the agents' fallback, without one) with the run's
 * orchestration, EDF queues as the agents use, enough frames to finish every request.
 */
export function predictRate(
  base: Scenario,
  requests: Request[],
  a: Pick<UpArgs, 'seed' | 'orchestration' | 'gpg'> & { guard?: boolean } & Partial<OptionsOf<typeof GUARD_SPEC>>,
  policy: LivePolicyName,
  checkpoint: string | undefined,
  view: 'global' | 'agent' = 'agent',
): {
  policy: string;
  rate: number;
  slotS: number;
  cloudShare: number;
  droppedShare: number;
  perTarget: TargetTally;
  /** Scenario seconds per frame, and each frame's arrivals and in-time completions (for the dashboard). */
  frameS: number;
  arrivedPerFrame: number[];
  completedInTimePerFrame: number[];
  /** The placement the simulator held at each orchestration step k = 0, 1, ... (k = 0: the start), d[w][n] row-major as PlacementBody. */
  placements: Int32Array[];
} {
  /* eslint-disable @typescript-eslint/no-require-imports */
  const { runEpisode } = require('../training/jobs/rollout') as typeof import('../training/jobs/rollout');
  const { makeDispatch, makeOrchestration } = require('../training/baselines/registry') as typeof import('../training/baselines/registry');
  const ck = require('../training/jobs/checkpoint') as typeof import('../training/jobs/checkpoint');
  /* eslint-enable @typescript-eslint/no-require-imports */
  // the simulator dispatches on arrival, as the agents do (edge-cloud-v2): the scenario's own slot
  const scenario = base;
  const learned = checkpoint
    ? isActorFile(checkpoint)
      ? ck.loadActorFile(checkpoint, base) // acting as the model says (its act), as the agents do
      : ck.loadCmmacFromDb(checkpoint, base) // the best checkpoint: what the orchestrator publishes
    : null;
  const orchestration = a.orchestration === 'gpg' ? gpgPolicy(a.gpg!, scenario) : makeOrchestration(a.orchestration, scenario);
  // the actor switch: the GPG model's light actor beside the main one, as the orchestrator publishes it to the agents
  const lightActor = (orchestration as { lightActor?: string | null }).lightActor ?? null;
  if (learned && lightActor !== null) {
    // read as kais eval reads it (training/jobs/eval.ts makeCmmac): a .bin with its .json, or a kais train database
    try {
      learned.setLightFrom(ck.loadCmmacCheckpoint(lightActor, base));
    } catch (e) {
      throw new UsageError(`the GPG model's light actor ${lightActor}: ${(e as Error).message}`);
    }
  }
  const dispatch = isDispatchHeuristic(policy)
    ? new PerEapDispatch(() => makeHeuristicDispatch(policy, scenario)) // reset(seed) seeds each eAP's instance as the agent seeds its own
    : learned
      ? a.guard
        ? guardedDispatch(learned, scenario, guardFromFlags(a)) // the agents' --guard: the same rule and flags, one state per eAP
        : learned
      : makeDispatch('lec', scenario);
  const frameS = scenario.slotS * scenario.slotsPerFrame;
  const lastS = requests.length > 0 ? requests[requests.length - 1].deadlineS : 0;
  let arrivedPerFrame: number[] = [];
  let completedInTimePerFrame: number[] = [];
  const placements: Int32Array[] = [];
  const res = runEpisode({
    scenario,
    requests,
    frames: Math.max(1, Math.ceil((lastS + 1) / frameS)),
    seed: a.seed,
    dispatch,
    orchestration: recordingPlacements(orchestration, placements),
    nodeDequeue: 'edf',
    view,
    tally: true,
    onFrames: (frames) => {
      arrivedPerFrame = frames.map((f) => f.arrived);
      completedInTimePerFrame = frames.map((f) => f.completedInTime);
    },
  });
  const name = isDispatchHeuristic(policy) ? policy : checkpoint ? (a.guard ? 'cmmac+guard' : 'cmmac') : 'lec';
  return {
    policy: `${name}/${a.orchestration}`,
    rate: res.throughputRate,
    slotS: scenario.slotS,
    cloudShare: res.cloudShare,
    droppedShare: res.droppedShare,
    perTarget: res.perTarget!,
    frameS,
    arrivedPerFrame,
    completedInTimePerFrame,
    placements,
  };
}

/**
 * The policy unchanged, recording the placement it decides on at each step into `out`: the one
 * the previous step left (out[0] the start), as the live loop's placement of frame k is the one
 * its k-th step left (orchestrator/placement-loop.ts).
 */
export function recordingPlacements(inner: OrchestrationPolicy, out: Int32Array[]): OrchestrationPolicy {
  return {
    name: inner.name,
    periodS: inner.periodS,
    reset: inner.reset ? (seed, view) => inner.reset!(seed, view) : undefined,
    decide(view) {
      out.push(Int32Array.from(placementOf(view).flat()));
      return inner.decide(view);
    },
    actorFor: inner.actorFor ? () => inner.actorFor!() : undefined,
  };
}

/**
 * Frame by frame, how far the live orchestrator's placement was from the one the simulator held at
 * the same step: the replicas (summed over services and nodes) by which they differ. Frames present
 * in both (the live run's last placement of each frame, a restart included); [] when either has none.
 */
export function comparePlacements(
  live: readonly { frame: number; replicas: Int32Array }[],
  predicted: readonly Int32Array[],
): { frame: number; replicasDiffering: number }[] {
  const byFrame = new Map<number, Int32Array>();
  for (const p of live) byFrame.set(p.frame, p.replicas); // oldest first: a later version of a frame wins
  const out: { frame: number; replicasDiffering: number }[] = [];
  for (const [frame, d] of [...byFrame].sort((x, y) => x[0] - y[0])) {
    const q = predicted[frame];
    if (!q || q.length !== d.length) continue;
    let diff = 0;
    for (let i = 0; i < d.length; i++) diff += Math.abs(d[i] - q[i]);
    out.push({ frame, replicasDiffering: diff });
  }
  return out;
}

/** The placements the orchestrator stored (its SQLite file, read-only), oldest first; [] when it cannot be read. */
/** The orchestrator's store at `dbFile` copied to the new file `to` (Store.copyTo). */
function copyStore(dbFile: string, to: string): void {
  const store = Store.open(dbFile, { readonly: true, log: () => undefined });
  try {
    store.copyTo(to);
  } finally {
    store.close();
  }
}

function storedPlacements(dbFile: string): { frame: number; replicas: Int32Array }[] {
  try {
    const store = Store.open(dbFile, { readonly: true });
    try {
      return store.placements();
    } finally {
      store.close();
    }
  } catch {
    return [];
  }
}

/**
 * What a run interrupted by Ctrl-C (or SIGTERM) had done: the counts so far (`open`: sent, no answer
 * yet; they count in `sent`, as unanswered would), the throughput rate so far (in time / sent, as
 * the summary's) and the prediction for the whole run, for scale.
 */
export interface PartialSummary {
  interrupted: true;
  elapsedS: number;
  durationS: number;
  scenario: string;
  workload: string;
  speed: number;
  policy: string;
  sent: number;
  completedInTime: number;
  late: number;
  refused: number;
  unanswered: number;
  open: number;
  throughputRate: number;
  /** null: interrupted before the prediction was made. */
  evalPolicy: string | null;
  evalThroughputRate: number | null;
  /** Present (true) when interrupted before the load generator started (during the prediction or the processes' start). */
  beforeLoad?: true;
  /** Children that exited on their own before the interruption (UpSummary.childExits). */
  childExits?: ChildExit[];
  /** Present when the orchestrator was restarted before the interruption (UpSummary.orchestratorRestarts). */
  orchestratorRestarts?: number;
}

/** A child process (`node`, `orchestrator`, `agent <b>`) that exited during the run, not stopped by `kais up`. */
export interface ChildExit {
  name: string;
  pid: number;
  code: number | null;
  signal: string | null;
  /** Seconds since `kais up` started. */
  atS: number;
  /** Its last stderr line, as text ('' if none). */
  lastLine: string;
}

/** The partial summary's text (null: interrupted before the load generator started). */
export function formatPartial(p: PartialSummary | null, durationS: number): string {
  if (p === null) return `kais up: interrupted before any request was sent (of ${durationS} s planned)`;
  const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
  const after = [
    ...(p.childExits ?? []).map((e) => `  ${e.name} exited (${e.signal ?? e.code}) after ${e.atS} s${e.lastLine ? `: ${e.lastLine}` : ''}`),
    ...(p.orchestratorRestarts ? [`  orchestrator restarts ${p.orchestratorRestarts}`] : []),
  ];
  // stopped before the load started: what was known then (the prediction, children that exited), as --json has it
  if (p.beforeLoad)
    return [
      `kais up: interrupted before any request was sent (of ${durationS} s planned)${p.evalPolicy !== null && p.evalThroughputRate !== null ? `; kais eval predicts ${p.evalPolicy} ${pct(p.evalThroughputRate)} for the whole run` : ''}`,
      ...after,
    ].join('\n');
  return [
    `kais up: interrupted after ${p.elapsedS} s of ${p.durationS} s (${p.scenario}, ${p.workload}, speed ${p.speed}, policy ${p.policy})`,
    `sent ${p.sent}: in time ${p.completedInTime}, late ${p.late}, refused ${p.refused}, unanswered ${p.unanswered}, still open ${p.open}; throughput rate so far ${pct(p.throughputRate)}${p.evalPolicy !== null && p.evalThroughputRate !== null ? ` (kais eval predicts ${p.evalPolicy} ${pct(p.evalThroughputRate)} for the whole run)` : ''}`,
    ...after,
  ].join('\n');
}

/** At most one line on why live / predicted is low: a dead process, a starved CPU, or a run's noise just below the band. */
function lowRateNote(s: UpSummary): string[] {
  // a process that died explains a low rate better than the CPU: said instead (its exit is listed below)
  if (s.vsEval < 0.9 && s.childExits.length > 0)
    return [`note: ${s.childExits.map((e) => e.name).join(', ')} exited during the run (below): the prediction has no such failure`];
  if (s.vsEval < 0.9 && s.loadAverage1m > s.cpus)
    return [
      `note: load average ${s.loadAverage1m} on ${s.cpus} CPUs: the processes competed for CPU, so requests went late that the simulator serves in time`,
    ];
  // just below the band: at full speed on a small machine one run's noise is about the band's width
  // (docs/gpg.md, "The light gate shipped": the same requests on a static placement gave 0.965 and 0.991 on 2 CPUs)
  if (s.vsEval >= 0.9 && s.vsEval < 0.97 && s.speed > 0.5 && s.cpus <= 4)
    return [
      `note: live / predicted below 0.97 at speed ${s.speed} on ${s.cpus} CPUs, where one run varies by a few percent (the agents, the orchestrator and the emulated cluster share them at the load's peaks); --speed 0.5 --duration ${Math.round((s.durationS * s.speed) / 0.5)} runs the same scenario time with half the CPU a second`,
    ];
  return [];
}

/**
 * A line when the fault drill's version (--inject) had no verdict by the end of the run: the drill
 * came at a third of it, and a canary takes up to settleS + maxWindows x windowS after it, plus
 * settleS + baselineS under the actor switch when it came in a light frame (canaryLongestS).
 */
function drillNote(s: UpSummary): string[] {
  const ev = s.safeLearningEvents;
  const inject = ev.find((e) => e.kind === 'inject' && /as weights v\d+/.test(e.message));
  const m = inject ? /as weights v(\d+)/.exec(inject.message) : null;
  if (!inject || !m) {
    // under the gate the drill waits for live arrivals; none come while the light actor dispatches every window
    const waited = ev.some((e) => e.kind === 'inject' && /drill waits for the gate's live arrivals/.test(e.message));
    return waited
      ? [
          "note: the drill waited for the gate's live arrivals to the end of the run (the agents explore nothing while the light actor dispatches, as in nearly every window at load 1): --load 1.5 gives the gate arrivals",
        ]
      : [];
  }
  const v = `weights v${m[1]} `;
  const after = ev.filter((e) => e.tsMs >= inject.tsMs);
  const final = after.some((e) => /^(gate-reject|canary-promote|canary-rollback|canary-skip)$/.test(e.kind) && e.message.includes(v));
  const toCanary = after.some(
    (e) => (e.kind === 'canary-start' && e.message.includes(v)) || (e.kind === 'canary-baseline' && e.message.startsWith('injected')),
  );
  const passedGate = after.some((e) => e.kind === 'gate-pass' && e.message.startsWith(v));
  if (final || (passedGate && !toCanary)) return [];
  // the run's canary (its baseline and windows may be --canary-baseline's and --canary-windows'; a summary without them: the default's)
  const c: CanaryConfig = {
    ...DEFAULT_CANARY,
    baselineS: s.canaryBaselineS ?? DEFAULT_CANARY.baselineS,
    maxWindows: s.canaryWindows ?? DEFAULT_CANARY.maxWindows,
  };
  return [
    `note: the drill's ${v.trim()} had no verdict when the run ended (it came at ${Math.round(s.durationS / 3)} s; a canary takes up to ${canaryLongestS(c, false)} s after it, ${canaryLongestS(c, true)} s when it waits for a baseline under the main actor): --duration ${Math.max(drillRunS(c), Math.ceil(s.durationS * 1.5))} leaves it time`,
  ];
}

/** The summary's words for online learning: what the learner did, and why nothing when it did nothing. */
function learningText(s: UpSummary): string {
  const l = s.learner;
  if (!l) return 'learning online';
  if (l.transitionsRead === 0) {
    const light = s.perEap.reduce((n, e) => n + e.decisionsLight, 0);
    const all = s.perEap.reduce((n, e) => n + e.decisionsLearned, 0);
    return `learning online, but no explored decision reached the learner${light > 0 ? `: the agents explore only where the main actor decides, and the light actor decided ${light === all ? 'every decision' : `${light} of ${all} decisions`}` : ''}`;
  }
  return `learning online: ${l.transitionsRead} explored decisions, ${l.updates} update${l.updates === 1 ? '' : 's'}, ${l.published} version${l.published === 1 ? '' : 's'} published`;
}

export function formatSummary(s: UpSummary): string {
  const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
  const lines = [
    `kais up: ${s.scenario}, ${s.workload}, ${s.durationS} s at speed ${s.speed}, policy ${s.policy}`,
    `sent ${s.sent}: in time ${s.completedInTime}, late ${s.late}, refused ${s.refused}, unanswered ${s.unanswered}; throughput rate ${pct(s.throughputRate)}`,
    `kais eval predicts ${s.evalPolicy} ${pct(s.evalThroughputRate)} for the same requests: live / predicted = ${s.vsEval.toFixed(3)}${s.learning ? ` (${learningText(s)})` : ''}; with --view global ${pct(s.evalGlobalViewThroughputRate)}: live / predicted = ${s.vsEvalGlobalView.toFixed(3)}`,
    `  to the cloud: live ${pct(s.cloudShare)} of decisions, predicted ${pct(s.evalCloudShare)}; refused live ${pct(s.refusedShare)}, dropped predicted ${pct(s.evalDroppedShare)}`,
    ...(s.perTarget
      ? [
          `  per target, live / predicted: ${s.perTarget
            .map(
              (r) =>
                `${r.target} sent ${r.live.sent}/${r.predicted.sent} refused ${r.live.refused}/${r.predicted.refused} expired ${r.live.expired}/${r.predicted.expired} completed ${r.live.completed}/${r.predicted.completed}${r.live.lost + r.predicted.lost > 0 ? ` lost ${r.live.lost}/${r.predicted.lost}` : ''}`,
            )
            .join('; ')}`,
        ]
      : []),
    ...(s.placementVsPredicted.length > 0
      ? [
          `  placement, replicas differing from the predicted one at each step: ${s.placementVsPredicted.map((p) => p.replicasDiffering).join(' ')}`,
        ]
      : []),
    ...lowRateNote(s),
    ...drillNote(s),
    `latency mean ${s.meanLatencyMs.toFixed(0)} ms, p99 ${s.p99LatencyMs.toFixed(0)} ms; weight versions applied ${s.weightVersionsApplied}, placement versions applied ${s.placementVersionsApplied}, orchestrator restarts ${s.orchestratorRestarts}`,
    ...s.perEap.map((e) =>
      s.policy === 'cmmac'
        ? `  eAP ${e.eap}: sent ${e.sent}, rate ${pct(e.throughputRate)}, policy decisions cmmac ${e.decisionsLearned}${e.decisionsLight > 0 ? ` (light actor ${e.decisionsLight})` : ''} / fallback ${e.decisionsFallback}`
        : `  eAP ${e.eap}: sent ${e.sent}, rate ${pct(e.throughputRate)}, ${e.policy ?? '?'} decisions ${e.decisionsFallback}`,
    ),
  ];
  if (s.childExits.length > 0)
    lines.push(
      'exited during the run:',
      ...s.childExits.map(
        (e) => `  ${e.name} (pid ${e.pid}) after ${e.atS} s: ${e.signal ?? e.code}${e.lastLine ? `: ${e.lastLine}` : ''}`,
      ),
    );
  if (s.safeLearningEvents.length > 0)
    lines.push(
      'safe-learning events:',
      ...s.safeLearningEvents.map((e) => `  ${e.kind}${e.eap !== null ? ` eAP ${e.eap}` : ''}: ${e.message}`),
    );
  if (Object.keys(s.refusedReasons).length > 0)
    lines.push(
      `refused: ${Object.entries(s.refusedReasons)
        .map(([k, v]) => `${k} x${v}`)
        .join(', ')}`,
    );
  return lines.join('\n');
}

/** Whether the actor shipped for the scenario's name was trained on this very scenario (its .json's fingerprint). */
function shippedActorFits(file: string, scenario: Scenario): boolean {
  try {
    const meta = JSON.parse(fs.readFileSync(`${file}.json`, 'utf8')) as { scenarioFingerprint?: unknown };
    return meta.scenarioFingerprint === scenarioFingerprint(scenario);
  } catch {
    return false;
  }
}

/** The parts of a run that exited on their own and were not brought back: every such agent or node, and the orchestrator when it exited more often than it was restarted. */
export function lostParts(s: Pick<UpSummary, 'childExits' | 'orchestratorRestarts'>): string[] {
  const orchestratorExits = s.childExits.filter((e) => e.name === 'orchestrator').length;
  const lost = [...new Set(s.childExits.filter((e) => e.name !== 'orchestrator').map((e) => e.name))];
  return orchestratorExits > s.orchestratorRestarts ? ['orchestrator', ...lost] : lost;
}

export const upCommand: CommandModule<object, object> = {
  command: 'up',
  describe: 'orchestrator, one agent per eAP, an emulated cluster and a replayed workload on this machine',
  builder: (y: Argv<object>) => yargsOptions(y.example('$0 up --duration 10', 'the whole system for 10 s, then a summary'), UP_SPEC),
  handler: namingFlags(UP_SPEC, async (argv) => {
    const a = resolveOptions(UP_SPEC, argv);
    const s = await runUp(a, (line) => process.stderr.write(`kais up: ${line}\n`));
    if (a.json) process.stdout.write(`${JSON.stringify(s)}\n`);
    else process.stdout.write(`${formatSummary(s)}\n`);
    // the store asked for and not written (the line before the summary said why): the run is not what was asked
    if (a.keepStore && s.keptStore === null) process.exit(1);
    // a script sees from the exit code alone that part of the run was lost (it used to be 0)
    const lost = lostParts(s);
    if (lost.length > 0) {
      process.stderr.write(`kais up: ${lost.join(', ')} exited during the run and did not come back (childExits): exit 3\n`);
      process.exit(3);
    }
    process.exit(0);
  }),
};
