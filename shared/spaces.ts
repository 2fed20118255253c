/**
 * Sizes of the cMMAC spaces, the contract between whoever builds observations (agent/observation.ts,
 * in the agent and the simulator) and whoever only needs their shape (the orchestrator's learner,
 * checkpoints): observation = W service one-hot + 3 request features + T target blocks of
 * PER_TARGET_FEATURES + B eAP one-hot; actions = T = N edge nodes + the cloud. The feature table
 * itself is documented next to the code that fills it (agent/observation.ts).
 */

export const PER_TARGET_FEATURES = 14;

export interface ObservationShape {
  numServices: number;
  numTargets: number;
  numEaps: number;
}

/** Where the per-target blocks sit in the observation (for the actor's shared target scorer). */
export function targetBlockOf(s: ObservationShape): { offset: number; stride: number; count: number } {
  return { offset: s.numServices + 3, stride: PER_TARGET_FEATURES, count: s.numTargets };
}

export function observationDim(s: ObservationShape): number {
  return s.numServices + 3 + s.numTargets * PER_TARGET_FEATURES + s.numEaps;
}
