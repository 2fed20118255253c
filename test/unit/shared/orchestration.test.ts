/**
 * One orchestration path (issue 16, item 1): the simulator and the live orchestrator run the same
 * policy objects on the same kind of view, so the same view gives the same orders; the old
 * divergence (the live HPA chose nodes by CPU share alone, with no health check) is gone.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { loadGpgOrchestration } from '../../../critic/gpg/load';
import { GpgNet } from '../../../critic/gpg/gnn';
import { gpgModelToJson } from '../../../critic/gpg/model';
import { tmpDir } from '../../support/tmp';
import { makeOrchestration } from '../../../training/baselines/registry';
import { PlacementLoop } from '../../../orchestrator/placement-loop';
import { NullExecutor } from '../../../orchestrator/executors';
import { EmulatedCluster } from '../../../orchestrator/emulated-cluster';
import { Cluster } from '../../../training/sim/cluster';
import type { Placement, ScaleOp } from '../../../shared/domain';
import { faultState, faultTransitions, validateFaults } from '../../../shared/faults';
import { ReportView, type ClusterReport } from '../../../shared/orchestration/executor';
import { initialPlacement, opsBetween, placementProblem, withOps } from '../../../shared/orchestration/placement';
import { EdgeCloudEnv } from '../../../training/sim/env';
import { WithHpaScaleIn } from '../../../shared/orchestration/scale-in';
import type { OrchestrationPolicy, OrchestrationView, ServiceWindowStats } from '../../../shared/policy';
import { loadScenario, validateScenario, type Scenario } from '../../../shared/scenario';

/** The policy object the simulator runs (kais eval's factory) and the one the orchestrator runs (its placement loop's). */
function bothPolicies(name: 'static' | 'hpa' | 'gsp-ss', s: Scenario): { sim: OrchestrationPolicy; live: OrchestrationPolicy } {
  const loop = new PlacementLoop({
    scenario: s,
    registry: { publishPlacement: () => undefined as never },
    executor: new NullExecutor(),
    policy: name,
    start: initialPlacement(s),
    startFrame: 0,
    publishStart: false,
    frameMs: 1000,
  });
  return { sim: makeOrchestration(name, s), live: loop.policy };
}

function windowOf(W: number, u: number[], arrivals: number, windowS: number, workCoreS = 1): ServiceWindowStats {
  return {
    windowS,
    arrivals: new Float64Array(W).fill(arrivals),
    busyReplicaS: Float64Array.from(u, (x) => x * windowS),
    readyReplicaS: new Float64Array(W).fill(windowS),
    completedInTime: new Float64Array(W).fill(arrivals),
    failed: new Float64Array(W),
    workCoreS: new Float64Array(W).fill(workCoreS),
  };
}

/** The simulator's view: its cluster with a window, as env.ts builds it. */
function simView(c: Cluster, win: ServiceWindowStats): OrchestrationView {
  return Object.create(c, { window: { get: () => win } }) as OrchestrationView;
}

/** The live view: the emulated cluster's report of the same state, with the same window. */
function liveView(s: Scenario, e: EmulatedCluster, win: ServiceWindowStats, nowS: number, healthy?: (t: number) => boolean): ReportView {
  const r: ClusterReport = e.report();
  r.nowS = nowS;
  r.window = windowOfReport(win);
  return new ReportView(s, r, healthy);
}

function windowOfReport(win: ServiceWindowStats): ClusterReport['window'] {
  return {
    windowS: win.windowS,
    arrivals: [...win.arrivals],
    busyReplicaS: [...win.busyReplicaS],
    readyReplicaS: [...win.readyReplicaS],
    completedInTime: [...win.completedInTime],
    failed: [...win.failed],
    workCoreS: [...win.workCoreS],
  };
}

function decideTwice(
  p: { sim: OrchestrationPolicy; live: OrchestrationPolicy },
  view: OrchestrationView,
): { sim: ScaleOp[]; live: ScaleOp[] } {
  p.sim.reset?.(1, view);
  p.live.reset?.(1, view);
  return { sim: p.sim.decide(view), live: p.live.decide(view) };
}

