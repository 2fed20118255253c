/**
 * Per request: eAP queue (dequeue strategy) -> context filter -> policy -> proxy -> answer. It
 * never waits on the orchestrator: with `policy` `cmmac` (the default) the policy is the learned
 * actor once weights arrived (from a `weights` frame or the disk cache), the `lec` fallback
 * before; with a heuristic of the simulator (`jsq`, `p2c`, ..., shared/dispatch/) that heuristic,
 * always (actor weights are ignored).
 *
 * Flow of one request: `submit` puts it in the eAP queue (ordered by the dequeue strategy:
 * `edf` earliest deadline first, or `fifo`); the pump takes requests while fewer than
 * `maxInFlight` are outstanding; a request whose deadline passed while queued is answered 504
 * `expired` without being sent. A dispatched one waits the emulated eAP -> target transfer time,
 * goes to the target over HTTP (with the time left to start it: the target drops it unserved, 504,
 * once the result could no longer come back in time), and waits the return time. A 503 from an
 * edge node (full) or an unreachable node is retried once on the cloud while the deadline is not
 * past. Every request gets exactly one answer: served (200), refused (503, with the target's
 * reason), expired (504), or timed out (504).
 *
 * Deadlines are enforced by timers, not by slots freeing up: a queued request is answered 504
 * `expired in the eAP queue` at its deadline, and one in flight 504 `no answer by the deadline`
 * at its deadline + `lateAnswerMs` (its work goes on and is counted, the device has its answer).
 * Admission keeps long requests from starving short ones: a service holds at most
 * `maxInFlightPerService` of the `maxInFlight` slots, requests with a deadline over
 * `longDeadlineMs` at most `maxInFlightLong`, and the queue holds at most `maxQueued` requests,
 * `maxQueuedPerService` of one service and `maxQueuedLong` long ones; a request beyond those is
 * answered 503 `admission: ...` at once. The pump skips a queued request whose service or class
 * is at its limit and takes the next one. Memory is bounded by these limits.
 *
 * A decision kept as experience (`experience`: by default the actor's drawn decisions, the ones
 * the online learner uses) becomes a `Transition` (reward 1 if the device got its answer in time,
 * else 0) in a bounded experience buffer; every decision counts toward the per-target telemetry
 * of the interval.
 */
import type { Request } from '../shared/domain';
import type { DispatchItem, DispatchPolicy } from '../shared/policy';
import { Rng } from '../shared/rng';
import type { Scenario } from '../shared/scenario';
import type { NodeSample, Transition, WeightsBody } from '../shared/protocol/envelope';
import { buildMask } from './filters/context-filter';
import { ObservationBuilder } from './observation';
import { actorFit } from '../shared/nets/actor-fit';
import { targetBlockOf } from '../shared/spaces';
import { isDispatchHeuristic, LecDispatch, LIVE_POLICIES, makeHeuristicDispatch, type LivePolicyName } from '../shared/dispatch';
import { noTargetMeetsDeadline, RegimeGuard, type GuardSwitch, type RegimeGuardOptions } from '../shared/dispatch/guard';
import type { LocalClusterView } from './local-view';
import { Proxy, type ProxyOutcome } from './proxy';

/**
 * Requests in flight at once, and waiting in the eAP queue. In flight, one service holds at most a
 * quarter of the slots (256) and long requests an eighth (128). Sized so that the limits bind in a
 * flood, not at the scenarios' own loads: on `kais` at its default load an agent has up to ~360
 * requests in flight and ~150 of one service (`kais up`, 60 s; 1.5x: ~410 and ~140). At 256 /
 * 64, the defaults until 2026-12-05, the agent held requests in its queue at every burst (p99 wait
 * 0.2-0.9 s, up to 2.7 s at 1.5x), which the simulator, dispatching every request on arrival, does
 * not do (docs/runtime.md, "Admission").
 */
const DEFAULT_MAX_IN_FLIGHT = 1024;
const DEFAULT_MAX_QUEUED = 1024;

export type DequeueRule = 'edf' | 'fifo';

export const EXPERIENCE_MODES = ['explored', 'all', 'none'] as const;
export type ExperienceMode = (typeof EXPERIENCE_MODES)[number];

export interface Targets {
  /** Base URL of each edge node, index = node id (0..numNodes-1). */
  nodes: string[];
  cloud: string;
}

/** What the device sends to the ingress. */
export interface IngressRequest {
  service: number;
  /** Relative deadline from arrival at the eAP, real milliseconds. */
  deadlineMs: number;
  payloadBytes: number;
  /** Emulation hint: CPU work (scenario core-seconds); the target uses its nominal work without it. */
  workCoreS?: number;
}

export interface DispatchResult {
  status: 200 | 503 | 504;
  /** Target index that served or refused (numNodes = cloud), -1 if never sent. */
  target: number;
  /** End to end at the eAP: ingress to answer, real ms. */
  latencyMs: number;
  reason?: string;
  procMs?: number;
}

