import { LocalClusterView } from '../../../agent/local-view';
import { placementBody } from '../../../shared/protocol/envelope';
import { loadScenario } from '../../../shared/scenario';
import { initialPlacement } from '../../../orchestrator/emulated-cluster';

const tiny = loadScenario('tiny');
const load = (waiting: number[], busy: number[], cpu = 0.5) => ({ cpu, waiting, busy });

describe('LocalClusterView', () => {
  it('takes its replica table from a placement frame and refuses one for another cluster', () => {
    const v = new LocalClusterView(tiny, 0);
    const d = initialPlacement(tiny);
    v.applyPlacement(placementBody(1, 0, d));
    for (let w = 0; w < 4; w++) for (let n = 0; n < 3; n++) expect(v.readyReplicas(n, w)).toBe(d[w][n]);
    expect(() => v.applyPlacement(placementBody(2, 0, [[1, 1]]))).toThrow(/1 services x 2 nodes, this cluster has 4 x 3/);
  });

  it('names the nodes whose replicas a placement changed (their device filters mark a break)', () => {
    const v = new LocalClusterView(tiny, 0);
    const d = initialPlacement(tiny);
    const everyHosting = [0, 1, 2].filter((n) => d.some((row) => row[n] > 0));
    expect(v.applyPlacement(placementBody(1, 0, d))).toEqual(everyHosting);
    expect(v.applyPlacement(placementBody(2, 1, d))).toEqual([]); // the same placement again
    const next = d.map((row) => row.slice());
    next[3][2] += 1; // a replica added on node 2
    next[0][0] = next[0][0] > 0 ? next[0][0] - 1 : 1; // and one removed (or added) on node 0
    expect(v.applyPlacement(placementBody(3, 2, next))).toEqual([0, 2]);
  });

  it('gives the cloud its concurrent capacity for every service', () => {
    const v = new LocalClusterView(tiny, 0);
    expect(v.readyReplicas(v.cloudTarget, 0)).toBe(Math.floor(4 / 0.5));
    expect(v.readyReplicas(v.cloudTarget, 1)).toBe(4);
  });

  it('counts its own outstanding requests as busy replicas first, then as waiting ones', () => {
    const v = new LocalClusterView(tiny, 0);
    v.applyPlacement(
      placementBody(1, 0, [
        [2, 0, 0],
        [0, 0, 0],
        [0, 0, 0],
        [0, 0, 0],
      ]),
    );
    for (let i = 0; i < 3; i++) v.onSent(0, 0);
    expect(v.busyReplicas(0, 0)).toBe(2);
    expect(v.serviceQueueLen(0, 0)).toBe(1);
    v.onDone(0, 0, 0.1, null);
    expect(v.serviceQueueLen(0, 0)).toBe(0);
  });

  it('raises its estimates to the load the target reported while the report is fresh', () => {
    const v = new LocalClusterView(tiny, 0, 1, 2, 0.05);
    v.applyPlacement(
      placementBody(1, 0, [
        [1, 0, 0],
        [0, 0, 0],
        [0, 0, 0],
        [0, 0, 0],
      ]),
    );
    v.onSent(0, 0);
    v.onDone(0, 0, 0.1, load([5, 0, 0, 0], [1, 0, 0, 0], 0.9));
    expect(v.serviceQueueLen(0, 0)).toBe(5);
    expect(v.busyReplicas(0, 0)).toBe(1);
    expect(v.freeCpuRatio(0)).toBeCloseTo(0.1);
    const until = performance.now() + 80;
    while (performance.now() < until) {
      // let the 50 ms report age out
    }
    expect(v.serviceQueueLen(0, 0)).toBe(0);
  });

  it('learns the processing time of a service at a target as a discounted mean', () => {
    const v = new LocalClusterView(tiny, 0);
    const nominal = v.meanServiceS(0, 0);
    v.onSent(0, 0);
    v.onDone(0, 0, nominal + 1, null);
    expect(v.meanServiceS(0, 0)).toBeCloseTo(nominal + 0.1);
  });

  it('keeps an unreachable node out of service for a while, never the cloud', () => {
    const v = new LocalClusterView(tiny, 0, 1, 0.05);
    v.markUnreachable(1);
    v.markUnreachable(v.cloudTarget);
    expect(v.healthy(1)).toBe(false);
    expect(v.healthy(v.cloudTarget)).toBe(true);
  });

  it('runs its clock in scenario seconds: real time x speed', () => {
    const v = new LocalClusterView(tiny, 0, 10);
    const t0 = v.nowS();
    const until = performance.now() + 50;
    while (performance.now() < until) {
      // 50 ms real
    }
    expect(v.nowS() - t0).toBeGreaterThanOrEqual(0.5);
  });

  it('uses the scenario links: own node, other node, cloud', () => {
    const small = loadScenario('small');
    const v = new LocalClusterView(small, 0);
    const own = v.transferS(0, 0, 0);
    const other = v.transferS(0, small.eaps[0].nodes.length, 0);
    expect(own).toBeCloseTo(small.network.eapToOwnNode.latencyMs / 1000);
    expect(other).toBeCloseTo(small.network.eapToOtherNode.latencyMs / 1000);
    expect(v.returnS(0, v.cloudTarget)).toBeCloseTo((small.network.edgeToCloud.latencyMs + small.network.deviceToEap.latencyMs) / 1000);
  });
});
