/**
 * The policy interfaces. Heuristic baselines and learned policies implement the same ones, so the
 * simulator, `kais eval` and the live agent can drive any of them (Decima's `Agent.get_action`).
 */
import type { Request, ScaleOp, ServiceId } from './domain';
import type { ActorSlot } from './protocol/envelope';

/**
 * What a dispatcher may look at. In the simulator it is backed by the simulated cluster; in the
 * live agent by the agent's local table (placement frames + telemetry). Targets: 0..numNodes-1 are
 * edge nodes, `cloudTarget` (= numNodes) is the cloud.
 */
export interface ClusterView {
  readonly numEaps: number;
  readonly numNodes: number;
  readonly numServices: number;
  /** numNodes + 1. */
  readonly numTargets: number;
  /** = numNodes. */
  readonly cloudTarget: number;
  nowS(): number;
  /** eAP that node n belongs to. */
  nodeEap(node: number): number;
  /** Ready (serving) replicas of w at a target; the cloud reports its concurrent capacity for w. */
  readyReplicas(target: number, service: ServiceId): number;
  /** Ready replicas of w at a target that are serving a request right now. */
  busyReplicas(target: number, service: ServiceId): number;
  /** Replicas of w on node n, including starting ones and excluding ones marked for deletion. */
  replicas(node: number, service: ServiceId): number;
  /** Requests sent to a target and not started yet (on the wire or waiting), all services. */
  queueLen(target: number): number;
  /** Requests of w sent to a target and not started yet (on the wire or waiting). */
  serviceQueueLen(target: number, service: ServiceId): number;
  /** Requests being served at a target. */
  running(target: number): number;
  /** Requests sent to a target and still on the wire. */
  inFlight(target: number): number;
  freeCpuRatio(target: number): number;
  freeMemRatio(target: number): number;
  cpuCores(target: number): number;
  memGB(target: number): number;
  /** One-way transfer time (s) of a payload from eAP b to a target: latency + size / bandwidth. */
  transferS(eap: number, target: number, inputMB: number): number;
  /** Time (s) for the (small) result to get from a target back to the device behind eAP b. */
  returnS(eap: number, target: number): number;
  /** Measured mean processing time (s) of w at a target (nominal until observed). */
  meanServiceS(target: number, service: ServiceId): number;
  /** Device filter verdict: false when the target is excluded (faulty or isolated). */
  healthy(target: number): boolean;
  /** Requests waiting in eAP b's queue. */
  eapQueueLen(eap: number): number;
  serviceCpuCores(service: ServiceId): number;
  serviceMemGB(service: ServiceId): number;
  /**
   * The actor the orchestration named for this frame (the last placement's `actor`): a dispatch
   * policy that holds a light actor uses it while this is `light`. Absent: `main`.
   */
  actorSlot?(): ActorSlot;
}

/** One pending dispatch decision: a request at an eAP with its action mask. */
export interface DispatchItem {
  request: Request;
  eap: number;
  /** mask[t] = 1 iff target t is valid (context filter). The cloud is always valid. */
  mask: Uint8Array;
  /** Filled by the policy: the chosen target. */
  action: number;
}

export interface DispatchPolicy {
  readonly name: string;
  /** Called once per episode before the first decision. */
  reset?(seed: number, view: ClusterView): void;
  /** Choose a valid target for one request. */
  decide(item: DispatchItem, view: ClusterView): number;
  /**
   * Decide several eAPs' requests at once (one batched forward pass for learned policies).
   * Items belong to different eAPs; the default is to call decide() on each.
   */
  decideBatch?(items: DispatchItem[], view: ClusterView): void;
  /** Told about every finished request, for policies that learn service times online. */
  onFrame?(view: ClusterView): void;
}

/** Per-service statistics over the orchestration window since the policy's previous call. */
export interface ServiceWindowStats {
  windowS: number;
  /** [w] requests of w that arrived at the eAPs in the window. */
  arrivals: Float64Array;
  /** [w] busy replica-seconds of w over the window (edge nodes only). */
  busyReplicaS: Float64Array;
  /** [w] ready replica-seconds of w over the window (edge nodes only). */
  readyReplicaS: Float64Array;
  /** [w] requests of w completed in time in the window. */
  completedInTime: Float64Array;
  /** [w] requests of w that failed (late or dropped) in the window. */
  failed: Float64Array;
  /** [w] total CPU work (core-s) of w's arrivals in the window. */
  workCoreS: Float64Array;
}

export interface OrchestrationView extends ClusterView {
  window: ServiceWindowStats;
  /** Memory (GB) still free on node n for new replicas. */
  freeMemForReplicasGB(node: number): number;
  /** Max replicas of one service in the whole edge cluster (scenario setting). */
  maxReplicasPerService: number;
  /** Number of nodes an orchestration step should touch at most per frame (H). */
  scaleNodesPerFrame: number;
}

export interface OrchestrationPolicy {
  readonly name: string;
  /** decide() is called every periodS seconds of simulated time (0 = never). */
  readonly periodS: number;
  reset?(seed: number, view: OrchestrationView): void;
  decide(view: OrchestrationView): ScaleOp[];
  /**
   * The actor the dispatch uses until the next decision, as decided by the last decide() (before
   * the first: as reset() left it). Absent, or undefined: the policy has no actor switch (every
   * frame `main`, and placements name none).
   */
  actorFor?(): ActorSlot | undefined;
  /**
   * After reset(), on a restart that resumes a stored placement: the actor that placement named
   * (the agents dispatch with it until the next decision), so actorFor() says what they do.
   */
  resumeActor?(actor: ActorSlot): void;
}