export interface DispatcherOptions {
  scenario: Scenario;
  view: LocalClusterView;
  targets: Targets;
  /** @defaultValue DEFAULT_MAX_IN_FLIGHT (1024) */
  maxInFlight?: number;
  /** Slots one service may hold. @defaultValue max(8, maxInFlight / 4) */
  maxInFlightPerService?: number;
  /** A request whose deadline is over this is "long", ms. @defaultValue 30000 */
  longDeadlineMs?: number;
  /** Slots long requests may hold together. @defaultValue max(4, maxInFlight / 8) */
  maxInFlightLong?: number;
  /** Requests waiting in the eAP queue. @defaultValue DEFAULT_MAX_QUEUED (1024) */
  maxQueued?: number;
  /** Of them, of one service. @defaultValue maxQueued / 4 */
  maxQueuedPerService?: number;
  /** Of them, long ones. @defaultValue maxQueued / 8 */
  maxQueuedLong?: number;
  /**
   * An in-flight request without an answer this long after its deadline is answered 504, ms. 50
   * leaves 50 ms for timer and event-loop slack inside the "deadline + 100 ms" promise.
   * @defaultValue 50
   */
  lateAnswerMs?: number;
  /** @defaultValue 'edf' */
  dequeue?: DequeueRule;
  /**
   * `cmmac`: the learned actor once weights are held, `lec` before. A heuristic name
   * (shared/dispatch DISPATCH_HEURISTICS): that heuristic for every decision, as the simulator
   * runs it; actor weights are ignored. @defaultValue 'cmmac'
   */
  policy?: LivePolicyName;
  /**
   * Seed of the heuristic's reset(seed, view) (random, p2c and prob draw from it), called before
   * the first decision; `kais agent` derives it per eAP (shared/dispatch agentPolicySeed). @defaultValue 0
   */
  policySeed?: number;
  /** Actor head for weights whose frame does not say (orchestrators before the `head` field). @defaultValue 'softplus1' (kais train's) */
  actorHead?: 'relu1' | 'softplus1';
  /**
   * Share of the actor's decisions drawn from its policy (exploration); the others take the most
   * likely target. 0: argmax only (production without learning). An online-learning orchestrator
   * learns only from the drawn ones (their recorded probability is the one they were taken with;
   * an argmax decision records probability 1). Measured live on kais (docs/runtime.md): drawing
   * every decision costs ~6 points of throughput rate, so a learning run explores a share.
   * @defaultValue 0
   */
  explore?: number;
  /** Seed of the exploration coin and the sampling stream. @defaultValue 0 */
  actSeed?: number;
  /** Transitions kept for the next experience frame; older ones are dropped. @defaultValue 4096 */
  experienceCapacity?: number;
  /**
   * Which decisions become experience (an observation costs ~2.4 KB per decision on `kais`):
   * `explored` the actor's drawn decisions, the only ones the online learner learns from (its
   * update is on-policy and skips argmax and fallback decisions; with a heuristic `policy` there
   * are none); `all` every decision (a data set for offline use; fallback and heuristic decisions
   * carry weightVersion null and logProb 0, and the learner skips them); `none`. Measured:
   * recording every decision cost ~0.1 ms of the agent's 0.6-0.7 ms CPU per request at 1000 req/s
   * (docs/runtime.md). @defaultValue 'explored'
   */
  experience?: ExperienceMode;
  /**
   * The regime guard (shared/dispatch/guard.ts) over the learned actor: while this eAP's late
   * share says overload, its fallback heuristic decides instead of the actor. null: no guard.
   * Ignored with a heuristic `policy`. @defaultValue null
   */
  guard?: RegimeGuardOptions | null;
}

/** One decision: the target, the mask it was chosen from, and what experience needs. */
export interface Decision {
  target: number;
  mask: Uint8Array;
  obs: Float32Array | null;
  logProb: number;
  version: number | null;
  /** With a version: how many weights the dispatcher had applied when it decided (Dispatcher.retireExperience). */
  gen?: number;
  /** The version's light actor decided (the actor switch), not its main one. */
  light?: boolean;
}

interface Pending {
  req: Request;
  workCoreS: number | null;
  deadlineMs: number;
  t0: number;
  resolve: (r: DispatchResult) => void;
  /** Deadline over longDeadlineMs. */
  long: boolean;
  /** The deadline timer (queued) or the late-answer timer (in flight). */
  timer: NodeJS.Timeout | null;
  answered: boolean;
}

export interface DispatchCounters {
  received: number;
  inTime: number;
  late: number;
  refused: number;
  expired: number;
  timedOut: number;
  retriedOnCloud: number;
  /** Refused 503 at the door: queue, service or long-request limits (see the file comment). */
  admissionRefused: number;
  /** In flight and answered 504 by the late-answer timer (counted in timedOut too). */
  answeredAtDeadline: number;
  /** Decisions that chose the cloud (first choice, before any retry): with decisionsLearned + decisionsFallback, the cloud share the simulator reports. */
  decidedToCloud: number;
  /** Decisions of the learned actor. */
  decisionsLearned: number;
  /** Of decisionsLearned, those drawn from the policy (`explore`; all of them at explore 1, a model whose act is sample) rather than its argmax. */
  decisionsDrawn: number;
  /** Of decisionsLearned, those of the light actor (the actor switch: frames whose placement names it). */
  decisionsLight: number;
  /** Decisions of the heuristic: cmmac's lec fallback (no weights yet), or the `policy` heuristic. */
  decisionsFallback: number;
  /** Decisions the regime guard's fallback took while the actor held weights (counted in decisionsFallback too). */
  decisionsGuarded: number;
  /** Switches of the regime guard, to its fallback and back. */
  guardSwitches: number;
  experienceDropped: number;
  /** Transitions not kept because their weights belong to an orchestrator store that is gone (retireExperience). */
  experienceRetired: number;
}