describe('one orchestration path', () => {
  it.each(['tiny', 'small', 'kais'])('%s: the simulator and the orchestrator start from the same initial placement', (name) => {
    const s = loadScenario(name);
    const e = new EmulatedCluster({ scenario: s });
    expect(new Cluster(s).placement()).toEqual(initialPlacement(s));
    expect(new ReportView(s, e.report()).replicas(0, 0)).toBe(initialPlacement(s)[0][0]);
    const d = initialPlacement(s);
    const v = new ReportView(s, e.report());
    expect(d.map((row, w) => row.map((_, n) => v.replicas(n, w)))).toEqual(d);
  });

  it.each(['hpa', 'gsp-ss', 'static'] as const)('%s: the same view gives the simulator and the orchestrator identical orders', (name) => {
    const s = loadScenario('kais');
    const W = s.services.length;
    // hot, idle and in-between services, so that hpa scales both ways and gsp-ss moves replicas
    const u = Array.from({ length: W }, (_, w) => [1, 0.95, 0.05, 0.7, 0.4][w % 5]);
    const win = windowOf(W, u, 40, 15, 30);
    const c = new Cluster(s);
    const e = new EmulatedCluster({ scenario: s });
    const sim = decideTwice(bothPolicies(name, s), simView(c, win));
    const live = decideTwice(bothPolicies(name, s), liveView(s, e, win, 0));
    expect(sim.live).toEqual(sim.sim);
    expect(live.live).toEqual(live.sim);
    // and the emulated cluster's report of the same state is, to the policies, the simulator's view
    expect(live.sim).toEqual(sim.sim);
    if (name !== 'static') expect(sim.sim.length).toBeGreaterThan(0);
  });

  // One eAP, three nodes: n0 has CPU to spare and little memory, n1 the reverse, n2 is empty (the
  // best node by any rule) but its device filter flags it. Service 0 is hot and needs one more replica.
  const divergence: Scenario = validateScenario(
    {
      ...JSON.parse(fs.readFileSync(require.resolve('../../../shared/scenarios/tiny.json'), 'utf8')),
      eaps: [
        {
          nodes: [
            { cpuCores: 8, memGB: 4 },
            { cpuCores: 4, memGB: 16 },
            { cpuCores: 16, memGB: 32 },
          ],
        },
      ],
      initialReplicasPerEap: 0,
    },
    'divergence',
  );
  // d[w][n]: n0 holds services 0, 1 and two of 2 (CPU share 2.5/8, 1.25 GB free); n1 two of 1 and
  // one of 3 (CPU share 3/4, 13.5 GB free). For one more replica of 0 (0.5 cores, 0.25 GB) the mean
  // of free CPU and memory ratios after it is 0.4375 on n0 and 0.477 on n1.
  const held: Placement = [
    [1, 0, 0],
    [1, 2, 0],
    [2, 0, 0],
    [0, 1, 0],
  ];
  /** The live HpaRule's old node choice: the lowest CPU share with memory for the replica, no health check. */
  function oldCpuShareChoice(s: Scenario, d: Placement, w: number): number {
    const nodes = s.eaps.flatMap((e) => e.nodes);
    let best = -1;
    let bestShare = Infinity;
    nodes.forEach((node, n) => {
      const mem = s.services.reduce((a, svc, v) => a + d[v][n] * svc.memGB, 0);
      const cpu = s.services.reduce((a, svc, v) => a + d[v][n] * svc.cpuCores, 0);
      if (node.memGB - mem < s.services[w].memGB - 1e-9) return;
      if (cpu / node.cpuCores < bestShare) {
        bestShare = cpu / node.cpuCores;
        best = n;
      }
    });
    return best;
  }

  it('places a new replica by the mean of free CPU and free memory and skips an unhealthy node, in both worlds (the old divergence)', () => {
    const s = divergence;
    const W = s.services.length;
    const e = new EmulatedCluster({ scenario: s });
    e.applyPlacement(held);
    const c = new Cluster(s);
    held.forEach((row, w) =>
      row.forEach((k, n) => {
        c.ready[n * W + w] += k;
        c.usedMem[n] += k * s.services[w].memGB;
      }),
    );
    c.healthyFlag[2] = 0;
    const win = windowOf(W, [1, 0.7, 0.7, 0.7], 10, 15);
    const sim = decideTwice(bothPolicies('hpa', s), simView(c, win));
    const live = decideTwice(
      bothPolicies('hpa', s),
      liveView(s, e, win, 0, (t) => t !== 2),
    );
    const expected: ScaleOp[] = [{ service: 0, node: 1, delta: 1 }];
    expect(sim.sim).toEqual(expected);
    expect(sim.live).toEqual(expected);
    expect(live.sim).toEqual(expected);
    expect(live.live).toEqual(expected);
    // the case does separate the two rules: by CPU share alone the replica would have gone to the
    // unhealthy n2, and without it to n0
    expect(oldCpuShareChoice(s, held, 0)).toBe(2);
    const noN2 = validateScenario({ ...s, eaps: [{ nodes: s.eaps[0].nodes.slice(0, 2) }] }, 'two nodes');
    expect(
      oldCpuShareChoice(
        noN2,
        held.map((r) => r.slice(0, 2)),
        0,
      ),
    ).toBe(0);
    // with n2 healthy both worlds pick it
    const healthy = decideTwice(bothPolicies('hpa', s), liveView(s, e, win, 0));
    expect(healthy.live).toEqual([{ service: 0, node: 2, delta: 1 }]);
  });

  it('the emulated cluster refuses what the simulator refuses: a replica on a failed node, past the maximum, without memory', async () => {
    const s = divergence;
    const e = new EmulatedCluster({ scenario: s });
    e.applyPlacement(held);
    e.setFault(2, 'failed');
    const rep = e.scale([
      { service: 3, node: 2, delta: 1 }, // failed node
      { service: 3, node: 0, delta: 1 }, // n0: 1.25 GB free, 0.5 needed: fits
      { service: 1, node: 0, delta: 1 }, // n0: 0.75 GB free now, 1 needed: no room
      { service: 2, node: 1, delta: -1 }, // nothing to remove
      { service: 0, node: 1, delta: 1 },
      { service: 0, node: 1, delta: 1 },
      { service: 0, node: 1, delta: 1 }, // the fourth replica of service 0: at the maximum (4)
      { service: 0, node: 1, delta: 1 },
    ]);
    expect(rep.executed).toEqual([
      { service: 3, node: 0, delta: 1 },
      { service: 0, node: 1, delta: 1 },
      { service: 0, node: 1, delta: 1 },
      { service: 0, node: 1, delta: 1 },
    ]);
    expect(rep.refused).toBe(4);
    await e.close(); // cancels the replicas still starting
  });

  it('a created replica reserves its memory at once and serves after the start-up time, as in the simulator; a removal cancels a starting one first', async () => {
    const s = { ...divergence, replicaStartupS: 5 };
    const e = new EmulatedCluster({ scenario: s, speed: 100 }); // 5 s of start-up = 50 ms
    e.applyPlacement(held);
    const t = e.targets[2];
    expect(e.scale([{ service: 0, node: 2, delta: 1 }]).executed).toHaveLength(1);
    let v = new ReportView(s, e.report());
    expect([v.replicas(2, 0), v.readyReplicas(2, 0), v.freeMemForReplicasGB(2)]).toEqual([1, 0, 32 - 0.25]);
    expect((await t.serve(0, 0.01)).body.reason).toBe('no replica of service 0');
    expect(await t.lastStart).toBe(true);
    v = new ReportView(s, e.report());
    expect([v.replicas(2, 0), v.readyReplicas(2, 0)]).toEqual([1, 1]);
    expect((await t.serve(0, 0.01)).status).toBe(200);
    // +1 then -1: the starting one is cancelled, the ready one stays
    e.scale([{ service: 0, node: 2, delta: 1 }]);
    const cancelled = t.lastStart;
    expect(e.scale([{ service: 0, node: 2, delta: -1 }]).executed).toHaveLength(1);
    expect(await cancelled).toBe(false);
    v = new ReportView(s, e.report());
    expect([v.replicas(2, 0), v.readyReplicas(2, 0)]).toEqual([1, 1]);
    await e.close();
  });

  it('opsBetween and withOps: the orders from one placement to another, deletions first', () => {
    const a: Placement = [
      [1, 0],
      [0, 2],
    ];
    const b: Placement = [
      [0, 1],
      [1, 2],
    ];
    const ops = opsBetween(a, b);
    expect(ops[0].delta).toBe(-1);
    expect(withOps(a, ops)).toEqual(b);
  });
});

