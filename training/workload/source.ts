/**
 * Requests as a stream: the workload hands them to the simulator in arrival order as it asks, so
 * a run holds the requests in the system, not every request of the run.
 *
 * | piece | what it does |
 * | --- | --- |
 * | `RequestSource` | `count` (known before the run) and `open()`: a fresh `RequestReader` from the first request; readers are independent and give the same requests |
 * | `RequestReader` | `next()`: the next request in arrival order (ids dense from 0), null after the last |
 * | `TaskGen` | a generator (synthetic.ts, to-requests.ts) that pushes tasks into a `TaskSink` in any order and yields *watermarks*: no task pushed after the yield arrives before it |
 * | `TaskHeap` | the sink of a reader: keeps arrivals in [0, durationS), hands them out by (arrival, push order) once they are at or below the watermark |
 * | `streamMedian` | the exact median of every task's core-seconds (shaping needs it before the first request), in one pass over the generator when it holds under `COLLECT_MAX` tasks, else by radix selection on the bits of the doubles (a histogram pass, then a pass collecting the middle bucket; more only when one value fills a bucket): a few MB whatever the count |
 * | `shapedSource` | the above, glued: one pass for the count and median (cached), then per reader the generator, the heap and the shaper |
 *
 * The generator runs from the start on every `open()` (and once more for the count and median),
 * from its own seeded Rng, so every reader gives the same requests, identical to `drain()` of the
 * source (which is what `buildRequests` returns).
 */
import type { Request } from '../../shared/domain';

export interface RequestReader {
  /** The next request in arrival order (ids dense from 0), or null after the last. */
  next(): Request | null;
}

export interface RequestSource {
  /** How many requests a reader gives. */
  readonly count: number;
  /** A reader from the first request; each call starts over. */
  open(): RequestReader;
}

export function isRequestSource(x: readonly Request[] | RequestSource): x is RequestSource {
  return !Array.isArray(x);
}

/** A source over requests already built (sorted by arrival, ids dense). */
export function arraySource(requests: readonly Request[]): RequestSource {
  return {
    count: requests.length,
    open(): RequestReader {
      let i = 0;
      return { next: () => (i < requests.length ? requests[i++] : null) };
    },
  };
}

/** Every request of a source, in order. */
export function drain(source: RequestSource): Request[] {
  const out: Request[] = new Array(source.count);
  const reader = source.open();
  let n = 0;
  for (let r = reader.next(); r !== null; r = reader.next()) out[n++] = r;
  out.length = n;
  return out;
}

// ------------------------------------------------------------------ tasks

/** Where a generator puts its tasks. */
export interface TaskSink {
  push(arrivalS: number, service: number, eap: number, taskCoreS: number): void;
  /** Tasks pushed since the consumer last resumed the generator; the generator yields once it reaches TASK_CHUNK. */
  fresh: number;
}

/** A generator yields a watermark about every this many pushes. */
export const TASK_CHUNK = 64;

/**
 * Pushes the tasks of a run into `sink` (any order) and yields watermarks: every task pushed
 * after a yield arrives at or after the value yielded. Deterministic: a new call starts over.
 */
export type TaskGen = (sink: TaskSink) => Iterator<number, void, void>;

/** Min-heap of tasks by (arrival, push order) over parallel typed arrays; only arrivals in [0, durationS) enter. */
export class TaskHeap implements TaskSink {
  fresh = 0;
  size = 0;
  private seqNext = 0;
  private key: Float64Array = new Float64Array(256);
  private seq: Float64Array = new Float64Array(256);
  private svc: Int32Array = new Int32Array(256);
  private eapA: Int32Array = new Int32Array(256);
  private core: Float64Array = new Float64Array(256);
  // the task popped last
  arrivalS = 0;
  service = 0;
  eap = 0;
  taskCoreS = 0;

  constructor(private readonly durationS: number) {}