interface TargetInterval {
  requests: number;
  succeeded: number;
  inDeadline: number;
  latencyMsSum: number;
  bytes: number;
}

export class Dispatcher {
  readonly counters: DispatchCounters = {
    received: 0,
    inTime: 0,
    late: 0,
    refused: 0,
    expired: 0,
    timedOut: 0,
    retriedOnCloud: 0,
    admissionRefused: 0,
    answeredAtDeadline: 0,
    decidedToCloud: 0,
    decisionsLearned: 0,
    decisionsDrawn: 0,
    decisionsLight: 0,
    decisionsFallback: 0,
    decisionsGuarded: 0,
    guardSwitches: 0,
    experienceDropped: 0,
    experienceRetired: 0,
  };
  /** Told every switch of the regime guard (the runtime logs it and reports it to the orchestrator). */
  onGuardSwitch: ((s: GuardSwitch) => void) | null = null;
  private readonly guard: RegimeGuard | null;
  /** The guard's heuristics by level: [1] the middle one (guard.mid), [2] the top one, [3] the spreading share's (guard.spread); each reset before its first decision. */
  private readonly guardPolicies: (DispatchPolicy | null)[] = [null, null, null, null];
  private readonly guardReset = [false, false, false, false];
  /** With guard.spread: the draws of its spreading share. */
  private readonly guardCoin: Rng | null;
  /** Told each answer's latency (real ms): the /metrics histogram (agent/metrics.ts) keeps the buckets. */
  onAnswer: ((latencyMs: number) => void) | null = null;
  /** Told how long each request waited in the eAP queue before it was dispatched (real ms). */
  onDispatch: ((queueWaitMs: number) => void) | null = null;
  private readonly view: LocalClusterView;
  private readonly scenario: Scenario;
  private readonly targets: Targets;
  private readonly maxInFlight: number;
  private readonly limits: {
    perService: number;
    longMs: number;
    long: number;
    queued: number;
    queuedPerService: number;
    queuedLong: number;
    lateMs: number;
  };
  /** In flight / queued per service, and long ones (for admission). */
  private readonly inFlightBySvc: number[];
  private readonly queuedBySvc: number[];
  private inFlightLong = 0;
  private queuedLong = 0;
  private readonly dequeue: DequeueRule;
  private readonly queue: Pending[] = [];
  /** Requests sent to a target and not yet back (answerAll reaches them). */
  private readonly sending = new Set<Pending>();
  private readonly proxy: Proxy;
  /** The rule without the actor: the heuristic of `policy`, or lec (cmmac's fallback). */
  private readonly fallback: DispatchPolicy;
  /** Whether `fallback` is the `policy` heuristic (then it always decides and weights are ignored). */
  private readonly heuristicOnly: boolean;
  private readonly policySeed: number;
  private fallbackReset = false;
  private readonly observations: ObservationBuilder;
  private readonly actorHead: 'relu1' | 'softplus1';
  /** Share of decisions drawn from the policy (the agent sets it from the orchestrator's welcome when --explore is not given). */
  get explore(): number {
    return this._explore;
  }
  set explore(x: number) {
    if (!(x >= 0 && x <= 1)) throw new TypeError(`Dispatcher: explore must be in [0, 1], got ${x}`);
    this._explore = x;
  }
  private _explore = 0;
  private readonly actSeed: number;
  private readonly coin: Rng;
  private readonly experienceCapacity: number;
  private readonly experienceMode: ExperienceMode;
  private learned:
    | (DispatchPolicy & {
        version: number;
        head: 'relu1' | 'softplus1';
        mode: 'argmax' | 'sample';
        recorder: unknown;
        hasLight: boolean;
        setWeights(v: number, a: readonly Float32Array[]): void;
      })
    | null = null;
  private lastLogProb = 0;
  private lastObs: Float32Array | null = null;
  /** Whether the light actor made the last learned decision. */
  private lastLight = false;
  /** Whether the decision being made is kept as experience (set per decision by `decide`). */
  private recordThis = false;
  private inFlight = 0;
  private nextId = 0;
  private experience: Transition[] = [];
  /** Weights applied so far; a learned decision carries the count it was made under. */
  private weightsGen = 0;
  /** Learned decisions made under fewer applied weights than this are not kept as experience. */
  private minGen = 0;
  private interval = new Map<number, TargetInterval>();
  private health = new Map<number, { served: number; failed: number }>();
  private idleWaiters: (() => void)[] = [];