describe('a placement given as the start (the weight gate replays on the live one)', () => {
  const tiny = loadScenario('tiny');
  it('placementProblem: the initial placement is one; a wrong shape, count, a service past its maximum or a node over its memory is not, said in a phrase', () => {
    const d = initialPlacement(tiny);
    const rows = 'd: must be 4 rows (one per service) of 3 non-negative integers (one per edge node)';
    expect(placementProblem(tiny, d)).toBeNull();
    expect(placementProblem(tiny, d.slice(1))).toBe(rows);
    expect(placementProblem(tiny, 'x')).toBe(rows);
    for (const row of [
      [0, 0],
      [0.5, 0, 0],
      [-1, 0, 0],
    ])
      expect(placementProblem(tiny, [row, ...d.slice(1)])).toBe('d[0]: must be 3 non-negative integers (one per edge node)');
    expect(placementProblem(tiny, [[5, 0, 0], ...d.slice(1)])).toBe('d[0]: 5 replicas of service 0, more than maxReplicasPerService (4)');
    // node 1 has 2 GB: three replicas of service 1 (1 GB each) do not fit
    const none = tiny.services.map(() => [0, 0, 0]);
    expect(
      placementProblem(
        tiny,
        none.map((r, w) => (w === 1 ? [0, 3, 0] : r)),
      ),
    ).toBe('d[*][1]: the replicas need 3 GB of memory, node 1 has 2 GB');
  });

  it('the simulator starts from it, every replica ready, at every reset; a placement it cannot hold is a TypeError', () => {
    const start: Placement = tiny.services.map((_, w) => (w === 1 ? [0, 0, 1] : [0, 0, 0]));
    const env = new EdgeCloudEnv(tiny, { requests: [], frames: 1, startPlacement: start });
    for (let k = 0; k < 2; k++) {
      env.reset({ seed: k });
      const held = tiny.services.map((_, w) => [0, 1, 2].map((n) => env.view.replicas(n, w)));
      const ready = tiny.services.map((_, w) => [0, 1, 2].map((n) => env.view.readyReplicas(n, w)));
      expect(held).toEqual(start);
      expect(ready).toEqual(start);
    }
    // without it: the initial placement
    const plain = new EdgeCloudEnv(tiny, { requests: [], frames: 1 });
    plain.reset({ seed: 0 });
    expect(tiny.services.map((_, w) => [0, 1, 2].map((n) => plain.view.replicas(n, w)))).toEqual(initialPlacement(tiny));
    expect(() => new EdgeCloudEnv(tiny, { requests: [], frames: 1, startPlacement: [[1]] })).toThrow(
      'EdgeCloudEnv: startPlacement: d: must be 4 rows (one per service) of 3 non-negative integers (one per edge node)',
    );
  });
});

