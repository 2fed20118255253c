/**
 * The weight gate's shadow evaluation (issue 17 item 1): recent live arrivals replayed in the
 * simulator, the candidate actor against the current one and the best of a few heuristics, all on
 * the same requests and seed (kais eval's episode: hpa, EDF node queues, the agent view).
 *
 * The live arrivals are what the agents sent as experience: per transition its eAP, service and
 * dispatch slot. The experience carries no request sizes, so each arrival takes the work, relative
 * deadline and input size of the next synthetic p4 request of the same service (seeded; the
 * calibrated size distributions of training/workload), and its arrival time is its slot plus a
 * seeded offset within the slot. The replay covers the arrivals' span of slots (at most
 * `seconds` of it, the newest arrivals kept).
 *
 * The verdict is the orchestrator's (orchestrator/gate.ts): this file only measures. It runs in
 * a worker thread (gate-worker.ts), so the hub never waits for it.
 */
import type { Request } from '../../shared/domain';
import { Rng } from '../../shared/rng';
import type { Scenario } from '../../shared/scenario';
import { scenarioActor } from '../../shared/nets/actor-fit';
import { CmmacDispatch } from '../../agent/actor-policy';
import { makeDispatch, makeOrchestration } from '../baselines/registry';
import { buildRequests } from '../workload';
import { placementProblem } from '../../shared/orchestration/placement';
import { runEpisode } from './rollout';
import type { ActorSpec, LiveArrival, ShadowInput, ShadowResult } from '../../shared/gate-contract';

export type { ActorSpec, LiveArrival, ShadowInput, ShadowResult };

/** The live arrivals as simulator requests (see the file comment); sorted, ids dense. */
export function replayRequests(
  scenario: Scenario,
  arrivals: readonly LiveArrival[],
  seed: number,
  seconds: number,
): { requests: Request[]; durationS: number } {
  const W = scenario.services.length;
  const E = scenario.eaps.length;
  const ok = arrivals.filter((a) => Number.isInteger(a.slot) && a.slot >= 0 && a.service >= 0 && a.service < W && a.eap >= 0 && a.eap < E);
  if (ok.length === 0) return { requests: [], durationS: 0 };
  let last = 0;
  for (const a of ok) if (a.slot > last) last = a.slot;
  const keepFrom = last - Math.max(1, Math.round(seconds / scenario.slotS)) + 1;
  const kept = ok.filter((a) => a.slot >= keepFrom);
  let first = last;
  for (const a of kept) if (a.slot < first) first = a.slot;
  const durationS = (last - first + 1) * scenario.slotS;
  // sizes from a synthetic p4 run over the same span, per service, in order
  const pool = buildRequests({ scenario, workload: 'p4', seed, load: 1, durationS: Math.max(durationS, 60) });
  const byService: Request[][] = Array.from({ length: W }, () => []);
  for (const r of pool) byService[r.service].push(r);
  const next = new Array<number>(W).fill(0);
  const rng = Rng.derive(seed, 'gate/replay');
  const out: Request[] = [];
  for (const a of kept) {
    const src = byService[a.service];
    if (src.length === 0) continue;
    const s = src[next[a.service]++ % src.length];
    const arrivalS = (a.slot - first + rng.next()) * scenario.slotS;
    out.push({
      id: 0,
      service: a.service,
      eap: a.eap,
      arrivalS,
      deadlineS: arrivalS + (s.deadlineS - s.arrivalS),
      workCoreS: s.workCoreS,
      inputMB: s.inputMB,
    });
  }
  out.sort((x, y) => x.arrivalS - y.arrivalS);
  out.forEach((r, i) => (r.id = i));
  return { requests: out, durationS };
}

function actorPolicy(scenario: Scenario, a: ActorSpec, act: 'argmax' | 'sample'): CmmacDispatch {
  return new CmmacDispatch({
    shape: scenarioActor(scenario).shape,
    queueCapPerReplica: scenario.queueCapPerReplica,
    weights: a.arrays,
    version: a.version ?? 0,
    mode: act,
    head: a.head,
  });
}

export function shadowEvaluate(input: ShadowInput): ShadowResult {
  const t0 = performance.now();
  const scenario = input.scenario;
  const { requests, durationS } = replayRequests(scenario, input.arrivals, input.seed, input.seconds);
  const frameS = scenario.slotS * scenario.slotsPerFrame;
  const frames = Math.max(1, Math.ceil(durationS / frameS));
  const given = input.placement ?? null;
  const problem = given ? placementProblem(scenario, given) : null;
  const live = given !== null && problem === null ? given : null;
  const rate = (dispatch: ReturnType<typeof makeDispatch>) =>
    requests.length === 0
      ? 0
      : runEpisode({
          scenario,
          requests,
          frames,
          seed: input.seed,
          dispatch,
          orchestration: makeOrchestration(live ? 'static' : 'hpa', scenario),
          ...(live ? { startPlacement: live } : {}),
          nodeDequeue: 'edf',
          view: 'agent',
        }).throughputRate;
  const m = input.stopBelowMargin ?? null;
  const below = (x: number) => m !== null && candidate < (1 - m) * x;
  const act = input.act ?? 'argmax';
  const candidate = rate(actorPolicy(scenario, input.candidate, act));
  const current = input.current ? rate(actorPolicy(scenario, input.current, act)) : null;
  let heuristic = { name: '', rate: NaN };
  let stopped = current !== null && below(current);
  for (const name of input.heuristics) {
    if (stopped) break;
    const r = rate(makeDispatch(name, scenario));
    if (!(r <= heuristic.rate)) heuristic = { name, rate: r };
    stopped = below(r);
  }
  return {
    requests: requests.length,
    durationS,
    candidate,
    current,
    heuristic,
    stopped,
    ms: performance.now() - t0,
    placement: live ? 'live' : 'initial',
    ...(problem ? { placementProblem: problem } : {}),
  };
}
