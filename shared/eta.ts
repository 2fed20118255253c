/**
 * Expected completion time of a request at a target, from what a ClusterView shows. One formula
 * for the `lec` baseline (training/baselines) and the learned actor's observation (agent/):
 *   eta_t = transfer(b -> t) + max(replica wait, CPU wait) + proc_t + return(t -> b)
 *   proc_t       = measured mean processing time of w at t
 *   replica wait = max(0, pending_w(t) + busy_w(t) - ready_w(t) + 1) x proc_t / ready_w(t)
 *                  (requests of w ahead that will not find a free replica, served ready_w at a time)
 *   CPU wait     = pending(t) x proc_t x cpuCores_w / cpuCores(t)
 *                  (all requests ahead at the node share its cores; assumes they look like this one)
 */
import type { ClusterView, DispatchItem } from './policy';

export function expectedCompletionS(view: ClusterView, eap: number, t: number, w: number, inputMB: number): number {
  const proc = view.meanServiceS(t, w);
  const ready = Math.max(1, view.readyReplicas(t, w));
  const ahead = view.serviceQueueLen(t, w) + view.busyReplicas(t, w) - ready + 1;
  const replicaWait = ahead > 0 ? (ahead * proc) / ready : 0;
  const cpuWait = (view.queueLen(t) * proc * view.serviceCpuCores(w)) / view.cpuCores(t);
  const wait = replicaWait > cpuWait ? replicaWait : cpuWait;
  return view.transferS(eap, t, inputMB) + wait + proc + view.returnS(eap, t);
}

/**
 * The `lec` rule: among the valid targets whose expected completion time meets the request's
 * slack, the one with the smallest; if none meets it, the smallest overall. Used by the `lec`
 * baseline and by the agent's fallback before any actor weights arrive.
 */
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
