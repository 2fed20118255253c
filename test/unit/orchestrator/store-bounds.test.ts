/**
 * The store's issue-14 parts on real SQLite files: epochs, events, size and age limits with
 * prune, a hard file cap that fails writes like a full disk (and the orchestrator's StoreGuard
 * backing off from it), a file deleted under a running store, and the checks at open.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import Database from 'better-sqlite3';
import { StoreGuard } from '../../../orchestrator/main';
import { isStoreWriteError, Store, StoreError } from '../../../orchestrator/store';
import { ModelRegistry, startHub } from '../../../orchestrator/registry';
import { placementBody, type Transition } from '../../../shared/protocol/envelope';
import { packWeights } from '../../../shared/protocol/weights';

const transitions = (n: number, obsDim = 256): Transition[] =>
  Array.from({ length: n }, (_, k) => ({
    eap: 0,
    slot: k,
    service: 0,
    obs: new Float32Array(obsDim).fill(0.5),
    mask: Uint8Array.from([1, 1]),
    action: 1,
    logProb: -0.7,
    reward: 1,
    latencyMs: 5,
    metDeadline: true,
    done: false,
    weightVersion: null,
  }));

describe('Store bounds and epochs', () => {
  let dir: string;
  beforeEach(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kais-store-bounds-'))));
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('gives a new file a new epoch, keeps it across reopens, and notices the file deleted under it', () => {
    const f = path.join(dir, 'o.db');
    const a = Store.open(f);
    expect(a.createdNow).toBe(true);
    const epoch = a.epoch;
    expect(epoch).toMatch(/^[0-9a-z]+-[0-9a-f]{12}$/);
    a.close();
    const b = Store.open(f);
    expect(b.createdNow).toBe(false);
    expect(b.epoch).toBe(epoch);
    expect(b.fileProblem()).toBeNull();
    for (const x of [f, `${f}-wal`, `${f}-shm`]) fs.rmSync(x, { force: true });
    expect(b.fileProblem()).toMatch(/o\.db was deleted while the orchestrator was running/);
    b.close();
    const c = Store.open(f);
    expect(c.createdNow).toBe(true);
    expect(c.epoch).not.toBe(epoch);
    c.close();
  });

  it("keeps the newest weight and placement versions (and a running canary's good version), and says how many went", () => {
    const s = Store.open(path.join(dir, 'o.db'), { limits: { modelsMaxRows: 3, placementsMaxRows: 2 } });
    const body = (v: number) => packWeights([{ shape: [4], data: new Float32Array([v, v, v, v]) }], v);
    for (let v = 1; v <= 6; v++) s.putModel(body(v));
    for (let v = 1; v <= 5; v++) s.putPlacement(placementBody(v, v, [[1, 0]]));
    // a canary of v6 runs with v2 as its good version: v2 stays, whatever its age
    s.putCanaryState({ version: 6, good: 2, eaps: [0], startedMs: 0 });
    const n = s.prune();
    expect([n.models, n.placements]).toEqual([2, 3]);
    expect(s.models().map((m) => m.version)).toEqual([2, 4, 5, 6]);
    expect(s.model(2)!.checksum).toBe(body(2).checksum);
    expect(s.latestPlacement()!.version).toBe(5);
    expect(s.latestModelVersion()).toBe(6);
    // the canary over: v2 goes too; a second prune finds nothing more
    s.putCanaryState(null);
    expect(s.prune().models).toBe(1);
    expect(s.prune()).toMatchObject({ models: 0, placements: 0 });
    expect(s.models().map((m) => m.version)).toEqual([4, 5, 6]);
    // numbering goes on above the kept ones
    s.putModel(body(7));
    expect(s.latestModelVersion()).toBe(7);
    s.close();
  });

  it('prunes experience by bytes and age, metrics and events by rows and age, oldest first', () => {
    const s = Store.open(path.join(dir, 'o.db'), {
      limits: {
        experienceMaxBytes: 40_000,
        experienceMaxAgeMs: 10_000,
        metricsMaxRows: 5,
        metricsMaxAgeMs: 10_000,
        eventsMaxRows: 3,
        eventsMaxAgeMs: 10_000,
      },
    });
    for (let i = 0; i < 10; i++) s.appendExperience({ eap: 0, transitions: transitions(10) }, 100_000 + i); // ~10.5 KB each
    const held = s.experienceBytes;
    expect(held).toBeGreaterThan(100_000);
    for (let i = 0; i < 8; i++) s.recordMetrics([{ tsMs: 100_000 + i, name: 'agent/requests', eap: 0, value: i }]);
    for (let i = 0; i < 6; i++) s.recordEvent({ kind: 'k', eap: 0, session: 's', message: `e${i}`, tsMs: 100_000 + i });
    const n = s.prune(105_000);
    expect(s.experienceBytes).toBeLessThanOrEqual(40_000);
    expect(s.readExperience(0).map((r) => r.seq)).toEqual([7, 8, 9]); // the newest kept
    expect(n.experience).toBe(7);
    expect(s.metrics('agent/requests').map((p) => p.value)).toEqual([3, 4, 5, 6, 7]);
    expect(s.events().map((e) => e.message)).toEqual(['e3', 'e4', 'e5']);
    // by age: everything is older than 10 s at t = 200 s
    s.prune(200_000);
    expect(s.experienceCount()).toBe(0);
    expect(s.experienceBytes).toBe(0);
    expect(s.metrics('agent/requests')).toEqual([]);
    expect(s.events()).toEqual([]);
    // the ring's seq goes on, and bytes are counted across an overwritten slot
    s.appendExperience({ eap: 0, transitions: transitions(1) });
    expect(s.readExperience(0).map((r) => r.seq)).toEqual([10]);
    s.close();
    const reopened = Store.open(path.join(dir, 'o.db'));
    expect(reopened.experienceBytes).toBeGreaterThan(0);
    reopened.close();
  });

  it('fails writes past fileMaxBytes like a full disk; the guard backs off and writes again once prune made room', () => {
    const s = Store.open(path.join(dir, 'o.db'), { limits: { fileMaxBytes: 512 * 1024, experienceMaxBytes: 64 * 1024 } });
    let clock = 1_000_000;
    const lines: string[] = [];
    const guard = new StoreGuard(
      (l) => lines.push(l),
      () => clock,
    );
    let written = 0;
    for (let i = 0; i < 200 && guard.failures === 0; i++)
      if (guard.run('experience', () => s.appendExperience({ eap: 0, transitions: transitions(20) }))) written++;
    expect(guard.failures).toBe(1);
    expect(written).toBeGreaterThan(10);
    expect(lines).toEqual([
      expect.stringMatching(/^store write failed \(SQLITE_FULL: database or disk is full\) writing experience; writes paused for 1 s$/),
    ]);
    // during the backoff writes are dropped without touching the store
    expect(guard.run('experience', () => s.appendExperience({ eap: 0, transitions: transitions(1) }))).toBe(false);
    expect(guard.dropped).toBe(1);
    // a second failure doubles the backoff
    clock += 1000;
    expect(guard.run('experience', () => s.appendExperience({ eap: 0, transitions: transitions(20) }))).toBe(false);
    expect(lines[1]).toMatch(/writes paused for 2 s$/);
    // a write run `always` (an admin change) is tried whatever the backoff, and says whether it was kept
    let tried = 0;
    expect(guard.run('the admin state', () => void tried++, true)).toBe(true);
    expect([tried, guard.dropped]).toEqual([1, 1]);
    // prune frees pages (incremental vacuum hands them back), and writing works again
    s.prune();
    clock += 2000;
    expect(guard.run('experience', () => s.appendExperience({ eap: 0, transitions: transitions(20) }))).toBe(true);
    // other errors are bugs, not the disk: thrown
    expect(() =>
      guard.run('x', () => {
        throw new TypeError('a bug');
      }),
    ).toThrow('a bug');
    expect(isStoreWriteError(new TypeError('x'))).toBe(false);
    s.close();
  });

  it('pushes a placement the full store cannot keep (the cluster changed already), numbers on past it, and stores the next one once there is room', async () => {
    const s = Store.open(path.join(dir, 'o.db'), { limits: { fileMaxBytes: 512 * 1024, experienceMaxBytes: 64 * 1024 } });
    const hub = await startHub(s, {});
    const lines: string[] = [];
    const guard = new StoreGuard((l) => lines.push(l));
    const registry = new ModelRegistry(s, hub, { storeWrite: (what, write) => guard.run(what, write, true) });
    try {
      const d = [
        [1, 0],
        [0, 1],
      ];
      registry.publishPlacement(1, d);
      expect([s.latestPlacementVersion(), registry.lastPlacementStored]).toEqual([1, true]);
      for (let i = 0; i < 400 && guard.failures === 0; i++)
        guard.run('experience', () => s.appendExperience({ eap: 0, transitions: transitions(20) }));
      expect(guard.failures).toBe(1); // the file is full
      const big = Array.from({ length: 64 }, () => new Array<number>(512).fill(1)); // a placement that needs new pages
      const v2 = registry.publishPlacement(2, big);
      expect(v2.version).toBe(2);
      expect(registry.lastPlacementStored).toBe(false);
      expect(registry.unstoredPlacements).toBe(1);
      expect(hub.placementVersion).toBe(2); // pushed
      expect(registry.placementVersion).toBe(2);
      expect(s.latestPlacementVersion()).toBe(1); // not kept
      expect(lines[1]).toMatch(/^store write failed \(SQLITE_FULL: database or disk is full\) writing placement v2;/);
      s.prune(); // room again
      const v3 = registry.publishPlacement(3, d);
      expect([v3.version, registry.lastPlacementStored, s.latestPlacementVersion(), hub.placementVersion]).toEqual([3, true, 3, 3]);
    } finally {
      registry.dispose();
      await hub.close();
      s.close();
    }
  });

  it('refuses at open a file that is not SQLite, a foreign SQLite file, an empty one read-only, and a missing folder, leaving them as they were', () => {
    const notSqlite = path.join(dir, 'a.db');
    fs.writeFileSync(notSqlite, 'hello, this is not a database'.repeat(40));
    expect(() => Store.open(notSqlite)).toThrow(new StoreError(`${notSqlite}: not a SQLite database (not a kais orchestrator store)`));
    const foreign = path.join(dir, 'b.db');
    const db = new Database(foreign);
    db.exec('CREATE TABLE checkpoints (episode INTEGER); CREATE TABLE meta (key TEXT, value TEXT)');
    db.close();
    const size = fs.statSync(foreign).size;
    expect(() => Store.open(foreign)).toThrow(
      /b\.db: a SQLite database of something else \(tables (checkpoints, meta|meta, checkpoints)\), not a kais orchestrator store/,
    );
    expect(fs.statSync(foreign).size).toBe(size);
    expect(() => Store.open(path.join(dir, 'nope', 'o.db'))).toThrow(/folder .*nope does not exist/);
    expect(() => Store.open(path.join(dir, 'missing.db'), { readonly: true })).toThrow(/missing\.db: no such file/);
  });
});
