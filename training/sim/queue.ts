/**
 * A priority queue of request indices keyed by a number (smaller first; ties by request index, so
 * the order is deterministic). FIFO is the key = eAP arrival time, EDF the key = deadline. Used for
 * eAP queues and per-(target, service) node queues. Hand-written for the same reason as timeline.ts.
 */
export class RequestQueue {
  items: Int32Array = new Int32Array(16);
  keys: Float64Array = new Float64Array(16);
  size = 0;

  push(item: number, key: number): void {
    if (this.size === this.items.length) this.grow();
    let i = this.size++;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (this.keys[p] < key || (this.keys[p] === key && this.items[p] < item)) break;
      this.items[i] = this.items[p];
      this.keys[i] = this.keys[p];
      i = p;
    }
    this.items[i] = item;
    this.keys[i] = key;
  }

  peek(): number {
    return this.items[0];
  }

  peekKey(): number {
    return this.size > 0 ? this.keys[0] : Infinity;
  }

  pop(): number {
    const top = this.items[0];
    const last = --this.size;
    if (last > 0) this.siftDown(0, this.items[last], this.keys[last], last);
    return top;
  }

  /**
   * Keeps the items for which keep(item) is true, optionally with new keys, and restores heap
   * order in O(n). Returns how many were removed.
   */
  filter(keep: (item: number) => boolean, rekey?: (item: number) => number): number {
    let j = 0;
    for (let i = 0; i < this.size; i++) {
      const it = this.items[i];
      if (keep(it)) {
        this.items[j] = it;
        this.keys[j] = rekey ? rekey(it) : this.keys[i];
        j++;
      }
    }
    const removed = this.size - j;
    this.size = j;
    if (removed > 0 || rekey) for (let i = (j >> 1) - 1; i >= 0; i--) this.siftDown(i, this.items[i], this.keys[i], j);
    return removed;
  }

  clear(): void {
    this.size = 0;
  }

  private siftDown(i: number, item: number, key: number, n: number): void {
    for (;;) {
      const l = 2 * i + 1;
      if (l >= n) break;
      const r = l + 1;
      let c = l;
      if (r < n && (this.keys[r] < this.keys[l] || (this.keys[r] === this.keys[l] && this.items[r] < this.items[l]))) c = r;
      if (key < this.keys[c] || (key === this.keys[c] && item < this.items[c])) break;
      this.items[i] = this.items[c];
      this.keys[i] = this.keys[c];
      i = c;
    }
    this.items[i] = item;
    this.keys[i] = key;
  }

  private grow(): void {
    const it = new Int32Array(this.items.length * 2);
    it.set(this.items);
    this.items = it;
    const k = new Float64Array(this.keys.length * 2);
    k.set(this.keys);
    this.keys = k;
  }
}
