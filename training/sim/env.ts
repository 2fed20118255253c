/**
 * # EdgeCloudEnv (edge-cloud-v1)
 *
 * A PettingZoo-style parallel environment of an edge-cloud cluster driven by a request trace.
 *
 * | item | value |
 * | --- | --- |
 * | agents | eAP ids `0..numEaps-1` (`possibleAgents`); `agents` = eAPs with a decision pending |
 * | observation | a `DispatchItem`: the request to dispatch, its eAP, `mask` (context filter), plus the `view` (ClusterView) the policy may read; policies turn this into tensors themselves |
 * | action | target index: `0..numNodes-1` an edge node, `numNodes` the cloud |
 * | step | one dispatch *round*: each live eAP dispatches one request. When no eAP has anything left to dispatch in the slot (budget or queue exhausted), time advances to the next slot and `infos[b].slotClosed` is true |
 * | reward | per eAP for the slot that closed: u_b = exp(-lambda_b - epsilon nu_b) (reward.ts); 0 in rounds that close no slot |
 * | truncation | all eAPs after `frames x slotsPerFrame` slots |
 * | termination | never (the trace is open-ended) |
 *
 * Time: slot k covers (k*slotS, (k+1)*slotS]; dispatch happens at slot boundaries, events
 * (uploads, transfers, starts, completions, replica start-ups, faults) at their exact times.
 * Requests whose deadline has passed are dropped from every queue at each slot boundary. At the
 * end, `arrived = completedInTime + late + dropped + queuedAtEnd` is checked (throws if not).
 *
 * Version history: v1 (this file).
 */
import type { Outcome, Request, ScaleOp } from '../../shared/domain';
import type { DequeueName } from '../../shared/dequeue';
import { slackKey, discounted } from '../../shared/dequeue';
import type { DispatchItem, OrchestrationPolicy, OrchestrationView, ServiceWindowStats } from '../../shared/policy';
import type { Scenario } from '../../shared/scenario';
import { buildMask } from '../../agent/filters/context-filter';
import { Cluster, RequestTable } from './cluster';
import { EventType, Timeline } from './timeline';
import { RequestQueue } from './queue';
import { slotRewards } from './reward';
import { applyScaleOps } from './executor';
import type { Fault } from './faults';
import { TelemetryFilters } from './telemetry';

export const ENV_VERSION = 'edge-cloud-v1';

export interface EnvOptions {
  requests: Request[];
  frames: number;
  /** eAP queue order. @defaultValue 'edf' */
  eapDequeue?: DequeueName;
  /** node queue order. @defaultValue 'edf' */
  nodeDequeue?: DequeueName;
  /** With 'discounted': drop hopeless requests at the eAP instead of sending them last. */
  dropHopeless?: boolean;
  orchestration?: OrchestrationPolicy;
  faults?: Fault[];
  /** What an action outside the mask does: throw (tests) or go to the cloud and be counted. */
  illegalAction?: 'throw' | 'cloud';
  /** epsilon of the reward. @defaultValue 1 */
  rewardEpsilon?: number;
  /** Generate node telemetry and run the device filters on it (telemetry.ts). @defaultValue false */
  deviceFilters?: boolean;
  /** With deviceFilters: the learned stage decides the ambiguous windows (telemetry.ts; needs a tfjs backend). @defaultValue false */
  learnedDetector?: boolean;
  seed?: number;
}

export interface StepResult {
  observations: Record<number, DispatchItem>;
  rewards: Record<number, number>;
  terminations: Record<number, boolean>;
  truncations: Record<number, boolean>;
  infos: Record<number, { slotClosed: boolean; slot: number }>;
}

/** Per-frame counters (for learning curves and the eval plot). */
export interface FrameStats {
  arrived: number;
  completedInTime: number;
  failed: number;
  scaleOps: number;
}

