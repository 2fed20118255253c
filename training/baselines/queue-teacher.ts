/**
 * `queue-lookahead`: a train-only teacher that looks one step ahead into the queues the simulator
 * actually holds (docs/cmmac.md "Queue lookahead teacher").
 *
 * `deadline-load` and `lec` judge a target by shared/eta.ts: every request ahead is assumed to look
 * like this one and to be served before it (FIFO). The simulator's node queues are deadline
 * ordered (edf, and discounted for the requests that can still make it), so a request only waits
 * for the queued requests of its service with an earlier deadline, and the work of those requests
 * is known to the simulator. This teacher reads, when the view is the simulator's Cluster (its
 * public SimulatorInsight, training/sim/cluster.ts), each (target, service) queue's request ids and keys, and the true work of the requests
 * it has dispatched itself (it sees every request while it acts or labels), and computes per target:
 *
 *   - `done`: when this request would complete there: list scheduling of the requests ahead
 *     (deadline < own, not hopeless, plus the ones dispatched in this slot still in flight) on the
 *     ready replicas, busy replicas free after `busyFrac` x the mean processing time, bounded below
 *     by the node's CPU (all services' queued work ahead / cores), then its own work / cores of w;
 *   - `harm`: how many requests of the service behind it (later deadlines) are predicted in time
 *     without it and late with it.
 *
 * Among the targets with `margin x (done - now) <= slack`, it takes the smallest
 * `load + etaWeight x (done - now) + harmWeight x harm` (`load` as in deadline-load: queued and
 * busy of w per ready replica); with none, the cloud or the smallest `done` (`fallback`).
 * On a view without queues (a live agent) it behaves as deadline-load with the same knobs.
 *
 * It uses what only the simulator knows (true work, queue contents), so it is a teacher, not a
 * policy the agent could run. Its in-flight list holds its own choices: exact while it acts, an
 * approximation under --dagger (the student's actions are not reported back to it).
 *
 * Measured (docs/cmmac.md "Queue lookahead teacher"): as a policy it beats the best heuristic
 * pair by 2.4-8% on training conditions, but its students are not better than the shipped model:
 * what it decides on (its own work, the deadlines in the node queues) is not in the observation.
 */
import type { ClusterView, DispatchItem, DispatchPolicy } from '../../shared/policy';
import type { Request } from '../../shared/domain';
import { expectedCompletionS, pickByEta, type EtaRule } from '../../shared/eta';
import { HOPELESS_OFFSET } from '../../shared/dequeue';
import { simulatorInsight, type SimulatorInsight } from '../sim/cluster';

export interface QueueLookaheadOptions {
  /** feasible iff margin x (done - now) <= slack. @defaultValue 0.9 */
  margin?: number;
  /** weight of (done - now) in s added to the load. @defaultValue 0.5 */
  etaWeight?: number;
  /** weight of the load (queued + busy of w per ready replica). @defaultValue 1 */
  loadWeight?: number;
  /** weight of the number of requests behind turned late. @defaultValue 1 */
  harmWeight?: number;
  /** a busy replica is assumed free after busyFrac x its mean processing time. @defaultValue 0.5 */
  busyFrac?: number;
  /**
   * This request's processing time: 'true' (its true work / cores of w), 'deadline' (inferred from
   * its relative deadline, (deadline - arrival - deadlineBaseS) / deadlineSlack, the inverse of
   * training/workload/to-requests.ts without the jitter), 'slack' (the same from deadline - now,
   * which the actor observes), or 'mean' (the measured mean of w at t, as eta). @defaultValue 'true'
   */
  ownWork?: 'true' | 'deadline' | 'slack' | 'mean' | boolean;
  /**
   * Work of the queued requests: 'true', or 'deadline' (inferred from their relative deadlines, as
   * ownWork 'deadline': what a dispatcher that logs the requests it sent could know). @defaultValue 'true'
   */
  queueWork?: 'true' | 'deadline';
  /** the scenario's workload.deadlineBaseS and deadlineSlack (kais: 0.4 and 4) */
  deadlineBaseS?: number;
  deadlineSlack?: number;
  /** with ownWork 'slack': seconds assumed already spent since arrival (upload, eAP queue). @defaultValue 0 */
  slackAgeS?: number;
  /**
   * Read the simulator's queues (true) or only the ClusterView (false: eta of shared/eta.ts with
   * the mean processing time replaced by ownWork's). @defaultValue true
   */
  useQueues?: boolean;
  /** @defaultValue 'cloud' */
  fallback?: 'cloud' | 'min-eta';
  /** @defaultValue 'queue-lookahead' */
  name?: string;
}

