/**
 * A store file holding one stored model, v1, random actor weights of a scenario's shapes (relu1 head):
 * what a restarted orchestrator finds, so that its learner has a model to start from.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { readConfig, startOrchestrator, type RunningOrchestrator } from '../../orchestrator/main';
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

/**
 * A learning orchestrator on `small` as a restarted one starts: `dir`/o.db holds a random v1 model
 * (storeWithRandomModel) and `dir`/c.json the config these tests share (cmmac learner, batch 64, no
 * detector, relu1 head, 1 s heartbeats) with `config` over it, read by the orchestrator's own config
 * reader. The caller closes it.
 */
export async function learningOrchestrator(
  dir: string,
  D: number,
  A: number,
  config: Record<string, unknown>,
  opts: Omit<Parameters<typeof startOrchestrator>[1], 'dbPath'> = {},
): Promise<RunningOrchestrator> {
  const db = path.join(dir, 'o.db');
  storeWithRandomModel(db, D, A);
  const cfgFile = path.join(dir, 'c.json');
  const base = { scenario: 'small', learner: 'cmmac', learnBatch: 64, detector: 'none', actorHead: 'relu1', heartbeatMs: 1000 };
  fs.writeFileSync(cfgFile, JSON.stringify({ ...base, ...config }));
  return startOrchestrator(readConfig(cfgFile), { ...opts, dbPath: db });
}
