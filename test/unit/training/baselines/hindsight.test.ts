/**
 * Hindsight orchestration (issue 16 item 3): each frame's true demand, read once from the
 * requests, and gsp-ss's rebuild decided on the frame about to start instead of the last one.
 */
import { loadScenario } from '../../../../shared/scenario';
import { GspSsOrchestration } from '../../../../shared/orchestration/gsp-ss';
import type { OrchestrationView, ServiceWindowStats } from '../../../../shared/policy';
import { Cluster } from '../../../../training/sim/cluster';
import { frameDemand, HindsightOrchestration } from '../../../../training/baselines/hindsight';
import { buildRequests, openWorkload } from '../../../../training/workload';
import { runEval, type EvalArgs } from '../../../../training/jobs/eval';

describe('hindsight orchestration', () => {
  const s = loadScenario('small');
  const frameS = s.slotS * s.slotsPerFrame;
  const wo = { scenario: s, workload: 'p4' as const, seed: 4, load: 1, durationS: 4 * frameS };

  it('reads each frame’s arrivals and CPU work per service', () => {
    const d = frameDemand(openWorkload(wo), s.services.length, frameS, 4);
    const reqs = buildRequests(wo);
    for (let k = 0; k < 4; k++) {
      for (let w = 0; w < s.services.length; w++) {
        const mine = reqs.filter((r) => r.service === w && Math.floor(r.arrivalS / frameS) === k);
        expect(d.arrivals[k][w]).toBe(mine.length);
        expect(d.workCoreS[k][w]).toBeCloseTo(
          mine.reduce((x, r) => x + r.workCoreS, 0),
          9,
        );
      }
    }
  });

  it('decides as gsp-ss would on the coming frame’s true demand', () => {
    const d = frameDemand(openWorkload(wo), s.services.length, frameS, 4);
    const c = new Cluster(s);
    const at = (k: number, win: ServiceWindowStats | null) =>
      Object.create(c, { nowS: { value: () => k * frameS }, window: { get: () => win } }) as OrchestrationView;
    const W = s.services.length;
    const truth: ServiceWindowStats = {
      windowS: frameS,
      arrivals: d.arrivals[2],
      workCoreS: d.workCoreS[2],
      busyReplicaS: new Float64Array(W),
      readyReplicaS: new Float64Array(W),
      completedInTime: new Float64Array(W),
      failed: new Float64Array(W),
    };
    const h = new HindsightOrchestration(d, frameS, 0.65);
    expect(h.decide(at(2, null))).toEqual(new GspSsOrchestration(frameS, 0.65).decide(at(2, truth)));
    expect(h.decide(at(4, null))).toEqual([]); // past the last frame
  });

  it('kais eval reports x/hindsight, the same on every run', () => {
    const args: EvalArgs = {
      scenario: 'tiny',
      workload: 'p4',
      policies: 'lec/hindsight,lec/hpa',
      frames: 3,
      seed: 2,
      load: 1,
      json: true,
      dequeue: 'edf',
      faultRate: 0,
      faultDurationS: 60,
      timing: false,
      filters: false,
    };
    const a = runEval(args);
    const b = runEval(args);
    expect(a.results.map((r) => r.policy)).toEqual(['lec/hindsight', 'lec/hpa']);
    expect(JSON.stringify(a)).toBe(JSON.stringify(b));
  });
});
