/**
 * A store file holding one stored model, v1, random actor weights of a scenario's shapes (relu1 head):
 * what a restarted orchestrator finds, so that its learner has a model to start from.
 */
import { Store } from '../../orchestrator/store';
import { actorShapes, initActorWeights } from '../../shared/nets/actor';
import { packWeights } from '../../shared/protocol/weights';

export function storeWithRandomModel(db: string, D: number, A: number, seed = 3): void {
  const store = Store.open(db);
  const shapes = actorShapes(D, A);
  store.putModel(
    packWeights(
      initActorWeights(D, A, seed).map((data, i) => ({ shape: shapes[i], data })),
      1,
      'relu1',
    ),
  );
  store.close();
}
