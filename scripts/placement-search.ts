/**
 * How far a fixed placement can take a dispatcher (docs/gpg.md, "Is the trace bar reachable?"): a
 * hill climb over placements held for the whole episode, scored by a heuristic dispatcher's
 * throughput rate in the simulator (kais eval's episode: EDF node queues, the agent view). A
 * diagnostic: it searches on one seed and checks the result on others; nothing is chosen from it.
 *
 *   TRACE=late-a.csv LOAD=1 SEED=2001 FRAMES=10 OUT=pa.json node dist/scripts/placement-search.js
 *   TRACE=late-a.csv LOAD=1 FROM=pa.json ITERS=0 CHECK_SEEDS=2002-2005 node dist/scripts/placement-search.js
 *
 * The climb starts from the better of the static placement and hpa's placement at the end of an
 * episode of DISPATCH/hpa (or from FROM, a file this script wrote). Each step scores, on SEED and
 * FRAMES, the placements one change away that the last episode points at (a replica more of each of
 * the 6 services that failed most, on the node with the most free memory and on the two freest
 * that hold none; a replica less of each of the 6 least busy services; a replica of one of the 3
 * least busy services traded for one of the 3 that failed most on the same node) and RANDOM more
 * drawn at random (removal, addition or trade), and keeps the best if it is better; it stops when
 * none is, or after ITERS steps. The placement is applied at the first decision (1 s in) and then
 * held. CHECK_SEEDS (a-b or a,b,...) then runs CHECK_POLICIES (default DISPATCH/fixed,
 * DISPATCH/hpa, DISPATCH/static; `fixed` is the placement found; the dispatcher may be any name of
 * scripts/policy-by-name.ts, e.g. cmmac or cmmac+guard) on those seeds for CHECK_FRAMES (default 20).
 * The orchestration `mpc` in a check pair repeats the climb at every frame boundary, MPC_STEPS
 * steps (default 6) from the placement of the moment, scored by DISPATCH on the last MPC_HISTORY
 * frames' arrivals (default 1) replayed after a warm-up frame (past arrivals only), and orders the way to the best it found: a search that
 * follows a moving mix, where `fixed` holds what the first climb found with the window's mix known.
 * With OBJECTIVE=lean its climb is the lean one, the floor FLOOR x the rate of the placement of the
 * moment on the same replay (FLOOR=1: a replica goes only where the replay loses nothing by it).
 * MPC_RATE_STEPS (default 0) steps of the rate climb come first, and the lean floor is then FLOOR x
 * the rate they reached; MPC_EVERY (default 1) plans every that many frames (at frames 1, 1 +
 * MPC_EVERY, ...) and holds in between.
 *
 * OBJECTIVE=lean climbs the other way, for the replica route of issue 16's bar (the same
 * throughput with fewer replica-seconds): a placement is better if it keeps at least FLOOR (default
 * 0.99) times DISPATCH/hpa's rate on SEED and FRAMES and holds fewer replica-seconds (equal ones: the
 * higher rate); below the floor, the higher rate. Its neighbours offer a replica less of every
 * service, not only of the 6 least busy. It prints DISPATCH/hpa's rate and replica-seconds first.
 *
 * TRACE (an Alibaba batch_task CSV window, as kais eval --trace; default: P4), LOAD (1), SEED
 * (2001), FRAMES (10), ITERS (40), RANDOM (20), DISPATCH (lec; any dispatch heuristic), OBJECTIVE
 * (rate or lean), FLOOR (0.99), OUT (the best placement so far, written after every step). Progress
 * on stdout.
 */
import * as fs from 'node:fs';
import type { Placement, Request } from '../shared/domain';
import type { OrchestrationPolicy, OrchestrationView } from '../shared/policy';
import { initialPlacement, opsBetween, placementOf } from '../shared/orchestration/placement';
import { Rng } from '../shared/rng';
import { UsageError } from '../shared/errors';
import { DISPATCH_HEURISTICS, isDispatchHeuristic } from '../shared/dispatch';
import { capacityArrays, loadScenario, topologyOf } from '../shared/scenario';
import { makeDispatch, makeOrchestration } from '../training/baselines/registry';
import { runEpisode } from '../training/jobs/rollout';
import { drain, openWorkload } from '../training/workload';
import type { RequestSource } from '../training/workload/source';
import { policyByName } from './policy-by-name';
import { seedList } from './seed-stats';

