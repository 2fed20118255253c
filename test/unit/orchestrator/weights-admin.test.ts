/**
 * The admin's rollback and learning freeze (orchestrator/weights-admin.ts) on a real Store (SQLite
 * file) and a real registry and hub on loopback; the canary and the learner are stand-ins that
 * record what they were asked (their own behaviour is tested in canary.test.ts and learner.test.ts,
 * and the whole path against a live orchestrator in test/integration/weights-admin.integration.test.ts).
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ModelRegistry, startHub } from '../../../orchestrator/registry';
import { Store } from '../../../orchestrator/store';
import type { Hub } from '../../../orchestrator/hub';
import { WeightsAdmin, type WeightsAdminDeps } from '../../../orchestrator/weights-admin';
import { unpackWeights } from '../../../shared/protocol/weights';
import type { WeightsBody } from '../../../shared/protocol/envelope';

const tensors = (x: number) => [{ shape: [2], data: new Float32Array([x, -x]) }];
const firstValue = (b: WeightsBody | null) => unpackWeights(b!)[0].data[0];

describe('WeightsAdmin', () => {
  let dir: string;
  let store: Store;
  let hub: Hub;
  let registry: ModelRegistry;
  let events: [string, string][];
  let logs: string[];
  let learner: {
    frozen: boolean;
    reloaded: number[];
    unfrozenAt: (number | null)[];
    freeze(): void;
    unfreeze(v: number | null): void;
    reload(v: number): void;
  };
  beforeEach(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kais-weights-admin-'));
    store = Store.open(path.join(dir, 'o.db'));
    hub = await startHub(store, { port: 0 });
    registry = new ModelRegistry(store, hub);
    events = [];
    logs = [];
    learner = {
      frozen: false,
      reloaded: [],
      unfrozenAt: [],
      freeze() {
        this.frozen = true;
      },
      unfreeze(v) {
        this.frozen = false;
        this.unfrozenAt.push(v);
      },
      reload(v) {
        this.reloaded.push(v);
      },
    };
  });
  afterEach(async () => {
    registry.dispose();
    await hub.close();
    store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const make = (over: Partial<WeightsAdminDeps> = {}) =>
    new WeightsAdmin({
      store,
      registry,
      canary: null,
      learner,
      event: (kind, message) => events.push([kind, message]),
      log: (line) => logs.push(line),
      ...over,
    });

  it('rolls the current version back to the newest earlier one never rejected, as a new version, and says so', () => {
    for (let v = 1; v <= 4; v++) registry.publishWeights(tensors(v));
    store.putRejectedModel({ version: 3, basedOn: 2, source: 'gate', reason: 'worse', body: null });
    const adoptGood: number[] = [];
    let dropped = 0;
    const canary = {
      running: null,
      rollBackNow: () => null,
      dropWaiting: () => (dropped++, true),
      adoptGood: (v: number) => void adoptGood.push(v),
    };
    const r = make({ canary }).rollback(null, 'late share up', 'alice');
    expect(r.status).toBe(200);
    expect(r.body.restoredAs).toBe(5);
    // v3 was rejected: v2's weights come back as v5
    expect(firstValue(store.model(5))).toBe(2);
    expect(store.latestModelVersion()).toBe(5);
    expect(events).toEqual([
      [
        'admin-rollback',
        "alice: weights v4 rolled back: every eAP gets v2's weights as v5 (the version waiting for its canary is dropped): late share up",
      ],
    ]);
    expect(store.rejectedModels()[0]).toMatchObject({ version: 4, basedOn: 2, source: 'admin', reason: 'by alice: late share up' });
    expect(learner.reloaded).toEqual([5]);
    expect(adoptGood).toEqual([5]);
    expect(dropped).toBe(1);
    // again: v4 (rejected now) and v3 are skipped, v5 -> v2's weights again as v6
    expect(make().rollback(null, 'again', 'bob').body.message).toBe(
      "bob: weights v5 rolled back: every eAP gets v2's weights as v6: again",
    );
  });

  it('goes to a named version, and refuses one not stored, the current one, and a rollback with nothing before it', () => {
    const a = make();
    expect(a.rollback(null, 'x', 'a')).toEqual({ status: 409, body: { reason: 'no weights are stored: nothing to roll back' } });
    registry.publishWeights(tensors(1));
    expect(a.rollback(null, 'x', 'a')).toEqual({
      status: 409,
      body: { reason: 'no version below v1 that was never rejected is stored: name one with to' },
    });
    registry.publishWeights(tensors(2));
    registry.publishWeights(tensors(3));
    expect(a.rollback(3, 'x', 'a')).toEqual({ status: 400, body: { reason: 'to: v3 is the current version (name an earlier one)' } });
    expect(a.rollback(7, 'x', 'a')).toEqual({ status: 400, body: { reason: 'to: v7 is not stored (stored: 1-3)' } });
    expect(store.latestModelVersion()).toBe(3);
    expect(events).toEqual([]);
    const r = a.rollback(1, 'back to the shipped one', 'a');
    expect(r.status).toBe(200);
    expect(firstValue(store.model(4))).toBe(1);
    // a version rejected before (a canary's false alarm) can be named: it comes back as a new version
    store.putRejectedModel({ version: 3, basedOn: 2, source: 'canary', reason: 'undecided, beyond the margin', body: null });
    expect(a.rollback(3, 'the canary was wrong', 'a').body.message).toBe(
      "a: weights v4 rolled back: every eAP gets v3's weights as v5: the canary was wrong",
    );
    expect(firstValue(store.model(5))).toBe(3);
  });

  it("while a canary runs, rolls the canary's version back through the canary, and only to its good version", () => {
    registry.publishWeights(tensors(1));
    registry.publishWeights(tensors(2)); // the canary's version
    const asked: string[] = [];
    const canary = {
      running: { version: 2, good: 1 },
      rollBackNow: (reason: string) => {
        asked.push(reason);
        return { restored: registry.restore(1), message: `the canary's own words: ${reason}` };
      },
      dropWaiting: () => false,
      adoptGood: () => undefined,
    };
    const a = make({ canary });
    expect(a.rollback(2, 'x', 'a')).toEqual({
      status: 409,
      body: { reason: 'to: a canary of v2 runs; a rollback now goes to its good version v1 (give no to, or 1)' },
    });
    const r = a.rollback(1, 'drill', 'carol');
    expect(r.status).toBe(200);
    expect(asked).toEqual(['by carol: drill']);
    // the canary's event message (its windows and per-eAP rates) is the answer's; no second event
    expect(r.body).toEqual({ ok: true, event: 'admin-rollback', message: "the canary's own words: by carol: drill", restoredAs: 3 });
    expect(events).toEqual([]);
    expect(firstValue(store.model(3))).toBe(1);
  });

  it('freezes and unfreezes online learning, keeps the freeze over a restart, and refuses what makes no sense', () => {
    registry.publishWeights(tensors(1));
    const a = make({ now: () => Date.UTC(2026, 11, 7, 12) });
    expect(a.unfreeze('x', 'a')).toEqual({ status: 409, body: { reason: 'learning is not frozen' } });
    const r = a.freeze('peak hours', 'dave');
    expect(r.status).toBe(200);
    expect(learner.frozen).toBe(true);
    expect(a.frozen).toEqual({ by: 'dave', reason: 'peak hours', sinceMs: Date.UTC(2026, 11, 7, 12) });
    expect(a.freeze('again', 'erin')).toEqual({
      status: 409,
      body: { reason: 'learning is frozen already (by dave since 2026-12-07T12:00:00.000Z: peak hours)' },
    });
    // a restarted orchestrator: the learner starts frozen, and the log says by whom
    learner.frozen = false;
    const b = make();
    expect(learner.frozen).toBe(true);
    expect(b.frozen).toEqual(a.frozen);
    expect(logs).toEqual(['learner: frozen by dave since 2026-12-07T12:00:00.000Z: peak hours (kais weights --unfreeze to learn again)']);
    expect(b.unfreeze('peak over', 'dave').status).toBe(200);
    expect(learner.frozen).toBe(false);
    expect(learner.unfrozenAt).toEqual([1]);
    expect(store.learningFrozen()).toBeNull();
    expect(events.map((e) => e[0])).toEqual(['admin-freeze', 'admin-unfreeze']);
    expect(events[1][1]).toBe("dave: online learning on again, from weights v1's decisions: peak over");
    // no learner: nothing to freeze
    expect(make({ learner: null }).freeze('x', 'a').status).toBe(409);
  });

  it('changes nothing when the store cannot be written (503), and says what was not made', () => {
    registry.publishWeights(tensors(1));
    registry.publishWeights(tensors(2));
    const failing = {
      ...store,
      latestModelVersion: () => store.latestModelVersion(),
      model: (v: number) => store.model(v),
      models: () => store.models(),
      rejectedModels: () => store.rejectedModels(),
      learningFrozen: () => null,
      putRejectedModel: () => undefined,
      putLearningFrozen: () => {
        throw new Error('SQLITE_FULL: database or disk is full');
      },
    };
    const full = {
      restore: () => {
        throw new Error('SQLITE_FULL: database or disk is full');
      },
    };
    const a = make({ store: failing, registry: full });
    const r = a.rollback(null, 'x', 'a');
    expect(r.status).toBe(503);
    expect(r.body.message).toBe('the rollback of weights v2');
    expect(a.freeze('x', 'a').status).toBe(503);
    expect(a.frozen).toBeNull();
    expect(learner.frozen).toBe(false);
    expect(learner.reloaded).toEqual([]);
    expect(events).toEqual([]);
    expect(store.latestModelVersion()).toBe(2);
    expect(logs.filter((l) => /SQLITE_FULL/.test(l))).toHaveLength(2);
    // the restored version stored and pushed, only its listing among the rejected ones failed: done, and said
    const listing = make({
      store: {
        ...failing,
        putRejectedModel: () => {
          throw new Error('SQLITE_FULL: database or disk is full');
        },
      },
    });
    const half = listing.rollback(null, 'y', 'b');
    expect(half.status).toBe(200);
    expect(half.body.message).toBe(
      "b: weights v2 rolled back: every eAP gets v1's weights as v3 (the store could not list v2 among the rejected versions): y",
    );
    expect(learner.reloaded).toEqual([3]);
  });
});
