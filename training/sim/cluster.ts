/**
 * The simulated edge cluster: nodes with replicas and queues, a finite cloud, requests moving
 * through them. Struct-of-arrays indexed by target (0..numNodes-1 edge nodes, numNodes = cloud) and
 * by target * numServices + service. Implements the ClusterView that dispatch policies read.
 *
 * Semantics (ALGORITHMS.md section 1):
 * - a replica of w reserves memGB[w] on its node from creation until deletion, and serves one
 *   request at a time; a request of w needs cpuCores[w] free CPU on the node to start, held until
 *   it finishes (processing time = work / cpuCores[w]), then released;
 * - a new replica is ready after replicaStartupS; a deleted replica leaves only when idle;
 * - the cloud hosts every service, limited by its total vCPU (concurrency = vCPU / cpuCores[w]);
 * - a failed node serves nothing: its running requests fail, its queue waits and expires.
 */
import type { ActorSlot } from '../../shared/protocol/envelope';
import type { Placement, Request } from '../../shared/domain';
import type { ClusterView } from '../../shared/policy';
import type { Scenario } from '../../shared/scenario';
import { capacityArrays, ScenarioTargets } from '../../shared/scenario';
import { fitsReplica, initialPlacement } from '../../shared/orchestration/placement';
import { Network } from '../../shared/network';
import { RequestQueue } from './queue';

/** A (target, service) queue as the simulator holds it: `size` request ids and their keys (read only). */
export interface QueuedRequests {
  readonly items: ArrayLike<number>;
  readonly keys: ArrayLike<number>;
  readonly size: number;
}

/**
 * What only the simulator can show, beyond ClusterView: the contents of its node queues and the
 * ground truth of failures. A train-time teacher reads it (training/baselines/queue-teacher.ts);
 * no live agent has it.
 */
export interface SimulatorInsight {
  /** The requests queued at `target` for `service`, in heap order; keys are deadlines under edf. */
  queuedRequests(target: number, service: number): QueuedRequests;
  /** Ground truth: the node has failed (`healthy()` is what the device filters say). */
  isDown(target: number): boolean;
}

/** The simulator's insight behind a view (the Cluster itself), or null for any other view (an agent's). */
export function simulatorInsight(view: ClusterView): SimulatorInsight | null {
  const v = view as Partial<SimulatorInsight>;
  return typeof v.queuedRequests === 'function' && typeof v.isDown === 'function' ? (v as SimulatorInsight) : null;
}

export class Cluster extends ScenarioTargets implements ClusterView, SimulatorInsight {
  readonly net: Network;
  readonly maxReplicasPerService: number;
  readonly scaleNodesPerFrame: number;

  // per target
  readonly cpu: Float64Array;
  readonly mem: Float64Array;
  readonly freeCpu: Float64Array;
  /** memory reserved by replicas (edge) */
  readonly usedMem: Float64Array;
  readonly waiting: Int32Array;
  readonly runningCount: Int32Array;
  readonly inFlightCount: Int32Array;
  readonly failed: Uint8Array;
  /** device-filter verdict the dispatchers see (1 = usable). Ground truth is `failed`. */
  readonly healthyFlag: Uint8Array;

  // per target * numServices + service
  readonly ready: Int32Array;
  readonly starting: Int32Array;
  readonly draining: Int32Array;
  readonly busy: Int32Array;
  readonly queues: RequestQueue[];
  /** lower bound of the deadlines in queues[k] (skip expiry scans when > now) */
  readonly queueMinDeadline: Float64Array;
  /** waiting + in-flight requests of a service at a target */
  readonly pendingByService: Int32Array;
  /** discounted mean processing time (s) */
  readonly meanProcS: Float64Array;
  /** discounted mean queueing delay (s) per target (all services) */
  readonly meanQueueS: Float64Array;

  readonly svcCpu: Float64Array;
  readonly svcMem: Float64Array;
  now = 0;

  // usage integrated over the current slot (per target): core-seconds and GB-seconds, since usageFromS
  readonly cpuUsedS: Float64Array;
  readonly memUsedS: Float64Array;
  private readonly usageSince: Float64Array;
  private usageFromS = 0;
  private eapQueueLens: Int32Array;

