import { LecFallback } from '../../../agent/heuristic';
import { LocalClusterView } from '../../../agent/local-view';
import { LecDispatch } from '../../../training/baselines/dispatch/lec';
import { Cluster } from '../../../training/sim/cluster';
import { placementBody } from '../../../shared/protocol/envelope';
import type { DispatchItem } from '../../../shared/policy';
import { loadScenario } from '../../../shared/scenario';
import { buildMask } from '../../../agent/filters/context-filter';

const small = loadScenario('small');

describe('LecFallback', () => {
  it('decides as the simulator lec baseline on the same view', () => {
    const sim = new Cluster(small);
    const ours = new LecFallback();
    const theirs = new LecDispatch();
    for (let w = 0; w < small.services.length; w++) {
      for (const slack of [0.05, 0.5, 5]) {
        const mask = new Uint8Array(sim.numTargets);
        buildMask(sim, w, small.queueCapPerReplica, mask);
        const item: DispatchItem = { request: { id: 0, service: w, eap: 1, arrivalS: 0, deadlineS: slack, workCoreS: 0.1, inputMB: 0.5 }, eap: 1, mask, action: -1 };
        expect(ours.decide(item, sim)).toBe(theirs.decide(item, sim));
      }
    }
  });

  it('prefers a node of its own eAP hosting the service over the cloud when both meet the deadline', () => {
    const v = new LocalClusterView(small, 0);
    const d = small.services.map(() => new Array<number>(v.numNodes).fill(0));
    d[0][1] = 1;
    v.applyPlacement(placementBody(1, 0, d));
    const mask = new Uint8Array(v.numTargets);
    buildMask(v, 0, small.queueCapPerReplica, mask);
    const item: DispatchItem = { request: { id: 0, service: 0, eap: 0, arrivalS: 0, deadlineS: v.nowS() + 10, workCoreS: 0.1, inputMB: 0.5 }, eap: 0, mask, action: -1 };
    expect(new LecFallback().decide(item, v)).toBe(1);
  });
});
