/**
 * Applies scale orders to the simulated cluster (the sim side of orchestrator/executors).
 * +1: create a replica if the node is up, has the memory and the CPU for one request of it, and the service is under its cluster-wide
 *     maximum; it serves after replicaStartupS. -1: delete one replica: a starting one is cancelled,
 *     else a ready one is marked draining and leaves when idle (never drops a request).
 * Invalid orders become no-ops. Returns the number of executed operations (the scheduling cost).
 */
import type { ScaleOp } from '../../shared/domain';
import type { EdgeCloudEnv } from './env';

export function applyScaleOps(env: EdgeCloudEnv, ops: ScaleOp[]): number {
  const c = env.cluster;
  const W = c.numServices;
  let executed = 0;
  for (const op of ops) {
    const { node: n, service: w } = op;
    if (!Number.isInteger(n) || n < 0 || n >= c.numNodes || !Number.isInteger(w) || w < 0 || w >= W) continue;
    const k = n * W + w;
    if (op.delta === 1) {
      if (c.failed[n]) continue;
      if (!c.fits(n, w)) continue;
      if (c.edgeReplicas(w) >= c.maxReplicasPerService) continue;
      c.integrateNode(n, c.now);
      c.usedMem[n] += c.svcMem[w];
      c.starting[k]++;
      env.scheduleReplica(n, w);
      executed++;
    } else if (op.delta === -1) {
      if (c.starting[k] > 0) {
        c.starting[k]--;
        c.integrateNode(n, c.now);
        c.usedMem[n] -= c.svcMem[w];
        executed++;
      } else if (c.ready[k] - c.draining[k] > 0) {
        c.draining[k]++;
        env.reap(n, w);
        executed++;
      }
    }
  }
  return executed;
}