/** A whole number or a number in a range from the environment, or a one-line UsageError naming it. */
function num(name: string, dflt: number, ok: (x: number) => boolean, what: string): number {
  const v = process.env[name];
  const x = v === undefined || v === '' ? dflt : Number(v);
  if (!ok(x)) throw new UsageError(`${name} must be ${what}, got ${v}`);
  return x;
}
const whole = (min: number) => (x: number) => Number.isInteger(x) && x >= min;

function settings() {
  const sc = loadScenario(process.env.SCENARIO ?? 'kais');
  const dispatch = process.env.DISPATCH ?? 'lec';
  if (!isDispatchHeuristic(dispatch))
    throw new UsageError(`DISPATCH must be a dispatch heuristic (${DISPATCH_HEURISTICS.join(', ')}), got ${dispatch}`);
  const trace = process.env.TRACE || undefined;
  if (trace !== undefined && !fs.existsSync(trace)) throw new UsageError(`TRACE: ${trace} does not exist`);
  const objective = process.env.OBJECTIVE || 'rate';
  if (objective !== 'rate' && objective !== 'lean') throw new UsageError(`OBJECTIVE must be rate or lean, got ${objective}`);
  return {
    objective,
    floor: num('FLOOR', 0.99, (x) => Number.isFinite(x) && x > 0 && x <= 1, 'a number in (0, 1]'),
    sc,
    frameS: sc.slotsPerFrame * sc.slotS,
    N: topologyOf(sc).numNodes,
    W: sc.services.length,
    cap: capacityArrays(sc),
    trace,
    dispatch,
    load: num('LOAD', 1, (x) => Number.isFinite(x) && x > 0 && x <= 100, 'a number in (0, 100]'),
    seed: num('SEED', 2001, whole(0), 'a whole number'),
    frames: num('FRAMES', 10, whole(1), 'a whole number >= 1'),
    iters: num('ITERS', 40, whole(0), 'a whole number >= 0'),
    randomMoves: num('RANDOM', 20, whole(0), 'a whole number >= 0'),
    checkFrames: num('CHECK_FRAMES', 20, whole(1), 'a whole number >= 1'),
    mpcSteps: num('MPC_STEPS', 6, whole(1), 'a whole number >= 1'),
    mpcHistory: num('MPC_HISTORY', 1, whole(1), 'a whole number >= 1'),
    mpcEvery: num('MPC_EVERY', 1, whole(1), 'a whole number >= 1'),
    mpcRateSteps: num('MPC_RATE_STEPS', 0, whole(0), 'a whole number >= 0'),
  };
}
let S: ReturnType<typeof settings>;

/** What one episode on a placement measured: per service, failed requests and busy / ready replica-seconds. */
interface Scored {
  rate: number;
  replicaS: number;
  failed: Float64Array;
  util: Float64Array;
}

function requestsOf(s: number, f: number): RequestSource {
  const { sc, trace, load, frameS } = S;
  return openWorkload({ scenario: sc, workload: 'p4', ...(trace ? { tracePath: trace } : {}), seed: s, load, durationS: f * frameS });
}
/** The search's requests (SEED, FRAMES), opened once: a source reads anew for every episode. */
let searchRequests: RequestSource | null = null;
const searchSource = (): RequestSource => (searchRequests ??= requestsOf(S.seed, S.frames));

/** Applies `target` at its first decision, then holds it; sums the window statistics of every decision. */
function held(target: Placement): OrchestrationPolicy & { failed: Float64Array; busy: Float64Array; ready: Float64Array } {
  const { W } = S;
  let decisions = 0;
  const failed = new Float64Array(W);
  const busy = new Float64Array(W);
  const ready = new Float64Array(W);
  return {
    name: 'fixed',
    periodS: 1,
    failed,
    busy,
    ready,
    reset: () => void (decisions = 0),
    decide(v: OrchestrationView) {
      for (let w = 0; w < W; w++) {
        failed[w] += v.window.failed[w];
        busy[w] += v.window.busyReplicaS[w];
        ready[w] += v.window.readyReplicaS[w];
      }
      return ++decisions === 1 ? opsBetween(placementOf(v), target) : [];
    },
  };
}

/**
 * DISPATCH's episode on `p` held: the search's (SEED's requests, FRAMES frames, the episode's rate),
 * or mpc's (`replay`: a warm-up frame and `frames` frames of past arrivals, the mean rate of all but
 * the warm-up).
 */
