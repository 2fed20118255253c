/**
 * How much a search over GPG's own orders could add: the bound a teacher for GPG would give
 * (docs/gpg.md, "Vine rollouts", next step). At every decision, the greedy GPG's orders and each
 * variant that drops one of them (and the empty set) are tried by simulation: the episode is
 * replayed from the start with the orders chosen so far (the simulator is deterministic per seed),
 * the candidate is applied, greedy GPG continues, and the candidate's score is the throughput of
 * the HORIZON frames after it. The best candidate (ties: greedy's) is kept. The kept orders are then
 * replayed as one episode, beside greedy GPG and DISPATCH/hpa on the same requests. The search is
 * over GPG's orders alone: a model's scale-in (its `scaleIn` field, as the shipped kais model has since
 * session 30) is not run here.
 *
 *   npm run build && SCENARIO=kais DISPATCH=lec SEEDS=951,952,953 FRAMES=10 HORIZON=2 LOAD=1 \
 *     GPG=models/kais-gpg.json node dist/scripts/gpg-lookahead.js
 *
 * An evaluation tool with hindsight of the seed's arrivals (it replays them per candidate): a bound on
 * what imitating such a search could give, not a policy that could run live.
 *
 * FUTURES=M takes the hindsight away: each candidate is scored on M other futures, the seed's arrivals
 * up to the decision followed by those of M other seeds after it (the simulator is deterministic, so
 * the state at the decision is the same), and the best mean wins. That is a search a planner without
 * the future could run (model-predictive control with sampled futures); the kept orders are then
 * replayed on the seed's own arrivals.
 *
 * CANDIDATES=swaps adds, for each picked node, greedy's decision with that node's next-best action
 * (by the scale head) in place of its own. CANDIDATES=hpa adds orders greedy GPG would not give on
 * nodes it did not pick: those of the hpa rule at the decision (its replica targets from the frame's
 * window, no stabilisation; removals first, at most 4), each in place of greedy's last
 * picked node without an order (else of its last order), so the candidate stays within H nodes.
 * CANDIDATES=swaps,hpa tries both.
 *
 * TRACE=file.csv replays an Alibaba trace window (as kais eval --trace) instead of P4.
 *
 * DATA_OUT=file.jsonl writes the search's choices for imitation (scripts/gpg-imitate.ts): one line
 * per decision with greedy GPG's graph state, its picked nodes and actions, and the search's action on
 * each (`teacher`, 0 where it dropped the order), beside the candidates' scores.
 */
import * as fs from 'fs';
import { loadGpgModel } from '../critic/gpg/load';
import { modelNodesPerFrame } from '../critic/gpg/model';
import { GpgOrchestration, type GpgDecision } from '../critic/gpg/policy';
import { encodeDecision } from '../critic/gpg/imitate';
import { actionCount, actionOp, opAction } from '../critic/gpg/graph';
import type { Request, ScaleOp } from '../shared/domain';
import type { OrchestrationPolicy, OrchestrationView } from '../shared/policy';
import { UsageError } from '../shared/errors';
import { round } from '../shared/round';
import { loadScenario } from '../shared/scenario';
import { loadBackend } from '../shared/tf-backend';
import { HpaOrchestration } from '../shared/orchestration/hpa';
import { makeDispatch, makeOrchestration } from '../training/baselines/registry';
import { runEpisode } from '../training/jobs/rollout';
import type { FrameStats } from '../training/sim/env';
import { buildRequests } from '../training/workload';

const env = (k: string, d: string): string => process.env[k] ?? d;

/** Decisions before `chosen.length` replay `chosen`; the next one is `at` (or greedy's, recorded); greedy after. */
class Scripted implements OrchestrationPolicy {
  readonly name = 'gpg-lookahead';
  readonly periodS: number;
  private k = 0;
  /** The greedy orders of the decision at chosen.length, when `at` is null. */
  greedyThere: ScaleOp[] = [];
  /** Greedy GPG's decision (graph, nodes, actions) at chosen.length. */
  decisionThere: GpgDecision | null = null;
  /** The hpa rule's orders at chosen.length (a fresh rule on the frame's window: no stabilisation history). */
  hpaThere: ScaleOp[] = [];
  private last: GpgDecision | null = null;
  private readonly greedy: OrchestrationPolicy;

