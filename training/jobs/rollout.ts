/**
 * One episode of one policy pair on the simulator, and the metrics `kais eval` reports for it.
 * Shared by `kais eval`, `kais train` (baseline curves) and the benchmarks.
 */
import type { TargetTally } from '../../shared/tally';
import { performance } from 'perf_hooks';
import type { Placement, Request } from '../../shared/domain';
import type { DequeueName } from '../../shared/dequeue';
import type { DispatchPolicy, OrchestrationPolicy } from '../../shared/policy';
import type { Scenario } from '../../shared/scenario';
import { round } from '../../shared/round';
import { EdgeCloudEnv, type FrameStats } from '../sim/env';
import type { Fault } from '../sim/faults';
import type { WindowScorer } from '../sim/telemetry';
import { TopValues, nearestRankIndex } from '../sim/top-values';
import type { RequestSource } from '../workload/source';
import { isRequestSource } from '../workload/source';
import { expectedCompletionS } from '../../shared/eta';

export interface EpisodeOptions {
  scenario: Scenario;
  /** An array, or a source read as the episode goes (training/workload/source.ts: memory bounded by the requests in the system). */
  requests: Request[] | RequestSource;
  frames: number;
  seed: number;
  dispatch: DispatchPolicy;
  orchestration: OrchestrationPolicy;
  /** The placement the episode starts from, every replica ready (EnvOptions.startPlacement). @defaultValue the scenario's initial placement */
  startPlacement?: Placement;
  nodeDequeue?: DequeueName;
  faults?: Fault[];
  /** Run the device filters on simulated node telemetry. */
  /** With deviceFilters: NodeHealth's L2 second stage (agent/filters/l2-stage.ts). */
  secondStage?: boolean;
  deviceFilters?: boolean;
  /** With deviceFilters: the learned stage on the ambiguous windows (the caller loads the tfjs backend). */
  learnedDetector?: boolean;
  /**
   * What each eAP's policy decides on: 'global' the true state of the whole cluster at that
   * instant; 'agent' what the live agent can know (agent/local-view.ts: its own outstanding
   * requests, the targets' load reports on their answers, the placement), with the live node's
   * 503 for a full, failed or replica-less node and the agent's retry on the cloud. @defaultValue 'agent'
   */
  view?: 'global' | 'agent';
  /** Measure every decision's wall time (adds ~0.1 µs per decision; makes output non-reproducible). */
  timing?: boolean;
  /** Return what happened at each target (`perTarget`; `kais up` compares it with the live cluster's). */
  tally?: boolean;
  /** Called at the end with each frame's figures (a learner's rewards: training/jobs/gpg-train.ts). */
  onFrames?: (frames: readonly FrameStats[]) => void;
  /** Score each decision's view against what happened (`viewCalibration`; kais eval --calibration). */
  calibration?: boolean;
}

/**
 * The decisions sent to one side (edge nodes or the cloud) against what the deciding policy's view
 * said of the chosen target at that instant: its expected completion time (shared/eta.ts, the
 * estimate lec and the actor's observation use) met the request's slack or not. Counts of requests;
 * the ones still in the system at the end count in `sent` and `unfinished` only.
 */
export interface CalibrationRow {
  sent: number;
  unfinished: number;
  /** finished in time */
  inTime: number;
  /** the view's eta of the chosen target met the slack */
  predictedInTime: number;
  /** of those, finished in time */
  inTimeWhenPredicted: number;
}

export interface ViewCalibration {
  edge: CalibrationRow;
  cloud: CalibrationRow;
}

/** Per request id (dense 0..count-1): SEEN | CLOUD | MET flags of the policy's decision on it, 0 when it had none. */
const SEEN = 1;
const CLOUD = 2;
const MET = 4;
class DecisionLog {
  private readonly flags: Uint8Array;
  constructor(count: number) {
    this.flags = new Uint8Array(count);
  }
  record(id: number, cloud: boolean, met: boolean): void {
    this.flags[id] = SEEN | (cloud ? CLOUD : 0) | (met ? MET : 0);
  }
  summarise(outcome: (id: number) => number): ViewCalibration {
    const row = (): CalibrationRow => ({ sent: 0, unfinished: 0, inTime: 0, predictedInTime: 0, inTimeWhenPredicted: 0 });
    const out: ViewCalibration = { edge: row(), cloud: row() };
    this.flags.forEach((f, id) => {
      if (f === 0) return;
      const r = f & CLOUD ? out.cloud : out.edge;
      const met = (f & MET) !== 0;
      const o = outcome(id);
      r.sent++;
      if (met) r.predictedInTime++;
      if (Number.isNaN(o)) r.unfinished++;
      else if (o === 1) {
        r.inTime++;
        if (met) r.inTimeWhenPredicted++;
      }
    });
    return out;
  }
}