describe('one fault model', () => {
  const faults = validateFaults(
    [
      { node: 1, startS: 100, durationS: 30 },
      { node: 2, startS: 50, durationS: 10, precursorS: 5 },
    ],
    3,
  );

  it('abnormal for the precursor, failed for the duration, then ok', () => {
    expect([79, 80, 99, 100, 129, 130].map((t) => faultState(faults, 1, t))).toEqual([
      'ok',
      'abnormal',
      'abnormal',
      'failed',
      'failed',
      'ok',
    ]);
    expect([44, 45, 50, 60].map((t) => faultState(faults, 2, t))).toEqual(['ok', 'abnormal', 'failed', 'ok']);
  });

  it('the real-time player (kais node) plays the same changes in time order', () => {
    expect(faultTransitions(faults)).toEqual([
      { atS: 45, node: 2, state: 'abnormal' },
      { atS: 50, node: 2, state: 'failed' },
      { atS: 60, node: 2, state: 'ok' },
      { atS: 80, node: 1, state: 'abnormal' },
      { atS: 100, node: 1, state: 'failed' },
      { atS: 130, node: 1, state: 'ok' },
    ]);
  });

  it('overlapping faults on one node play as faultState says: the worst that applies (a later, shorter fault cut an earlier one short)', () => {
    const overlap = [
      { node: 0, startS: 1, durationS: 20, precursorS: 0 },
      { node: 0, startS: 2, durationS: 1, precursorS: 0 },
      { node: 0, startS: 30, durationS: 5, precursorS: 10 }, // its precursor starts at 20, inside the first: abnormal from 21
    ];
    const played = faultTransitions(overlap);
    expect(played).toEqual([
      { atS: 1, node: 0, state: 'failed' },
      { atS: 21, node: 0, state: 'abnormal' },
      { atS: 30, node: 0, state: 'failed' },
      { atS: 35, node: 0, state: 'ok' },
    ]);
    // the player's state at every second is the simulator's
    const at = (t: number) => played.filter((x) => x.atS <= t).pop()?.state ?? 'ok';
    for (let t = 0; t <= 40; t += 0.5) expect([t, at(t)]).toEqual([t, faultState(overlap, 0, t)]);
  });

  it('rejects a fault naming a node that does not exist', () => {
    expect(() => validateFaults([{ node: 3, startS: 1, durationS: 1 }], 3)).toThrow(/needs a node in 0\.\.2/);
  });
});