export class QueueLookaheadDispatch implements DispatchPolicy, EtaRule {
  readonly name: string;
  readonly o: Required<Omit<QueueLookaheadOptions, 'name' | 'ownWork'>> & { ownWork: 'true' | 'deadline' | 'slack' | 'mean' };
  /** requests seen, by id (their true work and deadline) */
  private seen = new Map<number, Request>();
  /** dispatched in the current slot (still in flight): per target, request ids */
  private flight = new Map<number, number[]>();
  private flightAt = -1;
  // scratch
  private free: number[] = [];
  private ahead: number[] = [];
  private behind: number[] = [];
  private dls = new Map<number, number>();

  constructor(o: QueueLookaheadOptions = {}) {
    this.name = o.name ?? 'queue-lookahead';
    this.o = {
      margin: o.margin ?? 0.9,
      etaWeight: o.etaWeight ?? 0.5,
      loadWeight: o.loadWeight ?? 1,
      harmWeight: o.harmWeight ?? 1,
      busyFrac: o.busyFrac ?? 0.5,
      ownWork: o.ownWork === undefined || o.ownWork === true ? 'true' : o.ownWork === false ? 'mean' : o.ownWork,
      deadlineBaseS: o.deadlineBaseS ?? 0.4,
      deadlineSlack: o.deadlineSlack ?? 4,
      slackAgeS: o.slackAgeS ?? 0,
      fallback: o.fallback ?? 'cloud',
      useQueues: o.useQueues ?? true,
      queueWork: o.queueWork ?? 'true',
    };
  }

  reset(): void {
    this.seen.clear();
    this.flight.clear();
    this.flightAt = -1;
  }

  decide(item: DispatchItem, view: ClusterView): number {
    const r = item.request;
    this.seen.set(r.id, r);
    const now = view.nowS();
    if (now !== this.flightAt) {
      this.flight.clear();
      this.flightAt = now;
    }
    const t = this.choose(item, view);
    let f = this.flight.get(t);
    if (!f) this.flight.set(t, (f = []));
    f.push(r.id);
    return t;
  }

  // The eta rule of pickByEta (shared/eta.ts): the lookahead's completion time (or the view's eta),
  // ranked by load, eta and the harm done to the requests already queued there.
  /** per decision: the simulator's queues (null: read only the view); per target: the lookahead's harm */
  private sim: SimulatorInsight | null = null;
  private harm = 0;

  get margin(): number {
    return this.o.margin;
  }

  get fallback(): 'cloud' | 'min-eta' {
    return this.o.fallback;
  }

  eta(t: number, item: DispatchItem, view: ClusterView): number {
    const r = item.request;
    if (this.sim) {
      const e = this.lookahead(this.sim, view, item, t);
      this.harm = e.harm;
      return e.done - view.nowS();
    }
    this.harm = 0;
    const w = r.service;
    let eta = expectedCompletionS(view, item.eap, t, w, r.inputMB);
    if (!this.o.useQueues) eta += this.ownProc(r, view.nowS(), view.meanServiceS(t, w), view.serviceCpuCores(w)) - view.meanServiceS(t, w);
    return eta;
  }

  key(t: number, eta: number, item: DispatchItem, view: ClusterView): number {
    const { o } = this;
    const w = item.request.service;
    const ready = Math.max(1, view.readyReplicas(t, w));
    const load = (view.serviceQueueLen(t, w) + view.busyReplicas(t, w)) / ready;
    return o.loadWeight * load + o.etaWeight * eta + o.harmWeight * this.harm;
  }

  private choose(item: DispatchItem, view: ClusterView): number {
    this.sim = this.o.useQueues ? simulatorInsight(view) : null;
    return pickByEta(item, view, this);
  }

  /** This request's processing time (s) as ownWork says. */
  private ownProc(r: Request, now: number, mean: number, cores: number): number {
    const { o } = this;
    if (o.ownWork === 'true') return r.workCoreS / cores;
    if (o.ownWork === 'deadline') return Math.max(0.001, (r.deadlineS - r.arrivalS - o.deadlineBaseS) / o.deadlineSlack);
    if (o.ownWork === 'slack') return Math.max(0.001, (r.deadlineS - now + o.slackAgeS - o.deadlineBaseS) / o.deadlineSlack);
    return mean;
  }