  /**
   * @param start the placement d[w][n] every reset starts from, its replicas ready (the weight
   * gate replays on the live placement); absent: the scenario's initial placement.
   */
  constructor(
    scenario: Scenario,
    private readonly startPlacement: Placement | null = null,
  ) {
    super(scenario);
    this.net = new Network(scenario, this.eapOfNode, this.numTargets);
    this.maxReplicasPerService = scenario.maxReplicasPerService;
    this.scaleNodesPerFrame = scenario.scaleNodesPerFrame;
    const T = this.numTargets;
    const W = this.numServices;
    const cap = capacityArrays(scenario);
    this.cpu = cap.cpu;
    this.mem = cap.mem;
    this.freeCpu = new Float64Array(T);
    this.usedMem = new Float64Array(T);
    this.waiting = new Int32Array(T);
    this.runningCount = new Int32Array(T);
    this.inFlightCount = new Int32Array(T);
    this.failed = new Uint8Array(T);
    this.healthyFlag = new Uint8Array(T);
    this.ready = new Int32Array(T * W);
    this.starting = new Int32Array(T * W);
    this.draining = new Int32Array(T * W);
    this.busy = new Int32Array(T * W);
    this.queues = Array.from({ length: T * W }, () => new RequestQueue());
    this.queueMinDeadline = new Float64Array(T * W);
    this.pendingByService = new Int32Array(T * W);
    this.meanProcS = new Float64Array(T * W);
    this.meanQueueS = new Float64Array(T);
    this.svcCpu = cap.svcCpu;
    this.svcMem = cap.svcMem;
    this.eapQueueLens = new Int32Array(this.numEaps);
    this.cpuUsedS = new Float64Array(T);
    this.memUsedS = new Float64Array(T);
    this.usageSince = new Float64Array(T);
    this.reset();
  }

  /** The actor the orchestration named for this frame (ClusterView.actorSlot; the env sets it). */
  actor: ActorSlot = 'main';

  actorSlot(): ActorSlot {
    return this.actor;
  }

  /** Empty cluster with the initial placement. */
  reset(): void {
    const W = this.numServices;
    this.now = 0;
    this.actor = 'main';
    this.freeCpu.set(this.cpu);
    this.usedMem.fill(0);
    this.waiting.fill(0);
    this.runningCount.fill(0);
    this.inFlightCount.fill(0);
    this.failed.fill(0);
    this.healthyFlag.fill(1);
    this.ready.fill(0);
    this.starting.fill(0);
    this.draining.fill(0);
    this.busy.fill(0);
    for (const q of this.queues) q.clear();
    this.queueMinDeadline.fill(Infinity);
    this.pendingByService.fill(0);
    this.meanQueueS.fill(0);
    this.eapQueueLens.fill(0);
    this.cpuUsedS.fill(0);
    this.memUsedS.fill(0);
    this.usageSince.fill(0);
    this.usageFromS = 0;
    for (let t = 0; t < this.numTargets; t++) {
      for (let w = 0; w < W; w++) this.meanProcS[t * W + w] = this.nominalProcS(w);
    }
    const c = this.cloudTarget;
    for (let w = 0; w < W; w++) this.ready[c * W + w] = Math.max(1, Math.floor(this.cpu[c] / this.svcCpu[w]));
    this.placeInitial();
  }

  /** Nominal processing time of a median request of w (s), before anything was measured. */
  nominalProcS(w: number): number {
    return (0.12 * this.scenario.services[w].workScale) / this.svcCpu[w];
  }

  /**
   * Add target t's CPU and memory use since it last changed to the slot's integrals. Call before
   * changing freeCpu[t] or usedMem[t].
   */
  integrateNode(t: number, now: number): void {
    const dt = now - this.usageSince[t];
    if (dt > 0) {
      this.cpuUsedS[t] += (this.cpu[t] - this.freeCpu[t]) * dt;
      this.memUsedS[t] += this.usedMem[t] * dt;
    }
    this.usageSince[t] = now;
  }

  /** Bring every target's integrals up to `now` (slot end). */
  integrateUsage(now: number): void {
    for (let t = 0; t < this.numTargets; t++) this.integrateNode(t, now);
  }

  /** Time-averaged CPU usage ratio of target t over the slot so far (after integrateUsage). */
  meanCpuUsage(t: number): number {
    const span = this.now - this.usageFromS;
    return span > 0 ? this.cpuUsedS[t] / (this.cpu[t] * span) : 1 - this.freeCpu[t] / this.cpu[t];
  }

  /** Time-averaged memory usage ratio (replicas' reservations) of target t over the slot so far. */
  meanMemUsage(t: number): number {
    const span = this.now - this.usageFromS;
    return span > 0 ? this.memUsedS[t] / (this.mem[t] * span) : this.usedMem[t] / this.mem[t];
  }

