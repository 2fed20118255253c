/**
 * An orchestration policy followed by hpa's scale-in. At each of the inner policy's decisions, after
 * its orders, the HPA replica rule (hpa.ts: utilisation over the window against the target, 300 s
 * stabilisation, at least minReplicas) gives each service a target count, and the wrapper removes
 * replicas while the count after the inner orders is above it. It never adds: hpa's additions are
 * left to the inner policy. So hpa's count is a ceiling on what stays: an inner addition of a
 * service already at or above its target becomes a move (one removed elsewhere). Removals come from
 * the most allocated node holding the service, never from a node the inner policy has just given
 * one (no order undoes another), and with `keepPerEap` never the last one of the service on an eAP.
 *
 * Why: the learned orchestration (GPG) scales out and hardly ever scales in; the trace, whose
 * service mix shifts, is where hpa wins by holding fewer replicas (docs/gpg.md, session 29).
 */
import type { ScaleOp } from '../domain';
import type { OrchestrationPolicy, OrchestrationView } from '../policy';
import type { ActorSlot } from '../protocol/envelope';
import { HpaRecommender, type HpaOptions } from './hpa';
import { Plan } from './placement';

export interface ScaleInOptions extends Partial<HpaOptions> {
  /**
   * Never remove the last replica of a service on an eAP that holds one (hpa counts replicas in the
   * whole cluster and knows no eAPs). @defaultValue false
   */
  keepPerEap?: boolean;
  /**
   * Remove no replica of a service whose failed share over the window (failed / arrivals) is above
   * this: never shrink a service that is missing its deadlines, whatever its utilisation says (under
   * overload, requests fail for want of a replica near them while the cluster-wide utilisation looks
   * low). 1: no such gate. @defaultValue 1
   */
  maxFailedShare?: number;
  /**
   * Undo a removal that hurt: when a service's failed share in the window after the wrapper removed
   * some of its replicas is above its share in the window that led to the removal by more than
   * this (absolute), one replica of it goes back (where hpa puts a new one) and none of it is
   * removed for hpa's stabilisation period. Only a removal that happened counts: one the executor
   * or an admin override refused (the node holds as many replicas at the next decision) is no
   * cause. 1: never. @defaultValue 1
   */
  regret?: number;
  /**
   * A leaner scale-in while the cluster is lightly loaded: in a window whose failed share over all
   * services (failed / arrivals) is below `belowFailedShare`, hpa's target is `targetUtilisation`
   * and `keepPerEap` is this one's; in any other window (one without arrivals included) the options
   * above. Both recommenders see every window, so each one's stabilisation history is whole. @defaultValue none
   */
  light?: {
    belowFailedShare: number;
    targetUtilisation: number;
    keepPerEap: boolean;
    /**
     * The per-service gate (`maxFailedShare`) in a light window: a service whose failures do not
     * come from too few replicas (deadlines no node meets, or a cloud that fills) keeps every
     * replica under the gate though more replicas do not help it; in a light window the regret
     * (`regret`) can judge its removals instead. @defaultValue the option above
     */
    maxFailedShare?: number;
    /**
     * The actor switch: the dispatch uses its light actor in the frame after a light window, its
     * main one after any other, and the light one before the first decision (actorFor()). The
     * light-load actor then serves the load it was made for, the main one the overload.
     * @defaultValue false
     */
    switchActor?: boolean;
  };
}

export class WithHpaScaleIn implements OrchestrationPolicy {
  readonly name: string;
  readonly periodS: number;
  private rule: HpaRecommender;
  private lightRule: HpaRecommender | null = null;
  /** Per service: failed share of the window that led to the last decision's removals (NaN: none removed). */
  private removedAtShare: number[] = [];
  /** Per service: the last decision's removals as [node, replicas the plan left there]. */
  private removedFrom: [number, number][][] = [];
  /** Per service: no removal before this time (s), after a regretted one. */
  private heldUntil: number[] = [];
  /** The actor of the frames until the next decision (light.switchActor). */
  private actor: ActorSlot = 'light';

  constructor(
    readonly inner: OrchestrationPolicy,
    readonly options: ScaleInOptions = {},
  ) {
    this.name = inner.name;
    this.periodS = inner.periodS;
    this.rule = new HpaRecommender(0, options);
  }

