/**
 * `kais up`'s placement against the prediction: the simulator records the placement it held at each
 * orchestration step (recordingPlacements) and the summary compares the orchestrator's stored ones
 * with them frame by frame (comparePlacements). The live run is in test/integration/up.integration.test.ts.
 */
import { comparePlacements, recordingPlacements } from '../../../launcher/up';
import { loadScenario } from '../../../shared/scenario';
import { initialPlacement } from '../../../shared/orchestration/placement';
import type { OrchestrationPolicy } from '../../../shared/policy';
import { makeDispatch } from '../../../training/baselines/registry';
import { runEpisode } from '../../../training/jobs/rollout';
import { buildRequests } from '../../../training/workload';

const tiny = loadScenario('tiny');
const flat = (d: number[][]) => Int32Array.from(d.flat());

describe('kais up: placement against the prediction', () => {
  it('records the start placement, then what each step left, and passes the decisions through', () => {
    const start = initialPlacement(tiny);
    const node = start[0].findIndex((k) => k === 0);
    expect(node).toBeGreaterThanOrEqual(0);
    let calls = 0;
    // one replica of service 0 on a node without one at the first step, nothing after
    const inner: OrchestrationPolicy = {
      name: 'one-add',
      periodS: 10,
      decide: () => (calls++ === 0 ? [{ service: 0, node, delta: 1 }] : []),
    };
    const out: Int32Array[] = [];
    const requests = buildRequests({ scenario: tiny, workload: 'p4', tracePath: null, seed: 1, load: 0.5, durationS: 40 });
    runEpisode({
      scenario: tiny,
      requests,
      frames: 2,
      seed: 1,
      dispatch: makeDispatch('lec', tiny),
      orchestration: recordingPlacements(inner, out),
    });
    expect(out.length).toBe(calls);
    expect(out.length).toBeGreaterThanOrEqual(3);
    expect(out[0]).toEqual(flat(start));
    const after = start.map((r) => r.slice());
    after[0][node] += 1;
    expect(out[1]).toEqual(flat(after));
    expect(out[2]).toEqual(flat(after));
  });

  it('compares frame by frame: replicas differing, the latest version of a frame, frames in both only', () => {
    const p = (...x: number[]) => Int32Array.from(x);
    const predicted = [p(1, 0, 2, 1), p(1, 1, 2, 1), p(0, 1, 2, 2)];
    const live = [
      { frame: 0, replicas: p(1, 0, 2, 1) },
      { frame: 1, replicas: p(1, 0, 2, 1) }, // a version of frame 1 superseded below (a restart's republish)
      { frame: 1, replicas: p(2, 1, 2, 0) },
      { frame: 2, replicas: p(0, 1, 2, 2) },
      { frame: 3, replicas: p(0, 1, 2, 2) }, // past the prediction's steps
    ];
    expect(comparePlacements(live, predicted)).toEqual([
      { frame: 0, replicasDiffering: 0 },
      { frame: 1, replicasDiffering: 2 },
      { frame: 2, replicasDiffering: 0 },
    ]);
    expect(comparePlacements([], predicted)).toEqual([]);
    expect(comparePlacements(live, [])).toEqual([]);
  });
});