  /** Population std of the edge nodes' time-averaged CPU usage ratios over the slot. */
  cpuUsageStd(): number {
    let sum = 0;
    let sum2 = 0;
    for (let n = 0; n < this.numNodes; n++) {
      const u = this.meanCpuUsage(n);
      sum += u;
      sum2 += u * u;
    }
    const mean = sum / this.numNodes;
    return Math.sqrt(Math.max(0, sum2 / this.numNodes - mean * mean));
  }

  /** Start the next slot's integrals at `now`. */
  resetUsage(): void {
    this.cpuUsedS.fill(0);
    this.memUsedS.fill(0);
    this.usageSince.fill(this.now);
    this.usageFromS = this.now;
  }

  /** Node n can host a replica of w: it has the CPU to run one request of w and the memory free. */
  fits(n: number, w: number): boolean {
    return fitsReplica(this.cpu[n], this.mem[n] - this.usedMem[n], this.svcCpu[w], this.svcMem[w]);
  }

  /** Initial placement (shared/orchestration/placement.ts, the rule the live orchestrator uses too), booked in its order; or the start placement given. */
  private placeInitial(): void {
    const d = this.startPlacement;
    if (d) {
      for (let w = 0; w < this.numServices; w++)
        for (let n = 0; n < this.numNodes; n++) {
          this.ready[n * this.numServices + w] += d[w][n];
          this.usedMem[n] += d[w][n] * this.svcMem[w];
        }
      return;
    }
    initialPlacement(this.scenario, (w, n) => {
      this.ready[n * this.numServices + w]++;
      this.usedMem[n] += this.svcMem[w];
    });
  }

  /** d[w][n] including starting replicas, excluding draining ones. */
  placement(): number[][] {
    const W = this.numServices;
    return Array.from({ length: W }, (_, w) => Array.from({ length: this.numNodes }, (_, n) => this.replicas(n, w)));
  }

  setEapQueueLen(eap: number, len: number): void {
    this.eapQueueLens[eap] = len;
  }

  // ---- SimulatorInsight ----
  queuedRequests(target: number, service: number): QueuedRequests {
    return this.queues[target * this.numServices + service];
  }
  isDown(target: number): boolean {
    return this.failed[target] !== 0;
  }

  // ---- ClusterView ----
  nowS(): number {
    return this.now;
  }
  readyReplicas(target: number, service: number): number {
    const k = target * this.numServices + service;
    return this.ready[k] - this.draining[k];
  }
  busyReplicas(target: number, service: number): number {
    return this.busy[target * this.numServices + service];
  }
  replicas(node: number, service: number): number {
    const k = node * this.numServices + service;
    return this.ready[k] + this.starting[k] - this.draining[k];
  }
  queueLen(target: number): number {
    return this.waiting[target] + this.inFlightCount[target];
  }
  serviceQueueLen(target: number, service: number): number {
    return this.pendingByService[target * this.numServices + service];
  }
  running(target: number): number {
    return this.runningCount[target];
  }
  inFlight(target: number): number {
    return this.inFlightCount[target];
  }
  freeCpuRatio(target: number): number {
    return this.freeCpu[target] / this.cpu[target];
  }
  freeMemRatio(target: number): number {
    return 1 - this.usedMem[target] / this.mem[target];
  }
  cpuCores(target: number): number {
    return this.cpu[target];
  }
  memGB(target: number): number {
    return this.mem[target];
  }
  transferS(eap: number, target: number, inputMB: number): number {
    return this.net.transferS(eap, target, inputMB);
  }
  returnS(eap: number, target: number): number {
    return this.net.returnS(eap, target);
  }
  meanServiceS(target: number, service: number): number {
    return this.meanProcS[target * this.numServices + service];
  }
  healthy(target: number): boolean {
    return this.healthyFlag[target] === 1;
  }
  eapQueueLen(eap: number): number {
    return this.eapQueueLens[eap];
  }
  serviceCpuCores(service: number): number {
    return this.svcCpu[service];
  }
  serviceMemGB(service: number): number {
    return this.svcMem[service];
  }
  freeMemForReplicasGB(node: number): number {
    return this.mem[node] - this.usedMem[node];
  }
  /** Replicas of w in the whole edge cluster (ready + starting - draining). */
  edgeReplicas(service: number): number {
    let s = 0;
    for (let n = 0; n < this.numNodes; n++) s += this.replicas(n, service);
    return s;
  }
}

/**
 * The requests in the system, by request index (arrival order): a ring of slots, slot = index &
 * mask, over the indices from `head` (every request before it is done) to `tail` - 1 (the last
 * admitted). Static fields are copied in on admission for the hot loop; dynamic ones are the
 * simulator's. When full, `add` first moves `head` past the requests that are done (the caller
 * says which), then doubles. So the ring holds about (arrival rate x the longest time a request
 * stays in the system) slots, whatever the length of the run.
 */