  push(arrivalS: number, service: number, eap: number, taskCoreS: number): void {
    this.fresh++;
    if (!(arrivalS >= 0 && arrivalS < this.durationS)) return;
    if (this.size === this.key.length) this.grow();
    const s = this.seqNext++;
    let i = this.size++;
    const { key, seq, svc, eapA, core } = this;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (key[p] < arrivalS || (key[p] === arrivalS && seq[p] < s)) break;
      key[i] = key[p];
      seq[i] = seq[p];
      svc[i] = svc[p];
      eapA[i] = eapA[p];
      core[i] = core[p];
      i = p;
    }
    key[i] = arrivalS;
    seq[i] = s;
    svc[i] = service;
    eapA[i] = eap;
    core[i] = taskCoreS;
  }

  /** Arrival of the earliest task (Infinity when empty). */
  peekArrival(): number {
    return this.size > 0 ? this.key[0] : Infinity;
  }

  /** Removes the earliest task into `arrivalS`, `service`, `eap`, `taskCoreS`. */
  pop(): void {
    const { key, seq, svc, eapA, core } = this;
    this.arrivalS = key[0];
    this.service = svc[0];
    this.eap = eapA[0];
    this.taskCoreS = core[0];
    const n = --this.size;
    if (n === 0) return;
    const k = key[n];
    const q = seq[n];
    const sv = svc[n];
    const e = eapA[n];
    const c = core[n];
    let i = 0;
    for (;;) {
      let m = 2 * i + 1;
      if (m >= n) break;
      const r = m + 1;
      if (r < n && (key[r] < key[m] || (key[r] === key[m] && seq[r] < seq[m]))) m = r;
      if (k < key[m] || (k === key[m] && q < seq[m])) break;
      key[i] = key[m];
      seq[i] = seq[m];
      svc[i] = svc[m];
      eapA[i] = eapA[m];
      core[i] = core[m];
      i = m;
    }
    key[i] = k;
    seq[i] = q;
    svc[i] = sv;
    eapA[i] = e;
    core[i] = c;
  }

  private grow(): void {
    const cap = this.key.length * 2;
    const f = (a: Float64Array): Float64Array => {
      const b = new Float64Array(cap);
      b.set(a);
      return b;
    };
    const g = (a: Int32Array): Int32Array => {
      const b = new Int32Array(cap);
      b.set(a);
      return b;
    };
    this.key = f(this.key);
    this.seq = f(this.seq);
    this.svc = g(this.svc);
    this.eapA = g(this.eapA);
    this.core = f(this.core);
  }
}

// ------------------------------------------------------------------ exact median of a stream

/** Up to this many values, the median pass keeps them all and sorts (as `median` does); above, radix selection. */
export const COLLECT_MAX = 1 << 20;

const f64 = new Float64Array(1);
const u32 = new Uint32Array(f64.buffer);
const LITTLE = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;
const HI = LITTLE ? 1 : 0;
const LO = LITTLE ? 0 : 1;

/** Sets keyHi / keyLo: an unsigned 64-bit key whose order is the numeric order of x (NaN-free). */
let keyHi = 0;
let keyLo = 0;
function toKey(x: number): void {
  f64[0] = x;
  const hi = u32[HI];
  const lo = u32[LO];
  if (hi >>> 31 === 1) {
    keyHi = ~hi >>> 0;
    keyLo = ~lo >>> 0;
  } else {
    keyHi = (hi | 0x80000000) >>> 0;
    keyLo = lo;
  }
}

/** 16-bit digit d (0 = most significant) of the current key. */
function digit(d: number): number {
  return d === 0 ? keyHi >>> 16 : d === 1 ? keyHi & 0xffff : d === 2 ? keyLo >>> 16 : keyLo & 0xffff;
}

function fromDigits(dg: readonly number[]): number {
  const kh = ((dg[0] << 16) | dg[1]) >>> 0;
  const kl = ((dg[2] << 16) | dg[3]) >>> 0;
  if (kh >>> 31 === 1) {
    u32[HI] = (kh & 0x7fffffff) >>> 0;
    u32[LO] = kl;
  } else {
    u32[HI] = ~kh >>> 0;
    u32[LO] = ~kl >>> 0;
  }
  return f64[0];
}

/** Median of a numeric array (sorted copy; NaN-free input), NaN when empty. */
export function median(values: ArrayLike<number>): number {
  const n = values.length;
  if (n === 0) return NaN;
  const a = Float64Array.from(values as ArrayLike<number>).sort();
  return n % 2 === 1 ? a[(n - 1) / 2] : 0.5 * (a[n / 2 - 1] + a[n / 2]);
}

/**
 * The count and the exact median (as `median` computes it: the middle value, or the mean of the
 * two middle ones) of the values a pass visits. `pass(visit)` must visit the same values every
 * time it is called; it is called once when at most `collectMax` values come, else 2 or 3 times
 * (4 digits of 16 bits at most per rank if one value fills a whole bucket).
 */
