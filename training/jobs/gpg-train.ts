/**
 * GPG training on the simulator (issue 16 items 4-5, first stage): a fixed dispatch policy (the
 * best heuristic by default; cMMAC frozen comes with joint training), GPG sampling its orders
 * every frame, REINFORCE with Decima's time-aligned baseline over R rollouts that share one
 * arrival sequence (critic/gpg/update.ts).
 *
 *   per update u: requests of seed (seed + u) (a new arrival sequence each update), at load
 *                   loads[u % loads.length] (a load mix; default the one load), replaying the
 *                   trace window traces[floor(u / loads.length) % traces.length] when traces are
 *                   given (each window at every load), else the synthetic workload
 *                 R rollouts on them, GPG sampling with rollout seeds, the same dispatch
 *                 reward of decision tau (taken at the end of frame tau) = the next frame's
 *                   throughput rate - opCost x its executed scale operations
 *                   - replicaCost x its mean edge replicas held (replica-seconds / frame length)
 *                 (the last decision has no next frame and is left out)
 *                 one gradient step on the R rollouts
 *   every evalEvery updates: greedy GPG on held-out evaluation seeds, beside hpa on the same requests
 *
 * With `scaleIn` (a model's field: hpa's scale-in after GPG's orders, shared/orchestration/scale-in.ts)
 * every rollout and evaluation runs GPG followed by the scale-in, as the model runs in `kais eval`
 * and live: GPG learns in the world it is deployed in. The scale-in's removals are operations of
 * the frame like GPG's own (they cost opCost); the gradient is on GPG's decisions alone.
 *
 * With `vine` (TRPO's vine procedure) an update's R rollouts are greedy except at one branch
 * decision b = u mod (frames - horizon): rollout 0 keeps the greedy decision there, the others
 * sample it; each runs b + 1 + horizon frames, its return is the reward of the horizon frames after
 * b, and the step is on the R branch decisions (advantage: return minus their mean). Whole-episode
 * REINFORCE credits every decision with the noise of all the others (sessions 14-17 found its
 * fine-tunes flat or collapsing to the no-op: docs/gpg.md); here the rollouts differ in one decision.
 *
 * Same seed, same numbers: the nets start from the seed, every rollout's sampling is seeded, and
 * tfjs' CPU/wasm kernels are deterministic.
 */
import type { DequeueName } from '../../shared/dequeue';
import type { Scenario } from '../../shared/scenario';
import { round } from '../../shared/round';
import { GpgNet, type GpgNetConfig } from '../../critic/gpg/gnn';
import { GpgOrchestration, type GpgDecision } from '../../critic/gpg/policy';
import { withScaleIn } from '../../critic/gpg/load';
import type { GpgScaleIn } from '../../critic/gpg/model';
import { GpgLearner, type GpgEpisode, type GpgUpdateOptions } from '../../critic/gpg/update';
import { makeDispatch, makeOrchestration } from '../baselines/registry';
import { loadDefaultCmmac } from './checkpoint';
import type { DispatchPolicy, OrchestrationPolicy, OrchestrationView } from '../../shared/policy';
import type { ScaleOp } from '../../shared/domain';
import { buildRequests } from '../workload';
import type { WorkloadName } from '../workload';
import { runEpisode, type PolicyResult } from './rollout';
import type { FrameStats } from '../sim/env';

export interface GpgTrainOptions {
  scenario: Scenario;
  /** Dispatch the orchestration is trained under: a heuristic, or `cmmac` (the shipped model, argmax, frozen). */
  dispatch: string;
  workload: WorkloadName;
  load: number;
  /** Load mix: update u trains at loads[u % loads.length] (default: [load]); evaluations stay at `load`. */
  loads?: number[];
  /** Frames per rollout. */
  frames: number;
  /** Rollouts per update (the baseline's sample). */
  rollouts: number;
  updates: number;
  seed: number;
  opCost: number;
  replicaCost: number;
  evalEvery: number;
  /** Evaluation seeds (held out: training uses seed + u). */
  evalSeeds: number[];
  evalFrames: number;
  nodeDequeue?: DequeueName;
  view?: 'global' | 'agent';
  net?: Partial<GpgNetConfig>;
  update?: Partial<GpgUpdateOptions>;
  /**
   * Fine-tune: start from these weights (a model of the same net config) instead of the seed's,
   * with the entropy schedule continued from `initUpdates` updates (fresh Adam moments).
   */
  init?: { weights: Float32Array[]; updates: number };
  /**
   * Alibaba trace windows (CSV files or folders, as kais eval --trace) to train on instead of
   * `workload`: update u replays traces[floor(u / loads.length) % traces.length].
   */
  traces?: string[];
  /** A trace window the evaluations replay instead of `workload` (keep it apart from `traces`). */
  evalTrace?: string;
  /**
   * H, the nodes GPG may change per frame (its action budget; the heuristics do not read it).
   * @defaultValue the scenario's scaleNodesPerFrame
   */
  nodesPerFrame?: number;
  /**
   * Vine rollouts (TRPO's "vine" procedure, Schulman et al. 2015 section 5.2) instead of whole
   * sampled episodes: every rollout of an update follows the greedy policy (one shared trunk) up to
   * the branch decision, samples only there (rollout 0 keeps the greedy decision), and is greedy
   * again for `horizon` frames; its return is the reward of those frames, and the gradient step is
   * on the branch decisions alone. The rollouts differ in one decision and share the arrivals, the
   * trunk and the continuation, so the advantages measure that decision against its alternatives.
   * null: the whole-episode REINFORCE above.
   */
  vine?: { horizon: number; perturb?: boolean } | null;
  /** hpa's scale-in after GPG's orders in every rollout and evaluation (a model's `scaleIn`); absent: GPG alone. */
  scaleIn?: GpgScaleIn;
}

