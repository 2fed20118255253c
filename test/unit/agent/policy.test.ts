/**
 * The agent's dispatch policies (`kais agent --policy`): the Dispatcher decides with the
 * simulator's heuristics (shared/dispatch, what `kais eval --policies` runs), seeded as the
 * simulator seeds them, and ignores actor weights when a heuristic is chosen. The clock is fake,
 * so a decision and its check read the same instant.
 */
import { Dispatcher } from '../../../agent/dispatcher';
import { CmmacDispatch } from '../../../agent/actor-policy';
import { LocalClusterView } from '../../../agent/local-view';
import { buildMask } from '../../../agent/filters/context-filter';
import { agentPolicySeed, DISPATCH_HEURISTICS, LecDispatch, PerEapDispatch, makeHeuristicDispatch } from '../../../shared/dispatch';
import type { Request } from '../../../shared/domain';
import { actorShapes, initActorWeights } from '../../../shared/nets/actor';
import type { DispatchItem, DispatchPolicy } from '../../../shared/policy';
import { placementBody } from '../../../shared/protocol/envelope';
import { loadScenario } from '../../../shared/scenario';
import { observationDim } from '../../../shared/spaces';
import { DISPATCH_BASELINES, makeDispatch } from '../../../training/baselines/registry';

const small = loadScenario('small');
const EAP = 1;
const W = small.services.length;

beforeEach(() => jest.useFakeTimers({ now: 0 }));
afterEach(() => jest.useRealTimers());

/** eAP 1's view of `small` with replicas spread over the nodes and uneven outstanding requests. */
function loadedView(): LocalClusterView {
  const view = new LocalClusterView(small, EAP);
  const N = view.numNodes;
  const d = Array.from({ length: W }, (_, w) => Array.from({ length: N }, (_, n) => ((w + n) % 3 === 0 ? 2 : (w + n) % 3 === 1 ? 1 : 0)));
  view.applyPlacement(placementBody(1, 0, d));
  for (let t = 0; t < view.numTargets; t++) for (let w = 0; w < W; w++) for (let k = 0; k < (t * 7 + w * 3) % 5; k++) view.onSent(t, w);
  // some measured processing times and a node's load report, as answers bring them
  view.onDone(2, 0, 0.4, { cpu: 0.7, waiting: new Array<number>(W).fill(1), busy: new Array<number>(W).fill(1) });
  view.onDone(5, 1, 0.05, null);
  return view;
}

function agentDispatcher(view: LocalClusterView, policy: (typeof DISPATCH_HEURISTICS)[number] | 'cmmac', policySeed = 0): Dispatcher {
  const url = 'http://127.0.0.1:1'; // never contacted: choose() does not send
  return new Dispatcher({
    scenario: small,
    view,
    targets: { nodes: new Array<string>(view.numNodes).fill(url), cloud: url },
    policy,
    policySeed,
  });
}

function request(i: number, view: LocalClusterView): Request {
  const w = (i * 5) % W;
  return {
    id: i,
    service: w,
    eap: EAP,
    arrivalS: view.nowS(),
    deadlineS: view.nowS() + [0.05, 0.4, 2, 8][i % 4],
    workCoreS: 0.1,
    inputMB: [0.01, 0.5, 2][i % 3],
  };
}

/**
 * Runs `n` requests through the agent's dispatcher and through the simulator's policy on the same
 * view (each decision then counted as sent, so the queues move as they would): the two targets.
 */
function sideBySide(view: LocalClusterView, d: Dispatcher, sim: DispatchPolicy, n: number): { agent: number[]; sim: number[] } {
  const out = { agent: [] as number[], sim: [] as number[] };
  for (let i = 0; i < n; i++) {
    const req = request(i, view);
    const mask = new Uint8Array(view.numTargets);
    buildMask(view, req.service, small.queueCapPerReplica, mask);
    const item: DispatchItem = { request: req, eap: EAP, mask, action: -1 };
    const theirs = sim.decide(item, view);
    const ours = d.choose(req);
    expect(ours.mask).toEqual(mask);
    out.agent.push(ours.target);
    out.sim.push(theirs);
    view.onSent(ours.target, req.service);
    jest.advanceTimersByTime(3);
  }
  return out;
}