export interface PolicyResult {
  policy: string;
  throughputRate: number;
  arrived: number;
  completedInTime: number;
  dropped: number;
  late: number;
  queuedAtEnd: number;
  schedulingCost: number;
  /** edge replica-seconds held over the run (ready, starting and draining replicas): the resource an operator pays for */
  replicaSeconds: number;
  /** mean latency (arrival to result back at the device) of the completed requests, in time or late */
  meanLatencyMs: number;
  /**
   * 99th percentile over every answered request: completed ones at their latency, dropped ones at
   * their relative deadline (the time the device waits for its 504); requests still queued at the
   * end are left out. Dropping never lowers it below the deadlines.
   */
  p99LatencyMs: number;
  /** dropped / arrived: requests answered without being served */
  droppedShare: number;
  cloudShare: number;
  edgeImbalance: number;
  /** null unless timing was asked for (wall time is not reproducible). */
  decisionP99Us: number | null;
  lostToFailedNodes: number;
  /** with device filters: share of healthy node-time the filters excluded (null without filters) */
  falseExclusionRate: number | null;
  /** throughput rate of each frame: in-time completions / arrivals in the frame */
  throughputPerFrame: number[];
  /** with the learned stage only: its fits, windows scored and anomalous verdicts by ground truth (TelemetryFilters.learnedStats) */
  learnedDetector?: { fits: number; scored: number; anomalousAbnormal: number; anomalousNormal: number; unscored: number };
  /** kais eval: present when this pair's cmmac drew its targets from its policy (its model's act, or --cmmac-act sample) */
  cmmacAct?: 'sample';
  /** with `tally`: per target (edge nodes, then the cloud) the requests that reached it, refused, expired, completed, lost */
  perTarget?: TargetTally;
  /** with `calibration`: each side's decisions against what the policy's view predicted (CalibrationRow) */
  viewCalibration?: ViewCalibration;
}

/** The learned device detector's scorer for the simulator (critic/detector/core.ts: tfjs loads only when it is used). */
function newDetectorCore(): WindowScorer {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return new (require('../../critic/detector/core') as typeof import('../../critic/detector/core')).DetectorCore();
}

export function runEpisode(o: EpisodeOptions): PolicyResult {
  const env = new EdgeCloudEnv(o.scenario, {
    requests: o.requests,
    frames: o.frames,
    orchestration: o.orchestration,
    startPlacement: o.startPlacement,
    nodeDequeue: o.nodeDequeue,
    faults: o.faults,
    illegalAction: 'throw',
    deviceFilters: o.deviceFilters,
    agentViews: (o.view ?? 'agent') === 'agent',
    learnedDetector: o.learnedDetector ? newDetectorCore : null,
    secondStage: o.secondStage,
    seed: o.seed,
  });
  const policy = o.dispatch;
  let { observations } = env.reset({ seed: o.seed });
  policy.reset?.(o.seed, env.view);
  // decision wall times: the largest 1% of them (one decision per request at most)
  const count = isRequestSource(o.requests) ? o.requests.count : o.requests.length;
  const times = new TopValues(0.99, o.timing ? count : 0);
  const actions: number[] = new Array(env.possibleAgents.length).fill(-1);
  const batched = policy.decideBatch !== undefined;
  const log = o.calibration ? new DecisionLog(count) : null;
  while (!env.isDone) {
    const live = env.agents;
    if (batched) {
      const items = live.map((b) => observations[b]);
      const t0 = o.timing ? performance.now() : 0;
      policy.decideBatch!(items, env.viewOf(live[0]));
      if (o.timing) {
        const per = ((performance.now() - t0) * 1000) / Math.max(1, items.length);
        for (let k = 0; k < items.length; k++) times.push(per);
      }
      for (const b of live) actions[b] = observations[b].action;
    } else if (o.timing) {
      for (const b of live) {
        const t0 = performance.now();
        actions[b] = policy.decide(observations[b], env.viewOf(b));
        times.push((performance.now() - t0) * 1000);
      }
    } else {
      for (const b of live) actions[b] = policy.decide(observations[b], env.viewOf(b));
    }
    if (log) {
      for (const b of live) {
        const item = observations[b];
        const view = env.viewOf(b);
        const req = item.request;
        const t = actions[b];
        const eta = expectedCompletionS(view, b, t, req.service, req.inputMB);
        log.record(req.id, t === view.cloudTarget, eta <= req.deadlineS - view.nowS());
      }
    }
    observations = env.step(actions).observations;
  }
  o.onFrames?.(env.frames);
  const learned = o.learnedDetector && env.telemetry ? { ...env.telemetry.learnedStats } : undefined;
  env.telemetry?.dispose();
  const out = env.outcome;
  return {
    policy: `${policy.name}/${o.orchestration.name}`,
    throughputRate: round(out.arrived > 0 ? out.completedInTime / out.arrived : 0, 4),
    arrived: out.arrived,
    completedInTime: out.completedInTime,
    dropped: out.dropped,
    late: out.late,
    queuedAtEnd: out.queuedAtEnd,
    schedulingCost: env.scaleOps,
    replicaSeconds: round(env.replicaSeconds, 1),
    meanLatencyMs: round(env.latencyCount > 0 ? (env.latencySumS / env.latencyCount) * 1000 : 0, 1),
    p99LatencyMs: round(env.answeredP99S() * 1000, 1),
    droppedShare: round(out.arrived > 0 ? out.dropped / out.arrived : 0, 4),
    cloudShare: round(env.dispatched > 0 ? env.dispatchedToCloud / env.dispatched : 0, 4),
    edgeImbalance: round(env.edgeImbalance, 4),
    decisionP99Us: o.timing ? round(times.quantile(), 2) : null,
    lostToFailedNodes: env.lostToFailedNodes,
    falseExclusionRate: env.telemetry ? round(env.telemetry.falseExclusionRate, 4) : null,
    throughputPerFrame: env.frames.map((f) => round(f.arrived > 0 ? f.completedInTime / f.arrived : 0, 4)),
    ...(learned ? { learnedDetector: learned } : {}),
    ...(o.tally ? { perTarget: structuredClone(env.tally) } : {}),
    ...(log ? { viewCalibration: log.summarise((id) => env.requestOutcome(id)) } : {}),
  };
}

/** Nearest-rank percentile of the values (sorted in place); 0 for none. */
export function percentile(values: Float64Array, q: number): number {
  if (values.length === 0) return 0;
  values.sort();
  return values[nearestRankIndex(values.length, q)];
}

/** Re-exported for the training job's files that import it from here. */
export { round };
