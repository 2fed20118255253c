/**
 * The load one agent sees, for an orchestrator whose executor cannot see it on its cluster
 * (Kubernetes: the API server knows Deployments and readiness, not busy replicas, queues or
 * arrivals; orchestrator/load-board.ts combines the agents' reports).
 *
 * Per telemetry interval (the `load` section of a `telemetry` frame, shared/protocol/envelope.ts):
 * - arrivals and their CPU work per service, counted at this eAP's ingress;
 * - per service, the requests answered in the interval in time (200 by the deadline) and otherwise
 *   (the window's completedInTime and failed, counted at the device as the simulator counts them);
 * - per (target, service), the means over samples taken every `sampleMs` of: the requests this
 *   eAP sent there and had no answer to yet (`outstanding`: the orchestrator sums them over the
 *   agents), and the busy replicas and waiting requests this agent's view estimates (its own
 *   requests, raised to the node's load report while fresh, agent/local-view.ts: the
 *   orchestrator takes the largest over the agents).
 * Only targets with anything to say are listed (a cluster of 100 nodes x 100 services sends a few
 * rows, not 10,000 zeros).
 */
import type { LoadBody } from '../shared/protocol/envelope';
import type { Scenario } from '../shared/scenario';
import type { LocalClusterView } from './local-view';

export class LoadSampler {
  private readonly W: number;
  private readonly T: number;
  private readonly nominalWork: Float64Array;
  private arrivals: Float64Array;
  private work: Float64Array;
  private inTime: Float64Array;
  private failed: Float64Array;
  /** [t * W + w] sums over the interval's samples. */
  private outstanding: Float64Array;
  private busy: Float64Array;
  private waiting: Float64Array;
  private samples = 0;
  private startMs: number;

  constructor(
    scenario: Scenario,
    private readonly view: LocalClusterView,
    private readonly clockMs: () => number = () => performance.now(),
  ) {
    this.W = scenario.services.length;
    this.T = view.numTargets;
    this.nominalWork = Float64Array.from(scenario.services, (s) => 0.12 * s.workScale);
    this.arrivals = new Float64Array(this.W);
    this.work = new Float64Array(this.W);
    this.inTime = new Float64Array(this.W);
    this.failed = new Float64Array(this.W);
    this.outstanding = new Float64Array(this.T * this.W);
    this.busy = new Float64Array(this.T * this.W);
    this.waiting = new Float64Array(this.T * this.W);
    this.startMs = clockMs();
  }

  /** A request of w arrived at the ingress (its work in core-seconds when it says). */
  arrival(w: number, workCoreS?: number): void {
    this.arrivals[w]++;
    this.work[w] += workCoreS ?? this.nominalWork[w];
  }

  /** A request of w was answered: with its result by its deadline (`inTime`), or not (late, refused, expired). */
  answered(w: number, inTime: boolean): void {
    if (inTime) this.inTime[w]++;
    else this.failed[w]++;
  }

  /** One sample of the view (the interval's means are over these). */
  sample(): void {
    const v = this.view;
    const W = this.W;
    v.holdClock();
    try {
      for (let t = 0; t < this.T; t++) {
        for (let w = 0; w < W; w++) {
          const k = t * W + w;
          const out = v.outstanding[k];
          if (out > 0) this.outstanding[k] += out;
          const b = v.busyReplicas(t, w);
          if (b > 0) this.busy[k] += b;
          const q = v.serviceQueueLen(t, w);
          if (q > 0) this.waiting[k] += q;
        }
      }
    } finally {
      v.releaseClock();
    }
    this.samples++;
  }

  /** The interval since the last take (one more sample first), and a new interval. */
  take(endTs: number = Date.now()): LoadBody {
    this.sample();
    const W = this.W;
    const n = this.samples;
    const rows: number[] = [];
    for (let t = 0; t < this.T; t++) {
      for (let w = 0; w < W; w++) {
        const k = t * W + w;
        if (this.outstanding[k] > 0 || this.busy[k] > 0 || this.waiting[k] > 0) {
          rows.push(t);
          break;
        }
      }
    }
    const mean = (a: Float64Array) => {
      const out = new Float32Array(rows.length * W);
      rows.forEach((t, r) => {
        for (let w = 0; w < W; w++) out[r * W + w] = a[t * W + w] / n;
      });
      return out;
    };
    const now = this.clockMs();
    const body: LoadBody = {
      endTs,
      intervalMs: Math.max(1e-3, now - this.startMs),
      numServices: W,
      arrivals: Float32Array.from(this.arrivals),
      workCoreS: Float32Array.from(this.work),
      completedInTime: Float32Array.from(this.inTime),
      failed: Float32Array.from(this.failed),
      targets: Int32Array.from(rows),
      outstanding: mean(this.outstanding),
      busy: mean(this.busy),
      waiting: mean(this.waiting),
    };
    this.arrivals.fill(0);
    this.work.fill(0);
    this.inTime.fill(0);
    this.failed.fill(0);
    this.outstanding.fill(0);
    this.busy.fill(0);
    this.waiting.fill(0);
    this.samples = 0;
    this.startMs = now;
    return body;
  }
}
