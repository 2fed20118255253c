/**
 * The executor: what carries out an orchestration policy's scale orders on a cluster and reports
 * what happened. One interface, several worlds:
 * - the simulator (training/sim/executor.ts: SimExecutor, synchronous, on the simulated cluster);
 * - the emulated cluster of `kais node` (orchestrator/executors.ts: EmulatedExecutor, over HTTP);
 * - a Kubernetes executor (issue 19) implements the same two methods on a real cluster.
 *
 * Every executor follows the simulator's rules for an order (invalid ones become no-ops, counted
 * in `refused`, never an error):
 * - +1 (create a replica of w on n): n is not failed, n can run one request of w and has w's
 *   memory free (`fitsReplica`), and w is under `maxReplicasPerService` in the whole edge cluster;
 * - -1 (delete one): a starting replica is cancelled, else a ready one leaves when idle (no
 *   request is ever dropped by a deletion); nothing to remove: no-op.
 *
 * A policy decides on an OrchestrationView. The simulator's executor hands its cluster itself; an
 * executor across a wire reports a `ClusterReport` (plain JSON), and `ReportView` is the view of
 * it, with the same meaning method for method as the simulator's (training/sim/cluster.ts).
 */
import type { ScaleOp } from '../domain';
import type { OrchestrationView, ServiceWindowStats } from '../policy';
import type { Scenario } from '../scenario';
import { capacityArrays, ScenarioTargets } from '../scenario';
import { Network } from '../network';

/** What an executor did with a list of orders. */
export interface ScaleReport {
  /** The orders carried out, in order (their count is the scheduling cost). */
  executed: ScaleOp[];
  /** Orders that became no-ops (failed node, no room, at the maximum, nothing to remove). */
  refused: number;
}

type MaybePromise<T> = T | Promise<T>;

export interface OrchestrationExecutor {
  /**
   * What a policy decides on: the cluster now and the window of statistics since the previous
   * call (which starts a new window, unless `keepWindow`: an admin's step between two of the
   * policy's, whose window must run on). null when this executor cannot observe a cluster.
   */
  observe(options?: { keepWindow?: boolean }): MaybePromise<OrchestrationView | null>;
  /** Carries out the orders in order, each by the rules above. */
  apply(ops: readonly ScaleOp[]): MaybePromise<ScaleReport>;
}

/** The window of a report, as JSON. */
export interface WindowReport {
  windowS: number;
  arrivals: number[];
  busyReplicaS: number[];
  readyReplicaS: number[];
  completedInTime: number[];
  failed: number[];
  workCoreS: number[];
}

/** A window with nothing in it yet, for W services (the running totals an executor starts from). */
export function emptyWindow(W: number): WindowReport {
  const zeros = (): number[] => new Array<number>(W).fill(0);
  return {
    windowS: 0,
    arrivals: zeros(),
    busyReplicaS: zeros(),
    readyReplicaS: zeros(),
    completedInTime: zeros(),
    failed: zeros(),
    workCoreS: zeros(),
  };
}

/**
 * A cluster's state as an executor reports it. Targets t: 0..N-1 the edge nodes, N the cloud;
 * per-(target, service) arrays are indexed t * W + w, as in the simulator.
 */
export interface ClusterReport {
  /** Scenario seconds on the cluster's clock. */
  nowS: number;
  /** Serving replicas, those marked for deletion included. */
  ready: number[];
  /** Created and not serving yet. */
  starting: number[];
  /** Ready replicas marked for deletion (they leave when idle). */
  draining: number[];
  /** Ready replicas serving a request now. */
  busy: number[];
  /** Requests of w waiting at t. */
  waiting: number[];
  /** [t] memory reserved by replicas (GB). */
  usedMemGB: number[];
  /** [t] CPU cores not held by running requests. */
  freeCpuCores: number[];
  /** [n] 1 when edge node n has failed (the executor refuses to create replicas there). */
  failed: number[];
  /**
   * Per-service statistics over a window ending now. A cluster across a wire reports them since it
   * started (windowS = nowS), so that reading a report changes nothing; the executor turns two
   * successive reports into the window between them (windowSince).
   */
  window: WindowReport;
}

/** The window between two reports' cumulative statistics (prev null: since the start). */
export function windowSince(prev: WindowReport | null, cur: WindowReport): WindowReport {
  if (!prev) return cur;
  const d = (k: keyof Omit<WindowReport, 'windowS'>): number[] => cur[k].map((x, w) => x - (prev[k][w] ?? 0));
  return {
    windowS: cur.windowS - prev.windowS,
    arrivals: d('arrivals'),
    busyReplicaS: d('busyReplicaS'),
    readyReplicaS: d('readyReplicaS'),
    completedInTime: d('completedInTime'),
    failed: d('failed'),
    workCoreS: d('workCoreS'),
  };
}

