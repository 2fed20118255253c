/**
 * The placement loop: the live orchestrator runs the simulator's orchestration policy objects
 * (shared/orchestration: `static`, `hpa`, `gsp-ss`, made by the same factory `kais eval` uses) on
 * the view its executor reports, and publishes the resulting placement to the agents.
 *
 * Each step: observe (the executor's view: the cluster now and the statistics window since the
 * previous step) -> the policy's scale orders -> the executor carries them out and reports which
 * it executed -> the placement the cluster now holds goes to the registry (stored, broadcast as a
 * new placement version, even when unchanged, so agents and the dashboard see the loop is alive).
 *
 * Timing, as in the simulator: a policy decides every `periodS` seconds of scenario time (hpa:
 * 15 s, Kubernetes' sync period; gsp-ss: one frame, 25 s on `kais`), i.e. every periodS / speed
 * real seconds; the simulator pushes the placement to the agents after every decision, and so
 * does this loop. `static` (periodS 0) never decides: the loop publishes once per frame
 * (`frameMs`). A placement's `frame` field counts the loop's steps from the start (one per
 * policy period).
 *
 * At start the executor is brought to the start placement (the initial one, or the stored one
 * after a restart) by the orders between what the cluster holds and it.
 *
 * One change at a time: while `holdWhile` names a reason (main.ts: a weights canary runs), a step
 * that falls due is deferred: the policy is not asked, nothing is applied or published, and the
 * step runs when `resume()` is called (main.ts: at the canary's verdict). A canary compares two
 * groups of eAPs over its windows; placement changes in those windows move the groups' rates apart
 * for reasons that are not the weights and widen its standard error (docs/gpg.md, "The action
 * budget H"). The admin's changes (`stepNow`) still apply during a hold, without the policy's orders.
 * Under the actor switch, `actorOverride` names the actor every placement names while it returns
 * one (main.ts: `main` during a canary), and `refreshActor()` publishes the held placement again
 * when that changes.
 */
import type { Placement } from '../shared/domain';
import type { ActorSlot } from '../shared/protocol/envelope';
import type { Scenario } from '../shared/scenario';
import { ORCHESTRATION_POLICIES, makeOrchestrationPolicy, type OrchestrationPolicyName } from '../shared/orchestration';
import { opsBetween, placementOf, withOps } from '../shared/orchestration/placement';
import type { OrchestrationPolicy, OrchestrationView } from '../shared/policy';
import type { ScaleReport } from '../shared/orchestration/executor';
import type { LiveExecutor } from './executors';
import type { ModelRegistry } from './registry';
import type { AdminState, ScaleOverride } from './admin';

/** The heuristics by name, and `gpg`, the learned one (critic/gpg/, from a model file: main.ts builds it). */
export type OrchestrationName = OrchestrationPolicyName | 'gpg';
export const ORCHESTRATION_NAMES: readonly OrchestrationName[] = [...ORCHESTRATION_POLICIES, 'gpg'];

/** What one step did: whether the executor saw a cluster, the orders carried out and refused, or why it failed. */
export interface StepOutcome {
  cluster: boolean;
  executed: number;
  refused: number;
  error?: string;
  /** false: the placement was pushed, but the store could not keep it (database or disk full). */
  stored?: boolean;
}

export interface PlacementLoopOptions {
  scenario: Scenario;
  registry: Pick<ModelRegistry, 'publishPlacement'> & Partial<Pick<ModelRegistry, 'lastPlacementStored'>>;
  executor: LiveExecutor;
  /** A heuristic's name, or the policy object itself (gpg: built from its model by the caller). */
  policy: OrchestrationPolicyName | OrchestrationPolicy;
  /** Placement to start from (the stored one after a restart, else the initial one). */
  start: Placement;
  /** Step index of `start` (the stored frame after a restart, else 0). */
  startFrame: number;
  /** Publish `start` as a new version right away (a fresh store). */
  publishStart: boolean;
  /** The actor the stored `start` named (a restart; `main` when it named none): the policy resumes it (actor switch). */
  startActor?: ActorSlot;
  /** Real ms per frame: the publishing period of a policy that never decides (static). */
  frameMs: number;
  /** Scenario seconds per real second. @defaultValue 1 */
  speed?: number;
  /** Seed handed to the policy's reset. @defaultValue 1 */
  seed?: number;
  log?: (line: string) => void;
  /** A step failed (the executor refused it whole, the policy threw): its message (else the loop logs it). */
  onStepFailed?: (error: string) => void;
  /** The admin's overrides and holds, applied on top of the policy's orders (orchestrator/admin.ts). */
  admin?: { state: AdminState; onExpired?: (o: ScaleOverride) => void };
  /** Why the policy's steps wait now (null: they do not); a deferred step runs at `resume()`. */
  holdWhile?: () => string | null;
  /**
   * The actor every placement names while this returns one, in place of the policy's (the actor
   * switch only: a policy that names no actor keeps naming none). main.ts: `main` while a weights
   * canary runs, so that the canary judges the actor a version changes; `refreshActor()` publishes
   * the placement again when the answer changes.
   */
  actorOverride?: () => ActorSlot | null;
}

