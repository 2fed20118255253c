/**
 * How the two device-filter stages combine into one verdict per window (DESIGN.md §6; issue 20;
 * docs/detect.md "Combination"). Used by `kais detect` (training/jobs/detect.ts), the
 * orchestrator's learned stage (orchestrator/detector.ts) and the simulator's (training/sim/telemetry.ts),
 * so the combination measured on labelled data is the one that runs.
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
 * Live (not done): a finite etaHealthy needs the second stage to score the windows the rules call
 * healthy too, which the agent does not send today (it sends the ambiguous ones).
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
 * 'faulty' alarms and the L2 baseline's, at eta 0 (the machine's own held-out healthy q99). It is
 * what the `kais detect --lomo` objective picks with all 5 dev SMD machines as tuning machines and
 * the rules at DETECT_DEVICE_FILTER_OPTIONS (objective 1.001 vs 1.000 for eta 0.3: a near tie), and
 * every leave-one-machine-out fold chose l2 as the second stage (docs/detect.md "Combination").
 * Not live yet: the agent and the orchestrator still run the hard gate with the VGRU on ambiguous
 * windows (docs/detect.md "Live").
 */
export const DETECT_STAGE_COMBINATION: Readonly<StageCombination> = Object.freeze({ eta: 0, etaHealthy: 0, second: 'l2' as const });

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
