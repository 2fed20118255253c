/**
 * The simulator's executor (shared/orchestration/executor.ts): carries out scale orders on the
 * simulated cluster, by the rules every executor follows.
 * +1: create a replica if the node is up, has the memory and the CPU for one request of it, and the
 *     service is under its cluster-wide maximum; it serves after replicaStartupS (the host's timeline).
 * -1: delete one replica: a starting one is cancelled, else a ready one is marked draining and
 *     leaves when idle (never drops a request).
 * Invalid orders become no-ops. The executed orders' count is the scheduling cost.
 *
 * It knows the environment only through `SimExecutorHost` (the cluster and three callbacks), so
 * env.ts imports this file and not the other way round.
 */
import type { ScaleOp } from '../../shared/domain';
import type { OrchestrationExecutor, ScaleReport } from '../../shared/orchestration/executor';
import { fitsReplica } from '../../shared/orchestration/placement';
import type { OrchestrationView } from '../../shared/policy';
import type { Cluster } from './cluster';

export interface SimExecutorHost {
  readonly cluster: Cluster;
  /** A replica of w was created on n now (counted in `starting`, memory booked): make it ready after the start-up time. */
  replicaCreated(n: number, w: number): void;
  /** A starting replica of w on n was cancelled now (counted out of `starting`, memory released). */
  replicaCancelled(n: number, w: number): void;
  /** A ready replica of w on n was marked draining: delete it when idle (now, if it is). */
  reap(n: number, w: number): void;
}

export class SimExecutor implements OrchestrationExecutor {
  constructor(
    private readonly host: SimExecutorHost,
    /** The cluster with the environment's orchestration window. */
    private readonly view: OrchestrationView,
  ) {}

  /** The environment's window (it restarts the window at each frame: `keepWindow` changes nothing here). */
  observe(): OrchestrationView {
    return this.view;
  }

  apply(ops: readonly ScaleOp[]): ScaleReport {
    const c = this.host.cluster;
    const W = c.numServices;
    const executed: ScaleOp[] = [];
    for (const op of ops) {
      const { node: n, service: w } = op;
      if (!Number.isInteger(n) || n < 0 || n >= c.numNodes || !Number.isInteger(w) || w < 0 || w >= W) continue;
      const k = n * W + w;
      if (op.delta === 1) {
        if (c.failed[n]) continue;
        if (!fitsReplica(c.cpu[n], c.mem[n] - c.usedMem[n], c.svcCpu[w], c.svcMem[w])) continue;
        if (c.edgeReplicas(w) >= c.maxReplicasPerService) continue;
        c.integrateNode(n, c.now);
        c.usedMem[n] += c.svcMem[w];
        c.starting[k]++;
        this.host.replicaCreated(n, w);
        executed.push(op);
      } else if (op.delta === -1) {
        if (c.starting[k] > 0) {
          c.starting[k]--;
          c.integrateNode(n, c.now);
          c.usedMem[n] -= c.svcMem[w];
          this.host.replicaCancelled(n, w);
          executed.push(op);
        } else if (c.ready[k] - c.draining[k] > 0) {
          c.draining[k]++;
          this.host.reap(n, w);
          executed.push(op);
        }
      }
    }
    return { executed, refused: ops.length - executed.length };
  }
}