export class PlacementLoop {
  readonly policy: OrchestrationPolicy;
  private d: Placement;
  private frame: number;
  private timer: NodeJS.Timeout | null = null;
  /** alignTo's one-shot timers (the window's start, the first aligned step). */
  private readonly alignTimers: NodeJS.Timeout[] = [];
  private aligned = false;
  private running: Promise<void> = Promise.resolve();
  private stopped = false;
  private policyReady = false;
  /** Orders executed and refused by the executor since the start. */
  executed = 0;
  refused = 0;
  /** Steps that fell due during a hold (`holdWhile`), since the start. */
  deferredSteps = 0;
  /** Steps that failed since the start (a log line each; they were counted nowhere). */
  failedSteps = 0;
  /** A step fell due during the current hold and has not run yet. */
  private deferred = false;
  /** The actor the last published placement named (undefined: none, or nothing published yet). */
  private publishedActor: ActorSlot | undefined;
  /** Since when the placements published have named the main actor (wall ms; see mainActorSinceMs); -Infinity goes with none named. */
  private mainSince: number | null = -Infinity;

  constructor(private readonly o: PlacementLoopOptions) {
    this.d = o.start.map((r) => r.slice());
    this.frame = o.startFrame;
    this.policy = typeof o.policy === 'string' ? makeOrchestrationPolicy(o.policy, o.scenario) : o.policy;
    // before the policy's reset too (it comes with the first view): what the agents dispatch with now
    if (o.startActor !== undefined) this.policy.resumeActor?.(o.startActor);
  }

  get placement(): Placement {
    return this.d.map((r) => r.slice());
  }

  /** The actor the last published placement named (null: none, no actor switch, or nothing published yet). */
  get actorNamed(): ActorSlot | null {
    return this.publishedActor ?? null;
  }

  /**
   * Since when every placement published has named the main actor (wall ms; -Infinity: no actor
   * switch, every decision is the main actor's), or null while the light one is named: what a
   * canary's baseline may read (orchestrator/canary.ts, `mainActorSinceMs`).
   */
  mainActorSinceMs(): number | null {
    return this.mainSince;
  }

  get currentFrame(): number {
    return this.frame;
  }

  /** Real ms between two steps. */
  get stepMs(): number {
    return this.policy.periodS > 0 ? (this.policy.periodS * 1000) / (this.o.speed ?? 1) : this.o.frameMs;
  }

  async start(): Promise<void> {
    const log = this.o.log ?? (() => undefined);
    try {
      const held = await this.o.executor.placement();
      if (held) {
        const rep = await this.o.executor.apply(opsBetween(held, this.d));
        this.d = withOps(held, rep.executed);
        if (rep.refused > 0) log(`executor: ${rep.refused} orders to reach the start placement refused`);
      }
      await this.observe(); // starts the first window now
    } catch (e) {
      log(`executor: ${(e as Error).message}`);
    }
    if (this.o.publishStart) this.publish();
    // a restart: the stored placement named the start actor (none for a policy without the switch)
    else this.named(this.policy.actorFor?.() === undefined ? undefined : this.o.startActor);
    this.timer = setInterval(() => this.queueTick(), this.stepMs);
  }

