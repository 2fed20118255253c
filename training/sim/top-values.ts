/**
 * An exact nearest-rank quantile of a stream whose length has a known bound, in bounded memory:
 * the q-quantile of n values is the (n - k)-th largest, k = nearestRankIndex(n, q), so keeping the
 * largest (N - k(N)) + 1 values seen (a min-heap; N the bound) answers for every n <= N. At
 * q = 0.99 that is 1% of N, e.g. 140,000 numbers (1.1 MB) for 14 million requests.
 */

/** 0-based index of the nearest-rank q-quantile in n values sorted ascending (n >= 1). */
export function nearestRankIndex(n: number, q: number): number {
  return Math.min(n - 1, Math.max(0, Math.ceil(q * n) - 1));
}

export class TopValues {
  private readonly heap: Float64Array;
  private size = 0;
  /** values pushed since the last reset */
  seen = 0;

  /** `maxCount`: at most this many values will be pushed between resets. */
  constructor(
    readonly q: number,
    maxCount: number,
  ) {
    const n = Math.max(1, Math.ceil(maxCount));
    this.heap = new Float64Array(n - nearestRankIndex(n, q) + 1);
  }

  reset(): void {
    this.size = 0;
    this.seen = 0;
  }

  push(x: number): void {
    this.seen++;
    const h = this.heap;
    if (this.size < h.length) {
      let i = this.size++;
      while (i > 0) {
        const p = (i - 1) >> 1;
        if (h[p] <= x) break;
        h[i] = h[p];
        i = p;
      }
      h[i] = x;
      return;
    }
    if (!(x > h[0])) return;
    // replace the smallest kept value
    const n = this.size;
    let i = 0;
    for (;;) {
      let m = 2 * i + 1;
      if (m >= n) break;
      if (m + 1 < n && h[m + 1] < h[m]) m++;
      if (x <= h[m]) break;
      h[i] = h[m];
      i = m;
    }
    h[i] = x;
  }

  /** The nearest-rank q-quantile of the values pushed (0 for none), exactly as sorting them all would give. */
  quantile(): number {
    const n = this.seen;
    if (n === 0) return 0;
    const m = n - nearestRankIndex(n, this.q);
    if (m > this.size) throw new Error(`TopValues: ${n} values pushed, more than the bound it was sized for`);
    const kept = this.heap.slice(0, this.size).sort();
    return kept[this.size - m];
  }
}