/**
 * The OrchestrationView of a ClusterReport. `healthy(t)` is the device-filter verdict the
 * orchestrator holds (default: every target healthy, as the simulator without its device
 * filters); a failed node is not unhealthy by itself, as in the simulator: the executor refuses
 * to create replicas on it.
 */
export class ReportView extends ScenarioTargets implements OrchestrationView {
  readonly maxReplicasPerService: number;
  readonly scaleNodesPerFrame: number;
  readonly window: ServiceWindowStats;
  private readonly cap: ReturnType<typeof capacityArrays>;
  private readonly net: Network;

  constructor(
    scenario: Scenario,
    readonly report: ClusterReport,
    private readonly isHealthy: (target: number) => boolean = () => true,
  ) {
    super(scenario);
    this.maxReplicasPerService = scenario.maxReplicasPerService;
    this.scaleNodesPerFrame = scenario.scaleNodesPerFrame;
    this.cap = capacityArrays(scenario);
    this.net = new Network(scenario, this.eapOfNode, this.numTargets);
    const T = this.numTargets;
    const W = this.numServices;
    const per = ['ready', 'starting', 'draining', 'busy', 'waiting'] as const;
    for (const k of per)
      if (report[k]?.length !== T * W) throw new TypeError(`cluster report: ${k} must hold ${T * W} numbers, got ${report[k]?.length}`);
    for (const k of ['usedMemGB', 'freeCpuCores'] as const)
      if (report[k]?.length !== T) throw new TypeError(`cluster report: ${k} must hold ${T} numbers, got ${report[k]?.length}`);
    if (report.failed?.length !== this.numNodes)
      throw new TypeError(`cluster report: failed must hold ${this.numNodes} numbers, got ${report.failed?.length}`);
    const win = report.window;
    const arr = (k: keyof Omit<WindowReport, 'windowS'>): Float64Array => {
      if (win?.[k]?.length !== W) throw new TypeError(`cluster report: window.${k} must hold ${W} numbers, got ${win?.[k]?.length}`);
      return Float64Array.from(win[k]);
    };
    this.window = {
      windowS: win.windowS,
      arrivals: arr('arrivals'),
      busyReplicaS: arr('busyReplicaS'),
      readyReplicaS: arr('readyReplicaS'),
      completedInTime: arr('completedInTime'),
      failed: arr('failed'),
      workCoreS: arr('workCoreS'),
    };
  }

  nowS(): number {
    return this.report.nowS;
  }
  readyReplicas(target: number, service: number): number {
    const k = target * this.numServices + service;
    return this.report.ready[k] - this.report.draining[k];
  }
  busyReplicas(target: number, service: number): number {
    return this.report.busy[target * this.numServices + service];
  }
  replicas(node: number, service: number): number {
    const k = node * this.numServices + service;
    return this.report.ready[k] + this.report.starting[k] - this.report.draining[k];
  }
  queueLen(target: number): number {
    let s = 0;
    for (let w = 0; w < this.numServices; w++) s += this.report.waiting[target * this.numServices + w];
    return s;
  }
  serviceQueueLen(target: number, service: number): number {
    return this.report.waiting[target * this.numServices + service];
  }
  running(target: number): number {
    let s = 0;
    for (let w = 0; w < this.numServices; w++) s += this.report.busy[target * this.numServices + w];
    return s;
  }
  /** A cluster does not see requests on the wire. */
  inFlight(): number {
    return 0;
  }
  freeCpuRatio(target: number): number {
    return this.report.freeCpuCores[target] / this.cap.cpu[target];
  }
  freeMemRatio(target: number): number {
    return 1 - this.report.usedMemGB[target] / this.cap.mem[target];
  }
  cpuCores(target: number): number {
    return this.cap.cpu[target];
  }
  memGB(target: number): number {
    return this.cap.mem[target];
  }
  transferS(eap: number, target: number, inputMB: number): number {
    return this.net.transferS(eap, target, inputMB);
  }
  returnS(eap: number, target: number): number {
    return this.net.returnS(eap, target);
  }
  /** Nominal (the simulator's before it measures): a cluster report carries no service times. */
  meanServiceS(_target: number, service: number): number {
    return (0.12 * this.scenario.services[service].workScale) / this.cap.svcCpu[service];
  }
  healthy(target: number): boolean {
    return this.isHealthy(target);
  }
  /** A cluster does not see the eAPs' queues. */
  eapQueueLen(): number {
    return 0;
  }
  serviceCpuCores(service: number): number {
    return this.cap.svcCpu[service];
  }
  serviceMemGB(service: number): number {
    return this.cap.svcMem[service];
  }
  freeMemForReplicasGB(node: number): number {
    return this.cap.mem[node] - this.report.usedMemGB[node];
  }
}