  /**
   * Puts the steps on a clock that started at `startMs` (Date.now() ms): step k at startMs + k
   * stepMs, as the simulator orchestrates at k periodS of scenario time from 0. `kais up` passes the
   * instant its load generator replays scenario time 0 (the prediction file's startMs, written ahead
   * of it), so the live steps decide on the same stretches of traffic as the predicted ones; before
   * this the steps counted from the orchestrator's own start, 1-2 s before the load, and the first
   * window held that idle time and missed as much traffic at its end. When `startMs` is still
   * ahead, a new window starts at it (the idle time before it is left out, as the simulator's first
   * window starts at 0). The next step is the first boundary after now. Once; nothing for a policy
   * that never decides (static publishes once per frame).
   */
  alignTo(startMs: number, nowMs = Date.now()): void {
    if (this.stopped || this.aligned || this.policy.periodS <= 0 || !Number.isFinite(startMs)) return;
    this.aligned = true;
    const log = this.o.log ?? (() => undefined);
    const stepMs = this.stepMs;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    if (startMs > nowMs)
      this.alignTimers.push(
        setTimeout(() => {
          this.running = this.running
            .then(async () => {
              if (!this.stopped) await this.observe(false);
            })
            .catch((e) => log(`executor: ${(e as Error).message}`));
        }, startMs - nowMs),
      );
    const k = Math.max(1, Math.floor((nowMs - startMs) / stepMs) + 1);
    this.alignTimers.push(
      setTimeout(
        () => {
          if (this.stopped) return;
          this.queueTick();
          this.timer = setInterval(() => this.queueTick(), stepMs);
        },
        startMs + k * stepMs - nowMs,
      ),
    );
  }

  /** The timers' step: after any step in progress, a failure logged. */
  private queueTick(): void {
    this.running = this.running.then(() => this.tick()).catch((e) => this.failed((e as Error).message));
  }

  private failed(error: string): void {
    this.failedSteps++;
    if (this.o.onStepFailed) this.o.onStepFailed(error);
    else (this.o.log ?? (() => undefined))(`placement step failed: ${error}`);
  }

  /** Why a deferred step waits now (the hold's reason), or null: none is deferred. */
  get waitingFor(): string | null {
    return this.deferred ? (this.heldNow() ?? 'the hold ended; the step runs at resume()') : null;
  }

  /** Why the policy's steps wait now, or null (a policy that never decides is never held). */
  private heldNow(): string | null {
    return this.policy.periodS > 0 ? (this.o.holdWhile?.() ?? null) : null;
  }

  /** The timer's step (tests may call it): deferred while `holdWhile` names a reason. */
  async tick(): Promise<void> {
    const why = this.heldNow();
    if (why === null) return void (await this.step());
    if (!this.deferred) (this.o.log ?? (() => undefined))(`placement: the next step waits: ${why}`);
    this.deferred = true;
    this.deferredSteps++;
  }

  /**
   * The hold is over: a step deferred during it runs now, policy and all (resolves when it is
   * published); else the placement is published again if the actor it must name changed
   * (`refreshActor`), or nothing happens.
   */
  resume(): Promise<void> {
    if (!this.deferred) return this.refreshActor().then(() => undefined);
    this.deferred = false;
    return this.chain(false).then(() => undefined);
  }

  /** The actor a placement published now names: the override's while it names one, else the policy's (undefined: no switch). */
  private actorNow(): ActorSlot | undefined {
    const own = this.policy.actorFor?.();
    if (own === undefined) return undefined;
    return this.o.actorOverride?.() ?? own;
  }

  /** Publishes the cluster's placement (no decision, no frame) with the actor to name now. */
  private publish(): void {
    const actor = this.actorNow();
    this.o.registry.publishPlacement(this.frame, this.d, actor);
    this.named(actor);
  }

  /** The agents dispatch with `actor` from now on (undefined: no switch; a restart counts as now). */
  private named(actor: ActorSlot | undefined): void {
    if (actor === this.publishedActor) return;
    this.publishedActor = actor;
    this.mainSince = actor === undefined ? -Infinity : actor === 'main' ? Date.now() : null;
  }

  /**
   * After any step in progress: when the actor to name now (`actorOverride`, the policy's) differs
   * from the one the last placement named, the same placement is published again with it, as the
   * same frame (nothing is decided or applied). Resolves true when it published.
   */
  refreshActor(): Promise<boolean> {
    const next = this.running.then(() => {
      if (this.stopped || this.actorNow() === this.publishedActor) return false;
      const from = this.publishedActor ?? 'none';
      this.publish();
      (this.o.log ?? (() => undefined))(
        `placement: frame ${this.frame} published again naming the ${this.publishedActor ?? 'no'} actor (was ${from})`,
      );
      return true;
    });
    this.running = next.then(
      () => undefined,
      () => undefined,
    );
    return next;
  }

