/**
 * Observation o_b of one dispatch decision (ALGORITHMS.md section 2, kais-reconstruction.md 2.3):
 * built from the DispatchItem (request, eAP, mask) and the ClusterView only, so the simulator and
 * the live agent produce the same vector. Targets in the fixed order 0..N-1 (edge nodes), N (cloud).
 *
 * Beyond the listed features each target also gets the expected completion time `eta` of this
 * request there (transfer + queue wait + processing + return, the estimate the `lec` heuristic
 * uses) and its margin to the slack: the quantities a good dispatcher reasons with, which an MLP
 * would otherwise have to rediscover from raw queue lengths.
 *
 * Feature table (W services, T = N + 1 targets, B eAPs; dim = W + 3 + T x 14 + B):
 *
 * | index | feature | unit | normalisation |
 * | --- | --- | --- | --- |
 * | 0..W-1 | service of the request, one-hot | - | 0/1 |
 * | W | slack to deadline (deadline - now) | s | / 1 s, clipped to [-1, 4] |
 * | W+1 | own eAP queue length (after this request) | requests | x / (x + 32) |
 * | W+2 | input size | MB | / 2 MB, clipped to [0, 4] |
 * | per target t, base W + 3 + 14 t: | | | |
 * | +0 | valid (context-filter mask) | - | 0/1 |
 * | +1 | hosts a ready replica of w (d >= 1; cloud 1) | - | 0/1 |
 * | +2 | requests of w sent and not started / (queue cap x ready replicas) | - | clipped to [0, 2] |
 * | +3 | queue length (all services, incl. on the wire) | requests | x / (x + 8) |
 * | +4 | free CPU ratio | - | [0, 1] |
 * | +5 | free memory ratio | - | [0, 1] |
 * | +6 | latency from b: transfer of this input + return | s | / 0.25 s, clipped to [0, 4] |
 * | +7 | healthy (device filter) | - | 0/1 |
 * | +8 | expected completion time eta | s | / 1 s, clipped to [0, 4] |
 * | +9 | margin: slack - eta | s | / 1 s, clipped to [-2, 2] |
 * | +10 | meets the deadline (eta <= slack) | - | 0/1 |
 * | +11 | busy replicas of w / ready replicas of w | - | [0, 1] (0 if none) |
 * | +12 | load: (requests of w not started + busy replicas of w) / ready replicas (jsq's measure) | - | x / (x + 2) |
 * | +13 | slack / eta (how many times over the deadline would still be met) | - | clipped to [0, 4] (0 if no replica or slack <= 0) |
 * | W+3+14T .. +B-1 | eAP id, one-hot | - | 0/1 |
 *
 * Features +12 and +13 (added with the `deadline-load` warm-start teacher, training/baselines/teacher.ts)
 * are the quantities that teacher decides on; without them the cloned actor sent far more requests
 * to the cloud than its teacher.
 *
 * The cloud's latency and queue are its target block (the last one).
 */
import type { ClusterView, DispatchItem } from '../shared/policy';
import { expectedCompletionS } from '../shared/eta';

import { observationDim, PER_TARGET_FEATURES, type ObservationShape } from '../shared/spaces';

export { PER_TARGET_FEATURES, observationDim, targetBlockOf, type ObservationShape } from '../shared/spaces';

export { expectedCompletionS };

function clip(x: number, lo: number, hi: number): number {
  return x < lo ? lo : x > hi ? hi : x;
}

export class ObservationBuilder {
  readonly dim: number;

  constructor(
    readonly shape: ObservationShape,
    /** The scenario's queueCapPerReplica (the context filter's room rule). */
    readonly queueCapPerReplica: number,
  ) {
    this.dim = observationDim(shape);
  }

  /** Writes o into out[offset .. offset + dim). */
  build(item: DispatchItem, view: ClusterView, out: Float32Array, offset = 0): void {
    const { numServices: W, numTargets: T, numEaps: B } = this.shape;
    if (view.numServices !== W || view.numTargets !== T || view.numEaps !== B) {
      throw new TypeError(
        `ObservationBuilder: built for ${W} services / ${T} targets / ${B} eAPs, the view has ${view.numServices} / ${view.numTargets} / ${view.numEaps}`,
      );
    }
    const o = out.subarray(offset, offset + this.dim);
    o.fill(0);
    const req = item.request;
    const w = req.service;
    const b = item.eap;
    const slackS = req.deadlineS - view.nowS();
    o[w] = 1;
    o[W] = clip(slackS, -1, 4);
    const q = view.eapQueueLen(b);
    o[W + 1] = q / (q + 32);
    o[W + 2] = clip(req.inputMB / 2, 0, 4);
    const cloud = view.cloudTarget;
    for (let t = 0; t < T; t++) {
      const p = W + 3 + t * PER_TARGET_FEATURES;
      const ready = view.readyReplicas(t, w);
      o[p] = item.mask[t] ? 1 : 0;
      o[p + 1] = t === cloud || ready >= 1 ? 1 : 0;
      o[p + 2] = clip(view.serviceQueueLen(t, w) / (this.queueCapPerReplica * Math.max(1, ready)), 0, 2);
      const ql = view.queueLen(t);
      o[p + 3] = ql / (ql + 8);
      o[p + 4] = clip(view.freeCpuRatio(t), 0, 1);
      o[p + 5] = clip(view.freeMemRatio(t), 0, 1);
      o[p + 6] = clip((view.transferS(b, t, req.inputMB) + view.returnS(b, t)) / 0.25, 0, 4);
      o[p + 7] = view.healthy(t) ? 1 : 0;
      if (t === cloud || ready >= 1) {
        const eta = expectedCompletionS(view, b, t, w, req.inputMB);
        o[p + 8] = clip(eta, 0, 4);
        o[p + 9] = clip(slackS - eta, -2, 2);
        o[p + 10] = eta <= slackS ? 1 : 0;
        o[p + 11] = ready > 0 ? clip(view.busyReplicas(t, w) / ready, 0, 1) : 0;
        const load = (view.serviceQueueLen(t, w) + view.busyReplicas(t, w)) / Math.max(1, ready);
        o[p + 12] = load / (load + 2);
        o[p + 13] = slackS > 0 && eta > 0 ? clip(slackS / eta, 0, 4) : 0;
      } else {
        // no replica: nothing will ever run here; "never" = the clip bounds
        o[p + 8] = 4;
        o[p + 9] = -2;
      }
    }
    o[W + 3 + T * PER_TARGET_FEATURES + b] = 1;
  }
}
