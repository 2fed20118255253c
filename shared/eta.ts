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
import type { ClusterView } from './policy';

export function expectedCompletionS(view: ClusterView, eap: number, t: number, w: number, inputMB: number): number {
  const proc = view.meanServiceS(t, w);
  const ready = Math.max(1, view.readyReplicas(t, w));
  const ahead = view.serviceQueueLen(t, w) + view.busyReplicas(t, w) - ready + 1;
  const replicaWait = ahead > 0 ? (ahead * proc) / ready : 0;
  const cpuWait = (view.queueLen(t) * proc * view.serviceCpuCores(w)) / view.cpuCores(t);
  const wait = replicaWait > cpuWait ? replicaWait : cpuWait;
  return view.transferS(eap, t, inputMB) + wait + proc + view.returnS(eap, t);
}
