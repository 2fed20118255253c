/**
 * Queueing-theory checks of the simulator with known answers, built through the public API only
 * (validateScenario, Rng, EdgeCloudEnv, StaticOrchestration, a DispatchPolicy).
 *
 * Set-up: 1 eAP with 1 edge node of c cores holding c replicas of one 1-core service, so the node
 * is a c-server FCFS queue (EDF with deadline = arrival + 1e9 is arrival order); every link has 0
 * latency and huge bandwidth and inputs are 0 MB, so upload, transfer and return take no time and
 * the latency the simulator records is the sojourn time (wait + service). Service time =
 * workCoreS / 1 core. The cloud exists but the policy never uses it; no scaling (static).
 *
 * Time scale: mean service 1/MU = 10 ms and slotS = 0.25 s (a normal slot, 25 mean service times;
 * fewer slots to close per request than with slower service keeps the file fast). Since edge-cloud-v2 the simulator dispatches each request the instant it reaches its eAP,
 * so the slot length must not matter; under v1's dispatch at slot boundaries the theory checks fail
 * by 3-13x (measured on v1: M/M/1 rho 0.5 / 0.8 / 0.9 +890 / +404 / +206 %, M/D/1 rho 0.8 +699 %,
 * M/M/4 rho 0.8 +1212 %) and the end-of-run counts differ from the FCFS queue's (20 vs 2, 93 vs 12).
 *
 * Each check compares the mean sojourn over all requests with theory (within 3 %), and also with
 * an FCFS c-server recursion run here on the very same trace (the sample-path answer: it separates
 * a simulator error from sampling noise, and the simulator matches it to rounding).
 *
 * Sampling noise (FCFS recursion vs theory, this file's trace generator and lengths, seeds 1..30;
 * the simulator equals the recursion, so this is the spread of the simulator's error too):
 *   M/M/1 rho 0.5, 200k requests: sd 0.72 %, range -1.52 .. +1.61 %, 0/30 seeds outside 3 %
 *   M/M/1 rho 0.8, 1M requests:   sd 0.81 %, range -1.99 .. +1.52 %, 0/30
 *   M/M/1 rho 0.9, 2M requests:   sd 1.47 %, range -2.18 .. +3.23 %, 1/30 (seed 5)
 *   M/D/1 rho 0.8, 300k requests: sd 0.86 %, range -1.67 .. +2.00 %, 0/30
 *   M/M/4 rho 0.8, 600k requests: sd 0.94 %, range -1.73 .. +1.78 %, 0/30
 * rho 0.9 is the hard one (the sample mean's variance grows like 1/(1-rho)^4): 3 % at ~2 sd needs
 * ~2M requests. SEED = 1 is the first seed, not picked for luck; its errors are
 * -0.24, +0.37, -1.66, +0.09, -0.31 % in the order above.
 */
import { oneNodeQueue } from '../../../support/scenario';
import type { Request } from '../../../../shared/domain';
import type { DispatchPolicy } from '../../../../shared/policy';
import { Rng } from '../../../../shared/rng';
import { EdgeCloudEnv } from '../../../../training/sim/env';
import { StaticOrchestration } from '../../../../shared/orchestration/static';

const SEED = 1;
/** Service rate of one replica (1/s): mean service time 10 ms. */
const MU = 100;
const SLOT_S = 0.25;
const SLOTS_PER_FRAME = 40; // 10 s frames
const FRAME_S = SLOT_S * SLOTS_PER_FRAME;
/** Empty time after the last arrival so that every request finishes (1000 mean service times). */
const DRAIN_S = 10;
const TOL = 0.03;

/** n Poisson(lambda) arrivals with work from `work`; deadlines too far to matter. */
function poissonTrace(label: string, n: number, lambda: number, work: (r: Rng) => number): Request[] {
  const arr = Rng.derive(SEED, `${label}/arrivals`);
  const svc = Rng.derive(SEED, `${label}/work`);
  const out: Request[] = new Array(n);
  let t = 0;
  for (let i = 0; i < n; i++) {
    t += arr.exp(lambda);
    out[i] = { id: i, service: 0, eap: 0, arrivalS: t, deadlineS: t + 1e9, workCoreS: work(svc), inputMB: 0 };
  }
  return out;
}

/** FCFS with c identical servers on the same trace: departure time of each request. */
function fcfsDepartures(reqs: Request[], c: number): Float64Array {
  const free = new Float64Array(c);
  const dep = new Float64Array(reqs.length);
  for (let i = 0; i < reqs.length; i++) {
    let k = 0;
    for (let j = 1; j < c; j++) if (free[j] < free[k]) k = j;
    free[k] = Math.max(reqs[i].arrivalS, free[k]) + reqs[i].workCoreS;
    dep[i] = free[k];
  }
  return dep;
}

/** Every request to node 0, the only edge node. */
const toNode0: DispatchPolicy = { name: 'node-0', decide: () => 0 };

function runEnv(c: number, requests: Request[], frames: number): EdgeCloudEnv {
  const env = new EdgeCloudEnv(oneNodeQueue(c, SLOT_S, SLOTS_PER_FRAME), {
    requests,
    frames,
    orchestration: new StaticOrchestration(),
    illegalAction: 'throw',
  });
  let { observations } = env.reset({ seed: SEED });
  toNode0.reset?.(SEED, env.view);
  const actions: Record<number, number> = {};
  while (!env.isDone) {
    for (const b of env.agents) actions[b] = toNode0.decide(observations[b], env.view);
    observations = env.step(actions).observations;
  }
  return env;
}