export interface GpgEvalPoint {
  update: number;
  /** Mean throughput rate of greedy GPG over the evaluation seeds, and of hpa on the same requests. */
  gpg: number;
  hpa: number;
  gpgReplicaS: number;
  hpaReplicaS: number;
  gpgOps: number;
  hpaOps: number;
}

export interface GpgTrainResult {
  net: GpgNet;
  curve: { update: number; meanReturn: number; nodeEntropy: number; scaleEntropy: number; throughput: number }[];
  evals: GpgEvalPoint[];
}

/** Rewards of a rollout's decisions from its frames (see the file comment). */
export function gpgRewards(
  frames: readonly FrameStats[],
  decisions: number,
  frameS: number,
  opCost: number,
  replicaCost: number,
): number[] {
  const out: number[] = [];
  for (let t = 0; t < decisions; t++) {
    const f = frames[t + 1];
    if (!f) break;
    const rate = f.arrived > 0 ? f.completedInTime / f.arrived : 0;
    out.push(rate - opCost * f.scaleOps - replicaCost * (f.replicaS / frameS));
  }
  return out;
}

/**
 * One vine rollout's orchestration: greedy at every decision but the `branch`-th, where `branch`
 * decides (sampled, or greedy for the reference rollout) and its decision is recorded.
 */
class VineOrchestration implements OrchestrationPolicy {
  readonly name = 'gpg';
  readonly periodS: number;
  private k = 0;

  constructor(
    private readonly greedy: GpgOrchestration,
    private readonly branch: GpgOrchestration,
    private readonly branchAt: number,
  ) {
    this.periodS = greedy.periodS;
  }

  reset(seed: number, view: OrchestrationView): void {
    this.k = 0;
    this.greedy.reset(seed, view);
    this.branch.reset(seed, view);
  }

  decide(view: OrchestrationView): ScaleOp[] {
    return (this.k++ === this.branchAt ? this.branch : this.greedy).decide(view);
  }
}

