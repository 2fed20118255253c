/**
 * The agent's side of issue 14: its cache is a private directory and remembers epochs; its runtime
 * follows a new orchestrator epoch (and distrusts held versions the orchestrator never issued)
 * over a memory link with a scripted orchestrator.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { AgentRuntime } from '../../../agent/runtime';
import { defaultCacheDir, StateCache } from '../../../agent/weights-cache';
import { Codec } from '../../../shared/protocol/codec';
import { makeFrame, placementBody, type Frame, type WeightsBody } from '../../../shared/protocol/envelope';
import { packWeights } from '../../../shared/protocol/weights';

const w = (version: number, epoch?: string): WeightsBody => {
  const b = packWeights([{ shape: [2], data: Float32Array.from([version, 1]) }], version);
  if (epoch) b.epoch = epoch;
  return b;
};

describe('agent cache: a private directory that remembers epochs', () => {
  let dir: string;
  beforeEach(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kais-cache-trust-'))));
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('creates its directory 0700, tightens a readable one, refuses one others can write, a symlink or a file', () => {
    const fresh = path.join(dir, 'a', 'b');
    new StateCache(fresh);
    expect(fs.statSync(fresh).mode & 0o777).toBe(0o700);
    const readable = path.join(dir, 'readable');
    fs.mkdirSync(readable, { mode: 0o755 });
    fs.chmodSync(readable, 0o755);
    new StateCache(readable);
    expect(fs.statSync(readable).mode & 0o777).toBe(0o700);
    const open = path.join(dir, 'open');
    fs.mkdirSync(open);
    fs.chmodSync(open, 0o777);
    expect(() => new StateCache(open)).toThrow(
      /^--cache: .*open is writable by everyone \(mode 777\); use a private directory \(chmod 700\)$/,
    );
    fs.chmodSync(open, 0o770);
    expect(() => new StateCache(open)).toThrow(/is writable by its group/);
    const link = path.join(dir, 'link');
    fs.symlinkSync(fresh, link);
    expect(() => new StateCache(link)).toThrow(/is a symbolic link/);
    if (process.getuid?.() === 0) {
      // (only root can hand a directory to another user)
      const theirs = path.join(dir, 'theirs');
      fs.mkdirSync(theirs, { mode: 0o700 });
      fs.chownSync(theirs, 65534, 65534);
      expect(() => new StateCache(theirs)).toThrow(/^--cache: .*theirs is owned by uid 65534, not by this user \(0\)$/);
    }
    const file = path.join(dir, 'file');
    fs.writeFileSync(file, 'x');
    expect(() => new StateCache(file)).toThrow(/^--cache: cannot create .*file \(EEXIST\)$|is not a directory/);
  });

  it('keeps the epoch of its weights and placement, and the default is per user, not under /tmp', () => {
    const c = new StateCache(path.join(dir, 'c'));
    c.saveWeights(w(3, 'ep-a'));
    c.savePlacement({ ...placementBody(4, 9, [[1, 0]]), epoch: 'ep-a' });
    expect(c.loadWeights()!.epoch).toBe('ep-a');
    expect(c.loadPlacement()!.epoch).toBe('ep-a');
    c.saveWeights(w(5)); // an orchestrator before epochs: no epoch kept
    expect(c.loadWeights()!.epoch).toBeUndefined();
    expect(fs.statSync(path.join(dir, 'c', 'weights.bin')).mode & 0o777).toBe(0o600);
    expect(defaultCacheDir(2, { XDG_CACHE_HOME: '/x/cache' })).toBe('/x/cache/kais/agent-2');
    expect(defaultCacheDir(2, {})).toBe(path.join(os.homedir(), '.cache', 'kais', 'agent-2'));
  });
});

describe('AgentRuntime epochs', () => {
  /** A runtime on a memory link; `orch(frame)` delivers an orchestrator frame, `sent` holds what the agent sent. */
  function setUp(held: { weights?: WeightsBody; placement?: ReturnType<typeof placementBody> & { epoch?: string } }) {
    const codec = new Codec();
    let deliver: (b: Uint8Array) => void = () => undefined;
    const sent: Frame[] = [];
    const rt = new AgentRuntime(
      (b) => {
        const r = codec.decode(b);
        if (r.ok) sent.push(r.frame);
        return true;
      },
      (cb) => {
        deliver = cb;
        return () => undefined;
      },
      { eapId: 0, weights: held.weights ?? null, placement: held.placement ?? null, instance: 'me' },
    );
    const events: { from: string | null; to: string; reason: string; weights: boolean }[] = [];
    rt.on('epoch', (e) => events.push(e));
    let seq = 0;
    const orch = (type: 'welcome' | 'weights' | 'placement', body: unknown) =>
      deliver(codec.encode(makeFrame(type, seq++, body as never) as Frame));
    return { rt, sent, events, orch };
  }

  it('says which epoch its versions belong to, and applies a lower version of a new epoch', () => {
    const t = setUp({ weights: w(7, 'old'), placement: { ...placementBody(9, 0, [[1]]), epoch: 'old' } });
    expect(t.rt.helloBody('tok', '1')).toMatchObject({ weightVersion: 7, placementVersion: 9, epoch: 'old', instance: 'me' });
    t.orch('welcome', { sessionId: 's', heartbeatMs: 1000, weightVersion: 1, placementVersion: 1, epoch: 'new' });
    expect(t.events).toEqual([{ from: 'old', to: 'new', reason: expect.stringMatching(/store is a new one/), weights: true }]);
    t.orch('weights', w(1, 'new'));
    t.orch('placement', { ...placementBody(1, 0, [[2]]), epoch: 'new' });
    expect(t.rt.weightVersion).toBe(1);
    expect(t.rt.placement!.epoch).toBe('new');
    expect(t.rt.stats.stale).toBe(0);
    // once on the new epoch, numbers count again: an older version of it is stale
    t.orch('weights', w(1, 'new'));
    expect(t.rt.stats.stale).toBe(1);
    // and a frame of an epoch the orchestrator does not serve now is stale too
    t.orch('weights', w(50, 'old'));
    expect(t.rt.stats.stale).toBe(2);
    expect(t.rt.weightVersion).toBe(1);
  });

  it('distrusts held versions above what the orchestrator says is current in the same epoch (a planted cache)', () => {
    const t = setUp({ weights: w(2 ** 53 - 1, 'e') });
    t.orch('welcome', { sessionId: 's', heartbeatMs: 1000, weightVersion: 3, placementVersion: null, epoch: 'e' });
    expect(t.events[0].reason).toMatch(/held weights v9007199254740991 above the orchestrator's 3 in the same epoch: not trusted/);
    expect(t.events[0].weights).toBe(true);
    t.orch('weights', w(3, 'e'));
    expect(t.rt.weightVersion).toBe(3);
  });

  it("a held placement above the orchestrator's in the same store distrusts the placement only: the weights (and what they decided) stay", () => {
    // an orchestrator that crashed before it saved placement v10 and came back on the same store at v9
    const t = setUp({ weights: w(3, 'e'), placement: { ...placementBody(10, 0, [[1]]), epoch: 'e' } });
    t.orch('welcome', { sessionId: 's', heartbeatMs: 1000, weightVersion: 3, placementVersion: 9, epoch: 'e' });
    expect(t.events).toEqual([
      { from: 'e', to: 'e', reason: expect.stringMatching(/held placement v10 above the orchestrator's 9/), weights: false },
    ]);
    expect(t.rt.weightVersion).toBe(3);
  });

  it('reports no version for what it holds of another epoch than the one it reports', () => {
    const t = setUp({ weights: w(4, 'a'), placement: { ...placementBody(6, 0, [[1]]), epoch: 'b' } });
    expect(t.rt.helloBody('', '1')).toMatchObject({ epoch: 'b', placementVersion: 6, weightVersion: null });
  });
});
