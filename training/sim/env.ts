/**
 * # EdgeCloudEnv (edge-cloud-v2)
 *
 * A PettingZoo-style parallel environment of an edge-cloud cluster driven by a request trace.
 *
 * | item | value |
 * | --- | --- |
 * | agents | eAP ids `0..numEaps-1` (`possibleAgents`); `agents` = the one eAP with a decision pending (a request that just reached it) |
 * | observation | a `DispatchItem`: the request to dispatch, its eAP, `mask` (context filter), plus the `view` (ClusterView) the policy may read, at the instant the request reached its eAP; policies turn this into tensors themselves |
 * | action | target index: `0..numNodes-1` an edge node, `numNodes` the cloud |
 * | step | one dispatch: the live eAP sends its request; events run until the next request reaches an eAP. Every slot boundary passed on the way closes that slot (`infos[b].slotClosed`) |
 * | reward | per eAP for the slots that closed in this step: u_b = exp(-lambda_b - epsilon nu_b) (reward.ts; nu_b over the slot's time-averaged usage); 0 in steps that close no slot |
 * | truncation | all eAPs after `frames x slotsPerFrame` slots |
 * | termination | never (the trace is open-ended) |
 *
 * Time: every event runs at its exact time: arrival at the eAP after the upload, dispatch at that
 * same instant (as the live agent does: no eAP queue, no per-slot budget), transfer, start,
 * completion, return, replica start-up, faults. Slots (`slotS`) are the learning time scale only
 * (rewards, the critic's states), frames the orchestration time scale. A node drops a queued
 * request unserved when it would start it too late for the result to get back by the deadline (as
 * the live node does with the request's `ttl`); queues are also swept of such requests at every
 * slot boundary. Busy replica-seconds (HPA's window), node CPU and memory usage (reward, imbalance)
 * are integrated exactly over time, as the emulated cluster does. At the end,
 * `arrived = completedInTime + late + dropped + queuedAtEnd` is checked (throws if not).
 *
 * The step's `rewards`, `terminations`, `truncations` and `infos` records are reused: the next
 * `step()` overwrites them (copy what you keep).
 *
 * Requests come as an array or as a source (training/workload/source.ts), read one ahead as the
 * timeline reaches them. Per-request state lives in a ring of slots (cluster.ts RequestRing) for
 * the requests in the system only, so a run's memory does not grow with its length: what grows is
 * `fate` (1 byte per request, for requestOutcome), the per-frame counters, and with an array the
 * `latencyS` / `droppedWaitS` lists. Latency figures are kept as a running sum and, for the p99,
 * the largest 1% of the answered waits (top-values.ts: exact).
 *
 * Version history: v1 dispatched at slot boundaries with a per-eAP budget per slot
 * (`dispatchBudgetPerSlot`) and sampled usage at slot ends; v2 (this file) dispatches on arrival
 * and integrates usage.
 */
import type { Outcome, Placement, Request, ScaleOp } from '../../shared/domain';
import { placementProblem } from '../../shared/orchestration/placement';
import type { PlacementBody } from '../../shared/protocol/envelope';
import type { DequeueName } from '../../shared/dequeue';
import { discounted } from '../../shared/dequeue';
import type { ClusterView, DispatchItem, OrchestrationPolicy, OrchestrationView, ServiceWindowStats } from '../../shared/policy';
import type { Scenario } from '../../shared/scenario';
import { buildMask } from '../../agent/filters/context-filter';
import { LocalClusterView } from '../../agent/local-view';
import type { TargetLoad } from '../../agent/proxy';
import { AnswerPool } from './answer-pool';
import { Cluster, RequestRing } from './cluster';
import { EventType, Timeline } from './timeline';
import { slotRewards } from './reward';
import { SimExecutor } from './executor';
import type { Fault } from './faults';
import { faultState } from '../../shared/faults';
import { TelemetryFilters, type WindowScorer } from './telemetry';
import { TopValues } from './top-values';
import type { RequestReader, RequestSource } from '../workload/source';
import { arraySource, isRequestSource } from '../workload/source';
import { emptyTally, resetTally, type TargetTally } from '../../shared/tally';
import { QueueBlame } from './blame';

export const ENV_VERSION = 'edge-cloud-v2';

export interface EnvOptions {
  /** In arrival order, ids dense from 0: an array, or a source read as the run goes (memory bounded by the requests in the system). */
  requests: Request[] | RequestSource;
  frames: number;
  /** node queue order. @defaultValue 'edf' */
  nodeDequeue?: DequeueName;
  /** Refuse, at the eAP, a request no target can serve in time by the current estimates (predictedSlack < 0). @defaultValue false */
  dropHopeless?: boolean;
  orchestration?: OrchestrationPolicy;
  /**
   * The placement d[w][n] the episode starts from, every replica ready (the weight gate replays on
   * the live placement: training/jobs/gate.ts). Absent: the scenario's initial placement.
   */
  startPlacement?: Placement;
  faults?: Fault[];
  /** What an action outside the mask does: throw (tests) or go to the cloud and be counted. */
  illegalAction?: 'throw' | 'cloud';
  /** epsilon of the reward. @defaultValue 1 */
  rewardEpsilon?: number;
  /** Generate node telemetry and run the device filters on it (telemetry.ts). @defaultValue false */
  deviceFilters?: boolean;
  /**
   * With deviceFilters: the learned stage decides the ambiguous windows (telemetry.ts), with the
   * scorers this makes (one per episode; critic/detector/core.ts DetectorCore, made by the caller:
   * the simulator never loads tfjs). @defaultValue off
   */
  learnedDetector?: (() => WindowScorer) | null;
  /** With deviceFilters: NodeHealth's L2 second stage on every window (telemetry.ts `second`). @defaultValue false */
  secondStage?: boolean;
  seed?: number;
  /**
   * Each eAP's policy (and its context filter) decides on the live agent's information model: a
   * LocalClusterView (agent/local-view.ts) on the simulator's clock, fed with the eAP's own
   * dispatches, the answers as they reach the eAP (with the target's load report, as the emulated
   * node sends it) and the placement of every frame; an edge node answers 503 when it has failed,
   * has no replica of the service or its queue is full, and the agent retries on the cloud while
   * the deadline is not past (agent/dispatcher.ts). Policies read `viewOf(b)`. The default, because it
   * is what the live agents do; false hands every policy the whole cluster's true state (`view`),
   * an information model no live agent has. @defaultValue true
   */
  agentViews?: boolean;
  /**
   * Keep the queueing-blame ledger (blame.ts): which requests took the capacity that others waited
   * for before failing; `requestBlame()` reads it (kais train --externality). @defaultValue false
   */
  queueBlame?: boolean;
}

