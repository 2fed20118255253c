/**
 * The placement loop runs the simulator's policy objects on its executor's view (shared/orchestration);
 * the policies themselves, and the old divergence of the live HPA, are tested in
 * test/unit/shared/orchestration.test.ts. Here: when it steps, what it applies and publishes, and
 * one run against a real emulated cluster on loopback.
 */
import { PlacementLoop, type PlacementLoopOptions } from '../../../orchestrator/placement-loop';
import { EmulatedExecutor, NullExecutor, type LiveExecutor } from '../../../orchestrator/executors';
import { AdminState, type ScaleOverride } from '../../../orchestrator/admin';
import { EmulatedCluster } from '../../../orchestrator/emulated-cluster';
import type { ModelRegistry } from '../../../orchestrator/registry';
import type { Placement, ScaleOp } from '../../../shared/domain';
import type { ActorSlot } from '../../../shared/protocol/envelope';
import type { OrchestrationPolicy } from '../../../shared/policy';
import { initialPlacement, withOps } from '../../../shared/orchestration/placement';
import { ReportView } from '../../../shared/orchestration/executor';
import { loadScenario } from '../../../shared/scenario';

const tiny = loadScenario('tiny');
const total = (d: Placement, w: number) => d[w].reduce((a, b) => a + b, 0);

