/**
 * GPG (issue 16 item 4): the graph's features and masks follow the executors' rules, the
 * learner's log-probability is the one the policy sampled from (checked against a brute-force
 * Plackett-Luce computation), REINFORCE with the time-aligned baseline makes a rewarded action
 * more likely (the demo's GPG could not learn), and the policy runs inside the simulator.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { defaultsOf } from '../../../../shared/config';
import { defaultGpgModelPath } from '../../../../shared/nets/actor-file';
import { loadGpgModel, loadGpgOrchestration } from '../../../../critic/gpg/load';
import { withoutActorSwitch } from '../../../../training/jobs/train-joint';
import { WithHpaScaleIn } from '../../../../shared/orchestration/scale-in';
import { EVAL_SPEC, runEval, type EvalArgs } from '../../../../training/jobs/eval';
import { Cluster } from '../../../../training/sim/cluster';
import { runEpisode } from '../../../../training/jobs/rollout';
import { makeDispatch } from '../../../../training/baselines/registry';
import { buildRequests } from '../../../../training/workload';
import { loadScenario } from '../../../../shared/scenario';
import type { OrchestrationView, ServiceWindowStats } from '../../../../shared/policy';
import {
  actionCount,
  actionFeatures,
  ACTION_FEATURES,
  EAP_FEATURES,
  graphSpecOf,
  graphState,
  nodeFeatureCount,
} from '../../../../critic/gpg/graph';
import { GpgNet } from '../../../../critic/gpg/gnn';
import { gpgModelFromJson, gpgModelToJson, updatesSeen } from '../../../../critic/gpg/model';
import { GpgOrchestration, type GpgDecision } from '../../../../critic/gpg/policy';
import { decisionLogProbs, discountedReturns, GpgLearner } from '../../../../critic/gpg/update';
import { encodeDecision, greedyOnTeacherNodes, teacherDecision, type ImitationRecord } from '../../../../critic/gpg/imitate';
import { tmpDir } from '../../../support/tmp';

const SMALL = { hidden: [16], headHidden: [32, 16], embed: 8 };

function emptyWindow(W: number, arrivals = 10): ServiceWindowStats {
  return {
    windowS: 25,
    arrivals: new Float64Array(W).fill(arrivals),
    busyReplicaS: new Float64Array(W).fill(5),
    readyReplicaS: new Float64Array(W).fill(25),
    completedInTime: new Float64Array(W).fill(arrivals),
    failed: new Float64Array(W).fill(1),
    workCoreS: new Float64Array(W).fill(1),
  };
}

/** The simulator's cluster as an OrchestrationView (as env.ts builds it). */
function viewOf(c: Cluster, win: ServiceWindowStats): OrchestrationView {
  return Object.create(c, { window: { get: () => win } }) as OrchestrationView;
}

describe('GPG graph', () => {
  it('has one row per node, eAP and cluster, and masks what the executor would refuse', () => {
    const s = loadScenario('small');
    const c = new Cluster(s);
    const v = viewOf(c, emptyWindow(s.services.length));
    const g = graphState(v);
    const N = v.numNodes;
    const W = v.numServices;
    const A = actionCount(W);
    expect(g.x.length).toBe(N * nodeFeatureCount(W));
    expect(g.eapX.length).toBe(v.numEaps * EAP_FEATURES);
    expect([...g.x, ...g.eapX, ...g.globalX].every(Number.isFinite)).toBe(true);
    const total = new Array<number>(W).fill(0);
    for (let n = 0; n < N; n++) for (let w = 0; w < W; w++) total[w] += v.replicas(n, w);
    for (let n = 0; n < N; n++) {
      expect(g.actionMask[n * A]).toBe(1); // the no-op is always valid
      for (let w = 0; w < W; w++) {
        const canAdd =
          v.freeMemForReplicasGB(n) >= v.serviceMemGB(w) - 1e-9 &&
          v.cpuCores(n) >= v.serviceCpuCores(w) - 1e-9 &&
          total[w] < v.maxReplicasPerService;
        expect(g.actionMask[n * A + 1 + w]).toBe(canAdd ? 1 : 0);
        expect(g.actionMask[n * A + 1 + W + w]).toBe(v.replicas(n, w) >= 1 && total[w] >= 2 ? 1 : 0);
      }
      const any = g.actionMask.subarray(n * A + 1, n * A + A).some((m) => m === 1);
      expect(g.nodeMask[n]).toBe(any ? 1 : 0);
    }
  });

  it("a service's last edge replica cannot be removed (hpa's minReplicas = 1)", () => {
    const s = loadScenario('tiny'); // one eAP, one initial replica per service
    const v = viewOf(new Cluster(s), emptyWindow(s.services.length));
    const g = graphState(v);
    const W = v.numServices;
    const A = actionCount(W);
    const total = Array.from({ length: W }, (_, w) =>
      Array.from({ length: v.numNodes }, (_, n) => v.replicas(n, w)).reduce((x, y) => x + y, 0),
    );
    const lone = total.findIndex((t) => t === 1);
    expect(lone).toBeGreaterThanOrEqual(0);
    const holder = Array.from({ length: v.numNodes }, (_, n) => n).find((n) => v.replicas(n, lone) === 1)!;
    expect(g.actionMask[holder * A + 1 + W + lone]).toBe(0);
  });

  it('a failed node takes no new replica', () => {
    const s = loadScenario('tiny');
    const c = new Cluster(s);
    const v = viewOf(c, emptyWindow(s.services.length));
    const sick = Object.create(v, { healthy: { value: (t: number) => t !== 0 } }) as OrchestrationView;
    const g = graphState(sick);
    const A = actionCount(v.numServices);
    for (let w = 0; w < v.numServices; w++) expect(g.actionMask[0 * A + 1 + w]).toBe(0);
    expect(g.x[2]).toBe(0); // healthy feature of node 0
  });

  it('action features name the action kind and carry its service figures', () => {
    const s = loadScenario('tiny');
    const g = graphState(viewOf(new Cluster(s), emptyWindow(s.services.length)));
    const W = g.spec.numServices;
    const phi = new Float32Array(actionCount(W) * ACTION_FEATURES);
    actionFeatures(g, 1, phi);
    expect([...phi.subarray(0, 3)]).toEqual([1, 0, 0]);
    expect([...phi.subarray(ACTION_FEATURES, ACTION_FEATURES + 3)]).toEqual([0, 1, 0]); // add service 0
    expect([...phi.subarray((1 + W) * ACTION_FEATURES, (1 + W) * ACTION_FEATURES + 3)]).toEqual([0, 0, 1]); // remove service 0
  });
});