  constructor(o: DispatcherOptions) {
    this.view = o.view;
    this.scenario = o.scenario;
    this.targets = o.targets;
    if (o.targets.nodes.length !== o.view.numNodes) {
      throw new TypeError(`Dispatcher: targets.nodes has ${o.targets.nodes.length} URLs, the scenario has ${o.view.numNodes} nodes`);
    }
    const policy = o.policy ?? 'cmmac';
    if (!(LIVE_POLICIES as readonly string[]).includes(policy))
      throw new TypeError(`Dispatcher: policy must be one of ${LIVE_POLICIES.join(', ')}, got ${policy}`);
    this.heuristicOnly = isDispatchHeuristic(policy);
    this.fallback = isDispatchHeuristic(policy) ? makeHeuristicDispatch(policy, o.scenario) : new LecDispatch();
    this.policySeed = o.policySeed ?? 0;
    const guard = this.heuristicOnly ? null : (o.guard ?? null);
    // RegimeGuard throws a RangeError on options out of range (the CLI checks them first)
    this.guard = guard ? new RegimeGuard(guard, o.view.eap) : null;
    if (guard) {
      this.guardPolicies[2] = makeHeuristicDispatch(guard.fallback, o.scenario);
      if (guard.mid) this.guardPolicies[1] = makeHeuristicDispatch(guard.mid.fallback, o.scenario);
      if (guard.spread) this.guardPolicies[3] = makeHeuristicDispatch(guard.spread.fallback, o.scenario);
    }
    this.maxInFlight = o.maxInFlight ?? DEFAULT_MAX_IN_FLIGHT;
    // as many sockets per target as requests may be in flight: a smaller pool would queue requests
    // inside node:http, a wait the admission limits and the simulator know nothing of
    this.proxy = new Proxy(Math.max(1, this.maxInFlight));
    const queued = o.maxQueued ?? DEFAULT_MAX_QUEUED;
    this.limits = {
      perService: o.maxInFlightPerService ?? Math.max(8, Math.floor(this.maxInFlight / 4)),
      longMs: o.longDeadlineMs ?? 30_000,
      long: o.maxInFlightLong ?? Math.max(4, Math.floor(this.maxInFlight / 8)),
      queued,
      queuedPerService: o.maxQueuedPerService ?? Math.max(1, Math.floor(queued / 4)),
      queuedLong: o.maxQueuedLong ?? Math.max(1, Math.floor(queued / 8)),
      lateMs: o.lateAnswerMs ?? 50,
    };
    for (const [k, v] of Object.entries(this.limits)) {
      if (!(Number.isFinite(v) && v >= 0)) throw new TypeError(`Dispatcher: admission limit ${k} must be a number >= 0, got ${v}`);
    }
    this.inFlightBySvc = new Array(o.scenario.services.length).fill(0);
    this.queuedBySvc = new Array(o.scenario.services.length).fill(0);
    this.dequeue = o.dequeue ?? 'edf';
    this.actorHead = o.actorHead ?? 'softplus1';
    this.explore = o.explore ?? 0;
    this.actSeed = o.actSeed ?? 0;
    this.coin = Rng.derive(this.actSeed, 'agent/explore');
    this.guardCoin = guard?.spread ? Rng.derive(this.actSeed, 'agent/guard-spread') : null;
    this.experienceCapacity = o.experienceCapacity ?? 4096;
    this.experienceMode = o.experience ?? 'explored';
    if (!EXPERIENCE_MODES.includes(this.experienceMode))
      throw new TypeError(`Dispatcher: experience must be one of ${EXPERIENCE_MODES.join(', ')}, got ${this.experienceMode}`);
    this.observations = new ObservationBuilder(
      { numServices: o.view.numServices, numTargets: o.view.numTargets, numEaps: o.view.numEaps },
      o.scenario.queueCapPerReplica,
    );
  }

  /** Weight version of the learned policy in use, null while the fallback decides. */
  get weightVersion(): number | null {
    return this.learned?.version ?? null;
  }

  /** The rule deciding now: `cmmac`, the guard's fallback, or the heuristic (`lec` while cmmac has no weights). */
  get policyName(): string {
    if (this.learned && this.guard?.fallback) return this.guardPolicies[this.guard.level]!.name;
    return this.learned ? 'cmmac' : this.fallback.name;
  }

  /** The regime guard's state (null without --guard): whether its fallback decides, and the late share. */
  get guardState(): { fallback: boolean; level: 0 | 1 | 2; lateShare: number } | null {
    return this.guard ? { fallback: this.guard.fallback, level: this.guard.level, lateShare: this.guard.lateShare } : null;
  }

  /** The `policy` option: `cmmac` or the heuristic that always decides. */
  get policyOption(): LivePolicyName {
    return this.heuristicOnly ? (this.fallback.name as LivePolicyName) : 'cmmac';
  }

  get queued(): number {
    return this.queue.length;
  }

  get outstanding(): number {
    return this.inFlight + this.queue.length;
  }

  /** The admission limits in force (the options' values, or their defaults): requests in flight, queued, and long ones of each. */
  get admission(): { inFlight: number; queued: number; inFlightLong: number; queuedLong: number } {
    const l = this.limits;
    return { inFlight: this.maxInFlight, queued: l.queued, inFlightLong: l.long, queuedLong: l.queuedLong };
  }

