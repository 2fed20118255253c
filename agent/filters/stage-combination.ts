/**
 * How the two device-filter stages combine into one verdict per window (DESIGN.md §6; issue 20;
 * docs/detect.md "Combination"). Used by `kais detect` (training/jobs/detect.ts) and the agent's
 * NodeHealth (node-health.ts; the simulator runs the same class), so the combination measured on
 * labelled data is the one that runs.
 *
 * The rules run first and cheaply on every window. Their verdicts and the learned stage's
 * normalised score s (VgruDetector.score: 0 = the machine's own held-out healthy q99) combine as
 *   faulty    -> anomalous (the rules' confident alarm; precision >= 0.9 on every dev machine)
 *   ambiguous -> s > eta
 *   healthy   -> s > etaHealthy (etaHealthy >= eta; Infinity: the rules' "healthy" is final)
 * which is one threshold on a fused score (`fusedScore`): faulty = +Infinity, ambiguous = s,
 * healthy = s - (etaHealthy - eta). etaHealthy = Infinity is the hard gate of Sentinel (the learned
 * stage sees only ambiguous windows); etaHealthy = eta is the union of the rules' alarms and the
 * learned stage's. Why a raised threshold rather than a gate: the hard gate loses what the learned
 * stage finds on windows the rules call healthy (issue 20: on some machines the rules call 99% of
 * the windows healthy), and the union keeps every learned false alarm; a window the rules call
 * healthy needs more learned evidence than an ambiguous one, as much more as the selection on the
 * dev machines says. The union's recall is at least each stage's, and adding the rules' alarms
 * cannot lower the learned stage's F1 while their precision is above half its F1 (each added
 * flag is then more likely a hit than the F1 it dilutes).
 *
 * Live: the agent's NodeHealth runs the rules and the L2 stage (l2-stage.ts) on every window and
 * decides with `combinedAnomalous` and LIVE_STAGE_COMBINATION. The orchestrator's VGRU (optional,
 * `detector` in its config) still decides only the ambiguous windows the agents send (s > eta
 * there, this module's rule for an ambiguous window with the VGRU as second stage).
 */
import type { Verdict } from './device-filter';

export interface StageCombination {
  /** Learned threshold for windows the rules leave ambiguous (normalised score). */
  eta: number;
  /** Learned threshold for windows the rules call healthy; Infinity = the rules decide them. */
  etaHealthy: number;
  /**
   * The second stage's score: 'vgru' = the variational GRU (critic/detector/vgru.ts), 'l2' = the L2
   * norm of the standardised sample (critic/detector/baselines.ts), both normalised the same way.
   */
  second: 'vgru' | 'l2';
}

/**
 * The combination `kais detect` measures by default: the union (etaHealthy = eta) of the rules'
 * 'faulty' alarms and the L2 baseline's, at eta 0.3 (0.3 of the machine's own held-out healthy
 * spread above its q99). It is what `kais detect --lomo`'s selection picks with all 5 dev SMD
 * machines as tuning machines and the rules at DETECT_DEVICE_FILTER_OPTIONS: the union is the
 * grid's only combination, and the selection first maximises the worst machine's
 * combined-vs-better-stage F1 ratio capped at 1 (`lomoGuard`), then `lomoObjective`. eta 0 had the
 * higher objective (0.7455 vs 0.7449) but kept 0.994x its better stage on machine-2-7; eta 0.3
 * keeps >= 1.000x on all 5 (2026-12-02; before, with the objective alone, the default was eta 0).
 * Every leave-one-machine-out fold chose l2 as the second stage (docs/detect.md "Combination").
 * Live (LIVE_STAGE_COMBINATION): the same union with the same L2 arithmetic in the agent's
 * NodeHealth (l2-stage.ts), at eta 1.
 */
export const DETECT_STAGE_COMBINATION: Readonly<StageCombination> = Object.freeze({ eta: 0.3, etaHealthy: 0.3, second: 'l2' as const });

/**
 * The combination the agent runs (agent/filters/node-health.ts, and so the simulator's `kais eval
 * --filters`): DETECT_STAGE_COMBINATION's union of the rules' 'faulty' and the L2 stage's alarms,
 * at eta 1 instead of 0.3 (the history's q99 plus once more its distance from the median, as the
 * live VGRU's LIVE_DETECTOR_ETA), and it takes NodeHealth's `secondRun` (5) anomalous windows in
 * a row to exclude a node. Why not a lower eta: in the simulator (kais, v2017 failure times, seeds
 * 1-2, agent view) eta 0 held out 3-14% of healthy node-time, eta 1 0.3-0.8%, and neither lost
 * fewer requests than the rules alone (docs/detect.md "Live"; eta 0.3 was not run there). Chosen on
 * the simulator after the SMD figures; `kais detect --eta 1 --eta-healthy 1` measures it on labelled data.
 */
export const LIVE_STAGE_COMBINATION: Readonly<StageCombination> = Object.freeze({ eta: 1, etaHealthy: 1, second: 'l2' as const });

/** Fused score of one window: anomalous exactly when > c.eta (module comment). */
export function fusedScore(v: Verdict, learned: number, c: StageCombination): number {
  if (v === 'faulty') return Infinity;
  if (v === 'healthy') return c.etaHealthy === Infinity ? -Infinity : learned - (Math.max(c.etaHealthy, c.eta) - c.eta);
  return learned;
}

/** The combined verdict: true = anomalous. `learned` NaN (not scored) counts as not anomalous. */
export function combinedAnomalous(v: Verdict, learned: number, c: StageCombination): boolean {
  return fusedScore(v, learned, c) > c.eta;
}
