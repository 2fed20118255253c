/**
 * prob: two-stage probabilistic scheduling (../shared/papers/video-streaming-stall-quality.txt).
 * Stage 1, every frame: per service w, a probability over targets from measured rates so that
 * expected queueing delay is balanced: each edge target gets a share proportional to its service
 * rate mu_t = ready_w(t) / meanService_w(t) (equal utilisation across replicas, hence equal M/M/c
 * delay), up to a target utilisation rho = 0.85 of the edge; the arrival rate above rho x sum(mu)
 * goes to the cloud. Stage 2, per request: sample a target from that distribution restricted to the
 * valid ones (renormalised); the replica within a target is the node's queue.
 */
import type { ClusterView, DispatchItem, DispatchPolicy } from '../policy';
import { Rng } from '../rng';

export class ProbDispatch implements DispatchPolicy {
  readonly name = 'prob';
  private rng = new Rng(0);
  private probs: Float64Array = new Float64Array(0);
  private arrivals: Float64Array = new Float64Array(0);
  private lastFrameS = 0;
  /** @param frameS how often the distributions are recomputed (s) @param rho target edge utilisation */
  constructor(
    private readonly frameS = 25,
    private readonly rho = 0.85,
  ) {}

  reset(seed: number, view: ClusterView): void {
    this.rng = Rng.derive(seed, 'dispatch/prob');
    this.probs = new Float64Array(view.numServices * view.numTargets);
    this.arrivals = new Float64Array(view.numServices);
    this.lastFrameS = 0;
    this.recompute(view, 1);
  }

  /** Recomputes the per-service distributions from the last window's arrival rates. */
  private recompute(view: ClusterView, windowS: number): void {
    const T = view.numTargets;
    for (let w = 0; w < view.numServices; w++) {
      let mu = 0;
      for (let t = 0; t < view.numNodes; t++) {
        const r = view.readyReplicas(t, w);
        const m = r > 0 ? r / view.meanServiceS(t, w) : 0;
        this.probs[w * T + t] = m;
        mu += m;
      }
      const lambda = this.arrivals[w] / windowS;
      const edgeShare = lambda > 0 && mu > 0 ? Math.min(1, (this.rho * mu) / lambda) : mu > 0 ? 1 : 0;
      for (let t = 0; t < view.numNodes; t++) this.probs[w * T + t] = mu > 0 ? (this.probs[w * T + t] / mu) * edgeShare : 0;
      this.probs[w * T + view.cloudTarget] = 1 - edgeShare;
      this.arrivals[w] = 0;
    }
  }

  decide(item: DispatchItem, view: ClusterView): number {
    const now = view.nowS();
    if (now - this.lastFrameS >= this.frameS) {
      this.recompute(view, now - this.lastFrameS);
      this.lastFrameS = now;
    }
    const w = item.request.service;
    this.arrivals[w]++;
    const T = view.numTargets;
    let total = 0;
    for (let t = 0; t < T; t++) if (item.mask[t]) total += this.probs[w * T + t];
    if (total <= 0) return view.cloudTarget;
    let r = this.rng.next() * total;
    for (let t = 0; t < T; t++) {
      if (!item.mask[t]) continue;
      r -= this.probs[w * T + t];
      if (r < 0) return t;
    }
    return view.cloudTarget;
  }
}