export function streamMedian(pass: (visit: (x: number) => void) => void, collectMax = COLLECT_MAX): { count: number; median: number } {
  let n = 0;
  let kept: Float64Array | null = new Float64Array(Math.min(1024, Math.max(1, collectMax)));
  const hist0 = new Float64Array(65536);
  pass((x) => {
    if (kept !== null) {
      if (n < collectMax) {
        if (n === kept.length) {
          const b = new Float64Array(Math.min(collectMax, 2 * kept.length));
          b.set(kept);
          kept = b;
        }
        kept[n] = x;
      } else {
        kept = null;
      }
    }
    n++;
    toKey(x);
    hist0[keyHi >>> 16]++;
  });
  if (n === 0) return { count: 0, median: NaN };
  if (kept !== null) return { count: n, median: median(kept.subarray(0, n)) };
  // the bucket collected last (both middle ranks of an even count are nearly always in the same one)
  let lastKey = '';
  let lastVals = new Float64Array(0);
  const select = (rank: number): number => {
    const dg: number[] = [];
    let r = rank;
    let hist = hist0;
    for (let d = 0; d < 4; d++) {
      if (d > 0) {
        hist = new Float64Array(65536);
        const h = hist;
        pass((x) => {
          toKey(x);
          for (let j = 0; j < d; j++) if (digit(j) !== dg[j]) return;
          h[digit(d)]++;
        });
      }
      let b = 0;
      while (r >= hist[b]) r -= hist[b++];
      dg.push(b);
      const inBucket = hist[b];
      if (inBucket <= collectMax && d < 3) {
        const key = dg.join(',');
        if (key === lastKey) return lastVals[r];
        const vals = new Float64Array(inBucket);
        let k = 0;
        pass((x) => {
          toKey(x);
          for (let j = 0; j <= d; j++) if (digit(j) !== dg[j]) return;
          vals[k++] = x;
        });
        vals.sort();
        lastKey = key;
        lastVals = vals;
        return vals[r];
      }
    }
    return fromDigits(dg);
  };
  if (n % 2 === 1) return { count: n, median: select((n - 1) / 2) };
  const a = select(n / 2 - 1);
  const b = select(n / 2);
  return { count: n, median: 0.5 * (a + b) };
}

// ------------------------------------------------------------------ the source

export interface ShapedSourceOptions {
  /** Only tasks arriving in [0, durationS) become requests. */
  durationS: number;
  /** Per reader: a function from (id, task) to the request, given the median task core-seconds (the shaping rules of to-requests.ts). */
  shaper: (medianTaskCoreS: number) => (id: number, arrivalS: number, service: number, eap: number, taskCoreS: number) => Request;
  /** For tests: see streamMedian. */
  collectMax?: number;
}

/** Requests of a task generator: tasks in [0, durationS) in (arrival, push order), shaped in that order. */
export function shapedSource(gen: TaskGen, o: ShapedSourceOptions): RequestSource {
  let stats: { count: number; median: number } | null = null;
  const getStats = (): { count: number; median: number } => {
    if (stats === null) {
      stats = streamMedian((visit) => {
        const sink: TaskSink = {
          fresh: 0,
          push(arrivalS, _service, _eap, taskCoreS) {
            if (arrivalS >= 0 && arrivalS < o.durationS) visit(taskCoreS);
          },
        };
        const it = gen(sink);
        for (;;) {
          sink.fresh = 0;
          if (it.next().done) break;
        }
      }, o.collectMax);
    }
    return stats;
  };
  return {
    get count() {
      return getStats().count;
    },
    open(): RequestReader {
      const { count, median: med } = getStats();
      const shape = o.shaper(count > 0 ? med : 1);
      const heap = new TaskHeap(o.durationS);
      const it = gen(heap);
      let watermark = -Infinity;
      let id = 0;
      return {
        next(): Request | null {
          while (heap.size === 0 || heap.peekArrival() > watermark) {
            if (watermark === Infinity) return null; // the generator is done and the heap empty
            heap.fresh = 0;
            const r = it.next();
            watermark = r.done ? Infinity : r.value;
          }
          heap.pop();
          return shape(id++, heap.arrivalS, heap.service, heap.eap, heap.taskCoreS);
        },
      };
    },
  };
}