describe('kais agent --policy', () => {
  it('offers every dispatch heuristic of kais eval', () => {
    expect([...DISPATCH_HEURISTICS].sort()).toEqual([...DISPATCH_BASELINES].sort());
    expect(DISPATCH_HEURISTICS).toEqual(
      expect.arrayContaining(['lec', 'jsq', 'p2c', 'round-robin', 'greedy', 'random', 'prob', 'onsocmax']),
    );
  });

  it("with jsq, the dispatcher picks what the simulator's jsq picks on the same view", () => {
    const view = loadedView();
    const d = agentDispatcher(view, 'jsq');
    const sim = makeDispatch('jsq', small);
    sim.reset?.(0, view);
    const r = sideBySide(view, d, sim, 60);
    expect(r.agent).toEqual(r.sim);
    // not a trivial run: several targets, edge and cloud
    expect(new Set(r.agent).size).toBeGreaterThan(3);
    expect(d.policyName).toBe('jsq');
    expect(d.policyOption).toBe('jsq');
    expect(d.counters.decisionsFallback).toBe(60);
    // and it is jsq's choice, not the lec fallback's
    const view2 = loadedView();
    const lec = makeDispatch('lec', small);
    expect(sideBySide(view2, agentDispatcher(view2, 'jsq'), lec, 60).sim).not.toEqual(r.agent);
  });

  it.each(['lec', 'greedy', 'onsocmax', 'round-robin'] as const)('with %s, the dispatcher picks what the simulator picks', (policy) => {
    const view = loadedView();
    const d = agentDispatcher(view, policy);
    const sim = makeDispatch(policy, small);
    sim.reset?.(0, view);
    const r = sideBySide(view, d, sim, 40);
    expect(r.agent).toEqual(r.sim);
  });

  it.each(['random', 'p2c', 'prob'] as const)(
    'with %s, the agent of eAP 1 draws the stream the simulator draws after reset(agentPolicySeed(seed, 1))',
    (policy) => {
      const view = loadedView();
      const seed = agentPolicySeed(7, EAP);
      const d = agentDispatcher(view, policy, seed);
      const sim = makeDispatch(policy, small);
      sim.reset?.(seed, view);
      const r = sideBySide(view, d, sim, 40);
      expect(r.agent).toEqual(r.sim);
      expect(new Set(r.agent).size).toBeGreaterThan(1);
      // kais up's prediction holds one instance per eAP, seeded the same way
      const view2 = loadedView();
      const perEap = new PerEapDispatch(() => makeHeuristicDispatch(policy, small));
      perEap.reset(7, view2);
      const d2 = agentDispatcher(view2, policy, seed);
      expect(sideBySide(view2, d2, perEap, 40)).toEqual(r);
      // another eAP's seed gives another stream
      const view3 = loadedView();
      expect(sideBySide(view3, agentDispatcher(view3, policy, agentPolicySeed(7, 0)), sim, 40).agent).not.toEqual(r.agent);
    },
  );

  it('with a heuristic, actor weights are ignored; with cmmac they replace the lec fallback', () => {
    const view = loadedView();
    const shape = { numServices: W, numTargets: view.numTargets, numEaps: view.numEaps };
    const weights = {
      version: 3,
      checksum: 0,
      shapes: actorShapes(observationDim(shape), view.numTargets),
      tensors: initActorWeights(observationDim(shape), view.numTargets, 1),
    };
    const jsq = agentDispatcher(view, 'jsq');
    expect(jsq.setWeights(weights)).toBe(false);
    expect(jsq.weightVersion).toBeNull();
    expect(jsq.policyName).toBe('jsq');
    const cmmac = agentDispatcher(view, 'cmmac');
    expect(cmmac.policyName).toBe('lec');
    expect(cmmac.policyOption).toBe('cmmac');
    expect(cmmac.setWeights(weights)).toBe(true);
    expect(cmmac.policyName).toBe('cmmac');
    expect(cmmac.weightVersion).toBe(3);
  });

  it('with weights that hold a light actor, cmmac decides with it while the placement names it, counts those decisions and says which actor decides', () => {
    const view = loadedView();
    const shape = { numServices: W, numTargets: view.numTargets, numEaps: view.numEaps };
    const dim = observationDim(shape);
    const mainW = initActorWeights(dim, view.numTargets, 1);
    const lightW = initActorWeights(dim, view.numTargets, 2);
    const shapes = actorShapes(dim, view.numTargets);
    const d = agentDispatcher(view, 'cmmac');
    expect(d.actorInUse).toBeNull(); // lec decides until weights come
    d.setWeights({ version: 4, checksum: 0, shapes, tensors: mainW, light: { checksum: 0, shapes, tensors: lightW } });
    expect(d.holdsLightActor).toBe(true);
    const sim = (w: Float32Array[]) => new CmmacDispatch({ shape, queueCapPerReplica: small.queueCapPerReplica, weights: w });
    const N = view.numNodes;
    const spread = Array.from({ length: W }, (_, w) =>
      Array.from({ length: N }, (_, n) => ((w + n) % 3 === 0 ? 2 : (w + n) % 3 === 1 ? 1 : 0)),
    );
    // the loaded view's placement names no actor: the main one
    expect(d.actorInUse).toBe('main');
    let both = sideBySide(view, d, sim(mainW), 40);
    expect(both.agent).toEqual(both.sim);
    expect(d.counters.decisionsLight).toBe(0);
    view.applyPlacement({ ...placementBody(2, 1, spread), actor: 'light' });
    expect(d.actorInUse).toBe('light');
    both = sideBySide(view, d, sim(lightW), 40);
    expect(both.agent).toEqual(both.sim);
    expect(d.counters.decisionsLight).toBe(40);
    // the two actors choose differently on these requests, so the comparison above tells them apart
    const other = sideBySide(view, d, sim(mainW), 40);
    expect(other.agent).not.toEqual(other.sim);
    view.applyPlacement({ ...placementBody(3, 2, spread), actor: 'main' });
    expect(d.actorInUse).toBe('main');
    both = sideBySide(view, d, sim(mainW), 40);
    expect(both.agent).toEqual(both.sim);
    expect(d.counters.decisionsLight).toBe(80);
    // a light actor for another observation is refused whole (the main weights in use stay)
    expect(() =>
      d.setWeights({
        version: 5,
        checksum: 0,
        shapes,
        tensors: mainW,
        light: { checksum: 0, shapes: actorShapes(dim + 1, view.numTargets), tensors: initActorWeights(dim + 1, view.numTargets, 3) },
      }),
    ).toThrow(/^light actor weights do not fit: expected an MLP from \d+ inputs/);
    expect(d.weightVersion).toBe(4);
  });

  it('refuses an unknown policy', () => {
    expect(() => agentDispatcher(loadedView(), 'fastest' as never)).toThrow(/policy must be one of cmmac, random/);
  });
});

describe("lec (cmmac's fallback)", () => {
  it('prefers a node of its own eAP hosting the service over the cloud when both meet the deadline', () => {
    const v = new LocalClusterView(small, 0);
    const d = small.services.map(() => new Array<number>(v.numNodes).fill(0));
    d[0][1] = 1;
    v.applyPlacement(placementBody(1, 0, d));
    const mask = new Uint8Array(v.numTargets);
    buildMask(v, 0, small.queueCapPerReplica, mask);
    const item: DispatchItem = {
      request: { id: 0, service: 0, eap: 0, arrivalS: 0, deadlineS: v.nowS() + 10, workCoreS: 0.1, inputMB: 0.5 },
      eap: 0,
      mask,
      action: -1,
    };
    expect(new LecDispatch().decide(item, v)).toBe(1);
  });
});