describe("hpa's scale-in after another policy (WithHpaScaleIn)", () => {
  const s = loadScenario('kais');
  const W = s.services.length;
  /** A policy that gives these orders at its first decision, none after. */
  const fixed = (ops: ScaleOp[]): OrchestrationPolicy => {
    let calls = 0;
    return { name: 'fixed', periodS: 25, decide: () => (calls++ === 0 ? ops : []) };
  };
  /** The scale-in's orders at its first decision, on a fresh cluster and the window `win`. */
  const run = (o: ConstructorParameters<typeof WithHpaScaleIn>[1], win: ServiceWindowStats): ScaleOp[] => {
    const view = simView(new Cluster(s), win);
    const p = new WithHpaScaleIn(fixed([]), o);
    p.reset(1, view);
    return p.decide(view);
  };
  const replicasOn = (v: OrchestrationView, ops: readonly ScaleOp[], w: number, eap: number): number => {
    let c = 0;
    for (let n = 0; n < v.numNodes; n++) if (v.nodeEap(n) === eap) c += v.replicas(n, w);
    for (const o of ops) if (o.service === w && v.nodeEap(o.node) === eap) c += o.delta;
    return c;
  };

  it('after a policy that orders nothing, removes exactly what hpa would', () => {
    // every service cold: hpa only scales in
    const win = windowOf(
      W,
      Array.from({ length: W }, (_, w) => [0.05, 0.2, 0.3][w % 3]),
      40,
      25,
    );
    const view = simView(new Cluster(s), win);
    const hpa = makeOrchestration('hpa', s);
    hpa.reset?.(1, view);
    const want = hpa.decide(view);
    expect(want.length).toBeGreaterThan(0);
    expect(want.every((o) => o.delta === -1)).toBe(true);
    const p = new WithHpaScaleIn(fixed([]));
    p.reset(1, view);
    expect(p.decide(view)).toEqual(want);
    expect(p.name).toBe('fixed');
  });

  it("keeps the inner policy's orders first, adds nothing itself and never removes from a node the inner policy just added to", () => {
    // hot and cold services: hpa alone would add replicas of the hot ones
    const win = windowOf(
      W,
      Array.from({ length: W }, (_, w) => (w % 2 === 0 ? 0.05 : 1)),
      40,
      25,
    );
    const view = simView(new Cluster(s), win);
    const hpa = makeOrchestration('hpa', s);
    hpa.reset?.(1, view);
    expect(hpa.decide(view).some((o) => o.delta === 1)).toBe(true);
    // the inner policy adds a replica of cold service 0 on node 0 and one of hot service 1 on node 1
    const inner: ScaleOp[] = [
      { service: 0, node: 0, delta: 1 },
      { service: 1, node: 1, delta: 1 },
    ];
    const p = new WithHpaScaleIn(fixed(inner));
    p.reset(1, view);
    const ops = p.decide(view);
    expect(ops.slice(0, 2)).toEqual(inner);
    const removals = ops.slice(2);
    expect(removals.length).toBeGreaterThan(0);
    expect(removals.every((o) => o.delta === -1 && o.service % 2 === 0)).toBe(true);
    expect(removals.some((o) => o.service === 0)).toBe(true);
    expect(removals.some((o) => o.service === 0 && o.node === 0)).toBe(false);
  });

  it('GPG with a scale-in, as loaded from a model file, gives the simulator and the orchestrator identical orders, removals included', () => {
    const file = path.join(tmpDir('kais-scale-in-'), 'g.json');
    const net = new GpgNet(W, 3, { hidden: [16], headHidden: [32, 16], embed: 8 });
    fs.writeFileSync(
      file,
      gpgModelToJson(net, { scenario: 'kais', scaleIn: { rule: 'hpa', targetUtilisation: 0.5, maxFailedShare: 0.3 } }),
    );
    net.dispose();
    const win = windowOf(
      W,
      Array.from({ length: W }, (_, w) => [0.05, 0.95, 0.3][w % 3]),
      40,
      25,
      30,
    );
    // idle service 0 misses half its deadlines: the gate keeps its replicas in both views
    win.failed[0] = 20;
    const orders = (view: OrchestrationView): ScaleOp[] => {
      const p = loadGpgOrchestration(file, s, '--gpg');
      p.reset?.(1, view);
      const ops = p.decide(view);
      p.dispose();
      return ops;
    };
    const sim = orders(simView(new Cluster(s), win));
    expect(orders(liveView(s, new EmulatedCluster({ scenario: s }), win, 0))).toEqual(sim);
    // more removals than GPG alone could order (at most H nodes a decision): the scale-in ran
    expect(sim.filter((o) => o.delta === -1).length).toBeGreaterThan(s.scaleNodesPerFrame);
    // ... on the other idle services, not on the failing one
    expect(sim.some((o) => o.delta === -1 && o.service === 3)).toBe(true);
    expect(sim.some((o) => o.delta === -1 && o.service === 0)).toBe(false);
  });

  it('with keepPerEap it trims only above one replica per eAP, and removes nothing from the initial placement', () => {
    const win = windowOf(W, new Array<number>(W).fill(0.05), 40, 25);
    const view = simView(new Cluster(s), win);
    // the kais initial placement holds one replica of every service on every eAP
    const p = new WithHpaScaleIn(fixed([]), { keepPerEap: true });
    p.reset(1, view);
    expect(p.decide(view)).toEqual([]);
    // two more replicas of service 3 on eAP 0's nodes: those two go, the eAP's first one stays
    const eap0 = Array.from({ length: view.numNodes }, (_, n) => n).filter((n) => view.nodeEap(n) === 0);
    const inner: ScaleOp[] = [
      { service: 3, node: eap0[1], delta: 1 },
      { service: 3, node: eap0[2], delta: 1 },
    ];
    const q = new WithHpaScaleIn(fixed(inner), { keepPerEap: true });
    q.reset(1, view);
    const first = q.decide(view);
    expect(first.slice(0, 2)).toEqual(inner);
    // what it removes is service 3 on eAP 0, never on the nodes just given one, and every eAP keeps one
    const trimmed = first.slice(2);
    expect(trimmed.length).toBeGreaterThan(0);
    expect(
      trimmed.every((o) => o.delta === -1 && o.service === 3 && view.nodeEap(o.node) === 0 && !eap0.slice(1, 3).includes(o.node)),
    ).toBe(true);
    for (let e = 0; e < view.numEaps; e++) expect(replicasOn(view, first, 3, e)).toBeGreaterThanOrEqual(1);
    // the next decision sees both added replicas held: two go (the eAP keeps one), nothing of the other services
    const r = new EmulatedCluster({ scenario: s }).report();
    for (const o of inner) {
      r.ready[o.node * W + o.service] += 1;
      r.usedMemGB[o.node] += s.services[o.service].memGB;
    }
    r.window = windowOfReport(win);
    const held = new ReportView(s, r);
    expect(replicasOn(held, [], 3, 0)).toBe(3);
    const next = q.decide(held);
    expect(next.map((o) => o.delta)).toEqual([-1, -1]);
    expect(next.every((o) => o.service === 3 && held.nodeEap(o.node) === 0)).toBe(true);
    expect(replicasOn(held, next, 3, 0)).toBe(1);
    // without keepPerEap hpa's rule takes service 3 down to its minimum of one replica in the whole cluster
    const all = new WithHpaScaleIn(fixed([]));
    all.reset(1, held);
    const ops = all.decide(held).filter((o) => o.service === 3);
    expect(ops.length).toBe(6);
  });

  it('with light it scales in as the light options say in a window whose failed share over all services is below belowFailedShare, and as the others above it', () => {
    const light = { belowFailedShare: 0.3, targetUtilisation: 0.85, keepPerEap: false };
    // utilisation 0.45 everywhere: above 0.5 x (1 - 0.1) it is within hpa's tolerance at target 0.5, and well below 0.85
    const calm = windowOf(W, new Array<number>(W).fill(0.45), 40, 25);
    calm.failed.fill(8); // 20% of the requests fail: light
    const busy = windowOf(W, new Array<number>(W).fill(0.45), 40, 25);
    busy.failed.fill(16); // 40%: not light
    const base = { targetUtilisation: 0.5, keepPerEap: true };
    const lean = { targetUtilisation: 0.85, keepPerEap: false };
    expect(run({ ...base, light }, calm)).toEqual(run(lean, calm));
    expect(run({ ...base, light }, calm).length).toBeGreaterThan(0);
    expect(run({ ...base, light }, busy)).toEqual(run(base, busy));
    expect(run(base, busy)).toEqual([]);
    // the boundary: a failed share of exactly belowFailedShare is not light
    const edge = windowOf(W, new Array<number>(W).fill(0.45), 40, 25);
    edge.failed.fill(12);
    expect(run({ ...base, light }, edge)).toEqual(run(base, edge));
    // a window without arrivals is light (it was not: 0 < 0.3 x 0 is false), unless requests that arrived before it failed in it
    const quiet = windowOf(W, new Array<number>(W).fill(0.45), 0, 25);
    expect(run({ ...base, light }, quiet)).toEqual(run(lean, quiet));
    expect(run({ ...base, light }, quiet).length).toBeGreaterThan(0);
    quiet.failed[0] = 1;
    expect(run({ ...base, light }, quiet)).toEqual(run(base, quiet));
  });

  it('with light.maxFailedShare the per-service gate in a light window is that level, in any other window the gate of the options', () => {
    const light = { belowFailedShare: 0.3, targetUtilisation: 0.85, keepPerEap: false };
    const of = (ops: ScaleOp[], w: number) => ops.filter((o) => o.service === w);
    // light over all services (20% fail), but service 0 fails half its requests
    const calm = windowOf(W, new Array<number>(W).fill(0.45), 40, 25);
    calm.failed.fill(8);
    calm.failed[0] = 20;
    const base = { targetUtilisation: 0.5, keepPerEap: true, maxFailedShare: 0.3 };
    const lean = { targetUtilisation: 0.85, keepPerEap: false };
    // the gate of the options holds service 0 in the light window; the light level lets hpa's lean rule remove it as without a gate
    expect(of(run({ ...base, light }, calm), 0)).toEqual([]);
    const open = run({ ...base, light: { ...light, maxFailedShare: 1 } }, calm);
    expect(of(open, 0).length).toBeGreaterThan(0);
    expect(of(open, 0)).toEqual(of(run(lean, calm), 0));
    // every other service is below both levels: as many removals of each either way (from other
    // nodes, maybe: the removals of service 0 change which node is the most allocated)
    const count = (ops: ScaleOp[]) => Array.from({ length: W }, (_, w) => (w === 0 ? 0 : of(ops, w).length));
    expect(count(open)).toEqual(count(run({ ...base, light }, calm)));
    // a level between the service's share and the gate's: still gated
    expect(of(run({ ...base, light: { ...light, maxFailedShare: 0.4 } }, calm), 0)).toEqual([]);
    // a window that is not light keeps the gate of the options, whatever the light level
    const busy = windowOf(W, new Array<number>(W).fill(0.05), 40, 25);
    busy.failed.fill(16);
    busy.failed[1] = 4;
    const loose = { ...base, keepPerEap: false };
    const gated = run({ ...loose, light: { ...light, maxFailedShare: 1 } }, busy);
    expect(gated).toEqual(run({ ...loose, light }, busy));
    expect(gated.length).toBeGreaterThan(0);
    expect(gated.every((o) => o.service === 1)).toBe(true);
  });

  it('with light.switchActor it names the actor of the next frame: light before the first decision and after a light window, main after any other; without it none', () => {
    const light = { belowFailedShare: 0.3, targetUtilisation: 0.85, keepPerEap: false };
    const calm = windowOf(W, new Array<number>(W).fill(0.45), 40, 25);
    calm.failed.fill(8); // 20%: light
    const busy = windowOf(W, new Array<number>(W).fill(0.45), 40, 25);
    busy.failed.fill(16); // 40%: not light
    const c = new Cluster(s);
    const p = new WithHpaScaleIn(fixed([]), { targetUtilisation: 0.5, light: { ...light, switchActor: true } });
    p.reset(1, simView(c, calm));
    expect(p.actorFor()).toBe('light');
    const named: (string | undefined)[] = [];
    for (const win of [busy, busy, calm, busy]) {
      p.decide(simView(c, win));
      named.push(p.actorFor());
    }
    expect(named).toEqual(['main', 'main', 'light', 'main']);
    // reset starts light again; the switch changes no order of the scale-in
    p.reset(1, simView(c, busy));
    expect(p.actorFor()).toBe('light');
    const plain = new WithHpaScaleIn(fixed([]), { targetUtilisation: 0.5, light });
    plain.reset(1, simView(c, calm));
    expect(plain.actorFor()).toBeUndefined();
    expect(plain.decide(simView(c, calm))).toEqual(p.decide(simView(c, calm)));
    expect(plain.actorFor()).toBeUndefined();
  });

  it('with regret it puts back one replica of a service whose failed share rose past it after a removal that happened, and removes none of it for the stabilisation period', () => {
    const c = new Cluster(s);
    const idle = () => windowOf(W, new Array<number>(W).fill(0.05), 40, 25);
    const p = new WithHpaScaleIn(fixed([]), { regret: 0.05 });
    const at = (t: number, win: ServiceWindowStats) => {
      c.now = t;
      return simView(c, win);
    };
    const removedPer = (ops: ScaleOp[]): number[] => {
      const r = new Array<number>(W).fill(0);
      for (const o of ops) r[o.service] -= o.delta;
      return r;
    };
    // the executor: removals happen (a ready replica goes), additions are not needed here
    const carryOut = (ops: ScaleOp[]) => {
      for (const o of ops) if (o.delta < 0) c.ready[o.node * W + o.service]--;
    };
    const v0 = at(25, idle());
    p.reset(1, v0);
    const firstOps = p.decide(v0);
    const first = removedPer(firstOps);
    expect(first[0]).toBeGreaterThan(0); // every idle service loses replicas, 0 and 1 among them
    expect(first[1]).toBeGreaterThan(0);
    // the next window: service 0 fails 20% of its requests (it failed none before), service 1 4%
    const hurt = idle();
    hurt.failed[0] = 8;
    hurt.failed[1] = 1.6;
    // the same orders refused (the cluster unchanged): nothing was removed, so nothing goes back
    const refused = new WithHpaScaleIn(fixed([]), { regret: 0.05 });
    refused.reset(1, at(25, idle()));
    expect(refused.decide(at(25, idle()))).toEqual(firstOps);
    expect(refused.decide(at(50, hurt)).some((o) => o.delta > 0)).toBe(false);
    c.now = 25;
    carryOut(firstOps);
    const second = p.decide(at(50, hurt));
    expect(second.filter((o) => o.service === 0).map((o) => o.delta)).toEqual([1]); // one back
    expect(second.some((o) => o.service === 1 && o.delta > 0)).toBe(false); // 0.04 is within 0.05
    // for hpa's 300 s stabilisation nothing of service 0 is removed, idle or not; then it is again
    const during = removedPer(p.decide(at(325, idle())));
    expect(during[0]).toBe(0);
    const after = new WithHpaScaleIn(fixed([]), {});
    after.reset(1, at(25, idle()));
    expect(removedPer(p.decide(at(360, idle())))[0]).toBe(removedPer(after.decide(at(360, idle())))[0]);
    // 1 (the default) never puts anything back
    const never = new WithHpaScaleIn(fixed([]), { regret: 1 });
    never.reset(1, at(25, idle()));
    never.decide(at(25, idle()));
    expect(never.decide(at(50, hurt)).some((o) => o.delta > 0)).toBe(false);
  });

  it('with maxFailedShare it removes nothing of a service whose failed share over the window is above it, and the rest as before', () => {
    // every service idle, so hpa would take each down to one replica; services 0 and 1 miss deadlines
    const win = windowOf(W, new Array<number>(W).fill(0.05), 40, 25);
    win.failed[0] = 20; // half of its 40 arrivals
    win.failed[1] = 4; // a tenth
    const view = simView(new Cluster(s), win);
    const run = (maxFailedShare?: number): ScaleOp[] => {
      const p = new WithHpaScaleIn(fixed([]), maxFailedShare === undefined ? {} : { maxFailedShare });
      p.reset(1, view);
      return p.decide(view);
    };
    const services = (ops: ScaleOp[]): Set<number> => new Set(ops.map((o) => o.service));
    const ungated = run();
    expect(services(ungated).has(0) && services(ungated).has(1)).toBe(true);
    // 1 is no gate at all
    expect(run(1)).toEqual(ungated);
    // 0.2 spares service 0 only; 0.05 spares both; every other service loses as many replicas as
    // before (which node gives one up may change: the most allocated node is picked)
    const removedPer = (ops: ScaleOp[]): number[] => {
      const c = new Array<number>(W).fill(0);
      for (const o of ops) c[o.service] -= o.delta;
      return c;
    };
    const at02 = removedPer(run(0.2));
    const all = removedPer(ungated);
    expect(at02[0]).toBe(0);
    expect(at02.slice(1)).toEqual(all.slice(1));
    const at005 = removedPer(run(0.05));
    expect(at005.slice(0, 2)).toEqual([0, 0]);
    expect(at005.slice(2)).toEqual(all.slice(2));
    // a service whose failures outnumber its arrivals (arrived before the window, failed in it): 1 is
    // still no gate, a gate below 1 spares it
    const gone = windowOf(W, new Array<number>(W).fill(0.05), 40, 25);
    gone.arrivals[2] = 0;
    gone.failed[2] = 3;
    const goneView = simView(new Cluster(s), gone);
    const removedOf2 = (o: { maxFailedShare?: number }): number => {
      const p = new WithHpaScaleIn(fixed([]), o);
      p.reset(1, goneView);
      return removedPer(p.decide(goneView))[2];
    };
    expect(removedOf2({})).toBeGreaterThan(0);
    expect(removedOf2({ maxFailedShare: 1 })).toBe(removedOf2({}));
    expect(removedOf2({ maxFailedShare: 0.99 })).toBe(0);
  });
});
