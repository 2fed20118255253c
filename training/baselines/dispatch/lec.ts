/**
 * lec: least expected completion time, deadline-aware (ALGORITHMS.md section 5). For each valid
 * target t:
 *   eta_t = transfer(b -> t) + wait_t + proc_t + return(t -> b)
 *   proc_t = measured mean processing time of w at t
 *   wait_t = max(replica wait, CPU wait)
 *   replica wait = max(0, pending_w(t) + busy_w(t) - ready_w(t) + 1) x proc_t / ready_w(t)
 *            (requests of w ahead of this one that will not find a free replica, served ready_w at a time)
 *   CPU wait = pending(t) x proc_t x cpuCores_w / cpuCores(t)
 *            (all requests ahead at the node share its cores; assumes they look like this one)
 * Pick the smallest eta among those that meet the deadline; if none does, the smallest overall.
 * Among the targets that meet the deadline it prefers the edge (cheaper than the cloud) only through
 * eta itself: the cloud's 2 x 100 ms usually makes it the slower choice.
 */
import type { ClusterView, DispatchItem, DispatchPolicy } from '../../../shared/policy';

export class LecDispatch implements DispatchPolicy {
  readonly name = 'lec';
  decide(item: DispatchItem, view: ClusterView): number {
    return bestByEta(item, view).target;
  }
}

export function expectedCompletionS(view: ClusterView, eap: number, t: number, w: number, inputMB: number): number {
  const proc = view.meanServiceS(t, w);
  const ready = Math.max(1, view.readyReplicas(t, w));
  const ahead = view.serviceQueueLen(t, w) + view.busyReplicas(t, w) - ready + 1;
  const replicaWait = ahead > 0 ? (ahead * proc) / ready : 0;
  const cpuWait = (view.queueLen(t) * proc * view.serviceCpuCores(w)) / view.cpuCores(t);
  const wait = replicaWait > cpuWait ? replicaWait : cpuWait;
  return view.transferS(eap, t, inputMB) + wait + proc + view.returnS(eap, t);
}

export function bestByEta(item: DispatchItem, view: ClusterView): { target: number; eta: number } {
  const w = item.request.service;
  const slack = item.request.deadlineS - view.nowS();
  let bestOk = -1;
  let bestOkEta = Infinity;
  let best = view.cloudTarget;
  let bestEta = Infinity;
  for (let t = 0; t < view.numTargets; t++) {
    if (!item.mask[t]) continue;
    const eta = expectedCompletionS(view, item.eap, t, w, item.request.inputMB);
    if (eta < bestEta) {
      bestEta = eta;
      best = t;
    }
    if (eta <= slack && eta < bestOkEta) {
      bestOkEta = eta;
      bestOk = t;
    }
  }
  return bestOk >= 0 ? { target: bestOk, eta: bestOkEta } : { target: best, eta: bestEta };
}
