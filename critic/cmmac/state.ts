/**
 * The critic's global state s_t (kais-reconstruction.md 2.4): a fixed-size vector of the whole
 * cluster, read from the ClusterView the simulator's `env.state()` returns. Only the learner sees
 * it; agents act on their local observation.
 *
 * | block | per | features (normalisation) |
 * | --- | --- | --- |
 * | targets | T = N + 1 (cloud last) | free CPU ratio, free memory ratio, queue length x/(x+8), running / cores (clip 2), healthy |
 * | eAPs | B | queue length x/(x+32) |
 * | services | W | edge replicas x/(x+4), requests of w waiting at edge nodes x/(x+8) |
 *
 * dim = 5 T + B + 2 W.
 */
import type { ClusterView } from '../../shared/policy';

export function stateDim(v: { numTargets: number; numEaps: number; numServices: number }): number {
  return 5 * v.numTargets + v.numEaps + 2 * v.numServices;
}

/** Writes s into out[offset .. offset + stateDim). */
export function buildState(view: ClusterView, out: Float32Array, offset = 0): void {
  const T = view.numTargets;
  const B = view.numEaps;
  const W = view.numServices;
  let p = offset;
  for (let t = 0; t < T; t++) {
    out[p++] = view.freeCpuRatio(t);
    out[p++] = view.freeMemRatio(t);
    const q = view.queueLen(t);
    out[p++] = q / (q + 8);
    out[p++] = Math.min(2, view.running(t) / Math.max(1e-9, view.cpuCores(t)));
    out[p++] = view.healthy(t) ? 1 : 0;
  }
  for (let b = 0; b < B; b++) {
    const q = view.eapQueueLen(b);
    out[p++] = q / (q + 32);
  }
  for (let w = 0; w < W; w++) {
    let reps = 0;
    let waiting = 0;
    for (let n = 0; n < view.numNodes; n++) {
      reps += view.replicas(n, w);
      waiting += view.serviceQueueLen(n, w);
    }
    out[p++] = reps / (reps + 4);
    out[p++] = waiting / (waiting + 8);
  }
}