function meanLatencyS(env: EdgeCloudEnv): number {
  let s = 0;
  for (let i = 0; i < env.latencyCount; i++) s += env.latencyS[i];
  return s / env.latencyCount;
}

function factorial(k: number): number {
  let f = 1;
  for (let i = 2; i <= k; i++) f *= i;
  return f;
}

/** Erlang C: probability that an arrival waits in M/M/c with offered load a = lambda/mu (a < c). */
function erlangC(c: number, a: number): number {
  const rho = a / c;
  let sum = 0;
  for (let k = 0; k < c; k++) sum += a ** k / factorial(k);
  const top = a ** c / factorial(c) / (1 - rho);
  return top / (sum + top);
}

interface Case {
  name: string;
  servers: number;
  rho: number;
  n: number;
  deterministic: boolean;
  /** Mean sojourn time (s) from theory. */
  theoryS: number;
}

function mm1(rho: number, n: number): Case {
  const lambda = rho * MU;
  return { name: `M/M/1 rho ${rho}`, servers: 1, rho, n, deterministic: false, theoryS: 1 / (MU - lambda) };
}

function md1(rho: number, n: number): Case {
  // Pollaczek-Khinchine with service variance 0
  return { name: `M/D/1 rho ${rho}`, servers: 1, rho, n, deterministic: true, theoryS: 1 / MU + rho / (2 * MU * (1 - rho)) };
}

function mmc(c: number, rho: number, n: number): Case {
  const lambda = rho * c * MU;
  return {
    name: `M/M/${c} rho ${rho}`,
    servers: c,
    rho,
    n,
    deterministic: false,
    theoryS: erlangC(c, lambda / MU) / (c * MU - lambda) + 1 / MU,
  };
}

const CASES: Case[] = [mm1(0.5, 200_000), mm1(0.8, 1_000_000), mm1(0.9, 2_000_000), md1(0.8, 300_000), mmc(4, 0.8, 600_000)];

describe('simulator vs queueing theory (one node, dispatch on arrival, slotS 0.25 s)', () => {
  it.each(CASES.map((k) => [k.name, k] as const))('%s: mean sojourn within 3%% of theory', (_name, k) => {
    const lambda = k.rho * k.servers * MU;
    const reqs = poissonTrace(k.name, k.n, lambda, k.deterministic ? () => 1 / MU : (r) => r.exp(MU));
    const frames = Math.ceil((reqs[reqs.length - 1].arrivalS + DRAIN_S) / FRAME_S);
    const env = runEnv(k.servers, reqs, frames);

    // every request arrived, went to the node and finished (the mean is over all of them)
    expect(env.outcome).toEqual({ arrived: k.n, completedInTime: k.n, late: 0, dropped: 0, queuedAtEnd: 0 });
    expect(env.dispatchedToCloud).toBe(0);
    expect(env.latencyCount).toBe(k.n);

    const simS = meanLatencyS(env);
    const relErr = simS / k.theoryS - 1;
    // (an object so that a failure prints the numbers)
    const vsTheory = `${k.name}: simulated ${simS.toFixed(6)} s, theory ${k.theoryS.toFixed(6)} s, error ${(relErr * 100).toFixed(2)} %`;
    expect({ vsTheory, withinTolerance: Math.abs(relErr) <= TOL }).toEqual({ vsTheory, withinTolerance: true });

    // the sample-path answer on the same trace: FCFS with c servers
    const dep = fcfsDepartures(reqs, k.servers);
    let sum = 0;
    for (let i = 0; i < reqs.length; i++) sum += dep[i] - reqs[i].arrivalS;
    const fcfsS = sum / reqs.length;
    const vsFcfs = `${k.name}: simulated ${simS.toFixed(9)} s, FCFS on the same trace ${fcfsS.toFixed(9)} s`;
    expect({ vsFcfs, relDiff: simS / fcfsS - 1 }).toEqual({ vsFcfs, relDiff: expect.closeTo(0, 9) });
  });
});

describe('work conservation below saturation (rho 0.8, the run ends mid-trace)', () => {
  it.each([1, 4])('c = %i: nothing dropped, only the requests in the system at the end are left, and the counts add up', (c) => {
    const rho = 0.8;
    const lambda = rho * c * MU;
    const frames = Math.round(100 / c); // horizon 1000 s (c = 1) / 250 s (c = 4): ~80k arrivals
    const horizonS = frames * FRAME_S;
    const n = Math.ceil(lambda * horizonS * 1.2);
    const reqs = poissonTrace(`conservation c${c}`, n, lambda, (r) => r.exp(MU));
    expect(reqs[n - 1].arrivalS).toBeGreaterThan(horizonS); // the trace goes on past the end of the run

    const env = runEnv(c, reqs, frames);
    const o = env.outcome;
    const dep = fcfsDepartures(reqs, c);
    let admitted = 0;
    let inSystemAtEnd = 0;
    for (let i = 0; i < n; i++) {
      if (reqs[i].arrivalS >= horizonS) break;
      admitted++;
      if (dep[i] > horizonS) inSystemAtEnd++;
    }

    expect(o.arrived).toBe(admitted);
    expect(o.dropped).toBe(0);
    expect(o.late).toBe(0);
    expect(o.arrived).toBe(o.completedInTime + o.late + o.dropped + o.queuedAtEnd);
    expect(env.latencyCount).toBe(o.completedInTime);
    // a small tail: the work-conserving FCFS queue on the same trace has exactly these left at the end
    expect(o.queuedAtEnd).toBe(inSystemAtEnd);
    expect(o.queuedAtEnd).toBeLessThan(100); // mean number in system is 4 (c = 1) / ~5.6 (c = 4)
  });
});