function score(p: Placement, replay?: { requests: Request[]; frames: number; seed: number }): Scored {
  const { sc, dispatch, seed, frames } = S;
  const o = held(p);
  const r = runEpisode({
    scenario: sc,
    requests: replay ? replay.requests : searchSource(),
    frames: replay ? replay.frames + 1 : frames,
    seed: replay ? replay.seed : seed,
    dispatch: makeDispatch(dispatch, sc),
    orchestration: o,
  });
  const util = o.busy.map((b, w) => (o.ready[w] > 0 ? b / o.ready[w] : 1));
  const scored = replay ? r.throughputPerFrame.slice(1).reduce((a, b) => a + b, 0) / replay.frames : r.throughputRate;
  return { rate: scored, replicaS: r.replicaSeconds, failed: o.failed, util };
}

/** Whether `a` beats `b`: the higher rate, or with OBJECTIVE=lean above `floor` the fewer replica-seconds. */
type Better = (a: Scored, b: Scored) => boolean;
const higherRate: Better = (a, b) => a.rate > b.rate;
function leaner(floor: number): Better {
  return (a, b) => {
    const fa = a.rate >= floor;
    if (fa !== b.rate >= floor) return fa;
    if (!fa) return a.rate > b.rate;
    return a.replicaS < b.replicaS - 1e-6 || (Math.abs(a.replicaS - b.replicaS) <= 1e-6 && a.rate > b.rate);
  };
}

/**
 * The climb: up to `steps` times, the best of `neighbours` if it beats the best so far, else stop.
 * `onStep` hears of every step (the change taken, or null when none was better).
 */
function climb(
  start: { p: Placement; s: Scored },
  steps: number,
  rng: Rng,
  scoreOf: (p: Placement) => Scored,
  onStep: (best: { p: Placement; s: Scored }, what: string | null, tried: number) => void = () => undefined,
  better: Better = higherRate,
): { p: Placement; s: Scored } {
  let best = start;
  for (let it = 0; it < steps; it++) {
    const cands = neighbours(best.p, best.s, rng);
    let top: { p: Placement; s: Scored; what: string } | null = null;
    for (const c of cands) {
      const s = scoreOf(c.p);
      if (!top || better(s, top.s)) top = { ...c, s };
    }
    if (!top || !better(top.s, best.s)) {
      onStep(best, null, cands.length);
      break;
    }
    best = { p: top.p, s: top.s };
    onStep(best, top.what, cands.length);
  }
  return best;
}

/**
 * `mpc`: at every frame boundary, MPC_STEPS steps of the climb from the placement now, each
 * candidate scored by DISPATCH on the last MPC_HISTORY frames' arrivals (of `all`, the episode's
 * requests, up to now: no hindsight; fewer in the first frames), replayed in order from an empty
 * cluster after a warm-up frame (a copy of the oldest of them), the warm-up not scored. Its orders
 * are the way from the placement now to the best found.
 */
function mpc(all: Request[], seed: number): OrchestrationPolicy {
  const rng = Rng.derive(seed, 'placement-search/mpc');
  const { frameS } = S;
  return {
    name: 'mpc',
    periodS: frameS,
    decide(v: OrchestrationView) {
      // MPC_EVERY: plan at frames 1, 1 + MPC_EVERY, ...; hold in between
      if ((Math.round(v.nowS() / frameS) - 1) % S.mpcEvery !== 0) return [];
      const frames = Math.max(1, Math.min(S.mpcHistory, Math.round(v.nowS() / frameS)));
      const from = v.nowS() - frames * frameS;
      const past = all.filter((r) => r.arrivalS >= from && r.arrivalS < v.nowS());
      const replay: Request[] = [];
      const add = (r: Request, shift: number) =>
        replay.push({ ...r, id: replay.length, arrivalS: r.arrivalS + shift, deadlineS: r.deadlineS + shift });
      for (const r of past) if (r.arrivalS < from + frameS) add(r, -from); // the warm-up
      for (const r of past) add(r, frameS - from);
      const now = placementOf(v);
      const scoreOf = (p: Placement) => score(p, { requests: replay, frames, seed });
      let start = { p: now, s: scoreOf(now) };
      // MPC_RATE_STEPS: first that many steps of the rate climb; OBJECTIVE=lean then climbs to fewer
      // replica-seconds at FLOOR x the rate reached (without them: of the placement of the moment) on the replay
      if (S.mpcRateSteps > 0) start = climb(start, S.mpcRateSteps, rng, scoreOf);
      const better = S.objective === 'lean' ? leaner(S.floor * start.s.rate) : higherRate;
      return opsBetween(now, climb(start, S.mpcSteps, rng, scoreOf, undefined, better).p);
    },
  };
}