export function trainGpg(o: GpgTrainOptions, progress: (line: string) => void = () => {}): GpgTrainResult {
  const s = o.scenario;
  const frameS = s.slotS * s.slotsPerFrame;
  const net = new GpgNet(s.services.length, o.seed, o.net);
  if (o.init) net.setWeights(o.init.weights);
  const learner = new GpgLearner(net, o.update);
  if (o.init) learner.updates = o.init.updates;
  const curve: GpgTrainResult['curve'] = [];
  const evals: GpgEvalPoint[] = [];
  const loads = o.loads && o.loads.length > 0 ? o.loads : [o.load];
  const traces = o.traces ?? [];
  // cmmac: the shipped model, frozen (argmax; reset() per episode like any dispatch)
  const frozen: DispatchPolicy | null = o.dispatch === 'cmmac' ? loadDefaultCmmac(s) : null;
  if (o.dispatch === 'cmmac' && !frozen) throw new TypeError(`dispatch cmmac: no model ships for scenario ${s.name}`);
  const dispatchOf = (): DispatchPolicy => frozen ?? makeDispatch(o.dispatch, s);
  const policyFor = (mode: 'sample' | 'greedy' | 'perturb', sink?: GpgDecision[], sampleSalt = 0) =>
    new GpgOrchestration(net, {
      periodS: frameS,
      nodesPerDecision: o.nodesPerFrame ?? s.scaleNodesPerFrame,
      mode,
      sampleSalt,
      onDecision: sink ? (d) => sink.push(d) : undefined,
    });
  // GPG as the model runs it: followed by its scale-in when it has one
  const deployed = (gpg: OrchestrationPolicy): OrchestrationPolicy => withScaleIn(gpg, { scaleIn: o.scaleIn });
  const episode = (
    requests: ReturnType<typeof buildRequests>,
    seed: number,
    frames: number,
    orchestration: OrchestrationPolicy,
    onFrames?: (f: readonly FrameStats[]) => void,
  ): PolicyResult =>
    runEpisode({
      scenario: s,
      requests,
      frames,
      seed,
      dispatch: dispatchOf(),
      orchestration,
      nodeDequeue: o.nodeDequeue,
      view: o.view,
      onFrames,
    });

  const evaluate = (u: number): void => {
    let gpg = 0,
      hpa = 0,
      gRs = 0,
      hRs = 0,
      gOps = 0,
      hOps = 0;
    for (const es of o.evalSeeds) {
      const requests = buildRequests({
        scenario: s,
        workload: o.workload,
        tracePath: o.evalTrace ?? null,
        seed: es,
        load: o.load,
        durationS: o.evalFrames * frameS,
      });
      const a = episode(requests, es, o.evalFrames, deployed(policyFor('greedy')));
      const b = episode(requests, es, o.evalFrames, makeOrchestration('hpa', s));
      gpg += a.throughputRate;
      hpa += b.throughputRate;
      gRs += a.replicaSeconds;
      hRs += b.replicaSeconds;
      gOps += a.schedulingCost;
      hOps += b.schedulingCost;
    }
    const k = o.evalSeeds.length;
    const p: GpgEvalPoint = {
      update: u,
      gpg: round(gpg / k, 4),
      hpa: round(hpa / k, 4),
      gpgReplicaS: round(gRs / k, 0),
      hpaReplicaS: round(hRs / k, 0),
      gpgOps: round(gOps / k, 1),
      hpaOps: round(hOps / k, 1),
    };
    evals.push(p);
    progress(
      `eval u=${u}: gpg ${p.gpg} (replica-s ${p.gpgReplicaS}, ops ${p.gpgOps}) | ${o.dispatch}/hpa ${p.hpa} (replica-s ${p.hpaReplicaS}, ops ${p.hpaOps})`,
    );
  };

  for (let u = 0; u < o.updates; u++) {
    if (o.evalEvery > 0 && u % o.evalEvery === 0) evaluate(u);
    const load = loads[u % loads.length];
    const trace = traces.length > 0 ? traces[Math.floor(u / loads.length) % traces.length] : null;
    const requests = buildRequests({
      scenario: s,
      workload: o.workload,
      tracePath: trace,
      seed: o.seed + u,
      load,
      durationS: o.frames * frameS,
    });
    const episodes: GpgEpisode[] = [];
    let thr = 0;
    const vine = o.vine ?? null;
    // the branch decision cycles over the decisions that have `horizon` frames after them
    const branchAt = vine ? u % Math.max(1, o.frames - vine.horizon) : -1;
    for (let r = 0; vine && r < o.rollouts; r++) {
      const decisions: GpgDecision[] = [];
      let frames: readonly FrameStats[] = [];
      const branch = policyFor(r === 0 ? 'greedy' : vine.perturb ? 'perturb' : 'sample', decisions, 1 + u * o.rollouts + r);
      const res = episode(
        requests,
        o.seed + u,
        branchAt + 1 + vine.horizon,
        deployed(new VineOrchestration(policyFor('greedy'), branch, branchAt)),
        (f) => (frames = f),
      );
      const rewards = gpgRewards(frames, branchAt + vine.horizon, frameS, o.opCost, o.replicaCost).slice(branchAt);
      if (decisions.length === 1 && rewards.length > 0) episodes.push({ decisions, rewards: [rewards.reduce((a, b) => a + b, 0)] });
      thr += res.throughputRate;
    }
    for (let r = 0; !vine && r < o.rollouts; r++) {
      const decisions: GpgDecision[] = [];
      let frames: readonly FrameStats[] = [];
      const res = episode(
        requests,
        o.seed + u,
        o.frames,
        deployed(policyFor('sample', decisions, 1 + u * o.rollouts + r)),
        (f) => (frames = f),
      );
      const rewards = gpgRewards(frames, decisions.length, frameS, o.opCost, o.replicaCost);
      episodes.push({ decisions: decisions.slice(0, rewards.length), rewards });
      thr += res.throughputRate;
    }
    const st = learner.update(episodes);
    const point = {
      update: u,
      meanReturn: round(st.meanReturn, 4),
      nodeEntropy: round(st.nodeEntropy, 3),
      scaleEntropy: round(st.scaleEntropy, 3),
      throughput: round(thr / o.rollouts, 4),
    };
    curve.push(point);
    progress(
      `u=${u} load ${load}${trace ? ` trace ${trace}` : ''} throughput ${point.throughput} return ${point.meanReturn} H(node) ${point.nodeEntropy} H(scale) ${point.scaleEntropy} beta ${round(st.beta, 4)}`,
    );
  }
  if (o.evalEvery > 0) evaluate(o.updates);
  learner.dispose();
  return { net, curve, evals };
}
