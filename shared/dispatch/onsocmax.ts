/**
 * onsocmax: online marginal-cost dispatch (OnSocMax, ../shared/papers/serverless-resource-mesh-onsocmax.txt).
 * Each target has a price per unit of load that rises with its utilisation u (requests of the
 * service in the system at t per ready replica, divided by the queue cap):
 *   p(u) = iota                                             for u <= threshold
 *        = iota * (upsilon / iota)^((u - threshold) / (1 - threshold))   for threshold < u <= 1
 *        = infinity                                         for u > 1
 * A request of value v goes to the edge target that maximises v - p(u) - latency cost; when no edge
 * target has a non-negative surplus it goes to the cloud (whose price stays at iota: large capacity).
 */
import type { ClusterView, DispatchItem, DispatchPolicy } from '../policy';

export interface OnSocMaxOptions {
  /** lowest marginal value. @defaultValue 0.05 */
  iota: number;
  /** highest marginal value (at capacity). @defaultValue 2 */
  upsilon: number;
  /** utilisation up to which the price stays flat. @defaultValue 0.5 */
  threshold: number;
  /** value of serving a request. @defaultValue 1 */
  value: number;
  /** price of one second of expected transfer. @defaultValue 2 */
  latencyPricePerS: number;
  /** queue cap per replica used to normalise utilisation. @defaultValue 8 */
  queueCapPerReplica: number;
}

export class OnSocMaxDispatch implements DispatchPolicy {
  readonly name = 'onsocmax';
  private readonly o: OnSocMaxOptions;
  constructor(options: Partial<OnSocMaxOptions> = {}) {
    this.o = { iota: 0.05, upsilon: 2, threshold: 0.5, value: 1, latencyPricePerS: 2, queueCapPerReplica: 8, ...options };
  }

  price(u: number): number {
    const { iota, upsilon, threshold } = this.o;
    if (u <= threshold) return iota;
    if (u > 1) return Infinity;
    return iota * Math.pow(upsilon / iota, (u - threshold) / (1 - threshold));
  }

  decide(item: DispatchItem, view: ClusterView): number {
    const w = item.request.service;
    let best = view.cloudTarget;
    let bestSurplus = 0;
    for (let t = 0; t < view.numNodes; t++) {
      if (!item.mask[t]) continue;
      const ready = Math.max(1, view.readyReplicas(t, w));
      const u = (view.serviceQueueLen(t, w) + view.busyReplicas(t, w)) / (ready * this.o.queueCapPerReplica);
      const cpuU = 1 - view.freeCpuRatio(t);
      const surplus =
        this.o.value - this.price(Math.max(u, cpuU * 0.5)) - this.o.latencyPricePerS * view.transferS(item.eap, t, item.request.inputMB);
      if (surplus >= bestSurplus) {
        bestSurplus = surplus;
        best = t;
      }
    }
    return best;
  }
}
