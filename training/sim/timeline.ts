/**
 * The simulator's event queue: a binary min-heap ordered by (time, insertion counter), so events
 * at the same time pop in the order they were pushed and every run is deterministic.
 *
 * Struct-of-arrays on purpose (hand-written, no library): one push/pop per event is the hot path of
 * the simulator, and typed arrays keep it allocation-free (measured: the sim bench runs ~2x faster
 * than with an array of event objects).
 */

export const enum EventType {
  /** A request reaches its eAP from the device. a = request index. */
  EapArrive = 0,
  /** A dispatched request reaches its target. a = request index, b = target. */
  TargetArrive = 1,
  /** A request finishes processing. a = request index, b = target. */
  Finish = 2,
  /** A starting replica becomes ready. a = node, b = service. */
  ReplicaReady = 3,
  /** A node fails (b = 1) or recovers (b = 0). a = node. */
  NodeFault = 4,
  /** An answer reaches the eAP's agent (agentViews). a = eap * numTargets + target, b = its AnswerPool slot. */
  AgentAnswer = 5,
}

export class Timeline {
  private time = new Float64Array(1024);
  private seq = new Float64Array(1024);
  private type = new Uint8Array(1024);
  private a = new Int32Array(1024);
  private b = new Int32Array(1024);
  private n = 0;
  private counter = 0;

  get size(): number {
    return this.n;
  }

  clear(): void {
    this.n = 0;
    this.counter = 0;
  }

  push(time: number, type: EventType, a: number, b: number): void {
    if (this.n === this.time.length) this.grow();
    let i = this.n++;
    const s = this.counter++;
    // sift up
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (this.time[p] < time || (this.time[p] === time && this.seq[p] < s)) break;
      this.move(p, i);
      i = p;
    }
    this.time[i] = time;
    this.seq[i] = s;
    this.type[i] = type;
    this.a[i] = a;
    this.b[i] = b;
  }

  /** Time of the earliest event, or +Infinity when empty. */
  peekTime(): number {
    return this.n > 0 ? this.time[0] : Infinity;
  }

  // The popped event is exposed through these fields (no allocation per pop).
  popTime = 0;
  popType: EventType = EventType.EapArrive;
  popA = 0;
  popB = 0;

  /** Removes the earliest event into popTime/popType/popA/popB. Call only when size > 0. */
  pop(): void {
    this.popTime = this.time[0];
    this.popType = this.type[0];
    this.popA = this.a[0];
    this.popB = this.b[0];
    const last = --this.n;
    if (last === 0) return;
    const t = this.time[last];
    const s = this.seq[last];
    const ty = this.type[last];
    const av = this.a[last];
    const bv = this.b[last];
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= last) break;
      const r = l + 1;
      let c = l;
      if (r < last && (this.time[r] < this.time[l] || (this.time[r] === this.time[l] && this.seq[r] < this.seq[l]))) c = r;
      if (t < this.time[c] || (t === this.time[c] && s < this.seq[c])) break;
      this.move(c, i);
      i = c;
    }
    this.time[i] = t;
    this.seq[i] = s;
    this.type[i] = ty;
    this.a[i] = av;
    this.b[i] = bv;
  }

  private move(from: number, to: number): void {
    this.time[to] = this.time[from];
    this.seq[to] = this.seq[from];
    this.type[to] = this.type[from];
    this.a[to] = this.a[from];
    this.b[to] = this.b[from];
  }

  private grow(): void {
    const cap = this.time.length * 2;
    const t = new Float64Array(cap);
    t.set(this.time);
    this.time = t;
    const s = new Float64Array(cap);
    s.set(this.seq);
    this.seq = s;
    const ty = new Uint8Array(cap);
    ty.set(this.type);
    this.type = ty;
    const a = new Int32Array(cap);
    a.set(this.a);
    this.a = a;
    const b = new Int32Array(cap);
    b.set(this.b);
    this.b = b;
  }
}