export interface StepInfo {
  slotClosed: boolean;
  slot: number;
}

export interface StepResult {
  observations: Record<number, DispatchItem>;
  rewards: Record<number, number>;
  terminations: Record<number, boolean>;
  truncations: Record<number, boolean>;
  infos: Record<number, StepInfo>;
}

/** Per-frame counters (for learning curves and the eval plot). */
export interface FrameStats {
  arrived: number;
  completedInTime: number;
  failed: number;
  scaleOps: number;
  /** edge replica-seconds held in the frame (ready, starting and draining replicas: what reserves a node's memory) */
  replicaS: number;
}

const ST_UPLOAD = 1;
const ST_EAP = 2;
const ST_FLIGHT = 3;
const ST_QUEUED = 4;
const ST_RUNNING = 5;
const ST_DONE = 6;

export class EdgeCloudEnv {
  readonly possibleAgents: number[];
  agents: number[] = [];
  readonly cluster: Cluster;
  readonly totalSlots: number;
  private readonly req = new RequestRing();
  private readonly source: RequestSource;
  private reader: RequestReader | null = null;
  /** the next request to admit (read one ahead), null when none is left */
  private nextReq: Request | null = null;
  private lastArrivalS = -Infinity;
  /** per request index: 0 not finished, 1 completed in time, 2 late, 3 dropped (grows with the arrivals) */
  private fate: Uint8Array;
  private readonly timeline = new Timeline();
  private views: LocalClusterView[] | null = null;
  /** agentViews: the answers on their way back to the agents (the timeline event carries the slot) */
  private answers: AnswerPool | null = null;
  /** the load report handed to a view (the view copies it) */
  private loadScratch: TargetLoad = { cpu: 0, waiting: [], busy: [] };
  private readonly items: DispatchItem[];
  /** eAP with a decision pending, -1 when none */
  private pending = -1;
  /** request index pending at that eAP */
  private readonly pendingIndex: Int32Array;
  private slot = 0;
  private done = false;
  private readonly horizonS: number;
  private readonly opts: Required<Omit<EnvOptions, 'orchestration' | 'faults' | 'seed' | 'startPlacement'>> &
    Pick<EnvOptions, 'orchestration' | 'faults' | 'seed' | 'startPlacement'>;

  // accounting
  readonly outcome: Outcome = { arrived: 0, completedInTime: 0, late: 0, dropped: 0, queuedAtEnd: 0 };
  /** requests that failed because a node failed under them or while they waited there */
  lostToFailedNodes = 0;
  dispatched = 0;
  dispatchedToCloud = 0;
  illegalActions = 0;
  scaleOps = 0;
  /** agentViews: requests an edge node refused (503) and the agent sent on to the cloud */
  retriedOnCloud = 0;
  /** per target: requests that reached it, refused, expired unstarted, completed, lost (shared/tally.ts; `kais up` compares it with the emulated cluster's) */
  readonly tally: TargetTally;
  /** with a `requests` array (empty with a source): latency (s, arrival at the device to result back) of each completed request (in time or late), in completion order */
  readonly latencyS: Float64Array;
  latencyCount = 0;
  /** sum of the latencies, added in completion order */
  latencySumS = 0;
  /** with a `requests` array (empty with a source): relative deadline (s) of each dropped request: the time its device waits for the refusal (p99 over every answer) */
  readonly droppedWaitS: Float64Array;
  droppedCount = 0;
  /** the largest 1% of the answered waits (latencies and dropped requests' relative deadlines): the p99 */
  private readonly answered: TopValues;
  readonly frames: FrameStats[] = [];
  imbalanceSum = 0;
  private readonly slotDone: Float64Array;
  private readonly slotFailed: Float64Array;
  private readonly window: ServiceWindowStats;
  private windowStartS = 0;
  /** per service: busy and ready replicas on edge nodes, and when they last changed (exact integration) */
  private readonly edgeBusy: Int32Array;
  private readonly edgeReady: Int32Array;
  private readonly edgeSince: Float64Array;
  private nextOrchestrationS = Infinity;
  private readonly orchView: OrchestrationView;
  private readonly executor: SimExecutor;
  /** edge replicas held now (ready + starting, draining ones included), and since when (for FrameStats.replicaS) */
  private heldReplicas = 0;
  private heldSince = 0;
  /** device filters on simulated telemetry (null when off) */
  telemetry: TelemetryFilters | null = null;
  private nextTelemetryS = 0;
  /** largest result return time (s) over eAPs and targets (bounds the expiry sweep) */
  private readonly maxReturnS: number;
  /** queueBlame: the ledger of starts and waiting failures (null when off) */
  private readonly blameLedger: QueueBlame | null;

  // step results, reused from step to step
  private readonly rewardSum: Float64Array;
  private slotClosed = false;
  private readonly rewardsRec: Record<number, number> = {};
  private readonly terminationsRec: Record<number, boolean> = {};
  private readonly truncationsRec: Record<number, boolean> = {};
  private readonly infosRec: Record<number, StepInfo> = {};

