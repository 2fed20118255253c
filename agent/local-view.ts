/**
 * The live agent's ClusterView (shared/policy.ts): what one eAP knows about the cluster, built
 * from the last placement frame (replicas d[w][n]) and the agent's own counters (requests it sent
 * to each target and has not had answered yet, processing times the targets reported back).
 *
 * Time runs in "scenario seconds": real seconds x `speed`, so a load replayed at `--speed 10` looks
 * to the policy like the workload it was trained on (deadlines, service times and network delays are
 * all scaled by the same factor by the load generator and the emulated cluster).
 *
 * Estimates (the agent never asks anyone before deciding): from its own counters,
 * - busy replicas of w at t = min(outstanding_w(t), ready_w(t));
 * - requests of w waiting at t = max(0, outstanding_w(t) - ready_w(t));
 * - free CPU = 1 - sum_w busy_w x cpuCores_w / cpuCores(t);
 * and, since other eAPs' load on a node is invisible to these counters, each is raised to what the
 * target itself reported with its last answer (waiting/busy per service, CPU utilisation) while
 * that report is fresher than `reportTtlS`;
 * - a target that refused the connection is unhealthy for `unhealthyForS` (the device filter's
 *   place until agent/filters/device-filter.ts is wired in).
 */
import type { ClusterView } from '../shared/policy';
import type { Scenario } from '../shared/scenario';
import { capacityArrays, ScenarioTargets } from '../shared/scenario';
import { discounted } from '../shared/dequeue';
import type { ActorSlot, PlacementBody } from '../shared/protocol/envelope';
import type { TargetLoad } from './proxy';

export class LocalClusterView extends ScenarioTargets implements ClusterView {
  /** [n * W + w] replicas of w on edge node n (from the placement frame). */
  readonly replicaCount: Int32Array;
  /** [t * W + w] requests this agent sent to t and not yet answered. */
  readonly outstanding: Int32Array;
  /** [t * W + w] discounted mean processing time (scenario s). */
  readonly meanProcS: Float64Array;
  /** [t] last utilisation reported by the target (cpu fraction) and when (scenario s), -1 = never. */
  private readonly reportedCpu: Float64Array;
  private readonly reportedAtS: Float64Array;
  private readonly unhealthyUntilS: Float64Array;
  /** [t * W + w] waiting / busy counts of the target's last report. */
  private readonly repWaiting: Int32Array;
  private readonly repBusy: Int32Array;
  private readonly cpu: Float64Array;
  private readonly mem: Float64Array;
  private readonly svcCpu: Float64Array;
  private readonly svcMem: Float64Array;
  private readonly latS: Float64Array;
  private readonly sPerMB: Float64Array;
  private readonly deviceLatencyS: number;
  /** [w] the cloud's concurrent capacity for w (constant: its cores / w's cores). */
  private readonly cloudReady: Int32Array;
  /** The last placement's `actor` (main when it named none). */
  private actor: ActorSlot = 'main';
  /** [n] free memory ratio of edge node n under the current placement (recomputed by applyPlacement). */
  private readonly freeMem: Float64Array;
  private readonly t0Ms: number;
  private ownQueue = 0;
  /** While >= 0: the clock is held at this scenario time (one decision reads one instant). */
  private heldS = -1;