  constructor(
    makeGreedy: (onDecision: (d: GpgDecision) => void) => OrchestrationPolicy,
    private readonly chosen: readonly ScaleOp[][],
    private readonly at: ScaleOp[] | null,
  ) {
    this.greedy = makeGreedy((d) => (this.last = d));
    this.periodS = this.greedy.periodS;
  }

  reset(seed: number, view: OrchestrationView): void {
    this.k = 0;
    this.greedy.reset?.(seed, view);
  }

  decide(view: OrchestrationView): ScaleOp[] {
    const k = this.k++;
    // greedy decides at every step (its own state, if any, stays in step with the episode)
    const g = this.greedy.decide(view);
    if (k < this.chosen.length) return this.chosen[k];
    if (k === this.chosen.length) {
      this.greedyThere = g;
      this.decisionThere = this.last;
      const hpa = new HpaOrchestration();
      hpa.reset(0, view);
      this.hpaThere = hpa.decide(view);
      return this.at ?? g;
    }
    return g;
  }
}

/**
 * The decisions that differ from greedy's `d` on one picked node: the next-best valid action there by the
 * scale head's scores (a no-op already tried as a drop is skipped), as orders.
 */
function nextBest(d: GpgDecision): ScaleOp[][] {
  const W = d.state.spec.numServices;
  const A = actionCount(W);
  const out: ScaleOp[][] = [];
  const scores = d.scaleScores;
  if (!scores) return out;
  d.nodes.forEach((n, h) => {
    const mask = d.state.actionMask.subarray(n * A, n * A + A);
    let alt = -1;
    for (let a = 0; a < A; a++) if (mask[a] && a !== d.actions[h] && (alt < 0 || scores[h * A + a] > scores[h * A + alt])) alt = a;
    if (alt <= 0) return; // none, or the no-op (a drop, tried already)
    const actions = d.actions.map((a, k) => (k === h ? alt : a));
    out.push(d.nodes.flatMap((m, k) => actionOp(actions[k], m, W) ?? []));
  });
  return out;
}

/**
 * Greedy's orders with one of hpa's orders on a node greedy did not pick, each in place of greedy's
 * last picked node without an order (else of its last order): at most `max` candidates, removals first,
 * one order a node, only orders GPG's masks allow (critic/gpg/imitate.ts encodeDecision reads them back the same way).
 */
function hpaSubstitutions(d: GpgDecision, greedyOps: readonly ScaleOp[], hpaOps: readonly ScaleOp[], max: number): ScaleOp[][] {
  const W = d.state.spec.numServices;
  const A = actionCount(W);
  const seen = new Set<number>(d.nodes);
  const picks: ScaleOp[] = [];
  for (const o of [...hpaOps.filter((x) => x.delta < 0), ...hpaOps.filter((x) => x.delta > 0)]) {
    if (seen.has(o.node) || picks.length >= max) continue;
    const a = opAction(o, W);
    if (!d.state.nodeMask[o.node] || !d.state.actionMask[o.node * A + a]) continue;
    seen.add(o.node);
    picks.push(o);
  }
  const idle = d.actions.lastIndexOf(0);
  const base = idle >= 0 ? [...greedyOps] : greedyOps.filter((o) => o.node !== d.nodes[d.nodes.length - 1]);
  return picks.map((o) => [...base, o]);
}

/** The requests of `own` before `atS`, then those of `other` from `atS` on, numbered again in arrival order. */
function splice(own: readonly Request[], other: readonly Request[], atS: number): Request[] {
  const out = [...own.filter((r) => r.arrivalS < atS), ...other.filter((r) => r.arrivalS >= atS)];
  return out.map((r, id) => ({ ...r, id }));
}

