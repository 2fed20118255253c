/**
 * Evaluation during `kais train`: the actor (argmax, or sampling with --eval-act sample) on held-out
 * episodes, and with --eval-trace on a trace window as well; the selection score picks the checkpoint
 * `--export-actor` writes.
 */
import type { Request } from '../../shared/domain';
import type { Scenario } from '../../shared/scenario';
import { CmmacDispatch } from '../../agent/actor-policy';
import type { ObservationShape } from '../../agent/observation';
import { openWorkload } from '../workload';
import type { RequestSource } from '../workload/source';
import { spreadWindowRequests } from '../workload/window';
import { makeOrchestration } from '../baselines/registry';
import type { OrchestrationPolicy } from '../../shared/policy';
import { runEpisode, round } from './rollout';
import type { TrainOptions } from './train-options';

/** Seeds of held-out evaluation episodes (training episodes derive theirs from --seed). */
export const EVAL_SEED_BASE = 1_000_003;

/** One evaluation: the held-out seeds' mean rate, the trace window's (--eval-trace), the score. */
export interface TrainEvaluation {
  heldOut: number;
  trace: number | null;
  /** what the best checkpoint is chosen by: heldOut, or the mean of heldOut and trace */
  score: number;
}

/** The run's view; runs stored before --view existed trained and evaluated on the whole cluster. */
export function viewOfRun(c: Pick<TrainOptions, 'view'>): 'agent' | 'global' {
  return c.view ?? 'global';
}

/**
 * The policy of `actorWeights`, acting as config.evalAct (argmax; sample: drawn from a stream seeded
 * by each episode's seed, so an evaluation is reproducible), on config.evalSeeds held-out episodes (seeds
 * EVAL_SEED_BASE + i) of the run's workload, and with config.evalTrace on as many episodes replaying
 * config.evalTraceWindowS (episode i starts i/seeds of the way into the window). Orchestration:
 * config.orchestration, or `orchestration()` (a cmmac/gpg run: its lesson's, GPG greedy).
 */
export function evaluateActor(
  scenario: Scenario,
  config: TrainOptions,
  actorWeights: Float32Array[],
  shape: ObservationShape,
  orchestration?: () => OrchestrationPolicy,
): TrainEvaluation {
  const orchOf = orchestration ?? (() => makeOrchestration(config.orchestration, scenario));
  const seeds = config.evalSeeds ?? 1;
  const durationS = config.evalFrames * scenario.slotsPerFrame * scenario.slotS;
  // a stream (the same requests as buildRequests): an evaluation of --eval-frames 100000 holds only the requests in the system
  const heldOut = meanRate(scenario, config, actorWeights, shape, orchOf, seeds, (seed) =>
    openWorkload({ scenario, workload: config.workload, tracePath: config.trace, seed, load: config.load, durationS }),
  );
  if (!config.evalTrace) return { heldOut, trace: null, score: heldOut };
  const trace = meanRate(scenario, config, actorWeights, shape, orchOf, seeds, (seed, i) =>
    spreadWindowRequests(
      { scenario, trace: config.evalTrace!, window: config.evalTraceWindowS, seed, load: config.load, durationS, warn: () => {} },
      i,
      seeds,
    ),
  );
  return { heldOut, trace, score: round((heldOut + trace) / 2, 4) };
}

/** How a run's evaluations act; runs stored before --eval-act evaluated the argmax. */
export function evalActOf(c: Pick<TrainOptions, 'evalAct'>): 'argmax' | 'sample' {
  return c.evalAct ?? 'argmax';
}

function meanRate(
  scenario: Scenario,
  config: TrainOptions,
  actorWeights: Float32Array[],
  shape: ObservationShape,
  orchOf: () => OrchestrationPolicy,
  seeds: number,
  requestsOf: (seed: number, i: number) => Request[] | RequestSource,
): number {
  let sum = 0;
  for (let i = 0; i < seeds; i++) {
    const seed = EVAL_SEED_BASE + i;
    const requests = requestsOf(seed, i);
    const dispatch = new CmmacDispatch({
      shape,
      queueCapPerReplica: scenario.queueCapPerReplica,
      weights: actorWeights,
      mode: evalActOf(config),
      head: config.head,
    });
    const r = runEpisode({
      scenario,
      requests,
      frames: config.evalFrames,
      seed,
      dispatch,
      orchestration: orchOf(),
      nodeDequeue: config.dequeue ?? 'discounted', // older runs evaluated with rollout's unset (= discounted) order
      view: viewOfRun(config),
      deviceFilters: config.filters ?? false,
    });
    sum += r.throughputRate;
  }
  return round(sum / seeds, 4);
}