describe('PlacementLoop', () => {
  /** An in-process executor over an emulated cluster (no sockets), recording what it was asked. */
  function fakes() {
    const published: { frame: number; d: Placement; actor?: ActorSlot }[] = [];
    const applied: ScaleOp[][] = [];
    const registry = {
      publishPlacement: (frame: number, d: Placement, actor?: ActorSlot) => published.push({ frame, d, actor }),
    } as unknown as ModelRegistry;
    const cluster = new EmulatedCluster({ scenario: tiny });
    const counts = { observed: 0 };
    const executor: LiveExecutor = {
      apply: async (ops) => {
        applied.push([...ops]);
        return cluster.scale(ops);
      },
      observe: async () => {
        counts.observed++;
        const r = cluster.report();
        // every service fully busy over a 15 s window
        r.window.windowS = 15;
        r.window.busyReplicaS = r.window.readyReplicaS = tiny.services.map((_, w) => 15 * total(initialPlacement(tiny), w));
        return new ReportView(tiny, r);
      },
      placement: async () => cluster.currentPlacement(),
    };
    return { published, applied, registry, executor, cluster, counts };
  }

  /** Runs `body` on jest's fake clock, starting at 1,000,000 ms. */
  async function onFakeClock(body: () => Promise<void>): Promise<void> {
    jest.useFakeTimers({ now: 1_000_000 });
    try {
      await body();
    } finally {
      jest.useRealTimers();
    }
  }

  /** A loop on `f`'s executor and registry: tiny, a fresh store's start (frame 0, published), a minute per frame; `o` overrides. */
  function loopOn(f: ReturnType<typeof fakes>, o: Partial<PlacementLoopOptions>): PlacementLoop {
    return new PlacementLoop({
      scenario: tiny,
      registry: f.registry,
      executor: f.executor,
      policy: 'static',
      start: initialPlacement(tiny),
      startFrame: 0,
      publishStart: true,
      frameMs: 60_000,
      ...o,
    });
  }

  it('publishes the start placement at once on a fresh store, then one placement per frame', async () => {
    const f = fakes();
    const loop = loopOn(f, {});
    await loop.start();
    expect(f.published.map((p) => p.frame)).toEqual([0]);
    await loop.step();
    await loop.step();
    await loop.stop();
    expect(f.published.map((p) => p.frame)).toEqual([0, 1, 2]);
    expect(f.published[2].d).toEqual(initialPlacement(tiny));
  });

  it('resumes from a stored frame without republishing it', async () => {
    const f = fakes();
    const loop = loopOn(f, { startFrame: 7, publishStart: false });
    await loop.start();
    await loop.step();
    await loop.stop();
    expect(f.published.map((p) => p.frame)).toEqual([8]);
    expect(f.applied[0]).toEqual([]); // the cluster already holds the start placement
  });

  it('with hpa, has the executor carry out the orders before publishing what the cluster holds', async () => {
    const f = fakes();
    const loop = loopOn(f, { policy: 'hpa' });
    await loop.start();
    await loop.step();
    await loop.stop();
    await f.cluster.close();
    const last = f.published[f.published.length - 1].d;
    expect(total(last, 0)).toBeGreaterThan(total(initialPlacement(tiny), 0));
    expect(withOps(initialPlacement(tiny), f.applied[f.applied.length - 1])).toEqual(last);
    expect(loop.executed).toBe(f.applied.flat().length);
  });

  it('holds the policy still while holdWhile names a reason: due steps wait, the admin step carries no policy orders, resume() runs one', async () => {
    const f = fakes();
    let hold: string | null = null;
    const lines: string[] = [];
    const loop = loopOn(f, { policy: 'hpa', log: (l) => lines.push(l), holdWhile: () => hold });
    await loop.start();
    const before = f.published.length;
    const appliedBefore = f.applied.length;
    hold = 'weights v2 are under canary';
    await loop.tick();
    await loop.tick();
    // nothing asked of the executor, nothing published, one line for the hold
    expect({ published: f.published.length, applied: f.applied.length, deferred: loop.deferredSteps }).toEqual({
      published: before,
      applied: appliedBefore,
      deferred: 2,
    });
    expect(loop.waitingFor).toBe('weights v2 are under canary');
    expect(lines.filter((l) => l.startsWith('placement: the next step waits'))).toEqual([
      'placement: the next step waits: weights v2 are under canary',
    ]);
    // an admin step during the hold: published, but the busy services get no policy order
    await loop.stepNow();
    expect(f.applied[f.applied.length - 1]).toEqual([]);
    expect(f.published.length).toBe(before + 1);
    expect(total(f.published[f.published.length - 1].d, 0)).toBe(total(initialPlacement(tiny), 0));
    // the verdict: the deferred step runs with the policy, even if the next hold has begun
    hold = 'weights v3 are under canary';
    await loop.resume();
    expect(f.published.length).toBe(before + 2);
    expect(total(f.published[f.published.length - 1].d, 0)).toBeGreaterThan(total(initialPlacement(tiny), 0));
    expect(loop.executed).toBeGreaterThan(0);
    // nothing deferred any more: resume() runs nothing
    expect(loop.waitingFor).toBeNull();
    await loop.resume();
    expect(f.published.length).toBe(before + 2);
    // the hold over, due steps run as before
    hold = null;
    await loop.tick();
    expect(f.published.length).toBe(before + 3);
    expect(loop.deferredSteps).toBe(2);
    await loop.stop();
    await f.cluster.close();
  });

  it("an admin step outside a hold carries the admin's orders only and is not a frame (on its few ms of window gsp-ss emptied the cluster)", async () => {
    const f = fakes();
    const state = new AdminState();
    const loop = loopOn(f, { policy: 'hpa', admin: { state } });
    await loop.start();
    await loop.step(); // hpa scales the busy services out
    const frame = loop.currentFrame;
    const placed = f.published[f.published.length - 1].d;
    expect(f.applied[f.applied.length - 1].length).toBeGreaterThan(0);
    // no admin order: the step asks the policy nothing and applies nothing
    await expect(loop.stepNow()).resolves.toEqual({ cluster: true, executed: 0, refused: 0 });
    expect(f.applied[f.applied.length - 1]).toEqual([]);
    expect(f.published[f.published.length - 1]).toEqual({ frame, d: placed });
    // an override: its orders alone, counted in the outcome
    state.setOverride({ service: 0, replicas: total(placed, 0) + 1, node: null, untilMs: null, reason: 'r', by: 'b', setMs: 0 });
    const out = await loop.stepNow();
    expect(out).toEqual({ cluster: true, executed: 1, refused: 0 });
    expect(f.applied[f.applied.length - 1]).toEqual([expect.objectContaining({ service: 0, delta: 1 })]);
    expect(loop.currentFrame).toBe(frame);
    // the policy's next step is a frame again
    await loop.step();
    expect(loop.currentFrame).toBe(frame + 1);
    await loop.stop();
    await f.cluster.close();
  });

  it('an override that ran out expires at the next step even when the executor sees no cluster', async () => {
    const state = new AdminState();
    const expired: ScaleOverride[] = [];
    const published: number[] = [];
    const registry = { publishPlacement: (frame: number) => published.push(frame) } as unknown as ModelRegistry;
    const loop = new PlacementLoop({
      scenario: tiny,
      registry,
      executor: new NullExecutor(),
      policy: 'hpa',
      start: initialPlacement(tiny),
      startFrame: 0,
      publishStart: false,
      frameMs: 60_000,
      admin: { state, onExpired: (o) => expired.push(o) },
    });
    state.setOverride({ service: 1, replicas: 2, node: null, untilMs: Date.now() - 1, reason: 'r', by: 'b', setMs: 0 });
    await expect(loop.stepNow()).resolves.toEqual({ cluster: false, executed: 0, refused: 0 });
    expect(expired.map((o) => o.service)).toEqual([1]);
    expect(state.empty).toBe(true);
    await loop.stop();
  });

  it('an executor that fails with no orders to carry out is logged and the frame is still published (static under Kubernetes: a failed list)', async () => {
    const f = fakes();
    const lines: string[] = [];
    f.executor.apply = async (ops) => {
      if (ops.length === 0) throw new Error('list deployments: 503');
      return { executed: [], refused: ops.length };
    };
    const loop = loopOn(f, { log: (l) => lines.push(l) });
    await loop.start();
    const n = f.published.length;
    await expect(loop.step()).resolves.toEqual({ cluster: true, executed: 0, refused: 0 });
    expect(f.published.length).toBe(n + 1);
    expect(lines.at(-1)).toBe('executor (no orders this step): list deployments: 503');
    await loop.stop();
    await f.cluster.close();
  });

  it("a failed step is the admin step's outcome (logged, and the loop goes on)", async () => {
    const f = fakes();
    const lines: string[] = [];
    const loop = loopOn(f, { policy: 'hpa', log: (l) => lines.push(l) });
    await loop.start();
    f.executor.observe = async () => {
      throw new Error('fetch failed');
    };
    await expect(loop.stepNow()).resolves.toEqual({ cluster: true, executed: 0, refused: 0, error: 'fetch failed' });
    expect(lines).toContain('placement step failed: fetch failed');
    expect(loop.failedSteps).toBe(1); // counted (kais_orchestrator_placement_steps_failed_total): it was a log line only
    await loop.stop();
    await f.cluster.close();
  });

  it('a failed step goes to onStepFailed when given (the orchestrator stores an event), not to the log twice', async () => {
    const f = fakes();
    const lines: string[] = [];
    const failures: string[] = [];
    const loop = loopOn(f, { policy: 'hpa', log: (l) => lines.push(l), onStepFailed: (e) => failures.push(e) });
    await loop.start();
    f.executor.observe = async () => {
      throw new Error('POST /scale answered 401');
    };
    await loop.stepNow();
    await loop.stepNow();
    expect(failures).toEqual(['POST /scale answered 401', 'POST /scale answered 401']);
    expect(loop.failedSteps).toBe(2);
    expect(lines.filter((l) => l.startsWith('placement step failed'))).toEqual([]);
    await loop.stop();
    await f.cluster.close();
  });

  it("names the override's actor while it names one (a canary under the actor switch): published again at once, as the same frame, and back to the policy's at resume()", async () => {
    const f = fakes();
    // a policy with the actor switch that stays light and orders nothing
    const switching: OrchestrationPolicy = { name: 'switching', periodS: 15, decide: () => [], actorFor: () => 'light' };
    let override: ActorSlot | null = null;
    let hold: string | null = null;
    const lines: string[] = [];
    const loop = loopOn(f, { policy: switching, actorOverride: () => override, holdWhile: () => hold, log: (l) => lines.push(l) });
    await loop.start();
    await loop.step();
    expect(f.published.map((p) => [p.frame, p.actor])).toEqual([
      [0, 'light'],
      [1, 'light'],
    ]);
    expect(loop.mainActorSinceMs()).toBeNull(); // the light actor dispatches: no canary baseline yet
    // a canary starts: the same frame again, naming main; asking again publishes nothing more
    override = 'main';
    hold = 'weights v2 are under canary';
    const before = Date.now();
    expect(await loop.refreshActor()).toBe(true);
    const since = loop.mainActorSinceMs();
    expect(since).toBeGreaterThanOrEqual(before);
    expect(since).toBeLessThanOrEqual(Date.now());
    expect(await loop.refreshActor()).toBe(false);
    expect(loop.mainActorSinceMs()).toBe(since); // published once: the main actor's time runs from then
    expect(f.published.slice(2).map((p) => [p.frame, p.actor])).toEqual([[1, 'main']]);
    expect(f.published[2].d).toEqual(f.published[1].d);
    expect(loop.actorNamed).toBe('main');
    expect(lines).toContain('placement: frame 1 published again naming the main actor (was light)');
    // a step that falls due is deferred; the verdict runs it with the policy's actor
    await loop.tick();
    override = null;
    hold = null;
    await loop.resume();
    expect(f.published.slice(3).map((p) => [p.frame, p.actor])).toEqual([[2, 'light']]);
    expect(loop.mainActorSinceMs()).toBeNull();
    // a verdict with no deferred step: the placement is published again naming the policy's actor
    override = 'main';
    await loop.refreshActor();
    override = null;
    await loop.resume();
    expect(f.published.slice(4).map((p) => [p.frame, p.actor])).toEqual([
      [2, 'main'],
      [2, 'light'],
    ]);
    expect(f.published).toHaveLength(6); // nothing else was published
    await loop.stop();
    await f.cluster.close();
  });

  it('a policy without the actor switch names no actor, whatever the override says, also after a restart', async () => {
    const f = fakes();
    const loop = loopOn(f, { policy: 'hpa', actorOverride: () => 'main' });
    await loop.start();
    expect(await loop.refreshActor()).toBe(false);
    await loop.step();
    await loop.stop();
    expect(f.published.map((p) => p.actor)).toEqual([undefined, undefined]);
    expect(loop.actorNamed).toBeNull();
    expect(loop.mainActorSinceMs()).toBe(-Infinity); // every decision is the main actor's
    // a restart on a stored placement (which the orchestrator reads as naming main): nothing to publish again
    const again = loopOn(f, { policy: 'hpa', actorOverride: () => 'main', publishStart: false, startFrame: 2, startActor: 'main' });
    await again.start();
    expect(await again.refreshActor()).toBe(false);
    expect(again.actorNamed).toBeNull();
    expect(again.mainActorSinceMs()).toBe(-Infinity);
    await again.stop();
    await f.cluster.close();
    expect(f.published).toHaveLength(2);
  });

  it('never holds a policy that does not decide (static publishes its frame during a hold)', async () => {
    const f = fakes();
    const loop = loopOn(f, { holdWhile: () => 'a canary' });
    await loop.start();
    await loop.tick();
    await loop.stop();
    expect(f.published.map((p) => p.frame)).toEqual([0, 1]);
    expect(loop.deferredSteps).toBe(0);
  });

  it('steps at the policy period of the simulator (hpa: 15 scenario seconds), static once per frame', () => {
    const f = fakes();
    const make = (policy: 'hpa' | 'static' | 'gsp-ss') =>
      new PlacementLoop({
        scenario: tiny,
        registry: f.registry,
        executor: f.executor,
        policy,
        start: initialPlacement(tiny),
        startFrame: 0,
        publishStart: true,
        frameMs: 2500,
        speed: 10,
      });
    expect(make('hpa').stepMs).toBe(1500);
    expect(make('gsp-ss').stepMs).toBe(2500);
    expect(make('static').stepMs).toBe(2500);
  });

  it("alignTo puts the steps on the run's clock: a new window at its start, steps at start + k stepMs", () =>
    onFakeClock(async () => {
      const f = fakes();
      // hpa at speed 10: a step every 1.5 s; the load starts 2 s from now
      const loop = loopOn(f, { policy: 'hpa', speed: 10 });
      await loop.start();
      expect(f.counts.observed).toBe(1);
      loop.alignTo(1_002_000);
      loop.alignTo(1_009_000); // once: a second call changes nothing
      await jest.advanceTimersByTimeAsync(1999);
      expect(f.counts.observed).toBe(1); // the steps that counted from start() (1.5 s) are gone
      await jest.advanceTimersByTimeAsync(1);
      expect(f.counts.observed).toBe(2); // the window starts with the load
      expect(f.published.map((p) => p.frame)).toEqual([0]);
      await jest.advanceTimersByTimeAsync(1499);
      expect(f.published.map((p) => p.frame)).toEqual([0]);
      await jest.advanceTimersByTimeAsync(1); // start + 1.5 s
      expect(f.published.map((p) => p.frame)).toEqual([0, 1]);
      await jest.advanceTimersByTimeAsync(1500);
      expect(f.published.map((p) => p.frame)).toEqual([0, 1, 2]);
      await loop.stop();
      await jest.advanceTimersByTimeAsync(10_000);
      expect(f.published.map((p) => p.frame)).toEqual([0, 1, 2]);
      await f.cluster.close();
    }));

  it('alignTo to a start already past (a restarted orchestrator) steps at the next boundary and keeps the window', () =>
    onFakeClock(async () => {
      const f = fakes();
      const loop = loopOn(f, { policy: 'hpa', speed: 10, startFrame: 4, publishStart: false });
      await loop.start();
      loop.alignTo(1_000_000 - 4_000); // boundaries at -4.0, -2.5, -1.0, +0.5 s from now
      await jest.advanceTimersByTimeAsync(499);
      expect({ observed: f.counts.observed, published: f.published.length }).toEqual({ observed: 1, published: 0 });
      await jest.advanceTimersByTimeAsync(1);
      expect(f.published.map((p) => p.frame)).toEqual([5]);
      await loop.stop();
      await f.cluster.close();
    }));

  it('alignTo leaves a policy that never decides alone (static publishes once per frame from its start)', () =>
    onFakeClock(async () => {
      const f = fakes();
      const loop = loopOn(f, { frameMs: 1000 });
      await loop.start();
      loop.alignTo(1_000_500);
      await jest.advanceTimersByTimeAsync(1000);
      expect(f.published.map((p) => p.frame)).toEqual([0, 1]);
      await loop.stop();
      await f.cluster.close();
    }));

  it('the executor window is the difference of two reports: another reader of GET /state does not take it away', async () => {
    const cluster = new EmulatedCluster({ scenario: tiny, speed: 10 });
    await cluster.listen();
    try {
      const ex = new EmulatedExecutor(cluster.adminUrl, tiny);
      await ex.observe();
      const node = initialPlacement(tiny)[0].findIndex((k) => k > 0);
      expect((await fetch(`${cluster.nodeUrls[node]}/serve?service=0&work=0.5`, { method: 'POST' })).status).toBe(200); // 1 s / speed 10
      await fetch(`${cluster.adminUrl}/state`); // e.g. a dashboard
      const v = (await ex.observe())!;
      expect(v.window.arrivals[0]).toBe(1);
      expect(v.window.completedInTime[0]).toBe(1);
      expect(v.window.workCoreS[0]).toBeCloseTo(0.5, 9);
      expect(v.window.busyReplicaS[0]).toBeGreaterThan(0.9); // scenario seconds
      const again = (await ex.observe())!;
      expect(again.window.arrivals[0]).toBe(0);
    } finally {
      await cluster.close();
    }
  });

  it("an admin step does not take the policy's window: its next step still sees the requests before the admin step (real emulated cluster)", async () => {
    const cluster = new EmulatedCluster({ scenario: tiny, speed: 10 });
    await cluster.listen();
    const seen: number[] = [];
    const recorder = {
      name: 'recorder',
      periodS: 15,
      decide: (v: { window: { arrivals: ArrayLike<number> } }) => {
        seen.push(v.window.arrivals[0]);
        return [];
      },
    };
    const loop = new PlacementLoop({
      scenario: tiny,
      registry: { publishPlacement: () => undefined } as unknown as ModelRegistry,
      executor: new EmulatedExecutor(cluster.adminUrl, tiny),
      policy: recorder,
      start: initialPlacement(tiny),
      startFrame: 0,
      publishStart: true,
      frameMs: 60_000,
      admin: { state: new AdminState() },
    });
    try {
      await loop.start();
      await loop.step();
      const node = initialPlacement(tiny)[0].findIndex((k) => k > 0);
      for (let i = 0; i < 2; i++)
        expect((await fetch(`${cluster.nodeUrls[node]}/serve?service=0&work=0.01`, { method: 'POST' })).status).toBe(200);
      await loop.stepNow(); // e.g. kais scale: no policy step, and the window runs on
      expect((await fetch(`${cluster.nodeUrls[node]}/serve?service=0&work=0.01`, { method: 'POST' })).status).toBe(200);
      await loop.step();
      expect(seen.slice(-1)).toEqual([3]); // it saw 1 (the admin step had taken the first two)
    } finally {
      await loop.stop();
      await cluster.close();
    }
  });

  it('scales a busy service on a real emulated cluster over HTTP and publishes what the node holds', async () => {
    const speed = 100;
    const cluster = new EmulatedCluster({ scenario: tiny, speed });
    await cluster.listen();
    const published: Placement[] = [];
    let waiter: ((d: Placement) => void) | null = null;
    const registry = {
      publishPlacement: (_frame: number, d: Placement) => {
        published.push(d);
        waiter?.(d);
      },
    } as unknown as ModelRegistry;
    const loop = new PlacementLoop({
      scenario: tiny,
      registry,
      executor: new EmulatedExecutor(cluster.adminUrl, tiny),
      policy: 'hpa',
      start: initialPlacement(tiny),
      startFrame: 0,
      publishStart: true,
      frameMs: 250,
      speed,
    });
    try {
      await loop.start();
      const node = initialPlacement(tiny)[0].findIndex((k) => k > 0);
      // one long request keeps service 0's only replica busy through the first window (50 core-s / 0.5 cores / speed 100 = 1 s)
      const busy = fetch(`${cluster.nodeUrls[node]}/serve?service=0&work=50`, { method: 'POST' });
      const scaled = await new Promise<Placement>((resolve) => {
        waiter = (d) => total(d, 0) > total(initialPlacement(tiny), 0) && resolve(d);
      });
      waiter = null;
      expect(total(scaled, 0)).toBe(2);
      const held = (await (await fetch(`${cluster.adminUrl}/placement`)).json()) as { d: Placement };
      expect(held.d[0]).toEqual(scaled[0]);
      expect(loop.executed).toBeGreaterThanOrEqual(1);
      expect((await busy).status).toBe(200);
    } finally {
      await loop.stop();
      await cluster.close();
    }
  });
});