async function main(): Promise<void> {
  await loadBackend();
  const scenario = loadScenario(env('SCENARIO', 'kais'));
  const frameS = scenario.slotS * scenario.slotsPerFrame;
  const dispatch = env('DISPATCH', 'lec');
  const seeds = env('SEEDS', '951,952,953').split(',').map(Number);
  const frames = Number(env('FRAMES', '10'));
  const horizon = Number(env('HORIZON', '2'));
  const load = Number(env('LOAD', '1'));
  const gpgFile = env('GPG', 'models/kais-gpg.json');
  const dataOut = process.env.DATA_OUT;
  const candidateSet = env('CANDIDATES', 'drops').split(',');
  if (candidateSet.some((c) => !['drops', 'swaps', 'hpa'].includes(c))) {
    process.stderr.write(`gpg-lookahead: CANDIDATES must list drops, swaps or hpa, got ${process.env.CANDIDATES}\n`);
    process.exit(2);
  }
  const swaps = candidateSet.includes('swaps');
  const hpaMax = candidateSet.includes('hpa') ? 4 : 0;
  const tracePath = process.env.TRACE || null;
  if (tracePath && !fs.existsSync(tracePath)) {
    process.stderr.write(`gpg-lookahead: TRACE: ${tracePath} does not exist\n`);
    process.exit(2);
  }
  const futures = Number(env('FUTURES', '0'));
  if (!(Number.isInteger(futures) && futures >= 0)) {
    process.stderr.write(`gpg-lookahead: FUTURES must be a whole number >= 0, got ${process.env.FUTURES}\n`);
    process.exit(2);
  }
  if (![frames, horizon].every((x) => Number.isInteger(x) && x >= 1) || horizon >= frames || seeds.some((s) => !Number.isInteger(s))) {
    process.stderr.write('gpg-lookahead: FRAMES and HORIZON must be whole numbers >= 1 with HORIZON < FRAMES, SEEDS integers\n');
    process.exit(2);
  }
  const { net, meta } = loadGpgModel(gpgFile, scenario, 'GPG');
  const nodesPerDecision = modelNodesPerFrame(meta, scenario);
  const greedy = (onDecision?: (d: GpgDecision) => void) =>
    new GpgOrchestration(net, { periodS: frameS, nodesPerDecision, mode: 'greedy', onDecision });
  if (dataOut) fs.writeFileSync(dataOut, '');
  const totals = { search: 0, greedy: 0, hpa: 0 };
  for (const seed of seeds) {
    const requests = buildRequests({ scenario, workload: 'p4', tracePath, seed, load, durationS: frames * frameS });
    // the other futures: seed j's arrivals after a decision (seeds far from any evaluation seed's)
    const others = Array.from({ length: futures }, (_, j) =>
      buildRequests({ scenario, workload: 'p4', tracePath, seed: 7_000_000 + seed * 16 + j, load, durationS: frames * frameS }),
    );
    const run = (orchestration: OrchestrationPolicy, n: number, reqs: Request[] = requests) => {
      let frameStats: readonly FrameStats[] = [];
      const r = runEpisode({
        scenario,
        requests: reqs,
        frames: n,
        seed,
        dispatch: makeDispatch(dispatch, scenario),
        orchestration,
        onFrames: (f) => (frameStats = f),
      });
      return { r, frameStats };
    };
    const chosen: ScaleOp[][] = [];
    const kept = { greedy: 0, changed: 0 };
    // decision k is taken at the end of frame k and scored on frames k+1 .. k+horizon
    for (let k = 0; k + horizon < frames; k++) {
      const rate = (f: readonly FrameStats[]) => {
        let s = 0;
        for (let j = k + 1; j <= k + horizon; j++) s += f[j] ? f[j].completedInTime / Math.max(1, f[j].arrived) : 0;
        return s;
      };
      // hindsight: the seed's own arrivals; else the mean over the other futures after the decision (at the end of frame k)
      const worlds = futures === 0 ? [requests] : others.map((o) => splice(requests, o, (k + 1) * frameS));
      const score = (make: () => Scripted) => {
        let s = 0;
        let first: Scripted | null = null;
        for (const w of worlds) {
          const p = make();
          first ??= p;
          s += rate(run(p, k + 1 + horizon, w).frameStats);
        }
        return { s: s / worlds.length, policy: first! };
      };
      const { s: greedyScore, policy: base } = score(() => new Scripted(greedy, chosen, null));
      const best = { ops: [] as ScaleOp[], s: greedyScore, greedy: true };
      best.ops = base.greedyThere;
      const scores: { greedy: number; empty: number | null; drop: number[]; swap: number[]; hpa: number[] } = {
        greedy: best.s,
        empty: null,
        drop: [],
        swap: [],
        hpa: [],
      };
      // the empty set, and each one-order drop when that is not the empty set again (greedy with one order)
      const drops = best.ops.length > 1 ? best.ops.map((_, i) => best.ops.filter((__, j) => j !== i)) : [];
      const candidates = best.ops.length > 0 ? [[], ...drops] : [];
      candidates.forEach((c, i) => {
        const { s } = score(() => new Scripted(greedy, chosen, c));
        if (i === 0) scores.empty = s;
        else scores.drop.push(s);
        if (s > best.s + 1e-9) Object.assign(best, { ops: c, s, greedy: false });
      });
      // CANDIDATES=swaps: on each picked node in turn, the scale head's next-best action instead of greedy's
      if (swaps && base.decisionThere) {
        for (const c of nextBest(base.decisionThere)) {
          const { s } = score(() => new Scripted(greedy, chosen, c));
          scores.swap.push(s);
          if (s > best.s + 1e-9) Object.assign(best, { ops: c, s, greedy: false });
        }
      }
      // CANDIDATES=hpa: one of hpa's orders on a node greedy did not pick, in place of greedy's last idle node (or order)
      if (hpaMax > 0 && base.decisionThere) {
        for (const c of hpaSubstitutions(base.decisionThere, base.greedyThere, base.hpaThere, hpaMax)) {
          const { s } = score(() => new Scripted(greedy, chosen, c));
          scores.hpa.push(s);
          if (s > best.s + 1e-9) Object.assign(best, { ops: c, s, greedy: false });
        }
      }
      if (dataOut && base.decisionThere) {
        const line = encodeDecision(base.decisionThere, best.ops);
        fs.appendFileSync(dataOut, JSON.stringify({ seed, load, k, futures, scores, ...line }) + '\n');
      }
      chosen.push(best.ops);
      if (best.greedy) kept.greedy++;
      else kept.changed++;
    }
    const search = run(new Scripted(greedy, chosen, null), frames).r;
    const g = run(greedy(), frames).r;
    const h = run(makeOrchestration('hpa', scenario), frames).r;
    totals.search += search.throughputRate;
    totals.greedy += g.throughputRate;
    totals.hpa += h.throughputRate;
    process.stdout.write(
      `seed ${seed}: search ${round(search.throughputRate, 4)} (${search.schedulingCost} orders; greedy kept at ${kept.greedy} of ${kept.greedy + kept.changed} decisions) | greedy gpg ${round(g.throughputRate, 4)} (${g.schedulingCost}) | ${dispatch}/hpa ${round(h.throughputRate, 4)}\n`,
    );
  }
  const n = seeds.length;
  process.stdout.write(
    `mean over ${n} seeds: search ${round(totals.search / n, 4)} | greedy gpg ${round(totals.greedy / n, 4)} | ${dispatch}/hpa ${round(totals.hpa / n, 4)}\n`,
  );
}

main().catch((e: Error) => {
  // a missing or malformed GPG file, an unknown scenario or dispatch: the user's input, exit 2
  process.stderr.write(`gpg-lookahead: ${e.message}\n`);
  process.exit(e instanceof UsageError ? 2 : 1);
});