/** hpa's placement at its last decision of an episode under the dispatcher, and the episode's rate and replica-seconds. */
function hpaPlacement(): { p: Placement; rate: number; replicaS: number } {
  const { sc, seed, frames, dispatch } = S;
  const hpa = makeOrchestration('hpa', sc);
  let last: Placement = initialPlacement(sc);
  const spy: OrchestrationPolicy = {
    name: 'hpa',
    periodS: hpa.periodS,
    reset: (s, v) => hpa.reset?.(s, v),
    decide(v) {
      last = placementOf(v);
      return hpa.decide(v);
    },
  };
  const r = runEpisode({ scenario: sc, requests: searchSource(), frames, seed, dispatch: makeDispatch(dispatch, sc), orchestration: spy });
  return { p: last, rate: r.throughputRate, replicaS: r.replicaSeconds };
}

const total = (p: Placement, w: number) => p[w].reduce((a, b) => a + b, 0);
const copy = (p: Placement): Placement => p.map((row) => row.slice());
function memUsed(p: Placement): Float64Array {
  const { N, W, cap } = S;
  const u = new Float64Array(N);
  for (let w = 0; w < W; w++) for (let n = 0; n < N; n++) u[n] += p[w][n] * cap.svcMem[w];
  return u;
}
const fits = (w: number, n: number, freeGB: number) => S.cap.cpu[n] >= S.cap.svcCpu[w] && freeGB >= S.cap.svcMem[w] - 1e-9;

/** The placements one change away from `p` that are worth a try (see the file comment). */
function neighbours(p: Placement, s: Scored, rng: Rng): { p: Placement; what: string }[] {
  const { sc, N, W, cap, randomMoves } = S;
  const used = memUsed(p);
  const free = (n: number) => cap.mem[n] - used[n];
  const nodes = [...Array(N).keys()];
  const out: { p: Placement; what: string }[] = [];
  const change = (what: string, ...ops: [number, number, 1 | -1][]) => {
    const q = copy(p);
    for (const [w, n, d] of ops) q[w][n] += d;
    out.push({ p: q, what });
  };
  const hot = [...Array(W).keys()].sort((a, b) => s.failed[b] - s.failed[a]).slice(0, 6);
  const cold = [...Array(W).keys()]
    .filter((w) => total(p, w) > 1)
    .sort((a, b) => s.util[a] - s.util[b])
    .slice(0, S.objective === 'lean' ? W : 6);
  for (const w of hot) {
    if (total(p, w) >= sc.maxReplicasPerService) continue;
    const byFree = nodes.filter((n) => fits(w, n, free(n))).sort((a, b) => free(b) - free(a));
    const empty = byFree.filter((n) => p[w][n] === 0);
    for (const n of new Set([byFree[0], empty[0], empty[1]].filter((x) => x !== undefined))) change(`+${w}@${n}`, [w, n, 1]);
  }
  for (const w of cold) {
    const n = nodes.filter((m) => p[w][m] > 0).sort((a, b) => used[b] - used[a])[0];
    change(`-${w}@${n}`, [w, n, -1]);
  }
  const trade = (c: number, h: number, pick: (ns: number[]) => number, tag: string) => {
    if (c === h || total(p, c) <= 1) return;
    const ns = nodes.filter((n) => p[c][n] > 0 && fits(h, n, free(n) + cap.svcMem[c]));
    if (ns.length > 0) {
      const n = pick(ns);
      change(`${tag}${c}->${h}@${n}`, [c, n, -1], [h, n, 1]);
    }
  };
  for (const h of hot.slice(0, 3)) for (const c of cold.slice(0, 3)) trade(c, h, (ns) => ns.find((n) => p[h][n] === 0) ?? ns[0], '');
  for (let k = 0; k < randomMoves; k++) {
    const kind = rng.int(3);
    const w = rng.int(W);
    if (kind === 0 && total(p, w) > 1) {
      const ns = nodes.filter((n) => p[w][n] > 0);
      const n = ns[rng.int(ns.length)];
      change(`r-${w}@${n}`, [w, n, -1]);
    } else if (kind === 1 && total(p, w) < sc.maxReplicasPerService) {
      const ns = nodes.filter((n) => fits(w, n, free(n)));
      if (ns.length > 0) {
        const n = ns[rng.int(ns.length)];
        change(`r+${w}@${n}`, [w, n, 1]);
      }
    } else if (kind === 2) trade(w, rng.int(W), (ns) => ns[rng.int(ns.length)], 'r');
  }
  return out;
}