  private work(id: number, t: number, w: number, view: ClusterView): number {
    const q = this.seen.get(id);
    if (!q) return view.meanServiceS(t, w) * view.serviceCpuCores(w);
    if (this.o.queueWork === 'deadline')
      return Math.max(0.001, (q.deadlineS - q.arrivalS - this.o.deadlineBaseS) / this.o.deadlineSlack) * view.serviceCpuCores(w);
    return q.workCoreS;
  }

  /** Predicted completion time (absolute, at the eAP) of item at t, and the requests behind it it makes late. */
  lookahead(sim: SimulatorInsight, view: ClusterView, item: DispatchItem, t: number): { done: number; harm: number } {
    const { o } = this;
    const r = item.request;
    const w = r.service;
    const W = view.numServices;
    const now = view.nowS();
    const arrive = now + view.transferS(item.eap, t, r.inputMB);
    const back = view.returnS(item.eap, t);
    if (t !== view.cloudTarget && sim.isDown(t)) return { done: Infinity, harm: 0 };
    const cores = view.serviceCpuCores(w);
    const mean = view.meanServiceS(t, w);
    const ownProc = this.ownProc(r, now, mean, cores);
    const ready = view.readyReplicas(t, w);
    if (ready <= 0) return { done: Infinity, harm: 0 };
    // requests of w at t, ahead of / behind this one (deadline order; hopeless keys last)
    const ahead = this.ahead;
    const behind = this.behind;
    ahead.length = 0;
    behind.length = 0;
    const q = sim.queuedRequests(t, w);
    // deadlines: of the requests seen, else the queue key (a deadline under edf and discounted)
    const dls = this.dls;
    dls.clear();
    for (let j = 0; j < q.size; j++) {
      const id = q.items[j];
      const key = q.keys[j];
      if (key >= HOPELESS_OFFSET) continue;
      const d = this.seen.get(id)?.deadlineS ?? key;
      dls.set(id, d);
      if (d < r.deadlineS) ahead.push(id);
      else behind.push(id);
    }
    const fl = this.flight.get(t);
    if (fl) {
      for (const id of fl) {
        const q2 = this.seen.get(id);
        if (!q2 || q2.service !== w) continue;
        dls.set(id, q2.deadlineS);
        if (q2.deadlineS < r.deadlineS) ahead.push(id);
        else behind.push(id);
      }
    }
    const dl = (id: number) => dls.get(id) as number;
    ahead.sort((x, y) => dl(x) - dl(y) || x - y);
    behind.sort((x, y) => dl(x) - dl(y) || x - y);
    // replicas: free times (relative to now)
    const free = this.free;
    free.length = 0;
    const busy = Math.min(ready, view.busyReplicas(t, w));
    for (let k = 0; k < ready; k++) free.push(k < busy ? o.busyFrac * mean : 0);
    const startNext = (): number => {
      let m = 0;
      for (let k = 1; k < free.length; k++) if (free[k] < free[m]) m = k;
      return m;
    };
    for (const id of ahead) {
      const m = startNext();
      free[m] += this.work(id, t, w, view) / cores;
    }
    const snapshot = free.slice();
    // CPU bound: all services' queued work ahead of this one at t, shared by the node's cores
    let cpuAhead = 0;
    if (t !== view.cloudTarget) {
      for (let s = 0; s < W; s++) {
        if (s === w) continue;
        const qs = sim.queuedRequests(t, s);
        for (let j = 0; j < qs.size; j++) {
          if (qs.keys[j] < r.deadlineS) cpuAhead += this.work(qs.items[j], t, s, view);
        }
      }
      for (const id of ahead) cpuAhead += this.work(id, t, w, view);
    }
    const cpuStart = cpuAhead / view.cpuCores(t);
    const m = startNext();
    const start = Math.max(free[m], arrive - now, cpuStart);
    const done = now + start + ownProc + back;
    if (o.harmWeight === 0 || behind.length === 0) return { done, harm: 0 };
    // harm: requests behind, in time without this one and late with it
    const without = snapshot.slice();
    free[m] = start + ownProc;
    let harm = 0;
    for (const id of behind) {
      const wk = this.work(id, t, w, view) / cores;
      const d = dl(id);
      let a = 0;
      for (let k = 1; k < without.length; k++) if (without[k] < without[a]) a = k;
      without[a] += wk;
      let c = 0;
      for (let k = 1; k < free.length; k++) if (free[k] < free[c]) c = k;
      free[c] += wk;
      if (now + without[a] + back <= d && now + free[c] + back > d) harm++;
    }
    return { done, harm };
  }
}