const ST_UPLOAD = 1;
const ST_EAPQ = 2;
const ST_FLIGHT = 3;
const ST_QUEUED = 4;
const ST_RUNNING = 5;
const ST_DONE = 6;

export class EdgeCloudEnv {
  readonly possibleAgents: number[];
  agents: number[] = [];
  readonly cluster: Cluster;
  readonly totalSlots: number;
  private readonly req: RequestTable;
  private readonly status: Uint8Array;
  private readonly timeline = new Timeline();
  private readonly eapQueues: RequestQueue[];
  private readonly items: DispatchItem[];
  private readonly budget: Int32Array;
  private nextArrival = 0;
  private slot = 0;
  private done = false;
  private readonly opts: Required<Omit<EnvOptions, 'orchestration' | 'faults' | 'seed'>> & Pick<EnvOptions, 'orchestration' | 'faults' | 'seed'>;

  // accounting
  readonly outcome: Outcome = { arrived: 0, completedInTime: 0, late: 0, dropped: 0, queuedAtEnd: 0 };
  /** requests that failed because a node failed under them or while they waited there */
  lostToFailedNodes = 0;
  dispatched = 0;
  dispatchedToCloud = 0;
  illegalActions = 0;
  scaleOps = 0;
  readonly latencyS: Float64Array;
  latencyCount = 0;
  readonly frames: FrameStats[] = [];
  imbalanceSum = 0;
  private readonly slotDone: Float64Array;
  private readonly slotFailed: Float64Array;
  private readonly window: ServiceWindowStats;
  private nextOrchestrationS = Infinity;
  private readonly orchView: OrchestrationView;
  /** device filters on simulated telemetry (null when off) */
  telemetry: TelemetryFilters | null = null;
  private nextTelemetryS = 0;