/** A placement this script wrote (OUT), checked against the scenario's shape. */
function readPlacement(file: string): Placement {
  let p: unknown;
  try {
    p = (JSON.parse(fs.readFileSync(file, 'utf8')) as { placement?: unknown }).placement;
  } catch (e) {
    throw new UsageError(`FROM: cannot read ${file}: ${(e as Error).message}`);
  }
  const ok =
    Array.isArray(p) &&
    p.length === S.W &&
    p.every((row) => Array.isArray(row) && row.length === S.N && row.every((x) => Number.isInteger(x) && x >= 0));
  if (!ok) throw new UsageError(`FROM: ${file} holds no placement of ${S.W} services x ${S.N} nodes (write it with OUT)`);
  return p as Placement;
}

function main(): void {
  S = settings();
  const { sc, seed, frames, iters, trace, load, dispatch, checkFrames } = S;
  const fmt = (s: Scored) => `${s.rate.toFixed(4)} (replica-s ${Math.round(s.replicaS)})`;
  const hpa = process.env.FROM && S.objective === 'rate' ? null : hpaPlacement();
  let better = higherRate;
  if (S.objective === 'lean') {
    better = leaner(S.floor * hpa!.rate);
    console.log(
      `${dispatch}/hpa: ${hpa!.rate.toFixed(4)} (replica-s ${Math.round(hpa!.replicaS)}); floor ${(S.floor * hpa!.rate).toFixed(4)}`,
    );
  }
  const starts: [string, Placement][] = process.env.FROM
    ? [['FROM', readPlacement(process.env.FROM)]]
    : [
        ['static', initialPlacement(sc)],
        ['hpa', hpa!.p],
      ];
  let best: { p: Placement; s: Scored } | null = null;
  for (const [name, p] of starts) {
    const s = score(p);
    console.log(`start ${name}: ${fmt(s)}`);
    if (!best || better(s, best.s)) best = { p, s };
  }
  if (!best) return;
  let step = 0;
  best = climb(
    best,
    iters,
    Rng.derive(seed, 'placement-search'),
    score,
    (b, what, tried) => {
      if (what === null) {
        console.log(`step ${step}: none of ${tried} is better than ${b.s.rate.toFixed(4)}; stop`);
        return;
      }
      console.log(`step ${step++}: ${what} -> ${fmt(b.s)} of ${tried}`);
      if (process.env.OUT)
        fs.writeFileSync(
          process.env.OUT,
          JSON.stringify({
            trace,
            load,
            seed,
            frames,
            dispatch,
            objective: S.objective,
            rate: b.s.rate,
            replicaS: b.s.replicaS,
            placement: b.p,
          }) + '\n',
        );
    },
    better,
  );
  console.log(`best on seed ${seed}, ${frames} frames: ${fmt(best.s)}`);
  if (!process.env.CHECK_SEEDS) return;
  const pairs = (process.env.CHECK_POLICIES ?? `${dispatch}/fixed,${dispatch}/hpa,${dispatch}/static`).split(',');
  const sums = new Map<string, number[]>();
  for (const s of seedList(process.env.CHECK_SEEDS, 'CHECK_SEEDS')) {
    const source = requestsOf(s, checkFrames);
    // mpc reads the past frame's arrivals, so it needs them all in memory; the others read as they go
    const all = pairs.some((x) => x.endsWith('/mpc')) ? drain(source) : null;
    const row: string[] = [];
    for (const pair of pairs) {
      const [d, o] = pair.split('/');
      const orchestration = o === 'fixed' ? held(best.p) : o === 'mpc' ? mpc(all!, s) : makeOrchestration(o, sc);
      const r = runEpisode({
        scenario: sc,
        requests: all ?? source,
        frames: checkFrames,
        seed: s,
        dispatch: policyByName(d, sc),
        orchestration,
      });
      sums.set(pair, [...(sums.get(pair) ?? []), r.throughputRate]);
      row.push(`${pair} ${r.throughputRate.toFixed(4)} (${Math.round(r.replicaSeconds)}, ${r.schedulingCost} operations)`);
    }
    console.log(`seed ${s}: ${row.join('  ')}`);
  }
  for (const [pair, v] of sums) console.log(`${pair} mean ${(v.reduce((a, b) => a + b, 0) / v.length).toFixed(4)}`);
}

try {
  main();
} catch (e) {
  process.stderr.write(`placement-search: ${(e as Error).message}\n`);
  process.exit(e instanceof UsageError ? 2 : 1);
}
