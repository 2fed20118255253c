/**
 * Queueing blame: which requests made others fail by taking the capacity they waited for. The
 * per-request credit of `kais train` (critic/cmmac/learner.ts) scores a decision by its own
 * request's outcome, which ignores what the request did to the others at its target: on `kais`,
 * cMMAC's RL on GPG's placement moved requests to the cloud, where each one alone succeeded more
 * often than on the edge (88% against 74% in time), but the cloud is finite and every extra
 * request there delayed the ones queued behind it (docs/cmmac.md, "Credit and the cloud"). This
 * ledger lets the learner charge a decision for that: `--externality` (train-learn.ts).
 *
 * The rule, a first-order estimate of each request's marginal cost to the others:
 * - a request j that waited in a target's queue and then failed because of the wait (purged or
 *   dropped at the head as too late to start, or completed late by no more than it waited) is one
 *   failure to hand out;
 * - it is shared among the requests that RAN at the same target while j waited (started before
 *   or during the wait), in proportion to the core-seconds of each one's run that fell inside the
 *   wait (cores x overlap), j itself excluded. A wait during which nothing ran (j waiting for a
 *   starting replica) blames no one.
 * Target-level (every service of the node, the cloud's shared vCPU): another service's run took
 * CPU j might have used; where j waited for a replica of its own service this over-blames the
 * other services. A run is taken to end at its start plus its processing time (a node failure
 * cuts it shorter). Failures after the update are not seen (the same censoring as the outcomes
 * themselves, under 1% of the decisions at episode ends on kais).
 *
 * Hand-written: a few growable arrays and a binary search, nothing a library would simplify.
 */
export class QueueBlame {
  /** per target: start times (non-decreasing: the simulator's clock), end times, request ids, cores */
  private readonly startT: Float64Array[];
  private readonly endT: Float64Array[];
  private readonly startId: Int32Array[];
  private readonly cores: Float64Array[];
  private readonly startN: Int32Array;
  /** per target: the longest run so far (bounds the search for runs that overlap a wait) */
  private readonly maxRunS: Float64Array;
  /** failures to hand out: target, request, wait start, wait end */
  private failT: Int32Array;
  private failId: Int32Array;
  private failFrom: Float64Array;
  private failTo: Float64Array;
  private failN = 0;

  constructor(readonly numTargets: number) {
    this.startT = Array.from({ length: numTargets }, () => new Float64Array(256));
    this.endT = Array.from({ length: numTargets }, () => new Float64Array(256));
    this.startId = Array.from({ length: numTargets }, () => new Int32Array(256));
    this.cores = Array.from({ length: numTargets }, () => new Float64Array(256));
    this.startN = new Int32Array(numTargets);
    this.maxRunS = new Float64Array(numTargets);
    this.failT = new Int32Array(256);
    this.failId = new Int32Array(256);
    this.failFrom = new Float64Array(256);
    this.failTo = new Float64Array(256);
  }

  reset(): void {
    this.startN.fill(0);
    this.maxRunS.fill(0);
    this.failN = 0;
  }

  /** Request `id` started at target `t` at `timeS` on `cores` cores, to end at `endS`. */
  started(t: number, id: number, timeS: number, endS: number, cores: number): void {
    const n = this.startN[t];
    if (n === this.startT[t].length) {
      this.startT[t] = grow(this.startT[t], 2 * n);
      this.endT[t] = grow(this.endT[t], 2 * n);
      this.startId[t] = grow(this.startId[t], 2 * n);
      this.cores[t] = grow(this.cores[t], 2 * n);
    }
    this.startT[t][n] = timeS;
    this.endT[t][n] = endS;
    this.startId[t][n] = id;
    this.cores[t][n] = cores;
    if (endS - timeS > this.maxRunS[t]) this.maxRunS[t] = endS - timeS;
    this.startN[t] = n + 1;
  }

  /** Request `id` failed at target `t` after waiting there from `fromS` to `toS`. */
  failed(t: number, id: number, fromS: number, toS: number): void {
    if (!(toS > fromS)) return;
    const n = this.failN;
    if (n === this.failT.length) {
      this.failT = grow(this.failT, 2 * n);
      this.failId = grow(this.failId, 2 * n);
      this.failFrom = grow(this.failFrom, 2 * n);
      this.failTo = grow(this.failTo, 2 * n);
    }
    this.failT[n] = t;
    this.failId[n] = id;
    this.failFrom[n] = fromS;
    this.failTo[n] = toS;
    this.failN = n + 1;
  }

  /** Failures handed out so far. */
  get failures(): number {
    return this.failN;
  }

  /**
   * Each request's share of the failures so far (index = request id, `size` entries; 0 for
   * requests that blocked no one). The shares of one failure sum to 1 when anything ran during
   * its wait, else it is not handed out.
   */
  blame(size: number): Float32Array {
    const out = new Float32Array(size);
    for (let f = 0; f < this.failN; f++) {
      const t = this.failT[f];
      const from = this.failFrom[f];
      const to = this.failTo[f];
      const starts = this.startT[t];
      const ends = this.endT[t];
      const ids = this.startId[t];
      const cores = this.cores[t];
      const j = this.failId[f];
      // runs that overlap [from, to): started before `to`, and not before from - the longest run
      const lo = lowerBound(starts, this.startN[t], from - this.maxRunS[t]);
      const hi = lowerBound(starts, this.startN[t], to);
      let sum = 0;
      for (let e = lo; e < hi; e++) if (ids[e] !== j) sum += cores[e] * overlap(starts[e], ends[e], from, to);
      if (!(sum > 0)) continue;
      for (let e = lo; e < hi; e++) {
        if (ids[e] === j || ids[e] >= size) continue;
        const x = cores[e] * overlap(starts[e], ends[e], from, to);
        if (x > 0) out[ids[e]] += x / sum;
      }
    }
    return out;
  }
}

/** Length of [a0, a1) inside [b0, b1) (0 when they do not meet). */
function overlap(a0: number, a1: number, b0: number, b1: number): number {
  return Math.max(0, Math.min(a1, b1) - Math.max(a0, b0));
}

/** First index in a[0..n) with a[i] >= x (a non-decreasing). */
function lowerBound(a: Float64Array, n: number, x: number): number {
  let lo = 0;
  let hi = n;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (a[mid] < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function grow<T extends Float64Array | Int32Array>(a: T, n: number): T {
  const b = new (a.constructor as new (n: number) => T)(n);
  b.set(a);
  return b;
}