  constructor(
    scenario: Scenario,
    readonly eap: number,
    readonly speed = 1,
    private readonly unhealthyForS = 2,
    private readonly reportTtlS = 1,
    /** Scenario-time clock (the simulator's); default: real time x speed since construction. */
    private readonly clock: (() => number) | null = null,
  ) {
    super(scenario);
    if (!(speed > 0) || !Number.isFinite(speed)) throw new TypeError(`LocalClusterView: speed must be > 0, got ${speed}`);
    if (!Number.isInteger(eap) || eap < 0 || eap >= this.numEaps) {
      throw new TypeError(`LocalClusterView: eap must be in 0..${this.numEaps - 1}, got ${eap}`);
    }
    const T = this.numTargets;
    const W = this.numServices;
    this.replicaCount = new Int32Array(this.numNodes * W);
    this.outstanding = new Int32Array(T * W);
    this.meanProcS = new Float64Array(T * W);
    this.reportedCpu = new Float64Array(T).fill(-1);
    this.reportedAtS = new Float64Array(T).fill(-Infinity);
    this.unhealthyUntilS = new Float64Array(T);
    this.repWaiting = new Int32Array(T * W);
    this.repBusy = new Int32Array(T * W);
    const cap = capacityArrays(scenario);
    this.cpu = cap.cpu;
    this.mem = cap.mem;
    this.svcCpu = cap.svcCpu;
    this.svcMem = cap.svcMem;
    for (let t = 0; t < T; t++) for (let w = 0; w < W; w++) this.meanProcS[t * W + w] = this.nominalProcS(w);
    this.cloudReady = new Int32Array(W);
    for (let w = 0; w < W; w++) this.cloudReady[w] = Math.max(1, Math.floor(this.cpu[this.cloudTarget] / this.svcCpu[w]));
    this.freeMem = new Float64Array(this.numNodes);
    this.updateFreeMem();
    // network, as training/sim/latency.ts: latency + size / bandwidth per link class
    const net = scenario.network;
    this.latS = new Float64Array(T);
    this.sPerMB = new Float64Array(T);
    for (let t = 0; t < T; t++) {
      const link = t === this.cloudTarget ? net.edgeToCloud : this.eapOfNode[t] === eap ? net.eapToOwnNode : net.eapToOtherNode;
      this.latS[t] = link.latencyMs / 1000;
      this.sPerMB[t] = 8 / link.mbps;
    }
    this.deviceLatencyS = net.deviceToEap.latencyMs / 1000;
    this.t0Ms = performance.now();
  }

  /** Nominal processing time of a median request of w (s), as the simulator's before measuring. */
  nominalProcS(w: number): number {
    return (0.12 * this.scenario.services[w].workScale) / this.svcCpu[w];
  }

  /**
   * Takes the replica table of a placement frame; throws TypeError if it is for another cluster.
   * Returns the edge nodes whose replicas it changed, ascending.
   */
  applyPlacement(body: PlacementBody): number[] {
    if (body.numNodes !== this.numNodes || body.numServices !== this.numServices) {
      throw new TypeError(
        `placement is ${body.numServices} services x ${body.numNodes} nodes, this cluster has ${this.numServices} x ${this.numNodes}`,
      );
    }
    const W = this.numServices;
    const changed = new Set<number>();
    for (let w = 0; w < W; w++) {
      for (let n = 0; n < this.numNodes; n++) {
        const r = body.replicas[w * this.numNodes + n];
        if (this.replicaCount[n * W + w] !== r) changed.add(n);
        this.replicaCount[n * W + w] = r;
      }
    }
    this.updateFreeMem();
    this.actor = body.actor ?? 'main';
    return [...changed].sort((a, b) => a - b);
  }

  /** The actor the last placement named (ClusterView.actorSlot). */
  actorSlot(): ActorSlot {
    return this.actor;
  }

  private updateFreeMem(): void {
    for (let n = 0; n < this.numNodes; n++) {
      let used = 0;
      for (let w = 0; w < this.numServices; w++) used += this.replicas(n, w) * this.svcMem[w];
      this.freeMem[n] = Math.max(0, 1 - used / this.mem[n]);
    }
  }

  /**
   * Holds the clock at the current instant until `releaseClock()`: everything read during one
   * decision (mask, observation, fallback) then sees the same time, and the view reads
   * performance.now() once per decision instead of once per target and service.
   */
  holdClock(): void {
    this.heldS = -1;
    this.heldS = this.nowS();
  }
  releaseClock(): void {
    this.heldS = -1;
  }

  // ---- the agent's own counters ----
  setOwnQueueLen(len: number): void {
    this.ownQueue = len;
  }
  onSent(t: number, w: number): void {
    this.outstanding[t * this.numServices + w]++;
  }
  /** A request to t finished: its measured processing time (scenario s) if it was served, and the target's load report. */
  onDone(t: number, w: number, procS: number | null, load: TargetLoad | null): void {
    const W = this.numServices;
    const k = t * W + w;
    if (this.outstanding[k] > 0) this.outstanding[k]--;
    if (procS !== null && Number.isFinite(procS) && procS >= 0) this.meanProcS[k] = discounted(this.meanProcS[k], procS);
    if (load && load.cpu !== null && Number.isFinite(load.cpu)) {
      this.reportedCpu[t] = load.cpu;
      this.reportedAtS[t] = this.nowS();
      if (load.waiting && load.busy && load.waiting.length === W && load.busy.length === W) {
        for (let v = 0; v < W; v++) {
          this.repWaiting[t * W + v] = load.waiting[v];
          this.repBusy[t * W + v] = load.busy[v];
        }
      }
    }
  }

