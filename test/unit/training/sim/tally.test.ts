/**
 * Per-target tally (shared/tally.ts): what the simulator counts at each target adds up to its
 * outcome, and the emulated cluster counts the same events the same way (kais up compares the two).
 */
import { loadScenario } from '../../../../shared/scenario';
import { makeDispatch, makeOrchestration } from '../../../../training/baselines/registry';
import { runEpisode } from '../../../../training/jobs/rollout';
import { buildRequests } from '../../../../training/workload';
import { EmulatedTarget } from '../../../../orchestrator/emulated-cluster';

const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);

describe('per-target tally', () => {
  it('in the simulator, every request that reached a target ends there once, and the totals match the outcome', () => {
    const s = loadScenario('small');
    const frames = 4;
    const frameS = s.slotS * s.slotsPerFrame;
    const requests = buildRequests({ scenario: s, workload: 'p4', seed: 3, load: 1.6, durationS: (frames - 1) * frameS });
    const res = runEpisode({
      scenario: s,
      requests,
      frames,
      seed: 3,
      dispatch: makeDispatch('jsq', s),
      orchestration: makeOrchestration('static', s),
      tally: true,
    });
    const t = res.perTarget!;
    expect(t.sent).toHaveLength(s.eaps.reduce((a, e) => a + e.nodes.length, 0) + 1);
    expect(res.queuedAtEnd).toBe(0);
    // overload: every kind of ending happens somewhere
    expect(sum(t.refused)).toBeGreaterThan(0);
    expect(sum(t.expired)).toBeGreaterThan(0);
    for (let i = 0; i < t.sent.length; i++) expect(t.refused[i] + t.expired[i] + t.completed[i] + t.lost[i]).toBe(t.sent[i]);
    expect(sum(t.completed)).toBe(res.completedInTime + res.late);
    // a refused request is retried on the cloud (it reaches two targets) or dropped; refused ones never complete there
    expect(sum(t.sent)).toBeGreaterThanOrEqual(res.arrived - res.dropped);
    expect(sum(t.expired) + sum(t.lost)).toBeLessThanOrEqual(res.dropped);
    // without tally asked for, the result has none (kais eval's JSON is unchanged)
    const plain = runEpisode({
      scenario: s,
      requests,
      frames,
      seed: 3,
      dispatch: makeDispatch('jsq', s),
      orchestration: makeOrchestration('static', s),
    });
    expect(plain.perTarget).toBeUndefined();
    expect(plain.throughputRate).toBe(res.throughputRate);
  });

  it('the emulated target counts reached, refused, expired and completed as the simulator does', async () => {
    const tiny = loadScenario('tiny');
    const t = new EmulatedTarget(0, false, 2, 4, tiny, 1);
    await t.serve(0, 0.001); // no replica: refused
    t.setReplicas(0, 1);
    const first = t.serve(0, 0.05); // 100 ms, completes
    const late = t.serve(0, 0.05, 20); // cannot start within 20 ms: expires
    expect((await late).status).toBe(504);
    expect((await first).status).toBe(200);
    expect(t.tally).toEqual({ sent: 3, refused: 1, expired: 1, completed: 1, lost: 0 });
    const held = t.serve(0, 0.05);
    t.fail();
    expect((await held).status).toBe(503);
    expect(t.tally).toMatchObject({ sent: 4, lost: 1 });
    t.close();
  });
});
