/**
 * Domain objects shared by the simulator, the agent and the orchestrator. No tfjs, no I/O.
 *
 * Index conventions (fixed everywhere):
 * - eAPs are numbered 0..numEaps-1.
 * - edge nodes are numbered 0..numNodes-1 across the whole cluster, grouped by eAP in order.
 * - a dispatch *target* index is a node index 0..numNodes-1, and `numNodes` is the cloud.
 * - services are numbered 0..numServices-1.
 */

export type EapId = number;
export type NodeId = number;
export type ServiceId = number;

/** One request as it enters the system at an eAP. Times in seconds of simulated time. */
export interface Request {
  /** Unique, dense 0..n-1 in arrival order. */
  id: number;
  service: ServiceId;
  eap: EapId;
  /** When the end device sends it (s). */
  arrivalS: number;
  /** Absolute deadline (s): the result must be back at the device by then. */
  deadlineS: number;
  /** CPU work in core-seconds: processing time on a replica = workCoreS / replica cpuCores. */
  workCoreS: number;
  /** Input payload in megabytes (transfer time = latency + size / bandwidth). */
  inputMB: number;
}

/** Replica counts d[w][n]: service w on edge node n. */
export type Placement = number[][];

/** One replica create (+1) or delete (-1) order from an orchestration policy. */
export interface ScaleOp {
  service: ServiceId;
  node: NodeId;
  delta: 1 | -1;
}

/** Final outcome counters of a run. arrived = completedInTime + late + dropped + queuedAtEnd. */
export interface Outcome {
  arrived: number;
  completedInTime: number;
  late: number;
  dropped: number;
  queuedAtEnd: number;
}

/**
 * The runtime's replay speed (`--speed` of kais up, agent and node: x times real time). Below 1/1000
 * a second of scenario time takes over 16 minutes, and near 5e-7 the timers overflow (2^31 - 1 ms:
 * Node fired them every millisecond, and a node answered in 17 ms what should take years).
 */
export const SPEED_RANGE = { min: 0.001, max: 1000 } as const;
