/**
 * What the agent's unit tests set up again and again on the `tiny` scenario: an eAP's view with
 * every service placed on every node, and a seeded random actor of the right shapes.
 */
import { LocalClusterView } from '../../agent/local-view';
import { actorShapes, initActorWeights } from '../../shared/nets/actor';
import { placementBody } from '../../shared/protocol/envelope';
import { loadScenario, topologyOf } from '../../shared/scenario';
import { observationDim } from '../../shared/spaces';

export const tiny = loadScenario('tiny');

/** eAP `eap`'s view of tiny with one replica of every service on every node (placement v1, frame 0). */
export function allPlacedView(eap = 0): LocalClusterView {
  const view = new LocalClusterView(tiny, eap);
  const topo = topologyOf(tiny);
  view.applyPlacement(
    placementBody(
      1,
      0,
      Array.from({ length: topo.numServices }, () => new Array<number>(topo.numNodes).fill(1)),
    ),
  );
  return view;
}

/** A random (seeded) actor for tiny as weights version `version`: what `Dispatcher.setWeights` takes. */
export function randomActor(version: number, seed = 3) {
  const topo = topologyOf(tiny);
  const A = topo.numNodes + 1;
  const shapes = actorShapes(observationDim({ numServices: topo.numServices, numTargets: A, numEaps: topo.numEaps }), A);
  return { version, checksum: 0, shapes, tensors: initActorWeights(shapes[0][0], A, seed) };
}
