/**
 * The placement loop: once per orchestration frame (slotS x slotsPerFrame scenario seconds,
 * 25 s on `kais`, divided by `speed`), the orchestration policy turns what the executor observed
 * into a placement d[w][n]; the executor applies it and the registry stores and broadcasts it
 * (a new placement version every frame, even when unchanged, so agents and the dashboard see the
 * loop is alive).
 *
 * Policies: `static` (the current placement kept: the initial one, or the stored one after a
 * restart) and `hpa` (the Kubernetes HPA rule, as training/baselines/orchestration/hpa.ts:
 * u = busy / ready replica-seconds of w over the frame, desired = ceil(current x u / 0.7), no
 * change within 10 %, scale-down only to the highest recommendation of the last 300 s, clamped
 * to [1, maxReplicasPerService]; new replicas on the least-allocated node with room, removals from
 * the most allocated). GPG comes later.
 *
 * Executors: `EmulatedExecutor` talks to `kais node`'s admin server over HTTP; `NullExecutor`
 * applies nothing and observes nothing (placement frames only).
 */
import type { Placement } from '../shared/domain';
import type { Scenario } from '../shared/scenario';
import { topologyOf } from '../shared/scenario';
import type { ModelRegistry } from './registry';
import { HpaRecommender, type HpaOptions } from '../shared/hpa';

export type OrchestrationName = 'static' | 'hpa';
export const ORCHESTRATION_NAMES: OrchestrationName[] = ['static', 'hpa'];

export interface FrameStats {
  /** [w] arrivals at edge nodes in the frame. */
  arrivals: number[];
  /** [w] busy replica-seconds of w (edge nodes, scenario seconds). */
  busyReplicaS: number[];
  /** [w] ready replica-seconds of w. */
  readyReplicaS: number[];
}

export interface Executor {
  apply(d: Placement): Promise<void>;
  /** Stats since the previous call; null when the executor cannot observe. */
  observe(): Promise<FrameStats | null>;
}

export class NullExecutor implements Executor {
  async apply(): Promise<void> {}
  async observe(): Promise<FrameStats | null> {
    return null;
  }
}

export class EmulatedExecutor implements Executor {
  constructor(readonly adminUrl: string) {}

  async apply(d: Placement): Promise<void> {
    const r = await fetch(`${this.adminUrl}/placement`, { method: 'PUT', body: JSON.stringify({ d }), signal: AbortSignal.timeout(5000) });
    if (!r.ok) throw new Error(`executor refused the placement: ${r.status} ${await r.text()}`);
  }

  async observe(): Promise<FrameStats | null> {
    const r = await fetch(`${this.adminUrl}/stats`, { signal: AbortSignal.timeout(5000) });
    if (!r.ok) return null;
    return (await r.json()) as FrameStats;
  }
}

/** The hpa rule on one frame's stats; returns the new placement (a copy). */
export class HpaRule {
  private readonly rule: HpaRecommender;

  constructor(
    private readonly scenario: Scenario,
    options: Partial<HpaOptions> = {},
  ) {
    this.rule = new HpaRecommender(scenario.services.length, options);
  }

  decide(d: Placement, stats: FrameStats, nowS: number): Placement {
    const s = this.scenario;
    const topo = topologyOf(s);
    const nodes = s.eaps.flatMap((e) => e.nodes);
    const next = d.map((row) => row.slice());
    const usedMem = new Float64Array(topo.numNodes);
    const usedCpu = new Float64Array(topo.numNodes);
    s.services.forEach((svc, w) => {
      for (let n = 0; n < topo.numNodes; n++) {
        usedMem[n] += next[w][n] * svc.memGB;
        usedCpu[n] += next[w][n] * svc.cpuCores;
      }
    });
    for (let w = 0; w < s.services.length; w++) {
      const svc = s.services[w];
      const current = next[w].reduce((a, b) => a + b, 0);
      const stable = this.rule.recommend(
        w,
        current,
        { busyReplicaS: stats.busyReplicaS[w], readyReplicaS: stats.readyReplicaS[w], arrivals: stats.arrivals[w] },
        nowS,
        s.maxReplicasPerService,
      );
      for (let k = current; k < stable; k++) {
        // least allocated (CPU share) node with memory for one more replica
        let best = -1;
        for (let n = 0; n < topo.numNodes; n++) {
          if (nodes[n].memGB - usedMem[n] < svc.memGB - 1e-9) continue;
          if (best < 0 || usedCpu[n] / nodes[n].cpuCores < usedCpu[best] / nodes[best].cpuCores) best = n;
        }
        if (best < 0) break;
        next[w][best]++;
        usedMem[best] += svc.memGB;
        usedCpu[best] += svc.cpuCores;
      }
      for (let k = stable; k < current; k++) {
        let worst = -1;
        for (let n = 0; n < topo.numNodes; n++) {
          if (next[w][n] === 0) continue;
          if (worst < 0 || usedCpu[n] / nodes[n].cpuCores > usedCpu[worst] / nodes[worst].cpuCores) worst = n;
        }
        if (worst < 0) break;
        next[w][worst]--;
        usedMem[worst] -= svc.memGB;
        usedCpu[worst] -= svc.cpuCores;
      }
    }
    return next;
  }
}

export interface PlacementLoopOptions {
  scenario: Scenario;
  registry: ModelRegistry;
  executor: Executor;
  policy: OrchestrationName;
  /** Placement to start from (the stored one after a restart, else the initial one). */
  start: Placement;
  /** Frame index of `start` (the stored frame after a restart, else 0). */
  startFrame: number;
  /** Publish `start` as a new version right away (a fresh store). */
  publishStart: boolean;
  /** Real ms per frame. */
  frameMs: number;
  /** Scenario seconds per real second (for the hpa window). @defaultValue 1 */
  speed?: number;
  log?: (line: string) => void;
}

export class PlacementLoop {
  private d: Placement;
  private frame: number;
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> = Promise.resolve();
  private readonly hpa: HpaRule | null;
  private readonly t0 = performance.now();
  private stopped = false;

  constructor(private readonly o: PlacementLoopOptions) {
    this.d = o.start.map((r) => r.slice());
    this.frame = o.startFrame;
    this.hpa = o.policy === 'hpa' ? new HpaRule(o.scenario) : null;
  }

  get placement(): Placement {
    return this.d.map((r) => r.slice());
  }

  get currentFrame(): number {
    return this.frame;
  }

  async start(): Promise<void> {
    const log = this.o.log ?? (() => undefined);
    try {
      await this.o.executor.apply(this.d);
      await this.o.executor.observe(); // start the first window now
    } catch (e) {
      log(`executor: ${(e as Error).message}`);
    }
    if (this.o.publishStart) this.o.registry.publishPlacement(this.frame, this.d);
    this.timer = setInterval(() => {
      this.running = this.running.then(() => this.step()).catch((e) => log(`placement frame failed: ${(e as Error).message}`));
    }, this.o.frameMs);
  }

  /** One frame: observe, decide, apply, publish. */
  async step(): Promise<void> {
    if (this.stopped) return;
    this.frame++;
    if (this.hpa) {
      const stats = await this.o.executor.observe();
      if (stats) {
        const nowS = ((performance.now() - this.t0) / 1000) * (this.o.speed ?? 1);
        this.d = this.hpa.decide(this.d, stats, nowS);
      }
      await this.o.executor.apply(this.d);
    }
    if (this.stopped) return;
    this.o.registry.publishPlacement(this.frame, this.d);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    await this.running;
  }
}