  /**
   * One step: observe, decide, apply, publish. An admin's step
   * (`admin`) carries the admin's orders only and is not a frame: the policy is not asked (on the
   * few ms of window since the last step gsp-ss saw no arrivals and emptied the cluster), the
   * forecast is not fed and `frame` does not move. Overrides that ran out expire on every step,
   * whether or not the executor sees a cluster.
   */
  async step(admin = false): Promise<StepOutcome> {
    const outcome: StepOutcome = { cluster: false, executed: 0, refused: 0 };
    if (this.stopped) return outcome;
    if (!admin) this.frame++;
    const a = this.o.admin;
    if (a) for (const o of a.state.expire(Date.now())) a.onExpired?.(o);
    const view = await this.observe(!admin, admin);
    if (view) {
      outcome.cluster = true;
      this.d = placementOf(view);
      const seen = a ? a.state.viewFor(view) : view;
      let ops = this.policy.periodS > 0 && !admin ? this.policy.decide(seen) : [];
      if (a && !a.state.empty) ops = a.state.adjust(seen, ops);
      // every step, orders or not (static's too): an executor may have work of its own to do (the
      // Kubernetes one re-pins a Deployment whose node index moved to another Node); with no orders
      // a failure there is logged and the frame is still published, as before that work existed
      let rep: ScaleReport;
      try {
        rep = await this.o.executor.apply(ops);
      } catch (e) {
        if (ops.length > 0) throw e;
        (this.o.log ?? (() => undefined))(`executor (no orders this step): ${(e as Error).message}`);
        rep = { executed: [], refused: 0 };
      }
      this.executed += rep.executed.length;
      this.refused += rep.refused;
      outcome.executed = rep.executed.length;
      outcome.refused = rep.refused;
      this.d = withOps(this.d, rep.executed);
    }
    if (this.stopped) return outcome;
    // the actor switch: the actor the policy's last decision named (none without a switch), or the override's
    this.publish();
    if (this.o.registry.lastPlacementStored === false) outcome.stored = false;
    return outcome;
  }

  /**
   * An admin change, now: one step with the admin's orders only (the policy's own step keeps its
   * period), after any step in progress; resolves with what it did once its placement is
   * published. During a hold the policy's step waits for `resume()` as before.
   */
  stepNow(): Promise<StepOutcome> {
    if (this.heldNow() !== null) this.deferred = true;
    return this.chain(true);
  }

  private chain(admin: boolean): Promise<StepOutcome> {
    const next = this.running
      .then(() => this.step(admin))
      .catch((e: unknown): StepOutcome => {
        const error = (e as Error).message;
        this.failed(error);
        return { cluster: true, executed: 0, refused: 0, error };
      });
    this.running = next.then(() => undefined);
    return next;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    for (const t of this.alignTimers) clearTimeout(t);
    await this.running;
  }

  /**
   * Arrivals per scenario second of each service, an exponential average over the windows the
   * loop has observed (alpha 0.5): the admin API's forecast for the next frame. null before the
   * first window.
   */
  forecast: Float64Array | null = null;

  /**
   * The executor's view, its window starting where the previous one ended; `forecast`: fold its
   * rates into the forecast (not for alignTo's idle window); `keepWindow`: an admin's step, after
   * which the policy's next window still starts where its previous one ended.
   */
  private async observe(forecast = true, keepWindow = false): Promise<OrchestrationView | null> {
    const view = await this.o.executor.observe({ keepWindow });
    if (forecast && view && view.window.windowS > 0) {
      const rate = Float64Array.from(view.window.arrivals, (a) => a / view.window.windowS);
      this.forecast = this.forecast ? this.forecast.map((f, w) => 0.5 * f + 0.5 * rate[w]) : rate;
    }
    if (view && !this.policyReady) {
      this.policy.reset?.(this.o.seed ?? 1, view);
      if (this.o.startActor !== undefined) this.policy.resumeActor?.(this.o.startActor);
      this.policyReady = true;
    }
    return view;
  }
}