describe('GPG policy and learner', () => {
  afterEach(() => tf.disposeVariables());

  function fixture(encoder: 'gnn' | 'stack' = 'gnn', scenario = 'small', failingService = -1) {
    const s = loadScenario(scenario);
    const win = emptyWindow(s.services.length);
    if (failingService >= 0) win.failed[failingService] = 8;
    const view = viewOf(new Cluster(s), win);
    const net = new GpgNet(s.services.length, 7, { ...SMALL, encoder });
    const decisions: GpgDecision[] = [];
    const policy = new GpgOrchestration(net, { periodS: 25, nodesPerDecision: 2, mode: 'sample', onDecision: (d) => decisions.push(d) });
    policy.reset(3, view);
    return { s, view, net, policy, decisions };
  }

  it('the learner recomputes the log-probability the policy sampled from (brute-force Plackett-Luce)', () => {
    const { view, net, policy, decisions } = fixture();
    for (let i = 0; i < 6; i++) policy.decide(view);
    const got = decisionLogProbs(net, decisions);
    for (let i = 0; i < decisions.length; i++) {
      const d = decisions[i];
      const g = d.state;
      const N = g.spec.numNodes;
      const A = actionCount(g.spec.numServices);
      const { nodeLogits, scale } = tf.tidy(() => {
        const emb = net.embed(
          g.spec,
          1,
          tf.tensor2d(g.x, [N, g.x.length / N]),
          tf.tensor2d(g.eapX, [g.spec.numEaps, EAP_FEATURES]),
          tf.tensor2d(g.globalX, [1, g.globalX.length]),
        );
        const phi = new Float32Array(d.nodes.length * A * ACTION_FEATURES);
        d.nodes.forEach((n, k) => actionFeatures(g, n, phi, k * A * ACTION_FEATURES));
        return {
          nodeLogits: Array.from(net.nodeLogits(emb, 1, N).dataSync()),
          scale: Array.from(
            net.scaleLogits(emb, tf.tensor1d(d.nodes, 'int32'), tf.tensor2d(phi, [d.nodes.length * A, ACTION_FEATURES]), A).dataSync(),
          ),
        };
      });
      let want = 0;
      const left = Array.from(g.nodeMask);
      d.nodes.forEach((n, k) => {
        expect(left[n]).toBe(1);
        const z = left.reduce((s, m, j) => s + (m ? Math.exp(nodeLogits[j]) : 0), 0);
        want += nodeLogits[n] - Math.log(z);
        left[n] = 0;
        const row = g.actionMask.subarray(n * A, n * A + A);
        expect(row[d.actions[k]]).toBe(1);
        const zs = Array.from(row).reduce((s, m, j) => s + (m ? Math.exp(scale[k * A + j]) : 0), 0);
        want += scale[k * A + d.actions[k]] - Math.log(zs);
      });
      expect(d.nodes.length).toBe(2);
      expect(got[i]).toBeCloseTo(want, 4);
    }
  });

  it('greedy decisions are deterministic; sampled ones follow the seed', () => {
    const { view, net } = fixture();
    const greedy = new GpgOrchestration(net, { periodS: 25, nodesPerDecision: 2, mode: 'greedy' });
    greedy.reset(1, view);
    expect(greedy.decide(view)).toEqual(greedy.decide(view));
    const run = (seed: number) => {
      const p = new GpgOrchestration(net, { periodS: 25, nodesPerDecision: 2, mode: 'sample' });
      p.reset(seed, view);
      return Array.from({ length: 5 }, () => p.decide(view));
    };
    expect(run(4)).toEqual(run(4));
  });

  it("perturb: greedy's nodes, and greedy's action on every one of them but at most one, drawn; seeded", () => {
    const { view, net } = fixture();
    const greedy = new GpgOrchestration(net, { periodS: 25, nodesPerDecision: 2, mode: 'greedy' });
    greedy.reset(1, view);
    const g = greedy.act(graphState(view, graphSpecOf(view)));
    let differs = 0;
    for (let seed = 1; seed <= 20; seed++) {
      const p = new GpgOrchestration(net, { periodS: 25, nodesPerDecision: 2, mode: 'perturb', sampleSalt: seed });
      p.reset(1, view);
      const d = p.act(graphState(view, graphSpecOf(view)));
      expect(d.nodes).toEqual(g.nodes);
      const changed = d.actions.filter((a, k) => a !== g.actions[k]).length;
      expect(changed).toBeLessThanOrEqual(1);
      differs += changed;
    }
    // near-uniform scale scores of a fresh net: the drawn action is mostly another one
    expect(differs).toBeGreaterThan(10);
    const once = (salt: number) => {
      const p = new GpgOrchestration(net, { periodS: 25, nodesPerDecision: 2, mode: 'perturb', sampleSalt: salt });
      p.reset(1, view);
      return p.decide(view);
    };
    expect(once(7)).toEqual(once(7));
  });

  it.each(['gnn', 'stack'] as const)('REINFORCE makes a rewarded action more likely (%s encoder)', (encoder) => {
    // service 0 fails 8 of its 10 arrivals, the others 1: reward 1 when a picked action adds a
    // replica of service 0 (the scale head sees services only through their figures, so this
    // is learnable exactly because service 0's figures differ), reachable on every node
    const { view, net, policy, decisions } = fixture(encoder, 'tiny', 0);
    const learner = new GpgLearner(net, { lr: 1e-2, entropyStart: 0.01, entropyFloor: 0.001 });
    const rewarded = (d: GpgDecision): number => (d.actions.some((a) => a === 1) ? 1 : 0);
    const rate = (): number => {
      decisions.length = 0;
      for (let i = 0; i < 200; i++) policy.decide(view);
      return decisions.reduce((s, d) => s + rewarded(d), 0) / decisions.length;
    };
    const before = rate();
    for (let u = 0; u < 20; u++) {
      const episodes = Array.from({ length: 8 }, () => {
        decisions.length = 0;
        policy.decide(view);
        policy.decide(view);
        return { decisions: decisions.slice(), rewards: decisions.map(rewarded) };
      });
      const st = learner.update(episodes);
      expect(Number.isFinite(st.loss)).toBe(true);
    }
    const after = rate();
    expect(before).toBeLessThan(0.5);
    expect(after).toBeGreaterThan(before + 0.3);
    learner.dispose();
  });

  it('imitation: a record round-trips the decision, and behaviour cloning makes greedy drop the order the teacher dropped', () => {
    // tiny: one eAP of three nodes, all three picked (H = 3); two of them look alike on a fresh cluster
    const { view, net } = fixture('gnn', 'tiny');
    const greedy = new GpgOrchestration(net, { periodS: 25, nodesPerDecision: 3, mode: 'greedy' });
    greedy.reset(1, view);
    let d: GpgDecision | null = null;
    const recorder = new GpgOrchestration(net, { periodS: 25, nodesPerDecision: 3, mode: 'greedy', onDecision: (x) => (d = x) });
    recorder.reset(1, view);
    const ops = recorder.decide(view);
    const g = d as unknown as GpgDecision;
    expect(ops).toHaveLength(3); // a fresh net's greedy orders on every picked node
    // the teacher drops the order of the node that looks like no other (a rule the net can learn) and keeps the others
    const F = g.state.x.length / g.state.spec.numNodes;
    const rows = g.nodes.map((n) => Array.from(g.state.x.subarray(n * F, n * F + F)).join());
    const h = rows.findIndex((r) => rows.filter((q) => q === r).length === 1);
    expect(h).toBeGreaterThanOrEqual(0);
    const rec = JSON.parse(
      JSON.stringify(
        encodeDecision(
          g,
          ops.filter((o) => o.node !== g.nodes[h]),
        ),
      ),
    ) as ImitationRecord;
    expect(rec.teacher).toEqual(g.actions.map((a, k) => (k === h ? 0 : a)));
    const t = teacherDecision(rec);
    expect(t.nodes).toEqual(g.nodes);
    expect(t.actions).toEqual(g.actions.map((a, k) => (k === h ? 0 : a)));
    expect(Array.from(t.state.x)).toEqual(Array.from(g.state.x));
    expect(Array.from(t.state.actionMask)).toEqual(Array.from(g.state.actionMask));
    expect(() => teacherDecision({ ...rec, teacher: [0] })).toThrow(/not an imitation record/);
    // an action the node's mask refuses is not a record either
    const A = actionCount(g.state.spec.numServices);
    const refused = Array.from(g.state.actionMask.subarray(g.nodes[0] * A, g.nodes[0] * A + A)).indexOf(0);
    if (refused > 0)
      expect(() => teacherDecision({ ...rec, teacher: rec.teacher.map((a, k) => (k === 0 ? refused : a)) })).toThrow(/each valid/);
    expect(() => encodeDecision(g, [{ service: 0, node: 99, delta: 1 }])).toThrow(/node 99 that GPG's masks refuse/);
    expect(() => encodeDecision(g, [ops[0], ops[0]])).toThrow(/two orders on one node/);
    const learner = new GpgLearner(net, { lr: 1e-2 });
    for (let i = 0; i < 60; i++) learner.imitate([t]);
    const after = greedy.act(t.state);
    expect(after.nodes).toEqual(g.nodes);
    expect(after.actions).toEqual(t.actions);
    expect(learner.imitate([t]).agreement).toBe(1);
    learner.dispose();
  });

  it("imitation: an order on a node greedy did not pick takes the place of greedy's last order, and cloning makes greedy give it", () => {
    // small at H = 2: the teacher keeps greedy's first order and, instead of its second, orders on another node
    const { view, net } = fixture('gnn', 'small');
    let d: GpgDecision | null = null;
    const recorder = new GpgOrchestration(net, { periodS: 25, nodesPerDecision: 2, mode: 'greedy', onDecision: (x) => (d = x) });
    recorder.reset(1, view);
    const ops = recorder.decide(view);
    const g = d as unknown as GpgDecision;
    expect(ops).toHaveLength(2);
    const W = g.state.spec.numServices;
    const A = actionCount(W);
    // another selectable node and an add GPG's masks allow there, not the one greedy gave on its first node
    const m = Array.from(g.state.nodeMask).findIndex((ok, n) => ok === 1 && !g.nodes.includes(n));
    expect(m).toBeGreaterThanOrEqual(0);
    let a = 1;
    while (!g.state.actionMask[m * A + a] || a === g.actions[0]) a++;
    expect(a).toBeLessThanOrEqual(W); // an add
    const order = { service: a - 1, node: m, delta: 1 as const };
    const rec = JSON.parse(JSON.stringify(encodeDecision(g, [ops.find((o) => o.node === g.nodes[0])!, order]))) as ImitationRecord;
    expect(rec.nodes).toEqual(g.nodes);
    expect(rec.teacherNodes).toEqual([g.nodes[0], m]);
    expect(rec.teacher).toEqual([g.actions[0], a]);
    expect(greedyOnTeacherNodes(rec)).toEqual([g.actions[0], 0]);
    // on a fresh cluster nodes of one kind look alike: give m a free-CPU figure no other node has, so the net can tell it
    // apart, and one at which greedy does not give the order already
    const F = g.state.x.length / g.state.spec.numNodes;
    const greedy = new GpgOrchestration(net, { periodS: 25, nodesPerDecision: 2, mode: 'greedy' });
    const gives = (x: GpgDecision) => x.nodes.includes(m) && x.actions[x.nodes.indexOf(m)] === a;
    const free = [0.123, 0.01, 0.5, 0.9].find((v) => ((rec.state.x[m * F] = v), !gives(greedy.act(teacherDecision(rec).state))));
    expect(free).toBeDefined();
    rec.state.x[m * F] = free!;
    const t = teacherDecision(rec);
    expect(t.nodes).toEqual([g.nodes[0], m]);
    expect(t.actions).toEqual([g.actions[0], a]);
    // a teacher node the node mask refuses, or one node twice, is not a record
    const closed = Array.from(g.state.nodeMask).indexOf(0);
    if (closed >= 0) expect(() => teacherDecision({ ...rec, teacherNodes: [g.nodes[0], closed] })).toThrow(/not an imitation record/);
    expect(() => teacherDecision({ ...rec, teacherNodes: [m, m] })).toThrow(/not an imitation record/);
    // three ordered nodes do not fit in two picks
    const m2 = Array.from(g.state.nodeMask).findIndex((ok, n) => ok === 1 && !g.nodes.includes(n) && n !== m);
    const a2 = Array.from(g.state.actionMask.subarray(m2 * A + 1, m2 * A + 1 + W)).indexOf(1) + 1;
    expect(() => encodeDecision(g, [...ops, { service: a2 - 1, node: m2, delta: 1 }])).toThrow(/more nodes than the decision picked/);
    expect(gives(greedy.act(t.state))).toBe(false);
    const learner = new GpgLearner(net, { lr: 1e-2 });
    for (let i = 0; i < 80; i++) learner.imitate([t]);
    expect(gives(greedy.act(t.state))).toBe(true);
    learner.dispose();
  });

  it('a single rollout uses a moving-average baseline, not its own return (advantage not always 0)', () => {
    const { net } = fixture();
    const learner = new GpgLearner(net);
    const d = {} as GpgDecision;
    const first = learner.advantages([{ decisions: [d, d], rewards: [1, 0] }]);
    expect(first[0]).toEqual([1, 0]); // no history yet: baseline 0
    const second = learner.advantages([{ decisions: [d, d], rewards: [0, 0] }]);
    expect(second[0][0]).toBeCloseTo(-1, 9); // baseline = the first rollout's return, 1
    const multi = learner.advantages([
      { decisions: [d], rewards: [1] },
      { decisions: [d], rewards: [0] },
    ]);
    expect(multi).toEqual([[0.5], [-0.5]]);
    expect(discountedReturns([1, 2, 3], 1)).toEqual([6, 5, 3]);
    learner.dispose();
  });

  it('runs as the orchestration policy of the simulator, and its orders reach the cluster', () => {
    const s = loadScenario('tiny');
    const net = new GpgNet(s.services.length, 1, SMALL);
    const decisions: GpgDecision[] = [];
    const frameS = s.slotS * s.slotsPerFrame;
    const policy = new GpgOrchestration(net, {
      periodS: frameS,
      nodesPerDecision: s.scaleNodesPerFrame,
      mode: 'sample',
      onDecision: (d) => decisions.push(d),
    });
    const frames = 4;
    const requests = buildRequests({ scenario: s, workload: 'p4', seed: 2, load: 1, durationS: frames * frameS });
    const r = runEpisode({ scenario: s, requests, frames, seed: 2, dispatch: makeDispatch('lec', s), orchestration: policy });
    expect(decisions.length).toBeGreaterThanOrEqual(frames - 1);
    const ordered = decisions.reduce((n, d) => n + d.actions.filter((a) => a > 0).length, 0);
    expect(ordered).toBeGreaterThan(0);
    // every order the policy gave either ran (schedulingCost) or was refused by the executor's rules; the masks make refusals rare
    expect(r.schedulingCost).toBeGreaterThan(0);
    expect(r.schedulingCost).toBeLessThanOrEqual(ordered);
  });
});

describe('GPG model file', () => {
  afterEach(() => tf.disposeVariables());
  it('round-trips the weights exactly and refuses what is not a model for this scenario', () => {
    const net = new GpgNet(4, 9, SMALL);
    const text = gpgModelToJson(net, { scenario: 'tiny' });
    const back = gpgModelFromJson(text, 4);
    expect(back.net.getWeights()).toEqual(net.getWeights());
    expect(back.meta.scenario).toBe('tiny');
    expect(() => gpgModelFromJson(text, 8)).toThrow(/made for 4 services, the scenario has 8/);
    expect(() => gpgModelFromJson('{', 4)).toThrow(/not JSON/);
    expect(() => gpgModelFromJson('{"format":"other"}', 4)).toThrow(/not a GPG model/);
    const cut = JSON.parse(text);
    cut.weights = cut.weights.slice(0, 40);
    expect(() => gpgModelFromJson(JSON.stringify(cut), 4)).toThrow(/weight bytes/);
  });

  it("carries its own action budget H (nodesPerFrame); without one the scenario's applies", () => {
    const net = new GpgNet(4, 9, SMALL);
    expect(gpgModelFromJson(gpgModelToJson(net, { scenario: 'tiny' }), 4).meta.nodesPerFrame).toBeUndefined();
    const text = gpgModelToJson(net, { scenario: 'tiny', nodesPerFrame: 3 });
    expect(gpgModelFromJson(text, 4).meta.nodesPerFrame).toBe(3);
    for (const bad of [0, 1.5, '2']) {
      const m = { ...JSON.parse(text), nodesPerFrame: bad };
      expect(() => gpgModelFromJson(JSON.stringify(m), 4)).toThrow(/^nodesPerFrame must be a whole number >= 1, got /);
    }
    // every entry point loads through loadGpgOrchestration: it decides on the model's H, and picks up to H nodes
    const tiny = loadScenario('tiny');
    const file = path.join(tmpDir('kais-gpg-h-'), 'h.json');
    const H = tiny.scaleNodesPerFrame + 1;
    fs.writeFileSync(file, gpgModelToJson(net, { scenario: 'tiny', nodesPerFrame: H }));
    const p = loadGpgOrchestration(file, tiny, '--gpg');
    expect(p.nodesPerDecision).toBe(H);
    expect(p).toBeInstanceOf(GpgOrchestration);
    const v = viewOf(new Cluster(tiny), emptyWindow(tiny.services.length));
    p.reset?.(1, v);
    expect((p as unknown as GpgOrchestration).act(graphState(v, graphSpecOf(v))).nodes.length).toBe(H);
    p.dispose();
    fs.writeFileSync(file, gpgModelToJson(net, { scenario: 'tiny' }));
    const q = loadGpgOrchestration(file, tiny, '--gpg');
    expect(q.nodesPerDecision).toBe(tiny.scaleNodesPerFrame);
    q.dispose();
    fs.writeFileSync(file, JSON.stringify({ ...JSON.parse(text), nodesPerFrame: 0 }));
    expect(() => loadGpgOrchestration(file, tiny, '--gpg')).toThrow(/^--gpg: .*h\.json: nodesPerFrame must be a whole number >= 1, got 0$/);
  });
  it("runs with hpa's scale-in when the model names one (scaleIn), in every entry point that loads it", () => {
    const net = new GpgNet(4, 9, SMALL);
    const text = gpgModelToJson(net, { scenario: 'tiny', scaleIn: { rule: 'hpa', targetUtilisation: 0.5, keepPerEap: true } });
    expect(gpgModelFromJson(text, 4).meta.scaleIn).toEqual({ rule: 'hpa', targetUtilisation: 0.5, keepPerEap: true });
    expect(gpgModelFromJson(gpgModelToJson(net, { scenario: 'tiny' }), 4).meta.scaleIn).toBeUndefined();
    const bad: [unknown, RegExp][] = [
      [{ rule: 'other', targetUtilisation: 0.5 }, /^scaleIn must be \{"rule": "hpa"/],
      [{ rule: 'hpa', targetUtilisation: 0 }, /^scaleIn.targetUtilisation must be a number in \(0, 1\], got 0$/],
      [{ rule: 'hpa', targetUtilisation: '0.5' }, /^scaleIn.targetUtilisation must be/],
      [{ rule: 'hpa', targetUtilisation: 0.5, keepPerEap: 1 }, /^scaleIn.keepPerEap must be true or false, got 1$/],
      [{ rule: 'hpa', targetUtilisation: 0.5, maxFailedShare: 1.5 }, /^scaleIn.maxFailedShare must be a number in \[0, 1\], got 1.5$/],
      [{ rule: 'hpa', targetUtilisation: 0.5, maxFailedShare: null }, /^scaleIn.maxFailedShare must be a number in \[0, 1\], got null$/],
      [{ rule: 'hpa', targetUtilisation: 0.5, regret: -0.1 }, /^scaleIn.regret must be a number in \[0, 1\], got -0.1$/],
      [
        { rule: 'hpa', targetUtilisation: 0.5, light: { belowFailedShare: 0.3, targetUtilisation: 0.85 } },
        /^scaleIn.light must be \{"belowFailedShare"/,
      ],
      [
        { rule: 'hpa', targetUtilisation: 0.5, light: { belowFailedShare: 2, targetUtilisation: 0.85, keepPerEap: false } },
        /^scaleIn.light must be/,
      ],
      [
        {
          rule: 'hpa',
          targetUtilisation: 0.5,
          light: { belowFailedShare: 0.3, targetUtilisation: 0.85, keepPerEap: false, maxFailedShare: 1.2 },
        },
        /^scaleIn.light must be \{.*"maxFailedShare"\?: <0..1>.*got .*"maxFailedShare":1.2/,
      ],
    ];
    for (const [scaleIn, msg] of bad) expect(() => gpgModelFromJson(JSON.stringify({ ...JSON.parse(text), scaleIn }), 4)).toThrow(msg);
    const tiny = loadScenario('tiny');
    const file = path.join(tmpDir('kais-gpg-scale-in-'), 's.json');
    fs.writeFileSync(file, text);
    const p = loadGpgOrchestration(file, tiny, '--gpg');
    expect(p).toBeInstanceOf(WithHpaScaleIn);
    expect(p.name).toBe('gpg');
    expect((p as WithHpaScaleIn).inner).toBeInstanceOf(GpgOrchestration);
    expect((p as WithHpaScaleIn).options).toEqual({ targetUtilisation: 0.5, keepPerEap: true, maxFailedShare: 1 });
    expect(p.summary).toBe(
      `gpg ${file}: ${tiny.scaleNodesPerFrame} nodes a decision, then hpa's scale-in (target utilisation 0.5, one replica kept per service and eAP)`,
    );
    p.dispose();
    // maxFailedShare is carried through the file into the wrapper
    const gated = { rule: 'hpa', targetUtilisation: 0.5, maxFailedShare: 0.2 } as const;
    fs.writeFileSync(file, gpgModelToJson(net, { scenario: 'tiny', scaleIn: gated }));
    expect(gpgModelFromJson(fs.readFileSync(file, 'utf8'), 4).meta.scaleIn).toEqual(gated);
    const g = loadGpgOrchestration(file, tiny, '--gpg');
    expect((g as WithHpaScaleIn).options).toEqual({ targetUtilisation: 0.5, keepPerEap: false, maxFailedShare: 0.2 });
    expect(g.summary).toMatch(/then hpa's scale-in \(target utilisation 0\.5, no removal above a failed share of 0\.2\)$/);
    g.dispose();
    // and regret and light (session 41's lean-when-light variant)
    const lean = { ...gated, regret: 0.1, light: { belowFailedShare: 0.3, targetUtilisation: 0.85, keepPerEap: false } };
    fs.writeFileSync(file, gpgModelToJson(net, { scenario: 'tiny', scaleIn: lean }));
    expect(gpgModelFromJson(fs.readFileSync(file, 'utf8'), 4).meta.scaleIn).toEqual(lean);
    const l = loadGpgOrchestration(file, tiny, '--gpg');
    expect((l as WithHpaScaleIn).options).toEqual({
      targetUtilisation: 0.5,
      keepPerEap: false,
      maxFailedShare: 0.2,
      regret: 0.1,
      light: lean.light,
    });
    expect(l.summary).toMatch(
      /a removal undone when the failed share rises by 0\.1, below a failed share of 0\.3: target 0\.85, none kept per eAP\)$/,
    );
    l.dispose();
    // the light window's own gate level (session 46)
    const open = { ...lean, light: { ...lean.light, maxFailedShare: 1 } };
    fs.writeFileSync(file, gpgModelToJson(net, { scenario: 'tiny', scaleIn: open }));
    expect(gpgModelFromJson(fs.readFileSync(file, 'utf8'), 4).meta.scaleIn).toEqual(open);
    const o = loadGpgOrchestration(file, tiny, '--gpg');
    expect((o as WithHpaScaleIn).options.light).toEqual(open.light);
    expect(o.summary).toMatch(/below a failed share of 0\.3: target 0\.85, none kept per eAP, no removal above a failed share of 1\)$/);
    o.dispose();
    fs.writeFileSync(file, JSON.stringify({ ...JSON.parse(text), scaleIn: { rule: 'hpa' } }));
    expect(() => loadGpgOrchestration(file, tiny, '--gpg')).toThrow(
      /^--gpg: .*s\.json: scaleIn.targetUtilisation must be a number in \(0, 1\], got undefined$/,
    );
  });
});

describe('GPG fine-tuning (scripts/train-gpg.ts INIT)', () => {
  it("continues from every update the model has seen, its init's included", () => {
    expect(updatesSeen({ scenario: 'kais' })).toBe(0);
    expect(updatesSeen({ scenario: 'kais', trainedWith: { updates: 100 } })).toBe(100);
    // the shipped default: behaviour cloning (0 updates, session 19) on top of a 24-update fine-tune of kais-gpg-lec.json's 100
    const shipped = JSON.parse(fs.readFileSync(defaultGpgModelPath(loadScenario('kais'))!, 'utf8'));
    expect(updatesSeen(shipped)).toBe(124);
    // a fine-tune of it records 124 as initUpdates, so the chain adds up
    expect(updatesSeen({ scenario: 'kais', trainedWith: { updates: 45, initUpdates: updatesSeen(shipped) } })).toBe(169);
    expect(updatesSeen({ scenario: 'kais', trainedWith: { updates: 'x', initUpdates: -3 } })).toBe(0);
  });
});

describe('the GPG models the project ships', () => {
  afterEach(() => tf.disposeVariables());
  it('gpg without a model runs models/<scenario>-gpg.json, which fits its scenario; the others say which source failed', () => {
    const kais = loadScenario('kais');
    const file = defaultGpgModelPath(kais);
    expect(file).not.toBeNull();
    expect(path.basename(file!)).toBe('kais-gpg.json');
    const p = loadGpgOrchestration(file!, kais, 'the shipped GPG model');
    expect(p.periodS).toBe(kais.slotS * kais.slotsPerFrame);
    p.dispose();
    expect(defaultGpgModelPath(loadScenario('tiny'))).toBeNull();
    expect(() => loadGpgOrchestration('/nonexistent/m.json', kais, '--gpg')).toThrow(/^--gpg: cannot read \/nonexistent\/m\.json/);
    const forSmall = path.join(path.dirname(file!), 'small-gpg-lec.json');
    expect(() => loadGpgOrchestration(forSmall, kais, 'field "gpgModel"')).toThrow(
      /^field "gpgModel": .*small-gpg-lec\.json: made for 8 services, the scenario has 30$/,
    );
  });

  it("the shipped kais model runs hpa's scale-in, leaner in light windows, with the actor switch and its own light gate; kais-gpg-switch.json (the default of sessions 44-46), kais-gpg-gate.json (before session 44), kais-gpg-scale-in.json and kais-gpg-lean.json differ from it in the scale-in only; kais-gpg-lightgate.json (session 46's opt-in) is it", () => {
    const kais = loadScenario('kais');
    const dir = path.dirname(defaultGpgModelPath(kais)!);
    const read = (f: string): Record<string, unknown> => JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8')) as Record<string, unknown>;
    const { scaleIn: shipped, ...base } = read('kais-gpg.json');
    const { scaleIn: gate, ...gateRest } = read('kais-gpg-gate.json');
    const { scaleIn: optIn, ...rest } = read('kais-gpg-scale-in.json');
    const { scaleIn: lean, ...leanRest } = read('kais-gpg-lean.json');
    const { scaleIn: sw, ...switchRest } = read('kais-gpg-switch.json');
    expect(rest).toEqual(base);
    expect(gateRest).toEqual(base);
    expect(leanRest).toEqual(base);
    expect(switchRest).toEqual(base);
    // session 46's opt-in, the default since session 47: the same file under its old name
    expect(read('kais-gpg-lightgate.json')).toEqual(read('kais-gpg.json'));
    expect(gate).toEqual({ rule: 'hpa', targetUtilisation: 0.5, keepPerEap: true, maxFailedShare: 0.3 });
    expect(optIn).toEqual({ rule: 'hpa', targetUtilisation: 0.5, keepPerEap: true });
    // session 41's lean pair (with models/kais-cmmac-drawn.bin; docs/gpg.md): the gate's scale-in, leaner while the failed share is below 0.3, with regret
    expect(lean).toEqual({ ...gate, regret: 0.1, light: { belowFailedShare: 0.3, targetUtilisation: 0.85, keepPerEap: false } });
    // session 44's default: the lean scale-in with the actor switch (the lean pair's actor E in the frames after light windows)
    expect(sw).toEqual({
      ...gate,
      regret: 0.1,
      light: { belowFailedShare: 0.3, targetUtilisation: 0.85, keepPerEap: false, actor: 'kais-cmmac-drawn.bin' },
    });
    // session 47's default (window b at 1x by the replica route; docs/gpg.md): session 44's with the per-service gate at 0.6 in light windows
    expect(shipped).toEqual({ ...(sw as object), light: { ...(sw as { light: object }).light, maxFailedShare: 0.6 } });
    for (const f of ['kais-gpg.json', 'kais-gpg-switch.json', 'kais-gpg-gate.json', 'kais-gpg-scale-in.json', 'kais-gpg-lean.json']) {
      const p = loadGpgOrchestration(path.join(dir, f), kais, '--gpg');
      expect(p).toBeInstanceOf(WithHpaScaleIn);
      const switches = f === 'kais-gpg.json' || f === 'kais-gpg-switch.json';
      expect(p.lightActor).toBe(switches ? path.join(dir, 'kais-cmmac-drawn.bin') : null);
      expect(p.actorFor?.()).toBe(switches ? 'light' : undefined);
      p.dispose();
    }
  });

  it('a model trained from the shipped one (--gpg-init) carries its scale-in without the actor switch (its light actor is a file beside the init model)', () => {
    const kais = loadScenario('kais');
    const m = loadGpgModel(defaultGpgModelPath(kais)!, kais, '--gpg-init');
    expect(m.meta.scaleIn!.light!.actor).toBe('kais-cmmac-drawn.bin');
    const { actor: _a, ...light } = m.meta.scaleIn!.light!;
    expect(withoutActorSwitch(m.meta.scaleIn!)).toEqual({ ...m.meta.scaleIn, light });
    const plain = { rule: 'hpa', targetUtilisation: 0.5 } as const;
    expect(withoutActorSwitch(plain)).toBe(plain);
    m.net.dispose();
  });

  it('a light actor is a file name in the model folder: a path, another extension or a missing file is refused in one line', () => {
    const kais = loadScenario('kais');
    const dir = path.dirname(defaultGpgModelPath(kais)!);
    const m = JSON.parse(fs.readFileSync(path.join(dir, 'kais-gpg.json'), 'utf8')) as { scaleIn: { light: { actor: unknown } } };
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kais-light-'));
    try {
      for (const [actor, problem] of [
        [
          '../kais-cmmac.bin',
          /scaleIn\.light\.actor must be the file name of an actor \(\.bin\) in the model's folder, got "\.\.\/kais-cmmac\.bin"/,
        ],
        ['/etc/passwd', /scaleIn\.light\.actor must be the file name/],
        ['actor.json', /scaleIn\.light\.actor must be the file name/],
        [7, /scaleIn\.light\.actor must be the file name/],
        ['absent.bin', /^--gpg: .*m\.json: its light actor .*absent\.bin does not exist$/],
      ] as const) {
        m.scaleIn.light.actor = actor;
        fs.writeFileSync(path.join(tmp, 'm.json'), JSON.stringify(m));
        expect(() => loadGpgOrchestration(path.join(tmp, 'm.json'), kais, '--gpg')).toThrow(problem);
      }
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  });

  it('kais eval runs the shipped model for x/gpg when --gpg is left out: the same numbers as naming it', () => {
    const kais = loadScenario('kais');
    const args = { ...defaultsOf(EVAL_SPEC), scenario: 'kais', policies: 'lec/gpg', frames: 1, seed: 3, oracleMaxRequests: 0 } as EvalArgs;
    const implicit = runEval(args).results;
    const named = runEval({ ...args, gpg: defaultGpgModelPath(kais)! }).results;
    expect(implicit.map((r) => r.policy)).toEqual(['lec/gpg']);
    expect(implicit).toEqual(named);
    expect(() => runEval({ ...args, scenario: 'tiny' })).toThrow(
      /^--policies: gpg needs --gpg <model\.json>: no GPG model ships for scenario "tiny"/,
    );
  });
});