  /**
   * Swaps in actor weights; throws TypeError if they do not fit this scenario's actor (the runtime
   * then refuses the frame and keeps the old policy). The actor code loads on first use (it does not use tfjs).
   * With a heuristic `policy` the weights are ignored (returns false); true once applied.
   */
  setWeights(body: WeightsBody): boolean {
    if (this.heuristicOnly) return false;
    const dim = this.observations.dim;
    const A = this.view.numTargets;
    // any MLP from `dim` to A (the hidden widths are the sender's), optionally with the target scorer
    const hiddenOf = (shapes: number[][], what: string): number[] => {
      const fit = actorFit(shapes, { obsDim: dim, numActions: A, scorerInputs: targetBlockOf(this.observations.shape).stride });
      if (!fit)
        throw new TypeError(`${what} do not fit: expected an MLP from ${dim} inputs to ${A} actions, got shapes ${JSON.stringify(shapes)}`);
      return fit.hidden;
    };
    const hidden = hiddenOf(body.shapes, 'actor weights');
    // the actor switch: the version's light actor, used in frames whose placement names it (checked before anything changes)
    const lightHidden = body.light ? hiddenOf(body.light.shapes, 'light actor weights') : null;
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const { CmmacDispatch } = require('./actor-policy') as typeof import('./actor-policy');
    const policy = new CmmacDispatch({
      shape: { numServices: this.view.numServices, numTargets: A, numEaps: this.view.numEaps },
      queueCapPerReplica: this.scenario.queueCapPerReplica,
      weights: body.tensors,
      version: body.version,
      mode: 'argmax',
      rng: new Rng(this.actSeed),
      hidden,
      head: body.head ?? this.actorHead,
    });
    if (body.light && lightHidden !== null) policy.setLightWeights(body.light.tensors, body.light.head ?? this.actorHead, lightHidden);
    policy.recorder = {
      record: (obs: Float32Array, _mask: Uint8Array, _action: number, logProb: number, _eap: number, light?: boolean) => {
        this.lastLogProb = logProb;
        this.lastLight = light === true;
        // experience: the drawn decisions (or all, --experience all); the light actor's is never drawn
        this.lastObs = this.recordThis && (!this.lastLight || this.experienceMode === 'all') ? obs.slice() : null;
      },
    };
    this.learned = policy;
    this.weightsGen++;
    return true;
  }

  /**
   * The actor deciding now: `light` while the last placement names it and the weights hold a light
   * actor (the actor switch), else `main`; null while the fallback decides (no weights).
   */
  get actorInUse(): 'main' | 'light' | null {
    if (!this.learned) return null;
    return this.learned.hasLight && this.view.actorSlot() === 'light' ? 'light' : 'main';
  }

  /** Whether the weights in use hold a light actor. */
  get holdsLightActor(): boolean {
    return this.learned?.hasLight ?? false;
  }

  /** Head of the actor in use: the weights frame's, else `actorHead`; null while the fallback decides. */
  get actorHeadInUse(): 'relu1' | 'softplus1' | null {
    return this.learned?.head ?? null;
  }

  /** Queues one request; resolves with its answer (never rejects). */
  submit(r: IngressRequest): Promise<DispatchResult> {
    const t0 = performance.now();
    const nowS = this.view.nowS();
    const speed = this.view.speed;
    const req: Request = {
      id: this.nextId++,
      service: r.service,
      eap: this.view.eap,
      arrivalS: nowS,
      deadlineS: nowS + (r.deadlineMs / 1000) * speed,
      workCoreS: r.workCoreS ?? 0,
      inputMB: r.payloadBytes / 1e6,
    };
    this.counters.received++;
    return new Promise<DispatchResult>((resolve) => {
      const long = r.deadlineMs > this.limits.longMs;
      const p: Pending = { req, workCoreS: r.workCoreS ?? null, deadlineMs: r.deadlineMs, t0, resolve, long, timer: null, answered: false };
      const L = this.limits;
      const full =
        this.queue.length >= L.queued
          ? `the eAP queue holds ${this.queue.length} requests`
          : (this.queuedBySvc[r.service] ?? 0) >= L.queuedPerService
            ? `service ${r.service} has ${this.queuedBySvc[r.service]} requests queued`
            : long && this.queuedLong >= L.queuedLong
              ? `${this.queuedLong} long requests (deadline over ${L.longMs} ms) are queued`
              : null;
      if (full !== null) {
        this.counters.admissionRefused++;
        this.answer(p, { status: 503, target: -1, latencyMs: performance.now() - t0, reason: `admission: ${full}` });
        return;
      }
      this.enqueue(p);
      // the deadline is kept by a timer, whether or not a slot frees up before it
      p.timer = setTimeout(() => this.expireQueued(p), Math.max(0, r.deadlineMs - (performance.now() - t0)));
      p.timer.unref(); // the server keeps the process; a waiting request alone does not
      this.pump();
    });
  }

  /** Deadline timer of a queued request: answered 504 and taken out of the queue. */
  private expireQueued(p: Pending): void {
    p.timer = null;
    const i = this.queue.indexOf(p);
    if (i < 0 || p.answered) return;
    this.queue.splice(i, 1);
    this.unqueued(p);
    this.counters.expired++;
    this.answer(p, { status: 504, target: -1, latencyMs: performance.now() - p.t0, reason: 'expired in the eAP queue' });
    this.checkIdle();
  }

  private unqueued(p: Pending): void {
    this.queuedBySvc[p.req.service]--;
    if (p.long) this.queuedLong--;
    this.view.setOwnQueueLen(this.queue.length);
  }

