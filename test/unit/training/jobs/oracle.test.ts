/**
 * The oracle bound (training/jobs/oracle.ts): known answers on hand-built cases, never below an
 * exhaustive preemptive optimum on random small cases, and never below the throughput of the
 * baseline policies on the simulator.
 */
import type { Request } from '../../../../shared/domain';
import type { Scenario } from '../../../../shared/scenario';
import { loadScenario } from '../../../../shared/scenario';
import { makeDispatch, makeOrchestration } from '../../../../training/baselines/registry';
import { ORACLE_RULE, oracleBound } from '../../../../training/jobs/oracle';
import { runEpisode } from '../../../../training/jobs/rollout';
import { buildRequests } from '../../../../training/workload';

/**
 * One eAP with one edge node of 1 core, a cloud of 1 core, no latency except `cloudLatencyMs` each
 * way to the cloud. Service 0 (1 core, 1 GB) fits both; service 1 (32 GB) only the cloud.
 */
function micro(cloudLatencyMs = 0): Scenario {
  const none = { latencyMs: 0, mbps: 1e9 };
  return {
    ...loadScenario('tiny'),
    name: 'micro',
    eaps: [{ nodes: [{ cpuCores: 1, memGB: 16 }] }],
    cloud: { vms: 1, vcpuPerVm: 1, memGBPerVm: 16 },
    network: { deviceToEap: none, eapToOwnNode: none, eapToOtherNode: none, edgeToCloud: { latencyMs: cloudLatencyMs, mbps: 1e9 } },
    services: [
      { cpuCores: 1, memGB: 1, weight: 1, workScale: 1 },
      { cpuCores: 1, memGB: 32, weight: 1, workScale: 1 },
    ],
  };
}

/** Requests (sorted by arrival, dense ids) from [arrivalS, deadlineS, workCoreS, service?] rows. */
function reqs(rows: [number, number, number, number?][]): Request[] {
  return rows
    .slice()
    .sort((a, b) => a[0] - b[0])
    .map(([arrivalS, deadlineS, workCoreS, service = 0], id) => ({ id, service, eap: 0, arrivalS, deadlineS, workCoreS, inputMB: 0 }));
}

describe('oracleBound: hand-built cases', () => {
  it('a deadline shorter than upload + processing + return: 0', () => {
    const s = loadScenario('tiny');
    // tiny: the upload of 0.5 MB alone takes 20 ms + 80 ms
    const b = oracleBound(s, [{ id: 0, service: 0, eap: 0, arrivalS: 1, deadlineS: 1.09, workCoreS: 0.001, inputMB: 0.5 }], 10);
    expect(b).toMatchObject({ arrived: 1, feasible: 0, completedInTime: 0, throughputRate: 0 });
  });

  it('counts only arrivals before the horizon; nothing arrived: rate 0', () => {
    const r = reqs([
      [0, 1, 0.1],
      [9.5, 10.5, 0.1],
      [10, 11, 0.1],
      [12, 13, 0.1],
    ]);
    expect(oracleBound(micro(), r, 10)).toMatchObject({ arrived: 2, completedInTime: 2, throughputRate: 1 });
    expect(oracleBound(micro(), [], 10)).toMatchObject({ arrived: 0, completedInTime: 0, throughputRate: 0 });
  });

  it('ample capacity: the feasible share', () => {
    // 10 requests 10 s apart; 3 need more processing time than their deadline leaves
    const rows: [number, number, number][] = [];
    for (let k = 0; k < 10; k++) rows.push([10 * k, 10 * k + 1, k % 3 === 1 ? 1.5 : 0.5]);
    const b = oracleBound(micro(), reqs(rows), 100);
    expect(b).toMatchObject({ arrived: 10, feasible: 7, completedInTime: 7, edgeOnly: 0, cloudOnly: 0, edgeCores: 1, cloudCores: 1 });
    expect(b.throughputRate).toBe(0.7);
  });

  it('capacity binding: the count the smallest-work-first greedy allows', () => {
    // 10 requests in [0, 1], works 0.1 .. 1.0, 2 cores (edge + cloud) = 2 core-s: 0.1 + ... + 0.5 = 1.5, + 0.6 > 2
    const r = reqs(Array.from({ length: 10 }, (_, k) => [0, 1, (k + 1) / 10] as [number, number, number]));
    expect(oracleBound(micro(), r, 10)).toMatchObject({ arrived: 10, feasible: 10, completedInTime: 5, throughputRate: 0.5 });
  });

  it('separate windows: a burst does not borrow the capacity of a quiet time', () => {
    // 6 x 0.5 core-s in [0, 1] (2 core-s fit: 4), 2 x 0.5 in [100, 101] (both fit); one window over all would allow all 8
    const rows: [number, number, number][] = [];
    for (let k = 0; k < 6; k++) rows.push([0, 1, 0.5]);
    for (let k = 0; k < 2; k++) rows.push([100, 101, 0.5]);
    expect(oracleBound(micro(), reqs(rows), 200).completedInTime).toBe(6);
  });

  it('cloud-only requests use the cloud cores only, edge-only requests the edge cores only', () => {
    // service 1 does not fit the edge node's memory: 4 x 0.5 core-s in [0, 1] on 1 cloud core -> 2
    const cloudOnly = reqs(Array.from({ length: 4 }, () => [0, 1, 0.5, 1] as [number, number, number, number]));
    expect(oracleBound(micro(), cloudOnly, 10)).toMatchObject({ feasible: 4, cloudOnly: 4, completedInTime: 2 });
    // the same with service 0, which both sides can host: 2 cores -> 4
    const both = reqs(Array.from({ length: 4 }, () => [0, 1, 0.5, 0] as [number, number, number, number]));
    expect(oracleBound(micro(), both, 10)).toMatchObject({ feasible: 4, cloudOnly: 0, completedInTime: 4 });
    // 1 s to the cloud and back: too far for a 1 s deadline, so 1 edge core: 3 x 0.3 fit, not 4
    const edgeOnly = reqs(Array.from({ length: 4 }, () => [0, 1, 0.3, 0] as [number, number, number, number]));
    expect(oracleBound(micro(500), edgeOnly, 10)).toMatchObject({ feasible: 4, edgeOnly: 4, completedInTime: 3 });
  });

  it('is deterministic, does not depend on the order of the requests, and has a short rule for the docs', () => {
    const s = loadScenario('tiny');
    const r = buildRequests({ scenario: s, workload: 'p4', tracePath: null, seed: 5, load: 3, durationS: 50 });
    const a = oracleBound(s, r, 50);
    expect(oracleBound(s, r, 50)).toEqual(a);
    expect(oracleBound(s, r.slice().reverse(), 50)).toEqual(a);
    expect(a.completedInTime).toBeLessThanOrEqual(a.feasible);
    expect(ORACLE_RULE.length).toBeLessThan(600);
  });
});

