/**
 * The simple dispatchers: random, round-robin, jsq, p2c, greedy. Each picks among the valid targets
 * of the mask (the cloud is always valid), so none can choose an illegal action.
 */
import type { ClusterView, DispatchItem, DispatchPolicy } from '../policy';
import { Rng } from '../rng';

/** Uniform over valid targets. */
export class RandomDispatch implements DispatchPolicy {
  readonly name = 'random';
  private rng = new Rng(0);
  reset(seed: number): void {
    this.rng = Rng.derive(seed, 'dispatch/random');
  }
  decide(item: DispatchItem, view: ClusterView): number {
    return nthValid(item.mask, view.numTargets, this.rng.int(countValid(item.mask, view.numTargets)));
  }
}

/** Cycles over the valid targets per (eAP, service): what a Kubernetes Service does. */
export class RoundRobinDispatch implements DispatchPolicy {
  readonly name = 'round-robin';
  private next = new Int32Array(0);
  reset(_seed: number, view: ClusterView): void {
    this.next = new Int32Array(view.numEaps * view.numServices);
  }
  decide(item: DispatchItem, view: ClusterView): number {
    const k = item.eap * view.numServices + item.request.service;
    const T = view.numTargets;
    for (let j = 0; j < T; j++) {
      const t = (this.next[k] + j) % T;
      if (item.mask[t]) {
        this.next[k] = (t + 1) % T;
        return t;
      }
    }
    return view.cloudTarget;
  }
}

/**
 * Join the shortest queue among valid targets: fewest requests sent and not started per ready
 * replica of the service; ties go to the target with the shorter transfer (own eAP first).
 */
export class JsqDispatch implements DispatchPolicy {
  readonly name = 'jsq';
  decide(item: DispatchItem, view: ClusterView): number {
    const w = item.request.service;
    let best = view.cloudTarget;
    let bestQ = Infinity;
    let bestTx = Infinity;
    for (let t = 0; t < view.numTargets; t++) {
      if (!item.mask[t]) continue;
      const q = queuePerReplica(view, t, w);
      if (q < bestQ || (q === bestQ && view.transferS(item.eap, t, item.request.inputMB) < bestTx)) {
        best = t;
        bestQ = q;
        bestTx = view.transferS(item.eap, t, item.request.inputMB);
      }
    }
    return best;
  }
}

/** Power of two choices: two random valid targets, the shorter queue (per ready replica) wins. */
export class P2cDispatch implements DispatchPolicy {
  readonly name = 'p2c';
  private rng = new Rng(0);
  reset(seed: number): void {
    this.rng = Rng.derive(seed, 'dispatch/p2c');
  }
  decide(item: DispatchItem, view: ClusterView): number {
    const n = countValid(item.mask, view.numTargets);
    const a = nthValid(item.mask, view.numTargets, this.rng.int(n));
    if (n === 1) return a;
    let b = nthValid(item.mask, view.numTargets, this.rng.int(n - 1));
    if (b === a) b = nthValid(item.mask, view.numTargets, n - 1);
    const w = item.request.service;
    return queuePerReplica(view, b, w) < queuePerReplica(view, a, w) ? b : a;
  }
}

/** KaiS's Greedy: the valid edge node with the most free resources (CPU + memory ratios), else the cloud. */
export class GreedyDispatch implements DispatchPolicy {
  readonly name = 'greedy';
  decide(item: DispatchItem, view: ClusterView): number {
    let best = view.cloudTarget;
    let bestFree = -Infinity;
    for (let t = 0; t < view.numNodes; t++) {
      if (!item.mask[t]) continue;
      const free = view.freeCpuRatio(t) + view.freeMemRatio(t);
      if (free > bestFree) {
        best = t;
        bestFree = free;
      }
    }
    return best;
  }
}

/** Requests of w sent to t and not started, plus busy replicas, per ready replica (cloud: total). */
export function queuePerReplica(view: ClusterView, t: number, w: number): number {
  const ready = Math.max(1, view.readyReplicas(t, w));
  return (view.serviceQueueLen(t, w) + view.busyReplicas(t, w)) / ready;
}

export function countValid(mask: Uint8Array, n: number): number {
  let c = 0;
  for (let t = 0; t < n; t++) c += mask[t];
  return c;
}

/** Index of the k-th valid target (0-based). */
export function nthValid(mask: Uint8Array, n: number, k: number): number {
  for (let t = 0; t < n; t++) {
    if (mask[t] && k-- === 0) return t;
  }
  return n - 1;
}