  /** Resolves once nothing is queued or in flight. */
  idle(): Promise<void> {
    if (this.outstanding === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Takes the transitions recorded since the last call (at most `max`). */
  takeExperience(max = 256): Transition[] {
    return this.experience.splice(0, max);
  }

  /**
   * The orchestrator's store changed (a new epoch): the weight versions of what the actor decided
   * so far name versions of the old store, which the new one never published (its intake refuses
   * them, or worse, takes them for its own versions of the same number). Drops the learned
   * transitions held, and keeps none of the decisions still in flight or made before the next
   * weights are applied (counted in experienceRetired). Heuristic transitions (no version) stay.
   * Returns the transitions dropped now.
   */
  retireExperience(): number {
    this.minGen = this.weightsGen + 1;
    const kept = this.experience.filter((t) => t.weightVersion === null);
    const n = this.experience.length - kept.length;
    this.experience = kept;
    this.counters.experienceRetired += n;
    return n;
  }

  /** Per-target samples of the interval since the last call (targets that got requests). */
  takeTelemetry(intervalS: number): NodeSample[] {
    const ts = Date.now();
    const out: NodeSample[] = [];
    for (const [t, c] of this.interval) {
      out.push({
        node: t,
        ts,
        cpu: 1 - this.view.freeCpuRatio(t),
        mem: 1 - this.view.freeMemRatio(t),
        disk: 0,
        upBwMbps: intervalS > 0 ? (c.bytes * 8) / 1e6 / intervalS : 0,
        requests: c.requests,
        succeeded: c.succeeded,
        inDeadline: c.inDeadline,
        latencyMsSum: c.latencyMsSum,
      });
    }
    this.interval = new Map();
    return out.sort((a, b) => a.node - b.node);
  }

  /**
   * Answers every request still queued or in flight with 503 `reason` (the drain's time limit: they
   * used to get a connection reset when the process closed its sockets). Returns how many.
   */
  answerAll(reason: string): number {
    let n = 0;
    for (const p of this.queue.splice(0)) {
      this.unqueued(p);
      if (!p.answered) n++;
      this.answer(p, { status: 503, target: -1, latencyMs: performance.now() - p.t0, reason });
    }
    for (const p of this.sending) {
      if (!p.answered) n++;
      this.answer(p, { status: 503, target: -1, latencyMs: performance.now() - p.t0, reason });
    }
    this.checkIdle();
    return n;
  }

  close(): void {
    this.proxy.close();
  }

  // ------------------------------------------------------------------------------------------

  private key(p: Pending): number {
    return this.dequeue === 'edf' ? p.req.deadlineS : p.req.arrivalS;
  }

  private enqueue(p: Pending): void {
    // binary insertion, stable: equal keys keep arrival order
    const k = this.key(p);
    let lo = 0;
    let hi = this.queue.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.key(this.queue[mid]) <= k) lo = mid + 1;
      else hi = mid;
    }
    this.queue.splice(lo, 0, p);
    this.queuedBySvc[p.req.service]++;
    if (p.long) this.queuedLong++;
    this.view.setOwnQueueLen(this.queue.length);
  }

  /** Whether `p` may take a slot now (its service and class are under their limits). */
  private admissible(p: Pending): boolean {
    return this.inFlightBySvc[p.req.service] < this.limits.perService && (!p.long || this.inFlightLong < this.limits.long);
  }

  private pump(): void {
    let i = 0;
    while (i < this.queue.length && this.inFlight < this.maxInFlight) {
      const p = this.queue[i];
      if (!this.admissible(p)) {
        i++; // its service or class is at its limit: the next one may go
        continue;
      }
      this.queue.splice(i, 1);
      this.unqueued(p);
      if (p.timer) clearTimeout(p.timer);
      p.timer = null;
      if (this.view.nowS() > p.req.deadlineS) {
        this.counters.expired++;
        this.answer(p, { status: 504, target: -1, latencyMs: performance.now() - p.t0, reason: 'expired in the eAP queue' });
        continue;
      }
      this.onDispatch?.(performance.now() - p.t0);
      this.inFlight++;
      this.inFlightBySvc[p.req.service]++;
      if (p.long) this.inFlightLong++;
      // in flight, the device still gets its answer by the deadline (+ lateAnswerMs)
      p.timer = setTimeout(
        () => {
          p.timer = null;
          if (p.answered) return;
          this.counters.timedOut++;
          this.counters.answeredAtDeadline++;
          this.answer(p, { status: 504, target: -1, latencyMs: performance.now() - p.t0, reason: 'no answer by the deadline' });
        },
        Math.max(0, p.deadlineMs + this.limits.lateMs - (performance.now() - p.t0)),
      );
      p.timer.unref();
      this.sending.add(p);
      void this.dispatch(p).finally(() => {
        this.sending.delete(p);
        if (p.timer) clearTimeout(p.timer);
        p.timer = null;
        this.inFlight--;
        this.inFlightBySvc[p.req.service]--;
        if (p.long) this.inFlightLong--;
        this.pump();
        this.checkIdle();
      });
    }
    this.checkIdle();
  }

  private checkIdle(): void {
    if (this.outstanding === 0 && this.idleWaiters.length > 0) this.idleWaiters.splice(0).forEach((f) => f());
  }