  constructor(
    readonly scenario: Scenario,
    options: EnvOptions,
  ) {
    this.opts = {
      nodeDequeue: 'edf',
      dropHopeless: false,
      illegalAction: 'throw',
      rewardEpsilon: 1,
      deviceFilters: false,
      learnedDetector: null,
      secondStage: false,
      queueBlame: false,
      agentViews: true,
      // an option passed as undefined keeps its default (a plain spread would overwrite it)
      ...(Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)) as EnvOptions),
    };
    if (!Number.isInteger(options.frames) || options.frames < 1) {
      throw new TypeError(`EdgeCloudEnv: expected frames to be a positive integer, but got ${options.frames}`);
    }
    if (options.startPlacement) {
      const problem = placementProblem(scenario, options.startPlacement);
      if (problem) throw new TypeError(`EdgeCloudEnv: startPlacement: ${problem}`);
    }
    this.cluster = new Cluster(scenario, options.startPlacement ?? null);
    const c = this.cluster;
    this.possibleAgents = Array.from({ length: c.numEaps }, (_, b) => b);
    this.totalSlots = options.frames * scenario.slotsPerFrame;
    this.horizonS = this.totalSlots * scenario.slotS;
    const list = isRequestSource(options.requests) ? null : options.requests;
    if (list) {
      for (let i = 1; i < list.length; i++) {
        if (list[i].arrivalS < list[i - 1].arrivalS) throw new TypeError('EdgeCloudEnv: requests must be sorted by arrivalS');
      }
    }
    this.source = list ? arraySource(list) : (options.requests as RequestSource);
    const count = this.source.count;
    this.fate = new Uint8Array(list ? list.length : 1024);
    this.latencyS = new Float64Array(list ? list.length : 0);
    this.droppedWaitS = new Float64Array(list ? list.length : 0);
    this.answered = new TopValues(0.99, count);
    this.pendingIndex = new Int32Array(c.numEaps).fill(-1);
    this.tally = emptyTally(c.numTargets);
    this.items = this.possibleAgents.map((b) => ({
      request: list?.[0] ?? emptyRequest(),
      eap: b,
      mask: new Uint8Array(c.numTargets),
      action: -1,
    }));
    this.slotDone = new Float64Array(c.numEaps);
    this.slotFailed = new Float64Array(c.numEaps);
    this.rewardSum = new Float64Array(c.numEaps);
    for (const b of this.possibleAgents) this.infosRec[b] = { slotClosed: false, slot: 0 };
    const W = c.numServices;
    this.edgeBusy = new Int32Array(W);
    this.edgeReady = new Int32Array(W);
    this.edgeSince = new Float64Array(W);
    this.window = {
      windowS: 0,
      arrivals: new Float64Array(W),
      busyReplicaS: new Float64Array(W),
      readyReplicaS: new Float64Array(W),
      completedInTime: new Float64Array(W),
      failed: new Float64Array(W),
      workCoreS: new Float64Array(W),
    };
    const win = this.window;
    // what an executor can observe (shared/orchestration/executor.ts ReportView, the live cluster's
    // report): requests waiting at a target, not those still on the wire to it (the agents' view and
    // the dispatch policies' count those too, ClusterView.queueLen)
    this.orchView = Object.create(c, {
      window: { get: () => win },
      queueLen: { value: (t: number) => c.waiting[t] },
      serviceQueueLen: { value: (t: number, w: number) => c.queues[t * W + w].size },
    }) as OrchestrationView;
    this.executor = new SimExecutor(
      {
        cluster: c,
        replicaCreated: (n, w) => {
          this.touchHeld(c.now, 1);
          this.timeline.push(c.now + this.scenario.replicaStartupS, EventType.ReplicaReady, n, w);
        },
        replicaCancelled: () => this.touchHeld(c.now, -1),
        reap: (n, w) => this.reap(n, w),
      },
      this.orchView,
    );
    let maxRet = 0;
    for (let b = 0; b < c.numEaps; b++) for (let t = 0; t < c.numTargets; t++) maxRet = Math.max(maxRet, c.net.returnS(b, t));
    this.maxReturnS = maxRet;
    this.blameLedger = this.opts.queueBlame ? new QueueBlame(c.numTargets) : null;
  }

  /** Slots of the request ring in use: requests admitted and not retired yet (retired lazily, when the ring is full); never above requestSlotCapacity. */
  get liveRequestSlots(): number {
    return this.req.live;
  }

  /** Capacity of the request ring: a power of two about the most requests in the system at once, not the run's length. */
  get requestSlotCapacity(): number {
    return this.req.cap;
  }

  get view(): Cluster {
    return this.cluster;
  }

  get slotIndex(): number {
    return this.slot;
  }

  get isDone(): boolean {
    return this.done;
  }

  reset(options: { seed: number }): { observations: Record<number, DispatchItem>; infos: Record<number, StepInfo> } {
    const c = this.cluster;
    c.reset();
    this.req.reset();
    this.fate.fill(0);
    this.blameLedger?.reset();
    this.timeline.clear();
    this.pending = -1;
    this.pendingIndex.fill(-1);
    this.reader = this.source.open();
    this.nextReq = this.reader.next();
    this.lastArrivalS = -Infinity;
    this.slot = 0;
    this.done = false;
    Object.assign(this.outcome, { arrived: 0, completedInTime: 0, late: 0, dropped: 0, queuedAtEnd: 0 });
    this.lostToFailedNodes = 0;
    this.dispatched = 0;
    this.dispatchedToCloud = 0;
    this.illegalActions = 0;
    this.retriedOnCloud = 0;
    resetTally(this.tally);
    this.scaleOps = 0;
    this.latencyCount = 0;
    this.latencySumS = 0;
    this.droppedCount = 0;
    this.answered.reset();
    this.frames.length = 0;
    this.frames.push({ arrived: 0, completedInTime: 0, failed: 0, scaleOps: 0, replicaS: 0 });
    this.imbalanceSum = 0;
    this.slotDone.fill(0);
    this.slotFailed.fill(0);
    this.rewardSum.fill(0);
    this.slotClosed = false;
    const W = c.numServices;
    this.edgeBusy.fill(0);
    this.edgeReady.fill(0);
    this.edgeSince.fill(0);
    for (let n = 0; n < c.numNodes; n++) for (let w = 0; w < W; w++) this.edgeReady[w] += c.ready[n * W + w];
    this.heldReplicas = 0;
    for (let w = 0; w < W; w++) this.heldReplicas += this.edgeReady[w];
    this.heldSince = 0;
    this.windowStartS = 0;
    this.resetWindow();
    for (const f of this.opts.faults ?? []) {
      this.timeline.push(f.startS, EventType.NodeFault, f.node, 1);
      this.timeline.push(f.startS + f.durationS, EventType.NodeFault, f.node, 0);
    }
    this.telemetry?.dispose();
    this.telemetry = this.opts.deviceFilters
      ? new TelemetryFilters(c, options.seed, {
          ...(this.opts.learnedDetector ? { learned: {}, scorer: this.opts.learnedDetector } : {}),
          second: this.opts.secondStage ? {} : null,
        })
      : null;
    this.nextTelemetryS = 0;
    const orch = this.opts.orchestration;
    if (orch) {
      orch.reset?.(options.seed, this.orchView);
      // the actor switch: the global view names the orchestration's actor as a placement would
      c.actor = orch.actorFor?.() ?? 'main';
      this.nextOrchestrationS = orch.periodS > 0 ? orch.periodS : Infinity;
    } else {
      this.nextOrchestrationS = Infinity;
    }
    if (this.opts.agentViews) {
      this.views = this.possibleAgents.map((b) => new LocalClusterView(this.scenario, b, 1, undefined, undefined, () => this.cluster.now));
      // the device filters' exclusions reach each agent's mask, as agent/main.ts wires NodeHealth into its view
      // (every agent reads every node's telemetry, so all agents hold the same verdicts: the simulator's one NodeHealth)
      for (const v of this.views) v.excluded = (n) => this.cluster.healthyFlag[n] === 0;
      if (!this.answers) this.answers = new AnswerPool(c.numServices);
      this.answers.clear();
      this.loadScratch = { cpu: 0, waiting: new Array<number>(c.numServices).fill(0), busy: new Array<number>(c.numServices).fill(0) };
      this.pushPlacement();
    }
    this.advance();
    const r = this.result();
    return { observations: r.observations, infos: r.infos };
  }

  /**
   * Dispatch the pending request (action of the live eAP: its target) and advance to the next
   * request that reaches an eAP.
   */
  step(actions: Record<number, number> | ArrayLike<number>): StepResult {
    if (this.done) throw new Error('EdgeCloudEnv: step() after the episode ended; call reset()');
    const b = this.pending;
    if (b >= 0) {
      this.pending = -1;
      this.dispatch(this.items[b], this.pendingIndex[b], (actions as Record<number, number>)[b]);
    }
    this.advance();
    return this.result();
  }

  /**
   * What became of request `id` (its index in `requests`): 1 completed in time, 0 late or dropped,
   * NaN not finished (still in the system, or never arrived within the episode).
   */
  requestOutcome(id: number): number {
    const r = id < this.fate.length ? this.fate[id] : 0;
    return r === 0 ? Number.NaN : r === 1 ? 1 : 0;
  }

  /**
   * With `queueBlame`: each request's share of the failures of requests that waited behind it at
   * its target so far (index = request id, as requestOutcome; blame.ts).
   */
  requestBlame(): Float32Array {
    if (!this.blameLedger) throw new Error('EdgeCloudEnv.requestBlame: construct the env with queueBlame: true');
    return this.blameLedger.blame(this.fate.length);
  }

  /** Nearest-rank 99th percentile (s) of the answered waits: completed requests' latencies and dropped ones' relative deadlines; 0 for none. */
  answeredP99S(): number {
    return this.answered.quantile();
  }

  /** What eAP b's policy reads: its agent's view with agentViews, else the whole cluster. */
  viewOf(b: number): ClusterView {
    return this.views ? this.views[b] : this.cluster;
  }

  /** Hands every agent the placement as a placement frame carries it (replicas ordered, starting ones included). */
  private pushPlacement(): void {
    const c = this.cluster;
    const N = c.numNodes;
    const W = c.numServices;
    const replicas = new Int32Array(W * N);
    for (let w = 0; w < W; w++) for (let n = 0; n < N; n++) replicas[w * N + n] = c.replicas(n, w);
    const actor = this.opts.orchestration?.actorFor?.();
    const body: PlacementBody = { version: 0, frame: 0, numServices: W, numNodes: N, replicas, ...(actor ? { actor } : {}) };
    for (const v of this.views!) v.applyPlacement(body);
  }

  /**
   * The answer of request slot s at target t travels back to its agent (agentViews), with the
   * target's load report taken now, as the emulated node takes it when it answers (`withLoad`
   * false: no report, as from a failed node).
   */
  private answer(s: number, t: number, procS: number | null, withLoad: boolean, time: number): void {
    if (!this.views) return;
    const c = this.cluster;
    const b = this.req.eap[s];
    const k = b * c.numTargets + t;
    const p = this.answers!;
    const slot = p.alloc();
    p.service[slot] = this.req.service[s];
    p.procS[slot] = procS ?? Number.NaN;
    p.cpu[slot] = Number.NaN;
    if (withLoad) {
      const W = c.numServices;
      p.cpu[slot] = 1 - c.freeCpu[t] / c.cpu[t];
      for (let w = 0; w < W; w++) {
        p.waiting[slot * W + w] = c.queues[t * W + w].size;
        p.busy[slot * W + w] = c.busy[t * W + w];
      }
    }
    this.timeline.push(time + c.net.returnS(b, t) - c.net.deviceLatencyS, EventType.AgentAnswer, k, slot);
  }

  private onAgentAnswer(k: number, slot: number): void {
    const b = Math.floor(k / this.cluster.numTargets);
    const p = this.answers!;
    let load: TargetLoad | null = null;
    if (!Number.isNaN(p.cpu[slot])) {
      const W = p.numServices;
      load = this.loadScratch;
      load.cpu = p.cpu[slot];
      for (let w = 0; w < W; w++) {
        load.waiting![w] = p.waiting[slot * W + w];
        load.busy![w] = p.busy[slot * W + w];
      }
    }
    const procS = Number.isNaN(p.procS[slot]) ? null : p.procS[slot];
    const service = p.service[slot];
    p.release(slot);
    this.views![b].onDone(k - b * this.cluster.numTargets, service, procS, load);
  }

  /** The global state for the centralised critic (CTDE): the whole cluster, read-only. */
  state(): Cluster {
    return this.cluster;
  }

  /** Mean over slots of the std of edge nodes' CPU usage ratio (time-averaged over each slot). */
  get edgeImbalance(): number {
    return this.slot > 0 ? this.imbalanceSum / this.slot : 0;
  }

  // ------------------------------------------------------------------ the event loop

  /** Runs events, admitting arrivals and closing slots on the way, until a decision is pending or the episode ends. */
  private advance(): void {
    const tl = this.timeline;
    const slotS = this.scenario.slotS;
    while (!this.done) {
      const boundary = (this.slot + 1) * slotS;
      const te = tl.size > 0 ? tl.peekTime() : Infinity;
      // arrivals of this slot (the last boundary is exclusive) enter the timeline before any later event
      const nr = this.nextReq;
      if (nr !== null) {
        const ta = nr.arrivalS;
        if (ta < boundary && ta <= te) {
          this.admit(nr);
          continue;
        }
      }
      if (te <= boundary) {
        tl.pop();
        const time = tl.popTime;
        this.cluster.now = time;
        switch (tl.popType) {
          case EventType.EapArrive:
            if (this.onEapArrive(tl.popA, time)) return;
            break;
          case EventType.TargetArrive:
            this.onTargetArrive(tl.popA, tl.popB, time);
            break;
          case EventType.Finish:
            this.onFinish(tl.popA, tl.popB, time);
            break;
          case EventType.ReplicaReady:
            this.onReplicaReady(tl.popA, tl.popB, time);
            break;
          case EventType.NodeFault:
            this.onNodeFault(tl.popA, tl.popB === 1, time);
            break;
          case EventType.AgentAnswer:
            this.onAgentAnswer(tl.popA, tl.popB);
            break;
        }
        continue;
      }
      this.closeSlot(boundary);
    }
  }

  private result(): StepResult {
    const b = this.pending;
    this.agents = b >= 0 ? [b] : [];
    const observations: Record<number, DispatchItem> = {};
    if (b >= 0) observations[b] = this.items[b];
    const closed = this.slotClosed;
    for (const a of this.possibleAgents) {
      this.rewardsRec[a] = closed ? this.rewardSum[a] : 0;
      this.terminationsRec[a] = false;
      this.truncationsRec[a] = this.done;
      const info = this.infosRec[a];
      info.slotClosed = closed;
      info.slot = this.slot;
    }
    this.slotClosed = false;
    this.rewardSum.fill(0);
    return {
      observations,
      rewards: this.rewardsRec,
      terminations: this.terminationsRec,
      truncations: this.truncationsRec,
      infos: this.infosRec,
    };
  }

  private readonly isDoneSlot = (s: number): boolean => this.req.status[s] === ST_DONE;

  /** Admits request `nr` (the next in arrival order) and reads the one after it. */
  private admit(nr: Request): void {
    if (nr.arrivalS >= this.horizonS) {
      this.nextReq = null;
      return;
    }
    if (nr.arrivalS < this.lastArrivalS) throw new TypeError('EdgeCloudEnv: requests must be sorted by arrivalS');
    this.lastArrivalS = nr.arrivalS;
    this.nextReq = this.reader!.next();
    const r = this.req;
    const i = r.tail;
    const s = r.add(nr, this.isDoneSlot);
    if (i >= this.fate.length) {
      const f = new Uint8Array(Math.max(2 * this.fate.length, i + 1));
      f.set(this.fate);
      this.fate = f;
    }
    r.status[s] = ST_UPLOAD;
    this.outcome.arrived++;
    this.frames[this.frames.length - 1].arrived++;
    const w = r.service[s];
    this.window.arrivals[w]++;
    this.window.workCoreS[w] += r.workCoreS[s];
    this.timeline.push(r.arrivalS[s] + this.cluster.net.uploadS(r.inputMB[s]), EventType.EapArrive, i, 0);
  }

  /** A request reached its eAP: true when it waits for a decision (it was not refused as hopeless). */
  private onEapArrive(i: number, time: number): boolean {
    const r = this.req;
    const s = i & r.mask;
    r.eapArriveS[s] = time;
    r.status[s] = ST_EAP;
    if (this.opts.dropHopeless && this.predictedSlack(i) < 0) {
      this.fail(i, false);
      return false;
    }
    const b = r.eap[s];
    const item = this.items[b];
    item.request = r.requests[s]!;
    item.action = -1;
    buildMask(this.views ? this.views[b] : this.cluster, item.request.service, this.scenario.queueCapPerReplica, item.mask);
    this.pending = b;
    this.pendingIndex[b] = i;
    return true;
  }

  private dispatch(item: DispatchItem, i: number, action: number): void {
    const c = this.cluster;
    let t = action;
    if (!(Number.isInteger(t) && t >= 0 && t < c.numTargets && item.mask[t] === 1)) {
      if (this.opts.illegalAction === 'throw') {
        throw new RangeError(`EdgeCloudEnv: eAP ${item.eap} chose target ${action}, which the mask forbids`);
      }
      this.illegalActions++;
      t = c.cloudTarget;
    }
    const r = this.req;
    const s = i & r.mask;
    const w = r.service[s];
    r.target[s] = t;
    r.status[s] = ST_FLIGHT;
    c.inFlightCount[t]++;
    c.pendingByService[t * c.numServices + w]++;
    this.dispatched++;
    this.views?.[item.eap].onSent(t, w);
    if (t === c.cloudTarget) this.dispatchedToCloud++;
    this.timeline.push(c.now + c.net.transferS(item.eap, t, r.inputMB[s]), EventType.TargetArrive, i, t);
  }

  /** Close the slot that ends at t1: rewards, stats, frame counters, expiry sweep, telemetry, orchestration. */
  private closeSlot(t1: number): void {
    const c = this.cluster;
    c.now = t1;
    c.integrateUsage(t1);
    const rw = slotRewards(c, this.slotDone, this.slotFailed, this.opts.rewardEpsilon);
    for (let b = 0; b < c.numEaps; b++) this.rewardSum[b] += rw[b];
    this.slotClosed = true;
    this.slotDone.fill(0);
    this.slotFailed.fill(0);
    this.imbalanceSum += c.cpuUsageStd();
    c.resetUsage();
    this.slot++;
    if (this.slot % this.scenario.slotsPerFrame === 0 || this.slot >= this.totalSlots) this.touchHeld(t1, 0);
    if (this.slot % this.scenario.slotsPerFrame === 0 && this.slot < this.totalSlots) {
      this.frames.push({ arrived: 0, completedInTime: 0, failed: 0, scaleOps: 0, replicaS: 0 });
    }
    this.expire(t1);
    if (this.telemetry && t1 + 1e-9 >= this.nextTelemetryS) {
      this.telemetry.tick(t1, (n) => this.abnormal(n, t1));
      this.nextTelemetryS += this.telemetry.o.periodS;
    }
    if (t1 + 1e-9 >= this.nextOrchestrationS && this.opts.orchestration) this.orchestrate();
    if (this.slot >= this.totalSlots) this.finish();
  }

  // ------------------------------------------------------------------ events

  private nodeKey(s: number, t: number): number {
    const r = this.req;
    switch (this.opts.nodeDequeue) {
      case 'fifo':
        return r.targetArriveS[s];
      case 'edf':
        return r.deadlineS[s];
      case 'discounted': {
        const c = this.cluster;
        const slack = r.deadlineS[s] - c.now - c.meanProcS[t * c.numServices + r.service[s]] - c.net.returnS(r.eap[s], t);
        return slack >= 0 ? r.deadlineS[s] : 1e9 + r.deadlineS[s];
      }
    }
    throw new TypeError(`EdgeCloudEnv: unknown nodeDequeue ${String(this.opts.nodeDequeue)}`);
  }

  private onTargetArrive(i: number, t: number, time: number): void {
    const c = this.cluster;
    const r = this.req;
    const s = i & r.mask;
    const w = r.service[s];
    const k = t * c.numServices + w;
    c.inFlightCount[t]--;
    this.tally.sent[t]++;
    if (this.views && t !== c.cloudTarget) {
      // the live node's admission: 503 when failed, without a replica or full; the agent retries on the cloud.
      // Like the live node (orchestrator/emulated-cluster.ts purges its queues on every arrival and
      // completion), requests already too late leave the queue before it is counted: a queue of
      // requests that can no longer be served must not refuse one that can.
      if (c.queues[k].size > 0 && c.queueMinDeadline[k] - this.maxReturnS < time) this.purge(k, t, time);
      const ready = c.ready[k] - c.draining[k];
      if (c.failed[t] || ready <= 0 || c.queues[k].size >= this.scenario.queueCapPerReplica * ready) {
        c.pendingByService[k]--;
        this.tally.refused[t]++;
        this.answer(s, t, null, !c.failed[t], time);
        const b = r.eap[s];
        const back = time + c.net.returnS(b, t) - c.net.deviceLatencyS;
        if (back >= r.deadlineS[s]) {
          this.fail(i, c.failed[t] === 1);
          return;
        }
        const cl = c.cloudTarget;
        this.retriedOnCloud++;
        r.target[s] = cl;
        c.inFlightCount[cl]++;
        c.pendingByService[cl * c.numServices + w]++;
        this.views[b].onSent(cl, w);
        this.timeline.push(back + c.net.transferS(b, cl, r.inputMB[s]), EventType.TargetArrive, i, cl);
        return;
      }
    }
    c.waiting[t]++;
    r.targetArriveS[s] = time;
    r.status[s] = ST_QUEUED;
    c.queues[k].push(i, this.nodeKey(s, t));
    if (r.deadlineS[s] < c.queueMinDeadline[k]) c.queueMinDeadline[k] = r.deadlineS[s];
    this.tryStart(t, w, time);
  }

  /** The result of request i, started at target t now, could not get back by its deadline. */
  private tooLate(i: number, t: number, time: number): boolean {
    const r = this.req;
    const s = i & r.mask;
    return r.deadlineS[s] - this.cluster.net.returnS(r.eap[s], t) < time;
  }

  /** Pops the head of queue k and drops it unserved (too late to start). */
  private dropHead(t: number, k: number): void {
    const c = this.cluster;
    const i = c.queues[k].pop();
    c.waiting[t]--;
    c.pendingByService[k]--;
    this.tally.expired[t]++;
    const s = this.req.slotOf(i);
    this.blameLedger?.failed(t, i, this.req.targetArriveS[s], c.now);
    this.answer(s, t, null, true, c.now);
    this.fail(i, false);
  }

  /** Start queued requests of w at t while a replica and CPU are free. */
  private tryStart(t: number, w: number, time: number): void {
    const c = this.cluster;
    if (c.failed[t]) return;
    const W = c.numServices;
    const k = t * W + w;
    const q = c.queues[k];
    const need = c.svcCpu[w] - 1e-9;
    while (q.size > 0 && c.busy[k] < c.ready[k] - c.draining[k] && c.freeCpu[t] >= need) {
      if (this.tooLate(q.peek(), t, time)) this.dropHead(t, k);
      else this.start(q.pop(), t, w, time);
    }
  }

  /** After CPU was released: start whatever fits, best head first across services. */
  private tryStartAny(t: number, time: number): void {
    const c = this.cluster;
    if (c.failed[t] || c.waiting[t] === 0) return;
    const W = c.numServices;
    const base = t * W;
    for (;;) {
      let best = -1;
      let bestKey = Infinity;
      for (let w = 0; w < W; w++) {
        const k = base + w;
        const q = c.queues[k];
        if (q.size === 0 || c.busy[k] >= c.ready[k] - c.draining[k] || c.freeCpu[t] < c.svcCpu[w] - 1e-9) continue;
        const key = q.peekKey();
        if (key < bestKey || (key === bestKey && best >= 0 && q.peek() < c.queues[base + best].peek())) {
          bestKey = key;
          best = w;
        }
      }
      if (best < 0) return;
      const k = base + best;
      if (this.tooLate(c.queues[k].peek(), t, time)) this.dropHead(t, k);
      else this.start(c.queues[k].pop(), t, best, time);
    }
  }

  private start(i: number, t: number, w: number, time: number): void {
    const c = this.cluster;
    const k = t * c.numServices + w;
    if (t !== c.cloudTarget) {
      this.touchEdge(w, time);
      this.edgeBusy[w]++;
    }
    c.integrateNode(t, time);
    c.busy[k]++;
    c.runningCount[t]++;
    c.waiting[t]--;
    c.pendingByService[k]--;
    c.freeCpu[t] -= c.svcCpu[w];
    const r = this.req;
    const s = i & r.mask;
    r.status[s] = ST_RUNNING;
    r.startS[s] = time;
    c.meanQueueS[t] = discounted(c.meanQueueS[t], time - r.targetArriveS[s]);
    const endS = time + r.workCoreS[s] / c.svcCpu[w];
    this.blameLedger?.started(t, i, time, endS, c.svcCpu[w]);
    this.timeline.push(endS, EventType.Finish, i, t);
  }

  private onFinish(i: number, t: number, time: number): void {
    const r = this.req;
    const s = r.slotOf(i);
    if (s < 0 || r.status[s] !== ST_RUNNING || r.target[s] !== t) return; // failed with its node
    const c = this.cluster;
    const w = r.service[s];
    const k = t * c.numServices + w;
    this.releaseRunning(i, t, w, time);
    this.tally.completed[t]++;
    c.meanProcS[k] = discounted(c.meanProcS[k], time - r.startS[s]);
    this.answer(s, t, time - r.startS[s], true, time);
    const doneAt = time + c.net.returnS(r.eap[s], t);
    r.status[s] = ST_DONE;
    const b = r.eap[s];
    const latency = doneAt - r.arrivalS[s];
    if (this.latencyS.length > 0) this.latencyS[this.latencyCount] = latency;
    this.latencyCount++;
    this.latencySumS += latency;
    this.answered.push(latency);
    if (doneAt <= r.deadlineS[s]) {
      this.fate[i] = 1;
      this.outcome.completedInTime++;
      this.slotDone[b]++;
      this.window.completedInTime[w]++;
      this.frames[this.frames.length - 1].completedInTime++;
    } else {
      this.fate[i] = 2;
      // late by no more than it waited: the wait made it late (blame.ts)
      if (this.blameLedger && doneAt - r.deadlineS[s] <= r.startS[s] - r.targetArriveS[s])
        this.blameLedger.failed(t, i, r.targetArriveS[s], r.startS[s]);
      this.outcome.late++;
      this.slotFailed[b]++;
      this.window.failed[w]++;
      this.frames[this.frames.length - 1].failed++;
    }
    this.reap(t, w);
    this.tryStart(t, w, time);
    this.tryStartAny(t, time);
  }

  private releaseRunning(_i: number, t: number, w: number, time: number): void {
    const c = this.cluster;
    if (t !== c.cloudTarget) {
      this.touchEdge(w, time);
      this.edgeBusy[w]--;
    }
    c.integrateNode(t, time);
    c.busy[t * c.numServices + w]--;
    c.runningCount[t]--;
    c.freeCpu[t] += c.svcCpu[w];
  }

  /** Delete draining replicas that are idle now. */
  private reap(t: number, w: number): void {
    const c = this.cluster;
    const k = t * c.numServices + w;
    while (c.draining[k] > 0 && c.ready[k] - c.busy[k] > 0) {
      this.touchHeld(c.now, -1);
      this.touchEdge(w, c.now);
      c.integrateNode(t, c.now);
      c.ready[k]--;
      this.edgeReady[w]--;
      c.draining[k]--;
      c.usedMem[t] -= c.svcMem[w];
    }
  }

  private onReplicaReady(n: number, w: number, time: number): void {
    const c = this.cluster;
    const k = n * c.numServices + w;
    if (c.starting[k] <= 0) return; // cancelled while starting
    this.touchEdge(w, time);
    c.starting[k]--;
    c.ready[k]++;
    this.edgeReady[w]++;
    this.tryStart(n, w, time);
  }

  private onNodeFault(n: number, down: boolean, time: number): void {
    const c = this.cluster;
    if (n < 0 || n >= c.numNodes) return;
    if (down) {
      if (c.failed[n]) return;
      c.failed[n] = 1;
      // requests in service fail now, in index order
      const r = this.req;
      for (let i = r.head; i < r.tail; i++) {
        const s = i & r.mask;
        if (r.status[s] === ST_RUNNING && r.target[s] === n) {
          this.releaseRunning(i, n, r.service[s], time);
          this.answer(s, n, null, false, time);
          this.tally.lost[n]++;
          this.fail(i, true);
        }
      }
    } else {
      c.failed[n] = 0;
      for (let w = 0; w < c.numServices; w++) this.reap(n, w);
      this.tryStartAny(n, time);
    }
  }

  /** Ground truth for telemetry: node n is failed, or fails within the precursor time. */
  private abnormal(n: number, now: number): boolean {
    if (this.cluster.failed[n]) return true;
    return faultState(this.opts.faults ?? [], n, now, this.telemetry?.o.precursorS ?? 0) !== 'ok';
  }

  /** Count request i as dropped (failed before finishing). */
  private fail(i: number, atFailedNode: boolean): void {
    const r = this.req;
    const s = i & r.mask;
    r.status[s] = ST_DONE;
    this.fate[i] = 3;
    this.outcome.dropped++;
    const wait = r.deadlineS[s] - r.arrivalS[s];
    if (this.droppedWaitS.length > 0) this.droppedWaitS[this.droppedCount] = wait;
    this.droppedCount++;
    this.answered.push(wait);
    if (atFailedNode) this.lostToFailedNodes++;
    const b = r.eap[s];
    this.slotFailed[b]++;
    this.window.failed[r.service[s]]++;
    this.frames[this.frames.length - 1].failed++;
  }

  /** Slot boundary: drop every queued request whose result could no longer get back by its deadline. */
  private expire(now: number): void {
    const c = this.cluster;
    const W = c.numServices;
    for (let k = 0; k < c.queues.length; k++) {
      const q = c.queues[k];
      if (q.size === 0 || c.queueMinDeadline[k] - this.maxReturnS >= now) continue;
      this.purge(k, (k / W) | 0, now);
    }
  }

  /** Drops every request of queue k (at target t) whose result could no longer get back by its deadline. */
  private purge(k: number, t: number, now: number): void {
    const c = this.cluster;
    const dl = this.req.deadlineS;
    const mask = this.req.mask;
    const q = c.queues[k];
    const failedNode = c.failed[t] === 1;
    const removed = q.filter((i) => {
      if (!this.tooLate(i, t, now)) return true;
      this.answer(i & mask, t, null, !failedNode, now);
      if (!failedNode) this.blameLedger?.failed(t, i, this.req.targetArriveS[i & mask], now);
      (failedNode ? this.tally.lost : this.tally.expired)[t]++;
      this.fail(i, failedNode);
      return false;
    });
    c.waiting[t] -= removed;
    c.pendingByService[k] -= removed;
    let m = Infinity;
    for (let j = 0; j < q.size; j++) if (dl[q.items[j] & mask] < m) m = dl[q.items[j] & mask];
    c.queueMinDeadline[k] = m;
  }

  // ------------------------------------------------------------------ discounted experience

  /** Predicted slack (s) of request i if dispatched now to its best target. */
  predictedSlack(i: number): number {
    const c = this.cluster;
    const r = this.req;
    const s = i & r.mask;
    const w = r.service[s];
    const b = r.eap[s];
    let best = Infinity;
    for (let t = 0; t < c.numTargets; t++) {
      if (t !== c.cloudTarget && c.ready[t * c.numServices + w] - c.draining[t * c.numServices + w] <= 0) continue;
      const eta = c.net.transferS(b, t, r.inputMB[s]) + c.meanQueueS[t] + c.meanProcS[t * c.numServices + w] + c.net.returnS(b, t);
      if (eta < best) best = eta;
    }
    return r.deadlineS[s] - c.now - best;
  }

  // ------------------------------------------------------------------ orchestration and stats

  /** Busy and ready replica-seconds of w on the edge, integrated up to `now`. */
  private touchEdge(w: number, now: number): void {
    const dt = now - this.edgeSince[w];
    if (dt > 0) {
      this.window.busyReplicaS[w] += this.edgeBusy[w] * dt;
      this.window.readyReplicaS[w] += this.edgeReady[w] * dt;
    }
    this.edgeSince[w] = now;
  }

  /** Credit the edge replicas held since heldSince to the current frame, then add `delta` to them. */
  private touchHeld(now: number, delta: number): void {
    this.frames[this.frames.length - 1].replicaS += this.heldReplicas * (now - this.heldSince);
    this.heldSince = now;
    this.heldReplicas += delta;
  }

  /** Edge replica-seconds held over the run so far (up to the last change or frame end). */
  get replicaSeconds(): number {
    let s = 0;
    for (const f of this.frames) s += f.replicaS;
    return s;
  }

  private resetWindow(): void {
    const w = this.window;
    w.arrivals.fill(0);
    w.busyReplicaS.fill(0);
    w.readyReplicaS.fill(0);
    w.completedInTime.fill(0);
    w.failed.fill(0);
    w.workCoreS.fill(0);
    w.windowS = 0;
  }

  private orchestrate(): void {
    const orch = this.opts.orchestration!;
    const now = this.cluster.now;
    for (let w = 0; w < this.cluster.numServices; w++) this.touchEdge(w, now);
    this.window.windowS = now - this.windowStartS;
    const ops: ScaleOp[] = orch.decide(this.executor.observe());
    this.cluster.actor = orch.actorFor?.() ?? 'main';
    const done = this.executor.apply(ops).executed;
    const executed = done.length;
    // the nodes whose replicas changed: their device filters mark a break, as the agents' do on the new placement
    if (this.telemetry && executed > 0) this.telemetry.placementChanged(done.map((op) => op.node));
    if (this.views) this.pushPlacement();
    this.scaleOps += executed;
    this.frames[this.frames.length - 1].scaleOps += executed;
    this.resetWindow();
    this.windowStartS = now;
    this.nextOrchestrationS += orch.periodS;
  }

  private finish(): void {
    this.done = true;
    this.pending = -1;
    const o = this.outcome;
    let inSystem = 0;
    const r = this.req;
    for (let i = r.head; i < r.tail; i++) {
      const st = r.status[i & r.mask];
      if (st !== 0 && st !== ST_DONE) inSystem++;
    }
    this.reader = null;
    this.nextReq = null;
    o.queuedAtEnd = inSystem;
    if (o.arrived !== o.completedInTime + o.late + o.dropped + o.queuedAtEnd) {
      throw new Error(
        `EdgeCloudEnv: accounting invariant broken: arrived ${o.arrived} != completedInTime ${o.completedInTime} + late ${o.late} + dropped ${o.dropped} + queuedAtEnd ${o.queuedAtEnd}`,
      );
    }
  }
}

function emptyRequest(): Request {
  return { id: -1, service: 0, eap: 0, arrivalS: 0, deadlineS: 0, workCoreS: 0, inputMB: 0 };
}
