/**
 * Per-eAP slot reward (ALGORITHMS.md section 2):
 *   u_b = exp(-lambda_b - epsilon * nu_b)
 * lambda_b := share of b's requests that failed (late or dropped) among those of b that finished or
 *             failed in the slot (0 when none did);
 * nu_b     := sample standard deviation (ddof 1) of the 2|N_b| usage ratios {cpu_n, mem_n : n in N_b}
 *             of b's edge nodes (0 when b has a single ratio), each averaged over the slot's time
 *             (Cluster.integrateUsage; edge-cloud-v2: v1 took them at the slot's end).
 */
import type { Cluster } from './cluster';

export function slotRewards(c: Cluster, done: Float64Array, failed: Float64Array, epsilon: number): Record<number, number> {
  const out: Record<number, number> = {};
  for (let b = 0; b < c.numEaps; b++) {
    const total = done[b] + failed[b];
    const lambda = total > 0 ? failed[b] / total : 0;
    out[b] = Math.exp(-lambda - epsilon * usageStd(c, b));
  }
  return out;
}

/** nu_b: sample std of the slot-averaged CPU and memory usage ratios of eAP b's nodes. */
export function usageStd(c: Cluster, b: number): number {
  let n = 0;
  let sum = 0;
  let sum2 = 0;
  for (let k = 0; k < c.numNodes; k++) {
    if (c.eapOfNode[k] !== b) continue;
    const cpuU = c.meanCpuUsage(k);
    const memU = c.meanMemUsage(k);
    sum += cpuU + memU;
    sum2 += cpuU * cpuU + memU * memU;
    n += 2;
  }
  if (n < 2) return 0;
  const mean = sum / n;
  return Math.sqrt(Math.max(0, (sum2 - n * mean * mean) / (n - 1)));
}