  /**
   * The policy's choice for one request on the view as it is now: the context filter's mask, then
   * the actor, or the heuristic (the `policy` one, else lec). No side effect on the queue or the
   * counters of requests sent; the policy's own state moves (round-robin's cursor, random draws).
   */
  choose(req: Request): Decision {
    this.view.holdClock();
    try {
      return this.decide(req);
    } finally {
      this.view.releaseClock();
    }
  }

  private decide(req: Request): Decision {
    const view = this.view;
    const mask = new Uint8Array(view.numTargets);
    buildMask(view, req.service, this.scenario.queueCapPerReplica, mask);
    const item: DispatchItem = { request: req, eap: view.eap, mask, action: view.cloudTarget };
    if (this.learned && this.guard) {
      const sw = this.guard.observe(noTargetMeetsDeadline(item, view));
      if (sw) {
        this.counters.guardSwitches++;
        this.onGuardSwitch?.(sw);
      }
      const level = this.guardCoin ? this.guard.decider(this.guardCoin.next()) : this.guard.level;
      const p = this.guardPolicies[level];
      if (level > 0 && p) {
        if (!this.guardReset[level]) {
          this.guardReset[level] = true;
          p.reset?.(this.policySeed, view);
        }
        this.counters.decisionsGuarded++;
        return this.heuristicDecision(item, p);
      }
    }
    if (this.learned) {
      this.lastObs = null;
      this.lastLogProb = 0;
      this.lastLight = false;
      const exploring = this.explore > 0 && (this.explore >= 1 || this.coin.next() < this.explore);
      this.learned.mode = exploring ? 'sample' : 'argmax';
      this.recordThis = this.experienceMode === 'all' || (this.experienceMode === 'explored' && exploring);
      let target: number;
      try {
        target = this.learned.decide(item, view);
      } catch {
        target = -1;
      }
      if (target >= 0 && target < view.numTargets && mask[target]) {
        this.counters.decisionsLearned++;
        // the light actor decides by argmax even when this decision was to be drawn (actor-policy.ts)
        const drawn = exploring && !this.lastLight;
        if (drawn) this.counters.decisionsDrawn++;
        // the log-probability of what was done: an argmax actor is deterministic (probability 1)
        const logProb = drawn ? Math.min(0, this.lastLogProb) : 0;
        if (this.lastLight) this.counters.decisionsLight++;
        return {
          target,
          mask,
          obs: this.lastObs,
          logProb,
          version: this.learned.version,
          gen: this.weightsGen,
          ...(this.lastLight ? { light: true } : {}),
        };
      }
    }
    if (!this.fallbackReset) {
      // as the simulator does once per episode, before the policy's first decision (the placement is usually known by then)
      this.fallbackReset = true;
      this.fallback.reset?.(this.policySeed, view);
    }
    return this.heuristicDecision(item, this.fallback);
  }

  /** `policy`'s decision for `item`, recorded as a heuristic one (no weight version). */
  private heuristicDecision(item: DispatchItem, policy: DispatchPolicy): Decision {
    const view = this.view;
    const mask = item.mask;
    this.counters.decisionsFallback++;
    let target = policy.decide(item, view);
    if (!(target >= 0 && target < view.numTargets && mask[target])) target = view.cloudTarget; // never an invalid target (the cloud is always valid)
    let obs: Float32Array | null = null;
    if (this.experienceMode === 'all') {
      obs = new Float32Array(this.observations.dim);
      this.observations.build(item, view, obs);
    }
    // recorded as probability 1 (exact for the deterministic rules; random, p2c and prob draw, but
    // a transition without a weight version is never learned from)
    return { target, mask, obs, logProb: 0, version: null };
  }

  private async dispatch(p: Pending): Promise<void> {
    const view = this.view;
    const w = p.req.service;
    const d = this.choose(p.req); // one instant per decision (and one performance.now() instead of thousands)
    if (d.target === this.view.cloudTarget) this.counters.decidedToCloud++;
    const timeoutMs = Math.min(p.deadlineMs * 3 + 1000, p.deadlineMs + 10_000);
    let target = d.target;
    let outcome = await this.send(p, target, timeoutMs);
    // any refusal but 504 (expired: no time left): 503 full or no replica, and a node's own failure
    // (a 500 answered every request while the cloud sat idle, and none was retried)
    const notTaken = (outcome.kind === 'refused' && outcome.status !== 504) || outcome.kind === 'unreachable';
    if (notTaken && target !== view.cloudTarget && performance.now() - p.t0 < p.deadlineMs) {
      // the node was full, failing or away: the cloud always takes it
      this.counters.retriedOnCloud++;
      target = view.cloudTarget;
      outcome = await this.send(p, target, timeoutMs - (performance.now() - p.t0));
    }
    const latencyMs = performance.now() - p.t0;
    // the device got its answer from the late-answer timer already: the request counts as not in time
    const metDeadline = outcome.kind === 'served' && latencyMs <= p.deadlineMs && !p.answered;
    if (!p.answered) {
      let result: DispatchResult;
      if (outcome.kind === 'served') {
        if (metDeadline) this.counters.inTime++;
        else this.counters.late++;
        result = { status: 200, target, latencyMs, ...(outcome.procMs !== null ? { procMs: outcome.procMs } : {}) };
      } else if (outcome.kind === 'timeout') {
        this.counters.timedOut++;
        result = { status: 504, target, latencyMs, reason: 'target did not answer in time' };
      } else if (outcome.kind === 'refused' && outcome.status === 504) {
        this.counters.expired++;
        result = { status: 504, target, latencyMs, reason: outcome.reason };
      } else {
        this.counters.refused++;
        result = { status: 503, target, latencyMs, reason: outcome.reason };
      }
      this.answer(p, result);
    }
    const c = this.intervalOf(target);
    if (outcome.kind === 'served') {
      c.succeeded++;
      c.latencyMsSum += latencyMs;
      if (metDeadline) c.inDeadline++;
    }
    if (d.obs && d.version !== null && (d.gen ?? 0) < this.minGen) this.counters.experienceRetired++;
    else if (d.obs) {
      this.pushExperience({
        eap: view.eap,
        slot: Math.floor(p.req.arrivalS / this.scenario.slotS),
        service: w,
        obs: d.obs,
        mask: d.mask,
        action: d.target,
        logProb: d.logProb,
        reward: metDeadline ? 1 : 0,
        latencyMs: outcome.kind === 'served' ? latencyMs : null,
        metDeadline,
        done: false,
        weightVersion: d.version,
        ...(d.light ? { actor: 'light' as const } : {}),
      });
    }
  }