  private fresh(t: number): boolean {
    return this.nowS() - this.reportedAtS[t] < this.reportTtlS;
  }
  /** The target could not be reached: keep it out of the mask for a while. */
  markUnreachable(t: number): void {
    if (t !== this.cloudTarget) this.unhealthyUntilS[t] = this.nowS() + this.unhealthyForS;
  }

  // ---- ClusterView ----
  nowS(): number {
    if (this.heldS >= 0) return this.heldS;
    if (this.clock) return this.clock();
    return ((performance.now() - this.t0Ms) / 1000) * this.speed;
  }
  readyReplicas(target: number, service: number): number {
    if (target === this.cloudTarget) return this.cloudReady[service];
    return this.replicaCount[target * this.numServices + service];
  }
  busyReplicas(target: number, service: number): number {
    const k = target * this.numServices + service;
    const own = Math.min(this.outstanding[k], this.readyReplicas(target, service));
    return this.fresh(target) ? Math.max(own, Math.min(this.repBusy[k], this.readyReplicas(target, service))) : own;
  }
  replicas(node: number, service: number): number {
    return this.replicaCount[node * this.numServices + service];
  }
  queueLen(target: number): number {
    // serviceQueueLen summed over the services, with one freshness check
    const W = this.numServices;
    const fresh = this.fresh(target);
    const cloud = target === this.cloudTarget;
    let q = 0;
    for (let w = 0; w < W; w++) {
      const k = target * W + w;
      const own = Math.max(0, this.outstanding[k] - (cloud ? this.cloudReady[w] : this.replicaCount[k]));
      q += fresh ? Math.max(own, this.repWaiting[k]) : own;
    }
    return q;
  }
  serviceQueueLen(target: number, service: number): number {
    const k = target * this.numServices + service;
    const own = Math.max(0, this.outstanding[k] - this.readyReplicas(target, service));
    return this.fresh(target) ? Math.max(own, this.repWaiting[k]) : own;
  }
  running(target: number): number {
    let r = 0;
    for (let w = 0; w < this.numServices; w++) r += this.busyReplicas(target, w);
    return r;
  }
  inFlight(_target: number): number {
    return 0;
  }
  freeCpuRatio(target: number): number {
    const fresh = this.fresh(target);
    if (fresh && this.reportedCpu[target] >= 0) {
      return Math.max(0, Math.min(1, 1 - this.reportedCpu[target]));
    }
    // busyReplicas summed over the services, with one freshness check
    const W = this.numServices;
    const cloud = target === this.cloudTarget;
    let used = 0;
    for (let w = 0; w < W; w++) {
      const k = target * W + w;
      const ready = cloud ? this.cloudReady[w] : this.replicaCount[k];
      const own = Math.min(this.outstanding[k], ready);
      used += (fresh ? Math.max(own, Math.min(this.repBusy[k], ready)) : own) * this.svcCpu[w];
    }
    return Math.max(0, 1 - used / this.cpu[target]);
  }
  freeMemRatio(target: number): number {
    if (target === this.cloudTarget) return 1;
    return this.freeMem[target];
  }
  cpuCores(target: number): number {
    return this.cpu[target];
  }
  memGB(target: number): number {
    return this.mem[target];
  }
  transferS(eap: number, target: number, inputMB: number): number {
    void eap; // this view only knows its own eAP's links
    return this.latS[target] + inputMB * this.sPerMB[target];
  }
  returnS(eap: number, target: number): number {
    void eap;
    return this.latS[target] + this.deviceLatencyS;
  }
  meanServiceS(target: number, service: number): number {
    return this.meanProcS[target * this.numServices + service];
  }
  healthy(target: number): boolean {
    return this.unhealthyUntilS[target] <= this.nowS() && !(target < this.numNodes && this.excluded !== null && this.excluded(target));
  }

  /** Node health from the device filters and QoS isolation (agent/filters/node-health.ts); null: none. */
  excluded: ((node: number) => boolean) | null = null;
  eapQueueLen(eap: number): number {
    return eap === this.eap ? this.ownQueue : 0;
  }
  serviceCpuCores(service: number): number {
    return this.svcCpu[service];
  }
  serviceMemGB(service: number): number {
    return this.svcMem[service];
  }
}