/** Tiny deterministic generator for the exhaustive cases. */
function lcg(seed: number): () => number {
  let x = seed >>> 0;
  return () => {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    return x / 2 ** 32;
  };
}

/** Horn's condition: jobs [lo, hi] with processing p fit one preemptive unit-speed machine. */
function fitsOneMachine(jobs: { lo: number; hi: number; p: number }[]): boolean {
  for (const a of jobs) {
    for (const b of jobs) {
      if (b.hi < a.lo) continue;
      let sum = 0;
      for (const j of jobs) if (j.lo >= a.lo && j.hi <= b.hi) sum += j.p;
      if (sum > b.hi - a.lo + 1e-12) return false;
    }
  }
  return true;
}

describe('oracleBound: never below an exhaustive optimum', () => {
  it('on random cases of up to 8 requests, >= the most requests the 1-core edge node and the 1-core cloud serve in time even with preemption', () => {
    const cloudS = 0.1; // each way
    const s = micro(cloudS * 1000);
    const rnd = lcg(42);
    let equal = 0;
    const cases = 60;
    for (let c = 0; c < cases; c++) {
      const n = 3 + Math.floor(rnd() * 6);
      const rows: [number, number, number, number][] = [];
      for (let k = 0; k < n; k++) {
        const a = rnd() * 1.5;
        rows.push([a, a + 0.3 + rnd() * 1.2, 0.05 + rnd() * 0.75, rnd() < 0.8 ? 0 : 1]);
      }
      const r = reqs(rows);
      // every assignment of every request to: not served, the edge node, the cloud
      let best = 0;
      for (let code = 0; code < 3 ** n; code++) {
        const edge: { lo: number; hi: number; p: number }[] = [];
        const cloud: { lo: number; hi: number; p: number }[] = [];
        let x = code;
        let ok = true;
        for (const q of r) {
          const where = x % 3;
          x = Math.floor(x / 3);
          if (where === 1) {
            if (q.service === 1 || q.deadlineS - q.arrivalS < q.workCoreS) ok = false;
            edge.push({ lo: q.arrivalS, hi: q.deadlineS, p: q.workCoreS });
          } else if (where === 2) {
            if (q.deadlineS - q.arrivalS - 2 * cloudS < q.workCoreS) ok = false;
            cloud.push({ lo: q.arrivalS + cloudS, hi: q.deadlineS - cloudS, p: q.workCoreS });
          }
        }
        const count = edge.length + cloud.length;
        if (!ok || count <= best) continue;
        if (fitsOneMachine(edge) && fitsOneMachine(cloud)) best = count;
      }
      const bound = oracleBound(s, r, 10).completedInTime;
      expect(bound).toBeGreaterThanOrEqual(best);
      if (bound === best) equal++;
    }
    // and not vacuous: it is exact on most of these small cases
    expect(equal).toBeGreaterThan(cases / 2);
  });
});

describe('oracleBound: never below what the policies achieve on the simulator', () => {
  const pairs = ['lec/hpa', 'jsq/static', 'random/static'];
  for (const name of ['tiny', 'small']) {
    for (const load of [1, 3]) {
      it(`${name}, p4 at load ${load}: >= ${pairs.join(', ')}`, () => {
        const scenario = loadScenario(name);
        const frames = 4;
        const durationS = frames * scenario.slotsPerFrame * scenario.slotS;
        for (const seed of [1, 2]) {
          const requests = buildRequests({ scenario, workload: 'p4', tracePath: null, seed, load, durationS });
          const bound = oracleBound(scenario, requests, durationS);
          expect(bound.arrived).toBeGreaterThan(0);
          for (const pair of pairs) {
            const [d, o] = pair.split('/');
            const r = runEpisode({
              scenario,
              requests,
              frames,
              seed,
              dispatch: makeDispatch(d, scenario),
              orchestration: makeOrchestration(o, scenario),
            });
            expect(r.arrived).toBe(bound.arrived);
            expect(bound.completedInTime).toBeGreaterThanOrEqual(r.completedInTime);
            // runEpisode rounds its rate to 4 digits
            expect(bound.throughputRate).toBeGreaterThanOrEqual(r.throughputRate - 5e-5);
          }
        }
      });
    }
  }
});