  reset(seed: number, view: OrchestrationView): void {
    this.inner.reset?.(seed, view);
    this.rule = new HpaRecommender(view.numServices, this.options);
    const l = this.options.light;
    this.lightRule = l ? new HpaRecommender(view.numServices, { ...this.options, targetUtilisation: l.targetUtilisation }) : null;
    this.removedAtShare = new Array<number>(view.numServices).fill(NaN);
    this.removedFrom = Array.from({ length: view.numServices }, () => []);
    this.heldUntil = new Array<number>(view.numServices).fill(-Infinity);
    this.actor = 'light';
  }

  actorFor(): ActorSlot | undefined {
    return this.options.light?.switchActor ? this.actor : undefined;
  }

  resumeActor(actor: ActorSlot): void {
    this.actor = actor;
  }

  decide(view: OrchestrationView): ScaleOp[] {
    const innerOps = this.inner.decide(view);
    const plan = new Plan(view);
    const added = new Set<number>();
    for (const op of innerOps) {
      plan.add(op.service, op.node, op.delta);
      if (op.delta > 0) added.add(op.node * view.numServices + op.service);
    }
    const win = view.window;
    let arrivals = 0;
    let failed = 0;
    for (let w = 0; w < view.numServices; w++) {
      arrivals += win.arrivals[w];
      failed += win.failed[w];
    }
    const l = this.options.light;
    // a window without arrivals is light unless requests that arrived before it failed in it
    const light = l !== undefined && this.lightRule !== null && (arrivals > 0 ? failed < l.belowFailedShare * arrivals : failed === 0);
    this.actor = light ? 'light' : 'main';
    const keepPerEap = light ? l.keepPerEap : (this.options.keepPerEap ?? false);
    // 1 (the default) is no gate, even in a window where a service's failures outnumber its arrivals
    // (requests that arrived before the window and failed in it)
    const maxFailedShare = (light ? l.maxFailedShare : undefined) ?? this.options.maxFailedShare ?? 1;
    const gated = maxFailedShare < 1;
    const regret = this.options.regret ?? 1;
    const nowS = view.nowS();
    for (let w = 0; w < view.numServices; w++) {
      // hpa's target is at least minReplicas already; onView runs for every service, so that its
      // stabilisation history does not depend on the gate
      const base = this.rule.onView(view, w);
      const lean = this.lightRule?.onView(view, w);
      const target = light && lean ? lean.target : base.target;
      // a removal that did not happen (refused, or not carried out yet) is no cause for regret
      const happened = this.removedFrom[w].some(([n, left]) => view.replicas(n, w) <= left);
      const before = happened ? this.removedAtShare[w] : NaN;
      this.removedAtShare[w] = NaN;
      this.removedFrom[w] = [];
      if (regret < 1 && !Number.isNaN(before) && win.arrivals[w] > 0 && win.failed[w] / win.arrivals[w] > before + regret) {
        this.heldUntil[w] = nowS + this.rule.o.stabilisationS;
        // one back, unless the inner policy adds one of w already
        const n = innerOps.some((op) => op.service === w && op.delta > 0) ? -1 : plan.pickNodeForNew(w);
        if (n >= 0) plan.add(w, n, 1);
        continue;
      }
      if (nowS < this.heldUntil[w]) continue;
      if (gated && win.failed[w] > maxFailedShare * win.arrivals[w]) continue;
      let after = 0;
      for (let n = 0; n < view.numNodes; n++) after += plan.replicas(n, w);
      for (let k = target; k < after; k++) {
        const n = plan.pickNodeToRemove(
          w,
          (m) => !added.has(m * view.numServices + w) && (!keepPerEap || onEap(plan, view, w, view.nodeEap(m)) > 1),
        );
        if (n < 0) break;
        plan.add(w, n, -1);
        this.removedAtShare[w] = win.arrivals[w] > 0 ? win.failed[w] / win.arrivals[w] : 0;
        this.removedFrom[w].push([n, plan.replicas(n, w)]);
      }
    }
    return plan.ops;
  }
}

/** Replicas of w on the nodes of one eAP, with the plan's orders. */
function onEap(plan: Plan, view: OrchestrationView, w: number, eap: number): number {
  let c = 0;
  for (let n = 0; n < view.numNodes; n++) if (view.nodeEap(n) === eap) c += plan.replicas(n, w);
  return c;
}
