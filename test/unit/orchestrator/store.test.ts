/** The orchestrator's SQLite store, on a real file in a temporary folder. */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Store } from '../../../orchestrator/store';
import { placementBody, type ExperienceBody } from '../../../shared/protocol/envelope';
import { packLightActor, packWeights } from '../../../shared/protocol/weights';
import Database from 'better-sqlite3';

function weights(version: number) {
  return packWeights(
    [
      { shape: [2, 3], data: new Float32Array([1, 2, 3, 4, 5, version]) },
      { shape: [3], data: new Float32Array([0.5, -0.5, 0.25]) },
    ],
    version,
  );
}

function batch(eap: number, slot: number): ExperienceBody {
  return {
    eap,
    transitions: [
      {
        eap,
        slot,
        service: 1,
        obs: new Float32Array([0.1, 0.2]),
        mask: new Uint8Array([1, 0, 1]),
        action: 2,
        logProb: -0.5,
        reward: 1,
        latencyMs: 40,
        metDeadline: true,
        done: false,
        weightVersion: null,
      },
    ],
  };
}

describe('Store', () => {
  let dir: string;
  let file: string;
  const open: Store[] = [];
  const openStore = (capacity?: number) => {
    const s = Store.open(file, { experienceCapacity: capacity });
    open.push(s);
    return s;
  };

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'kais-store-'));
    file = join(dir, 'orchestrator.db');
  });
  afterEach(() => {
    for (const s of open.splice(0)) s.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('uses WAL journaling', () => {
    const s = openStore();
    s.putModel(weights(1));
    // the -wal file exists while the connection is open
    expect(existsSync(`${file}-wal`)).toBe(true);
  });

  it('resumes the same model version and placement after a reopen', () => {
    const a = openStore();
    expect(a.latestModel()).toBeNull();
    expect(a.latestPlacement()).toBeNull();
    a.putModel(weights(1));
    a.putModel(weights(2));
    a.putPlacement(
      placementBody(5, 30, [
        [1, 0, 2],
        [0, 3, 0],
      ]),
    );
    a.close();

    const b = openStore();
    const m = b.latestModel()!;
    expect(m.version).toBe(2);
    expect(m.checksum).toBe(weights(2).checksum);
    expect(Array.from(m.tensors[0])).toEqual([1, 2, 3, 4, 5, 2]);
    expect(m.shapes).toEqual([[2, 3], [3]]);
    const p = b.latestPlacement()!;
    expect(p).toMatchObject({ version: 5, frame: 30, numServices: 2, numNodes: 3 });
    expect(Array.from(p.replicas)).toEqual([1, 0, 2, 0, 3, 0]);
    expect(b.models().map((r) => r.version)).toEqual([1, 2]);
  });

  it("keeps a version's light actor and a placement's actor across a reopen; a file from before the actor column gains it and reads its old placements as naming none", () => {
    const a = openStore();
    const light = packLightActor([{ shape: [2], data: new Float32Array([7, 8]) }], 'softplus1');
    a.putModel({ ...weights(1), light });
    a.putPlacement({ ...placementBody(1, 0, [[1, 0]]), actor: 'light' });
    a.putPlacement({ ...placementBody(2, 1, [[1, 1]]), actor: 'main' });
    a.putPlacement(placementBody(3, 2, [[0, 1]]));
    a.close();
    // as a build before the column left it
    const raw = new Database(file);
    raw.exec('ALTER TABLE placements DROP COLUMN actor');
    raw.close();
    const b = openStore();
    expect(b.latestModel()!.light).toEqual(light);
    expect(b.placements().map((p) => p.actor)).toEqual([undefined, undefined, undefined]);
    b.putPlacement({ ...placementBody(4, 3, [[1, 0]]), actor: 'light' });
    expect(b.latestPlacement()!.actor).toBe('light');
    b.close();
    const c = openStore();
    expect(c.placements().map((p) => p.actor)).toEqual([undefined, undefined, undefined, 'light']);
  });

  it('keeps rejected versions with their reason (the newest 100) and the running canary, across a reopen', () => {
    const a = openStore();
    a.putModel(weights(1));
    a.putModel(weights(2)); // a canary, published to some eAPs
    a.putRejectedModel({ version: 3, basedOn: 2, source: 'gate', reason: 'worse than lec', body: weights(3) });
    a.putRejectedModel({ version: 2, basedOn: 1, source: 'canary', reason: 'worse than the control', body: null });
    a.putCanaryState({ version: 2, good: 1, eaps: [0, 1], startedMs: 5 });
    a.close();
    const b = openStore();
    expect(b.rejectedModels().map((r) => [r.version, r.basedOn, r.source, r.reason, r.hasWeights])).toEqual([
      [2, 1, 'canary', 'worse than the control', false],
      [3, 2, 'gate', 'worse than lec', true],
    ]);
    expect(b.rejectedWeights(3)!.checksum).toBe(weights(3).checksum); // its own weights
    expect(b.rejectedWeights(2)!.checksum).toBe(weights(2).checksum); // from models
    expect(b.rejectedWeights(9)).toBeNull();
    expect(b.canaryState()).toEqual({ version: 2, good: 1, eaps: [0, 1], startedMs: 5 });
    b.putCanaryState(null);
    expect(b.canaryState()).toBeNull();
    for (let v = 10; v < 115; v++) b.putRejectedModel({ version: v, basedOn: 1, source: 'gate', reason: `r${v}`, body: null });
    const kept = b.rejectedModels();
    expect(kept).toHaveLength(100);
    expect([kept[0].version, kept[99].version]).toEqual([114, 15]);
  });

  it('refuses a model or placement version that does not increase', () => {
    const s = openStore();
    s.putModel(weights(3));
    expect(() => s.putModel(weights(3))).toThrow(/version 3 is not above/);
    s.putPlacement(placementBody(2, 0, [[1]]));
    expect(() => s.putPlacement(placementBody(1, 0, [[1]]))).toThrow(/version 1 is not above/);
    expect(s.latestModelVersion()).toBe(3);
    expect(s.latestPlacementVersion()).toBe(2);
  });

  it('lists every stored placement oldest first, and reads them from a read-only handle on the same file', () => {
    const s = openStore();
    s.putPlacement(placementBody(1, 0, [[1, 0]]));
    s.putPlacement(placementBody(2, 1, [[0, 2]]));
    s.putPlacement(placementBody(3, 1, [[1, 1]]));
    const ro = Store.open(s.path, { readonly: true });
    const list = ro.placements();
    ro.close();
    expect(list.map((p) => [p.version, p.frame, Array.from(p.replicas)])).toEqual([
      [1, 0, [1, 0]],
      [2, 1, [0, 2]],
      [3, 1, [1, 1]],
    ]);
    expect(list[2]).toEqual(s.placement(3));
  });

  it('tracks agents across connect, apply and disconnect, and after a reopen', () => {
    const a = openStore();
    a.agentConnected(0, 's-0-1', { agentVersion: '0.1.0', weightVersion: null, placementVersion: null }, 1000);
    a.agentApplied(0, 'weights', 4, 2000);
    a.agentDisconnected(0, 'stale-session', 2500); // a replaced session closing late changes nothing
    expect(a.agent(0)).toMatchObject({ connected: true, weightVersion: 4, lastSeenMs: 2000 });
    a.agentDisconnected(0, 's-0-1', 3000);
    a.close();
    const b = openStore();
    expect(b.agents()).toEqual([
      { eapId: 0, sessionId: 's-0-1', agentVersion: '0.1.0', weightVersion: 4, placementVersion: null, connected: false, lastSeenMs: 3000 },
    ]);
  });

  it('keeps metrics in order by name', () => {
    const s = openStore();
    s.recordMetrics([
      { tsMs: 2, name: 'hub/sessions', eap: null, value: 3 },
      { tsMs: 1, name: 'hub/sessions', eap: null, value: 2 },
      { tsMs: 1, name: 'agent/throughputRate', eap: 1, value: 0.9 },
    ]);
    expect(s.metrics('hub/sessions').map((p) => p.value)).toEqual([2, 3]);
    expect(s.metrics('agent/throughputRate', 1)).toEqual([{ tsMs: 1, name: 'agent/throughputRate', eap: 1, value: 0.9 }]);
    expect(() => s.recordMetrics([{ tsMs: 1, name: 'x', eap: null, value: NaN }])).toThrow(/x is NaN/);
    expect(s.metrics('x')).toEqual([]); // the failed batch rolled back
  });

  it('copies itself, write-ahead log included, to a new file from a read-only handle while the writer is open; never over a file', () => {
    const s = openStore();
    s.putModel(weights(1));
    s.recordMetrics([{ tsMs: 5, name: 'agent/requests', eap: 0, value: 40 }]);
    expect(existsSync(`${file}-wal`)).toBe(true); // the writer is open: the rows are in the log, not yet in the file
    const reader = Store.open(file, { readonly: true, log: () => undefined });
    open.push(reader);
    const copy = join(dir, 'copy.db');
    reader.copyTo(copy);
    const c = Store.open(copy, { readonly: true, log: () => undefined });
    open.push(c);
    expect(c.latestModelVersion()).toBe(1);
    expect(c.metrics('agent/requests')).toEqual([{ tsMs: 5, name: 'agent/requests', eap: 0, value: 40 }]);
    expect(() => reader.copyTo(copy)).toThrow(/copy\.db exists: the copy goes to a new file/);
    expect(existsSync(`${copy}-wal`)).toBe(false); // one self-contained file
  });

  it('bounds the experience ring and continues its sequence after a reopen', () => {
    const a = openStore(4);
    for (let i = 0; i < 6; i++) expect(a.appendExperience(batch(i % 2, i), 100 + i)).toBe(i);
    expect(a.experienceCount()).toBe(4);
    expect(a.readExperience().map((r) => r.seq)).toEqual([2, 3, 4, 5]);
    a.close();

    const b = openStore(99); // capacity is the file's, not the new option
    expect(b.experienceCapacity).toBe(4);
    expect(b.appendExperience(batch(0, 6))).toBe(6);
    const rows = b.readExperience(5);
    expect(rows.map((r) => r.seq)).toEqual([5, 6]);
    expect(rows[0].body.transitions[0].slot).toBe(5);
    expect(Array.from(rows[0].body.transitions[0].mask)).toEqual([1, 0, 1]);
    expect(b.experienceCount()).toBe(4);
  });

  it('names the option in a bad experienceCapacity', () => {
    expect(() => Store.open(':memory:', { experienceCapacity: 0 })).toThrow(/experienceCapacity.*got 0/);
  });
});
