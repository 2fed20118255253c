import { HpaRule, PlacementLoop, type Executor, type FrameStats } from '../../../orchestrator/placement-loop';
import { initialPlacement } from '../../../orchestrator/emulated-cluster';
import type { ModelRegistry } from '../../../orchestrator/registry';
import type { Placement } from '../../../shared/domain';
import { loadScenario } from '../../../shared/scenario';

const tiny = loadScenario('tiny');
const W = tiny.services.length;
const total = (d: Placement, w: number) => d[w].reduce((a, b) => a + b, 0);
const stats = (u: number[], arrivals = 10): FrameStats => ({
  arrivals: new Array(W).fill(arrivals),
  busyReplicaS: u.map((x) => x * 25),
  readyReplicaS: new Array(W).fill(25),
});

describe('HpaRule', () => {
  it('adds replicas to a service whose utilisation is above the 0.7 target, up to maxReplicasPerService', () => {
    const rule = new HpaRule(tiny);
    const d = initialPlacement(tiny);
    const next = rule.decide(d, stats([1, 0.7, 0.7, 0.7]), 0);
    expect(total(next, 0)).toBe(Math.min(tiny.maxReplicasPerService, Math.ceil(total(d, 0) / 0.7)));
    for (let w = 1; w < W; w++) expect(next[w]).toEqual(d[w]);
  });

  it('does not go below one replica, and scales down only to the highest recommendation of the last 300 s', () => {
    const rule = new HpaRule(tiny);
    let d = initialPlacement(tiny);
    d = rule.decide(d, stats([1, 0.7, 0.7, 0.7]), 0);
    d = rule.decide(d, stats([1, 0.7, 0.7, 0.7]), 25);
    const high = total(d, 0);
    const idle = rule.decide(d, stats([0, 0.7, 0.7, 0.7]), 50);
    expect(total(idle, 0)).toBe(high); // stabilisation window holds it
    const later = rule.decide(idle, stats([0, 0.7, 0.7, 0.7]), 400);
    expect(total(later, 0)).toBe(1);
  });

  it('never places more replicas on a node than its memory holds', () => {
    const rule = new HpaRule(tiny);
    let d = initialPlacement(tiny);
    for (let i = 0; i < 5; i++) d = rule.decide(d, stats([1, 1, 1, 1]), i * 25);
    const nodes = tiny.eaps.flatMap((e) => e.nodes);
    nodes.forEach((n, j) => {
      const used = tiny.services.reduce((s, svc, w) => s + d[w][j] * svc.memGB, 0);
      expect(used).toBeLessThanOrEqual(n.memGB + 1e-9);
    });
  });
});

describe('PlacementLoop', () => {
  function fakes() {
    const published: { frame: number; d: Placement }[] = [];
    const applied: Placement[] = [];
    const registry = { publishPlacement: (frame: number, d: Placement) => published.push({ frame, d }) } as unknown as ModelRegistry;
    const executor: Executor = {
      apply: async (d) => void applied.push(d),
      observe: async () => stats([1, 1, 1, 1]),
    };
    return { published, applied, registry, executor };
  }

  it('publishes the start placement at once on a fresh store, then one placement per frame', async () => {
    const f = fakes();
    const loop = new PlacementLoop({ scenario: tiny, registry: f.registry, executor: f.executor, policy: 'static', start: initialPlacement(tiny), startFrame: 0, publishStart: true, frameMs: 60_000 });
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
    const loop = new PlacementLoop({ scenario: tiny, registry: f.registry, executor: f.executor, policy: 'static', start: initialPlacement(tiny), startFrame: 7, publishStart: false, frameMs: 60_000 });
    await loop.start();
    await loop.step();
    await loop.stop();
    expect(f.published.map((p) => p.frame)).toEqual([8]);
    expect(f.applied.length).toBeGreaterThanOrEqual(1); // the stored placement is re-applied to the executor
  });

  it('with hpa, applies the scaled placement to the executor before publishing it', async () => {
    const f = fakes();
    const loop = new PlacementLoop({ scenario: tiny, registry: f.registry, executor: f.executor, policy: 'hpa', start: initialPlacement(tiny), startFrame: 0, publishStart: true, frameMs: 60_000 });
    await loop.start();
    await loop.step();
    await loop.stop();
    const last = f.published[f.published.length - 1].d;
    expect(total(last, 0)).toBeGreaterThan(total(initialPlacement(tiny), 0));
    expect(f.applied[f.applied.length - 1]).toEqual(last);
  });
});
