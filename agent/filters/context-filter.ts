/**
 * Context filter (ALGORITHMS.md section 2): which targets may serve a request of service w.
 * A target is valid iff it hosts a ready replica of w, has room (requests of w sent to it and not
 * started yet below queueCapPerReplica x its ready replicas) and the device filter keeps it in
 * service. The cloud is always valid. Shared by the simulator and the live agent.
 */
import type { ClusterView } from '../../shared/policy';

/** Fills out[t] with 1 for valid targets, 0 otherwise; returns the number of valid targets. */
export function buildMask(view: ClusterView, service: number, queueCapPerReplica: number, out: Uint8Array): number {
  let valid = 0;
  for (let t = 0; t < view.numNodes; t++) {
    const ready = view.readyReplicas(t, service);
    const ok = ready >= 1 && view.serviceQueueLen(t, service) < queueCapPerReplica * ready && view.healthy(t);
    out[t] = ok ? 1 : 0;
    if (ok) valid++;
  }
  out[view.cloudTarget] = 1;
  return valid + 1;
}
