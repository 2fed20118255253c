/**
 * The admin's hand on the placement (issue 18 items 1-2): scale overrides and node holds, kept in
 * the store (they survive a restart) and applied by the placement loop on top of whatever the
 * orchestration policy orders.
 *
 * - **Scale override** of service w: `replicas` in total in the edge cluster, or on one `node`.
 *   While it holds, the policy's orders for w are dropped and the loop orders what reaches the
 *   override (new replicas on the node-choice rule's best node, removals from the most allocated
 *   one: shared/orchestration/placement.ts Plan, the policies' own rule). It ends when released or
 *   at `untilMs`.
 * - **Node hold**: node n is out: the policy sees it unhealthy (no new replica goes there) and its
 *   replicas are removed (each leaves when idle, as any deletion); agents stop sending to it as soon
 *   as the placement frame shows none. Re-admitting it gives it back to the policy.
 *
 * Every change is an event naming who and why (the caller records it).
 */
import type { ScaleOp } from '../shared/domain';
import { Plan } from '../shared/orchestration/placement';
import type { OrchestrationView } from '../shared/policy';

export interface ScaleOverride {
  service: number;
  replicas: number;
  /** null: in total across the edge cluster. */
  node: number | null;
  /** Wall-clock ms when it ends (null: until released). */
  untilMs: number | null;
  reason: string;
  by: string;
  setMs: number;
}

export interface NodeHold {
  node: number;
  reason: string;
  by: string;
  setMs: number;
}

export interface AdminSnapshot {
  overrides: ScaleOverride[];
  holds: NodeHold[];
}

export class AdminState {
  private readonly overrides = new Map<number, ScaleOverride>();
  private readonly holds = new Map<number, NodeHold>();

  constructor(snapshot: AdminSnapshot | null = null) {
    if (snapshot) this.restore(snapshot);
  }

  snapshot(): AdminSnapshot {
    return { overrides: [...this.overrides.values()], holds: [...this.holds.values()] };
  }

  setOverride(o: ScaleOverride): void {
    this.overrides.set(o.service, o);
  }

  release(service: number): ScaleOverride | null {
    const o = this.overrides.get(service) ?? null;
    this.overrides.delete(service);
    return o;
  }

  hold(h: NodeHold): void {
    this.holds.set(h.node, h);
  }

  readmit(node: number): NodeHold | null {
    const h = this.holds.get(node) ?? null;
    this.holds.delete(node);
    return h;
  }

  /** Back to `snapshot` (a change the store could not keep is undone). */
  restore(snapshot: AdminSnapshot): void {
    this.overrides.clear();
    this.holds.clear();
    for (const o of snapshot.overrides) this.overrides.set(o.service, o);
    for (const h of snapshot.holds) this.holds.set(h.node, h);
  }

  isHeld(node: number): boolean {
    return this.holds.has(node);
  }

  /** Removes the overrides past their end; returns them. */
  expire(nowMs: number): ScaleOverride[] {
    const out: ScaleOverride[] = [];
    for (const [w, o] of this.overrides) {
      if (o.untilMs !== null && o.untilMs <= nowMs) {
        out.push(o);
        this.overrides.delete(w);
      }
    }
    return out;
  }

  get empty(): boolean {
    return this.overrides.size === 0 && this.holds.size === 0;
  }

  /** The view a policy decides on: held nodes look unhealthy. */
  viewFor(view: OrchestrationView): OrchestrationView {
    if (this.holds.size === 0) return view;
    const healthy = (t: number) => !this.holds.has(t) && view.healthy(t);
    return Object.create(view, { healthy: { value: healthy } }) as OrchestrationView;
  }

  /**
   * The orders to carry out: the policy's, less those for overridden services, plus what empties
   * held nodes and reaches each override. `view` is `viewFor`'s (held nodes unhealthy).
   */
  adjust(view: OrchestrationView, policyOps: readonly ScaleOp[]): ScaleOp[] {
    const plan = new Plan(view);
    // held nodes: every replica leaves
    for (const n of this.holds.keys()) {
      if (n < 0 || n >= view.numNodes) continue;
      for (let w = 0; w < view.numServices; w++) for (let k = view.replicas(n, w); k > 0; k--) plan.add(w, n, -1);
    }
    for (const op of policyOps) {
      // an overridden service is the override's; a held node takes nothing and was emptied above
      if (this.overrides.has(op.service) || this.holds.has(op.node)) continue;
      plan.add(op.service, op.node, op.delta);
    }
    for (const o of this.overrides.values()) {
      const w = o.service;
      if (w < 0 || w >= view.numServices) continue;
      if (o.node !== null) {
        if (o.node < 0 || o.node >= view.numNodes || this.holds.has(o.node)) continue;
        for (let k = plan.replicas(o.node, w); k < o.replicas; k++) plan.add(w, o.node, 1);
        for (let k = plan.replicas(o.node, w); k > o.replicas; k--) plan.add(w, o.node, -1);
        continue;
      }
      let total = 0;
      for (let n = 0; n < view.numNodes; n++) total += plan.replicas(n, w);
      for (; total < o.replicas; total++) {
        const n = plan.pickNodeForNew(w);
        if (n < 0) break; // no room: the executor's report says how far it got
        plan.add(w, n, 1);
      }
      for (; total > o.replicas; total--) {
        const n = plan.pickNodeToRemove(w);
        if (n < 0) break;
        plan.add(w, n, -1);
      }
    }
    return plan.ops;
  }
}