export class RequestRing {
  cap = 0;
  mask = 0;
  /** oldest index that may still be in the system */
  head = 0;
  /** next index to admit */
  tail = 0;
  /** index held by each slot (-1: none): tells a late event of a recycled slot from its new request */
  index!: Int32Array;
  /** the simulator's per-request state (env.ts ST_*; 0 never used) */
  status!: Uint8Array;
  service!: Int32Array;
  eap!: Int32Array;
  arrivalS!: Float64Array;
  deadlineS!: Float64Array;
  workCoreS!: Float64Array;
  inputMB!: Float64Array;
  // dynamic
  eapArriveS!: Float64Array;
  target!: Int32Array;
  targetArriveS!: Float64Array;
  startS!: Float64Array;
  /** the request objects (handed to the dispatch policy on arrival) */
  requests!: (Request | undefined)[];

  constructor(capacity = 1024) {
    this.alloc(capacity);
  }

  private alloc(cap: number): void {
    this.cap = cap;
    this.mask = cap - 1;
    this.index = new Int32Array(cap).fill(-1);
    this.status = new Uint8Array(cap);
    this.service = new Int32Array(cap);
    this.eap = new Int32Array(cap);
    this.arrivalS = new Float64Array(cap);
    this.deadlineS = new Float64Array(cap);
    this.workCoreS = new Float64Array(cap);
    this.inputMB = new Float64Array(cap);
    this.eapArriveS = new Float64Array(cap);
    this.target = new Int32Array(cap).fill(-1);
    this.targetArriveS = new Float64Array(cap);
    this.startS = new Float64Array(cap);
    this.requests = new Array<Request | undefined>(cap).fill(undefined);
  }

  /** Empty, keeping the capacity. */
  reset(): void {
    this.head = 0;
    this.tail = 0;
    this.index.fill(-1);
    this.status.fill(0);
    this.target.fill(-1);
    this.requests.fill(undefined);
  }

  /** Requests in slots now (head to tail). */
  get live(): number {
    return this.tail - this.head;
  }

  /** Admits r as index `tail`; returns its slot. `isDone(slot)`: the request there needs no slot any more. */
  add(r: Request, isDone: (slot: number) => boolean): number {
    if (this.tail - this.head === this.cap) {
      while (this.head < this.tail && isDone(this.head & this.mask)) this.head++;
      if (this.tail - this.head === this.cap) this.grow();
    }
    const i = this.tail++;
    const s = i & this.mask;
    this.index[s] = i;
    this.status[s] = 0;
    this.service[s] = r.service;
    this.eap[s] = r.eap;
    this.arrivalS[s] = r.arrivalS;
    this.deadlineS[s] = r.deadlineS;
    this.workCoreS[s] = r.workCoreS;
    this.inputMB[s] = r.inputMB;
    this.target[s] = -1;
    this.requests[s] = r;
    return s;
  }

  /** Slot of index i, or -1 when i is not held (done and recycled, or never admitted). */
  slotOf(i: number): number {
    const s = i & this.mask;
    return this.index[s] === i ? s : -1;
  }

  private grow(): void {
    const old = {
      mask: this.mask,
      index: this.index,
      status: this.status,
      service: this.service,
      eap: this.eap,
      arrivalS: this.arrivalS,
      deadlineS: this.deadlineS,
      workCoreS: this.workCoreS,
      inputMB: this.inputMB,
      eapArriveS: this.eapArriveS,
      target: this.target,
      targetArriveS: this.targetArriveS,
      startS: this.startS,
      requests: this.requests,
    };
    this.alloc(this.cap * 2);
    for (let i = this.head; i < this.tail; i++) {
      const a = i & old.mask;
      const b = i & this.mask;
      this.index[b] = old.index[a];
      this.status[b] = old.status[a];
      this.service[b] = old.service[a];
      this.eap[b] = old.eap[a];
      this.arrivalS[b] = old.arrivalS[a];
      this.deadlineS[b] = old.deadlineS[a];
      this.workCoreS[b] = old.workCoreS[a];
      this.inputMB[b] = old.inputMB[a];
      this.eapArriveS[b] = old.eapArriveS[a];
      this.target[b] = old.target[a];
      this.targetArriveS[b] = old.targetArriveS[a];
      this.startS[b] = old.startS[a];
      this.requests[b] = old.requests[a];
    }
  }
}
