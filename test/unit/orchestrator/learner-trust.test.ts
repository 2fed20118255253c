/**
 * The online learner survives any batch (issue 14), on a real Store and hub: out-of-bounds rewards
 * are skipped, an update that diverges is discarded and learning goes on from the stored version,
 * and an update whose KL is past maxKl is not published.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Transition } from '../../../shared/protocol/envelope';
import { actorShapes, initActorWeights } from '../../../shared/nets/actor';
import { Rng } from '../../../shared/rng';
import { loadScenario, topologyOf } from '../../../shared/scenario';
import { observationDim } from '../../../shared/spaces';
import { OnlineLearner } from '../../../orchestrator/learner';
import { ModelRegistry, startHub } from '../../../orchestrator/registry';
import { Store } from '../../../orchestrator/store';
import type { Hub } from '../../../orchestrator/hub';

const scenario = loadScenario('tiny');
const topo = topologyOf(scenario);
const A = topo.numNodes + 1;
const D = observationDim({ numServices: topo.numServices, numTargets: A, numEaps: topo.numEaps });

function batch(n: number, version: number, rng: Rng, obsValue?: number): Transition[] {
  return Array.from({ length: n }, (_, k) => {
    const action = Math.floor(rng.next() * A);
    return {
      eap: 0,
      slot: k,
      service: 0,
      obs: Float32Array.from({ length: D }, () => obsValue ?? rng.next()),
      mask: new Uint8Array(A).fill(1),
      action,
      logProb: Math.log(1 / A),
      reward: action === 0 ? 1 : 0,
      latencyMs: 10,
      metDeadline: action === 0,
      done: false,
      weightVersion: version,
    };
  });
}

describe('OnlineLearner under hostile batches', () => {
  let dir: string;
  let store: Store;
  let hub: Hub;
  let registry: ModelRegistry;
  beforeEach(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kais-learner-trust-'));
    store = Store.open(path.join(dir, 'o.db'));
    hub = await startHub(store, { port: 0 });
    registry = new ModelRegistry(store, hub);
    const shapes = actorShapes(D, A);
    registry.publishWeights(
      initActorWeights(D, A, 5).map((data, i) => ({ shape: shapes[i], data })),
      'relu1',
    );
  });
  afterEach(async () => {
    registry.dispose();
    await hub.close();
    store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('skips rewards out of bounds, discards a diverging update and learns from the next batch', async () => {
    const events: string[] = [];
    const learner = new OnlineLearner({
      scenario,
      store,
      registry,
      head: 'relu1',
      thread: 'in-process',
      maxDuty: 1,
      batch: 64,
      criticWarmup: 0,
      onEvent: (e) => events.push(e.kind),
    });
    const rng = new Rng(3);
    // reward 1e300 (Infinity in float32) never reaches a Float32Array
    store.appendExperience({ eap: 0, transitions: batch(64, 1, rng).map((t) => ({ ...t, reward: 1e300 })) });
    expect(await learner.poll()).toBe(false);
    expect(learner.stats.transitionsOutOfBounds).toBe(64);
    // observations of 3e38 (finite in float32) make the update diverge: discarded, v1 stays
    store.appendExperience({ eap: 0, transitions: batch(64, 1, rng, 3e38) });
    expect(await learner.poll()).toBe(true);
    expect(learner.stats.failedUpdates).toBe(1);
    expect(events).toEqual(['update-failed']);
    expect(store.latestModelVersion()).toBe(1);
    // learning goes on: the next honest batch publishes v2
    store.appendExperience({ eap: 0, transitions: batch(64, 1, rng) });
    expect(await learner.poll()).toBe(true);
    expect(store.latestModelVersion()).toBe(2);
    expect(learner.stats.published).toBe(1);
    learner.dispose();
  });

  it('does not publish an update whose approximate KL is past maxKl, and keeps learning from the stored version', async () => {
    const events: { kind: string; message: string }[] = [];
    const learner = new OnlineLearner({
      scenario,
      store,
      registry,
      head: 'relu1',
      thread: 'in-process',
      maxDuty: 1,
      batch: 64,
      criticWarmup: 0,
      lr: 1e-2,
      maxKl: 1e-9,
      onEvent: (e) => events.push(e),
    });
    const rng = new Rng(4);
    store.appendExperience({ eap: 0, transitions: batch(64, 1, rng) });
    expect(await learner.poll()).toBe(true);
    expect(learner.stats.refusedUpdates).toBe(1);
    expect(store.latestModelVersion()).toBe(1);
    expect(events[0]).toMatchObject({
      kind: 'kl-refused',
      message: expect.stringMatching(/approximate KL [\d.]+ is past 1e-9 .*actor back to weights v1/),
    });
    expect(learner.weightVersion).toBe(1);
    learner.dispose();
  });
});