  constructor(
    readonly scenario: Scenario,
    options: EnvOptions,
  ) {
    this.opts = {
      eapDequeue: 'edf',
      nodeDequeue: 'edf',
      dropHopeless: false,
      illegalAction: 'throw',
      rewardEpsilon: 1,
      deviceFilters: false,
      learnedDetector: false,
      // an option passed as undefined keeps its default (a plain spread would overwrite it)
      ...(Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)) as EnvOptions),
    };
    if (!Number.isInteger(options.frames) || options.frames < 1) {
      throw new TypeError(`EdgeCloudEnv: expected frames to be a positive integer, but got ${options.frames}`);
    }
    this.cluster = new Cluster(scenario);
    const c = this.cluster;
    this.possibleAgents = Array.from({ length: c.numEaps }, (_, b) => b);
    this.totalSlots = options.frames * scenario.slotsPerFrame;
    this.req = new RequestTable(options.requests);
    this.status = new Uint8Array(this.req.n);
    this.latencyS = new Float64Array(this.req.n);
    this.eapQueues = Array.from({ length: c.numEaps }, () => new RequestQueue());
    this.items = this.possibleAgents.map((b) => ({
      request: options.requests[0] ?? emptyRequest(),
      eap: b,
      mask: new Uint8Array(c.numTargets),
      action: -1,
    }));
    this.budget = new Int32Array(c.numEaps);
    this.slotDone = new Float64Array(c.numEaps);
    this.slotFailed = new Float64Array(c.numEaps);
    const W = c.numServices;
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
    this.orchView = Object.create(c, {
      window: { get: () => win },
    }) as OrchestrationView;
    for (let i = 1; i < this.req.n; i++) {
      if (this.req.arrivalS[i] < this.req.arrivalS[i - 1]) throw new TypeError('EdgeCloudEnv: requests must be sorted by arrivalS');
    }
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

  reset(options: { seed: number }): { observations: Record<number, DispatchItem>; infos: Record<number, { slotClosed: boolean; slot: number }> } {
    const c = this.cluster;
    c.reset();
    this.req.resetDynamic();
    this.status.fill(0);
    this.timeline.clear();
    for (const q of this.eapQueues) q.clear();
    this.nextArrival = 0;
    this.slot = 0;
    this.done = false;
    Object.assign(this.outcome, { arrived: 0, completedInTime: 0, late: 0, dropped: 0, queuedAtEnd: 0 });
    this.lostToFailedNodes = 0;
    this.dispatched = 0;
    this.dispatchedToCloud = 0;
    this.illegalActions = 0;
    this.scaleOps = 0;
    this.latencyCount = 0;
    this.frames.length = 0;
    this.frames.push({ arrived: 0, completedInTime: 0, failed: 0, scaleOps: 0 });
    this.imbalanceSum = 0;
    this.resetWindow();
    for (const f of this.opts.faults ?? []) {
      this.timeline.push(f.startS, EventType.NodeFault, f.node, 1);
      this.timeline.push(f.startS + f.durationS, EventType.NodeFault, f.node, 0);
    }
    this.telemetry?.dispose();
    this.telemetry = this.opts.deviceFilters ? new TelemetryFilters(c, options.seed, this.opts.learnedDetector ? { learned: {} } : {}) : null;
    this.nextTelemetryS = 0;
    const orch = this.opts.orchestration;
    if (orch) {
      orch.reset?.(options.seed, this.orchView);
      this.nextOrchestrationS = orch.periodS > 0 ? orch.periodS : Infinity;
    } else {
      this.nextOrchestrationS = Infinity;
    }
    // slot 0 boundary: nothing has arrived yet at t = 0 except requests sent exactly at 0
    this.admitArrivals(0);
    this.runEvents(0);
    this.startSlot();
    const r = this.collectRound();
    return { observations: r.observations, infos: r.infos };
  }

  /**
   * Apply the actions of the live agents (eAP -> target) and advance to the next decision point.
   */
  step(actions: Record<number, number> | ArrayLike<number>): StepResult {
    if (this.done) throw new Error('EdgeCloudEnv: step() after the episode ended; call reset()');
    const acts = actions as Record<number, number>;
    for (const b of this.agents) {
      const item = this.items[b];
      this.dispatch(item, acts[b]);
    }
    return this.collectRound();
  }

  /** The global state for the centralised critic (CTDE): the whole cluster, read-only. */
  state(): Cluster {
    return this.cluster;
  }

  /** Mean over slots of the std of edge nodes' CPU usage ratio. */
  get edgeImbalance(): number {
    return this.slot > 0 ? this.imbalanceSum / this.slot : 0;
  }

  // ------------------------------------------------------------------ rounds and slots

  private rewards: Record<number, number> = {};
  private slotClosed = false;

  private collectRound(): StepResult {
    // the reward of the slot closed by this step, if any; rewards of empty slots skipped on the way
    // to the next decision are added to it
    let rw = this.slotClosed ? this.rewards : zeroRecord(this.possibleAgents);
    let cl = this.slotClosed;
    this.slotClosed = false;
    let live = this.fillRound();
    while (live.length === 0 && !this.done) {
      this.advanceSlot();
      rw = sumRecords(rw, this.rewards);
      cl = true;
      this.slotClosed = false;
      live = this.done ? [] : this.fillRound();
    }
    this.agents = live;
    const observations: Record<number, DispatchItem> = {};
    for (const b of live) observations[b] = this.items[b];
    const trunc = this.done;
    const terminations: Record<number, boolean> = {};
    const truncations: Record<number, boolean> = {};
    const infos: Record<number, { slotClosed: boolean; slot: number }> = {};
    for (const b of this.possibleAgents) {
      terminations[b] = false;
      truncations[b] = trunc;
      infos[b] = { slotClosed: cl, slot: this.slot };
    }
    return { observations, rewards: rw, terminations, truncations, infos };
  }

  /** Pops one request per eAP with budget left; returns the live eAPs. */
  private fillRound(): number[] {
    const c = this.cluster;
    const live: number[] = [];
    for (let b = 0; b < c.numEaps; b++) {
      if (this.budget[b] <= 0) continue;
      const q = this.eapQueues[b];
      let i = -1;
      while (q.size > 0) {
        const cand = q.pop();
        if (this.opts.dropHopeless && this.opts.eapDequeue === 'discounted' && this.isHopeless(cand)) {
          this.fail(cand, false);
          continue;
        }
        i = cand;
        break;
      }
      if (i < 0) continue;
      c.setEapQueueLen(b, q.size);
      this.budget[b]--;
      const item = this.items[b];
      item.request = this.req.requests[i];
      item.action = -1;
      buildMask(c, item.request.service, this.scenario.queueCapPerReplica, item.mask);
      live.push(b);
    }
    return live;
  }

  private dispatch(item: DispatchItem, action: number): void {
    const c = this.cluster;
    const i = item.request.id;
    let t = action;
    if (!(Number.isInteger(t) && t >= 0 && t < c.numTargets && item.mask[t] === 1)) {
      if (this.opts.illegalAction === 'throw') {
        throw new RangeError(`EdgeCloudEnv: eAP ${item.eap} chose target ${action}, which the mask forbids`);
      }
      this.illegalActions++;
      t = c.cloudTarget;
    }
    const w = this.req.service[i];
    this.req.target[i] = t;
    this.status[i] = ST_FLIGHT;
    c.inFlightCount[t]++;
    c.pendingByService[t * c.numServices + w]++;
    this.dispatched++;
    if (t === c.cloudTarget) this.dispatchedToCloud++;
    this.timeline.push(c.now + c.net.transferS(item.eap, t, this.req.inputMB[i]), EventType.TargetArrive, i, t);
  }

  private startSlot(): void {
    const c = this.cluster;
    this.budget.fill(this.scenario.dispatchBudgetPerSlot);
    if (this.opts.eapDequeue === 'discounted') this.rekeyEapQueues();
    for (let b = 0; b < c.numEaps; b++) c.setEapQueueLen(b, this.eapQueues[b].size);
  }

  /** Close the current slot, run events up to the next boundary, open the next slot. */
  private advanceSlot(): void {
    const c = this.cluster;
    const slotS = this.scenario.slotS;
    const t1 = (this.slot + 1) * slotS;
    this.admitArrivals(t1);
    this.runEvents(t1);
    c.now = t1;
    this.rewards = slotRewards(c, this.slotDone, this.slotFailed, this.opts.rewardEpsilon);
    this.slotClosed = true;
    this.slotDone.fill(0);
    this.slotFailed.fill(0);
    this.accumulateSlotStats(slotS);
    this.slot++;
    if (this.slot % this.scenario.slotsPerFrame === 0 && this.slot < this.totalSlots) {
      this.frames.push({ arrived: 0, completedInTime: 0, failed: 0, scaleOps: 0 });
    }
    this.expire(t1);
    if (this.telemetry && t1 + 1e-9 >= this.nextTelemetryS) {
      this.telemetry.tick(t1, (n) => this.abnormal(n, t1));
      this.nextTelemetryS += this.telemetry.o.periodS;
    }
    if (t1 + 1e-9 >= this.nextOrchestrationS && this.opts.orchestration) this.orchestrate();
    if (this.slot >= this.totalSlots) {
      this.finish();
      return;
    }
    this.startSlot();
  }

  private admitArrivals(untilS: number): void {
    const r = this.req;
    const net = this.cluster.net;
    // arrivals with arrivalS < untilS belong to the slots so far (the last slot's boundary is exclusive)
    while (this.nextArrival < r.n && (r.arrivalS[this.nextArrival] < untilS || (untilS === 0 && r.arrivalS[this.nextArrival] === 0))) {
      const i = this.nextArrival++;
      if (r.arrivalS[i] >= this.totalSlots * this.scenario.slotS) {
        this.nextArrival = r.n;
        break;
      }
      this.status[i] = ST_UPLOAD;
      this.outcome.arrived++;
      this.frames[this.frames.length - 1].arrived++;
      const w = r.service[i];
      this.window.arrivals[w]++;
      this.window.workCoreS[w] += r.workCoreS[i];
      this.timeline.push(r.arrivalS[i] + net.uploadS(r.inputMB[i]), EventType.EapArrive, i, 0);
    }
  }

  private runEvents(untilS: number): void {
    const tl = this.timeline;
    while (tl.size > 0 && tl.peekTime() <= untilS) {
      tl.pop();
      const time = tl.popTime;
      this.cluster.now = time;
      switch (tl.popType) {
        case EventType.EapArrive:
          this.onEapArrive(tl.popA, time);
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
      }
    }
  }

  // ------------------------------------------------------------------ events

  private eapKey(i: number): number {
    switch (this.opts.eapDequeue) {
      case 'fifo':
        return this.req.eapArriveS[i];
      case 'edf':
        return this.req.deadlineS[i];
      case 'discounted':
        return slackKey(this.predictedSlack(i));
      default:
        throw new TypeError(`EdgeCloudEnv: unknown eapDequeue ${String(this.opts.eapDequeue)}`);
    }
  }

  private onEapArrive(i: number, time: number): void {
    this.req.eapArriveS[i] = time;
    this.status[i] = ST_EAPQ;
    this.eapQueues[this.req.eap[i]].push(i, this.eapKey(i));
  }

  private nodeKey(i: number, t: number): number {
    switch (this.opts.nodeDequeue) {
      case 'fifo':
        return this.req.targetArriveS[i];
      case 'edf':
        return this.req.deadlineS[i];
      case 'discounted': {
        const c = this.cluster;
        const slack = this.req.deadlineS[i] - c.now - c.meanProcS[t * c.numServices + this.req.service[i]] - c.net.returnS(this.req.eap[i], t);
        return slack >= 0 ? this.req.deadlineS[i] : 1e9 + this.req.deadlineS[i];
      }
    }
    throw new TypeError(`EdgeCloudEnv: unknown nodeDequeue ${String(this.opts.nodeDequeue)}`);
  }

  private onTargetArrive(i: number, t: number, time: number): void {
    const c = this.cluster;
    const w = this.req.service[i];
    const k = t * c.numServices + w;
    c.inFlightCount[t]--;
    c.waiting[t]++;
    this.req.targetArriveS[i] = time;
    this.status[i] = ST_QUEUED;
    c.queues[k].push(i, this.nodeKey(i, t));
    if (this.req.deadlineS[i] < c.queueMinDeadline[k]) c.queueMinDeadline[k] = this.req.deadlineS[i];
    this.tryStart(t, w, time);
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
      this.start(q.pop(), t, w, time);
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
      this.start(c.queues[base + best].pop(), t, best, time);
    }
  }

  private start(i: number, t: number, w: number, time: number): void {
    const c = this.cluster;
    const k = t * c.numServices + w;
    c.busy[k]++;
    c.runningCount[t]++;
    c.waiting[t]--;
    c.pendingByService[k]--;
    c.freeCpu[t] -= c.svcCpu[w];
    this.status[i] = ST_RUNNING;
    this.req.startS[i] = time;
    c.meanQueueS[t] = discounted(c.meanQueueS[t], time - this.req.targetArriveS[i]);
    this.timeline.push(time + this.req.workCoreS[i] / c.svcCpu[w], EventType.Finish, i, t);
  }

  private onFinish(i: number, t: number, time: number): void {
    if (this.status[i] !== ST_RUNNING || this.req.target[i] !== t) return; // failed with its node
    const c = this.cluster;
    const w = this.req.service[i];
    const k = t * c.numServices + w;
    this.releaseRunning(i, t, w);
    c.meanProcS[k] = discounted(c.meanProcS[k], time - this.req.startS[i]);
    const doneAt = time + c.net.returnS(this.req.eap[i], t);
    this.status[i] = ST_DONE;
    const b = this.req.eap[i];
    this.latencyS[this.latencyCount++] = doneAt - this.req.arrivalS[i];
    if (doneAt <= this.req.deadlineS[i]) {
      this.outcome.completedInTime++;
      this.slotDone[b]++;
      this.window.completedInTime[w]++;
      this.frames[this.frames.length - 1].completedInTime++;
    } else {
      this.outcome.late++;
      this.slotFailed[b]++;
      this.window.failed[w]++;
      this.frames[this.frames.length - 1].failed++;
    }
    this.reap(t, w);
    this.tryStart(t, w, time);
    this.tryStartAny(t, time);
  }

  private releaseRunning(_i: number, t: number, w: number): void {
    const c = this.cluster;
    c.busy[t * c.numServices + w]--;
    c.runningCount[t]--;
    c.freeCpu[t] += c.svcCpu[w];
  }

  /** Delete draining replicas that are idle now. */
  reap(t: number, w: number): void {
    const c = this.cluster;
    const k = t * c.numServices + w;
    while (c.draining[k] > 0 && c.ready[k] - c.busy[k] > 0) {
      c.ready[k]--;
      c.draining[k]--;
      c.usedMem[t] -= c.svcMem[w];
    }
  }

  private onReplicaReady(n: number, w: number, time: number): void {
    const c = this.cluster;
    const k = n * c.numServices + w;
    if (c.starting[k] <= 0) return; // cancelled while starting
    c.starting[k]--;
    c.ready[k]++;
    this.tryStart(n, w, time);
  }

  /** Called by the executor for a +1 order. */
  scheduleReplica(n: number, w: number): void {
    this.timeline.push(this.cluster.now + this.scenario.replicaStartupS, EventType.ReplicaReady, n, w);
  }

  private onNodeFault(n: number, down: boolean, time: number): void {
    const c = this.cluster;
    if (n < 0 || n >= c.numNodes) return;
    if (down) {
      if (c.failed[n]) return;
      c.failed[n] = 1;
      // requests in service fail now
      for (let i = 0; i < this.req.n; i++) {
        if (this.status[i] === ST_RUNNING && this.req.target[i] === n) {
          this.releaseRunning(i, n, this.req.service[i]);
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
    const pre = this.telemetry?.o.precursorS ?? 0;
    for (const f of this.opts.faults ?? []) {
      if (f.node === n && now >= f.startS - pre && now < f.startS + f.durationS) return true;
    }
    return false;
  }

  /** Count request i as dropped (failed before finishing). */
  private fail(i: number, atFailedNode: boolean): void {
    this.status[i] = ST_DONE;
    this.outcome.dropped++;
    if (atFailedNode) this.lostToFailedNodes++;
    const b = this.req.eap[i];
    this.slotFailed[b]++;
    this.window.failed[this.req.service[i]]++;
    this.frames[this.frames.length - 1].failed++;
  }

  /** Drop every queued request whose deadline has passed (slot boundary). */
  private expire(now: number): void {
    const c = this.cluster;
    const dl = this.req.deadlineS;
    const keep = (i: number): boolean => {
      if (dl[i] > now) return true;
      this.fail(i, false);
      return false;
    };
    for (const q of this.eapQueues) if (q.size > 0) q.filter(keep);
    const W = c.numServices;
    for (let k = 0; k < c.queues.length; k++) {
      const q = c.queues[k];
      if (q.size === 0 || c.queueMinDeadline[k] > now) continue;
      const t = (k / W) | 0;
      const failedNode = c.failed[t] === 1;
      const removed = q.filter((i) => {
        if (dl[i] > now) return true;
        this.fail(i, failedNode);
        return false;
      });
      c.waiting[t] -= removed;
      c.pendingByService[k] -= removed;
      let m = Infinity;
      for (let j = 0; j < q.size; j++) if (dl[q.items[j]] < m) m = dl[q.items[j]];
      c.queueMinDeadline[k] = m;
    }
  }

  // ------------------------------------------------------------------ discounted experience

  /** Predicted slack (s) of request i if dispatched now to its best target. */
  predictedSlack(i: number): number {
    const c = this.cluster;
    const w = this.req.service[i];
    const b = this.req.eap[i];
    let best = Infinity;
    for (let t = 0; t < c.numTargets; t++) {
      if (t !== c.cloudTarget && c.ready[t * c.numServices + w] - c.draining[t * c.numServices + w] <= 0) continue;
      const eta =
        c.net.transferS(b, t, this.req.inputMB[i]) + c.meanQueueS[t] + c.meanProcS[t * c.numServices + w] + c.net.returnS(b, t);
      if (eta < best) best = eta;
    }
    return this.req.deadlineS[i] - c.now - best;
  }

  private isHopeless(i: number): boolean {
    return this.predictedSlack(i) < 0;
  }

  private rekeyEapQueues(): void {
    for (const q of this.eapQueues) if (q.size > 0) q.filter(() => true, (i) => slackKey(this.predictedSlack(i)));
  }

  // ------------------------------------------------------------------ orchestration and stats

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

  private accumulateSlotStats(slotS: number): void {
    const c = this.cluster;
    const W = c.numServices;
    const win = this.window;
    let sum = 0;
    let sum2 = 0;
    for (let n = 0; n < c.numNodes; n++) {
      const u = 1 - c.freeCpu[n] / c.cpu[n];
      sum += u;
      sum2 += u * u;
      const base = n * W;
      for (let w = 0; w < W; w++) {
        const r = c.ready[base + w];
        if (r === 0) continue;
        win.readyReplicaS[w] += r * slotS;
        win.busyReplicaS[w] += c.busy[base + w] * slotS;
      }
    }
    const mean = sum / c.numNodes;
    this.imbalanceSum += Math.sqrt(Math.max(0, sum2 / c.numNodes - mean * mean));
    win.windowS += slotS;
  }

  private orchestrate(): void {
    const orch = this.opts.orchestration!;
    const ops: ScaleOp[] = orch.decide(this.orchView);
    const executed = applyScaleOps(this, ops);
    this.scaleOps += executed;
    this.frames[this.frames.length - 1].scaleOps += executed;
    this.resetWindow();
    this.nextOrchestrationS += orch.periodS;
  }

  private finish(): void {
    this.done = true;
    const o = this.outcome;
    let inSystem = 0;
    for (let i = 0; i < this.req.n; i++) {
      const s = this.status[i];
      if (s !== 0 && s !== ST_DONE) inSystem++;
    }
    o.queuedAtEnd = inSystem;
    if (o.arrived !== o.completedInTime + o.late + o.dropped + o.queuedAtEnd) {
      throw new Error(
        `EdgeCloudEnv: accounting invariant broken: arrived ${o.arrived} != completedInTime ${o.completedInTime} + late ${o.late} + dropped ${o.dropped} + queuedAtEnd ${o.queuedAtEnd}`,
      );
    }
  }
}

function zeroRecord(keys: number[]): Record<number, number> {
  const r: Record<number, number> = {};
  for (const k of keys) r[k] = 0;
  return r;
}

function sumRecords(a: Record<number, number>, b: Record<number, number>): Record<number, number> {
  const r: Record<number, number> = {};
  for (const k of Object.keys(a)) r[+k] = a[+k] + (b[+k] ?? 0);
  return r;
}

function emptyRequest(): Request {
  return { id: -1, service: 0, eap: 0, arrivalS: 0, deadlineS: 0, workCoreS: 0, inputMB: 0 };
}