  /** Emulated transfer, the HTTP call, emulated return; keeps the view's counters. */
  private async send(p: Pending, target: number, timeoutMs: number): Promise<ProxyOutcome> {
    const view = this.view;
    const w = p.req.service;
    const url = target === view.cloudTarget ? this.targets.cloud : this.targets.nodes[target];
    const c = this.intervalOf(target);
    c.requests++;
    c.bytes += p.req.inputMB * 1e6;
    view.onSent(target, w);
    const speed = view.speed;
    let outcome: ProxyOutcome = { kind: 'timeout' };
    try {
      await sleep((view.transferS(view.eap, target, p.req.inputMB) * 1000) / speed);
      // the request's own work in scenario core-seconds: the node scales its processing time by --speed (once)
      const work = p.workCoreS;
      // the target may start it until the result could still get back in time
      const ttlMs = p.deadlineMs - (performance.now() - p.t0) - (view.returnS(view.eap, target) * 1000) / speed;
      outcome = await this.proxy.forward(url, w, work, Math.max(1, timeoutMs), ttlMs);
      if (outcome.kind === 'served') await sleep((view.returnS(view.eap, target) * 1000) / speed);
    } finally {
      this.countHealth(target, outcome);
      const procS = outcome.kind === 'served' && outcome.procMs !== null ? (outcome.procMs / 1000) * speed : null;
      view.onDone(target, w, procS, outcome.kind === 'served' || outcome.kind === 'refused' ? outcome : null);
      if (outcome.kind === 'unreachable') view.markUnreachable(target);
    }
    return outcome;
  }

  /**
   * QoS isolation's view of a node: served answers and failures. A failure is a node that did not
   * answer (unreachable, timeout) or refused for a reason of its own ('node failed', a 500...). A
   * refusal that carries the node's load report ('full', 'expired at node') is admission control
   * working, and 'no replica' / 'replica removed' is placement: neither counts, so a busy node is
   * never isolated for being busy (the context filter already routes around its queue).
   */
  private countHealth(target: number, outcome: ProxyOutcome): void {
    if (target >= this.view.numNodes) return;
    let failed: boolean;
    if (outcome.kind === 'served') failed = false;
    else if (outcome.kind === 'refused') {
      if (outcome.waiting !== null || /^(no replica|replica removed)/.test(outcome.reason)) return;
      failed = true;
    } else failed = true;
    let c = this.health.get(target);
    if (!c) {
      c = { served: 0, failed: 0 };
      this.health.set(target, c);
    }
    if (failed) c.failed++;
    else c.served++;
  }

  /** Per node since the last call: answers served and failures (see countHealth), nodes with any. */
  takeNodeOutcomes(): { node: number; served: number; failed: number }[] {
    const out = [...this.health].map(([node, c]) => ({ node, ...c }));
    this.health = new Map();
    return out.sort((a, b) => a.node - b.node);
  }

  /** The one answer of `p` (later calls do nothing). */
  private answer(p: Pending, r: DispatchResult): void {
    if (p.answered) return;
    p.answered = true;
    if (p.timer) clearTimeout(p.timer);
    p.timer = null;
    this.onAnswer?.(r.latencyMs);
    p.resolve(r);
  }

  private intervalOf(t: number): TargetInterval {
    let c = this.interval.get(t);
    if (!c) {
      c = { requests: 0, succeeded: 0, inDeadline: 0, latencyMsSum: 0, bytes: 0 };
      this.interval.set(t, c);
    }
    return c;
  }

  private pushExperience(t: Transition): void {
    this.experience.push(t);
    if (this.experience.length > this.experienceCapacity) {
      const drop = this.experience.length - this.experienceCapacity;
      this.experience.splice(0, drop);
      this.counters.experienceDropped += drop;
    }
  }
}

function sleep(ms: number): Promise<void> {
  if (!(ms > 0)) return Promise.resolve();
  return new Promise((resolve) => setTimeout(resolve, ms));
}
