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
 * An eta-based dispatch rule: which valid targets count as meeting the deadline, how those are
 * ranked, and what happens when none does. `lec`, the warm-start teachers (critic/cmmac/) and the
 * teacher search (scripts/) are instances; pickByEta is the one loop they share.
 */
export interface EtaRule {
  /** A target meets the deadline when margin x eta <= slack (slack = deadline - now). */
  readonly margin: number;
  /** Ranks the targets that meet it, smallest first (the first one wins a tie). */
  key(t: number, eta: number, item: DispatchItem, view: ClusterView): number;
  /** When none meets it: the cloud, or the valid target with the smallest eta (lec's choice). */
  readonly fallback: 'cloud' | 'min-eta';
  /** Eta of target t; by default expectedCompletionS. Called once per valid target, in order, each just before key(t). */
  eta?(t: number, item: DispatchItem, view: ClusterView): number;
}

/**
 * Over the valid targets of item.mask in index order: the one with the smallest rule.key among
 * those whose eta meets the request's slack with the rule's margin; if none does, rule.fallback
 * (the smallest eta, first on ties, or the cloud; the cloud too when no target is valid).
 */
export function pickByEta(item: DispatchItem, view: ClusterView, rule: EtaRule): number {
  const w = item.request.service;
  const slack = item.request.deadlineS - view.nowS();
  let best = -1;
  let bestKey = Infinity;
  let minEta = Infinity;
  let minEtaT = view.cloudTarget;
  for (let t = 0; t < view.numTargets; t++) {
    if (!item.mask[t]) continue;
    const eta = rule.eta ? rule.eta(t, item, view) : expectedCompletionS(view, item.eap, t, w, item.request.inputMB);
    if (eta < minEta) {
      minEta = eta;
      minEtaT = t;
    }
    if (rule.margin * eta > slack) continue;
    const key = rule.key(t, eta, item, view);
    if (key < bestKey) {
      bestKey = key;
      best = t;
    }
  }
  if (best >= 0) return best;
  return rule.fallback === 'min-eta' ? minEtaT : view.cloudTarget;
}

/**
 * The `lec` rule: among the valid targets whose expected completion time meets the request's
 * slack, the one with the smallest; if none meets it, the smallest overall. Used by the `lec`
 * baseline and by the agent's fallback before any actor weights arrive.
 */
export const LEC_RULE: EtaRule = { margin: 1, key: (_t, eta) => eta, fallback: 'min-eta' };
