import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { StateCache } from '../../../agent/weights-cache';
import { placementBody } from '../../../shared/protocol/envelope';
import { packLightActor, packWeights } from '../../../shared/protocol/weights';

describe('StateCache', () => {
  let dir: string;
  beforeEach(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kais-cache-'))));
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('returns the weights and placement it saved', () => {
    const c = new StateCache(dir);
    const w = packWeights(
      [
        { shape: [2, 2], data: Float32Array.from([1, 2, 3, 4]) },
        { shape: [2], data: Float32Array.from([5, 6]) },
      ],
      3,
    );
    const p = placementBody(4, 9, [
      [1, 0],
      [2, 3],
    ]);
    c.saveWeights(w);
    c.savePlacement(p);
    const again = new StateCache(dir);
    expect(again.loadWeights()).toEqual(w);
    expect(again.loadPlacement()).toEqual(p);
  });

  it("keeps the actor switch: the weights' light actor and each placement's actor (a restarted agent dispatches with the frame's actor)", () => {
    const c = new StateCache(dir);
    const w = {
      ...packWeights([{ shape: [2], data: Float32Array.from([1, 2]) }], 5, 'relu1'),
      light: packLightActor([{ shape: [2], data: Float32Array.from([3, 4]) }], 'softplus1'),
      epoch: 'epoch-a',
    };
    c.saveWeights(w);
    expect(new StateCache(dir).loadWeights()).toEqual(w);
    for (const actor of ['light', 'main'] as const) {
      const p = { ...placementBody(6, 2, [[1, 0]]), actor };
      c.savePlacement(p);
      expect(new StateCache(dir).loadPlacement()).toEqual(p);
    }
    // a placement without one, or with one this build does not know, is read as naming none (main)
    c.savePlacement(placementBody(7, 3, [[1, 0]]));
    expect(new StateCache(dir).loadPlacement()!.actor).toBeUndefined();
    fs.writeFileSync(path.join(dir, 'placement.json'), JSON.stringify({ ...placementBody(8, 4, [[1]]), replicas: [1], actor: 'heavy' }));
    expect(new StateCache(dir).loadPlacement()!.actor).toBeUndefined();
  });

  it('a weights file that cannot be written leaves no cached weights and no temporary file (not the old weights under the new epoch)', () => {
    const c = new StateCache(dir);
    const w = (version: number, epoch: string) => ({ ...packWeights([{ shape: [2], data: Float32Array.from([1, 2]) }], version), epoch });
    c.saveWeights(w(1, 'epoch-a'));
    // the rename onto weights.bin fails (a non-empty folder in its place), after the new epoch was written
    fs.rmSync(path.join(dir, 'weights.bin'));
    fs.mkdirSync(path.join(dir, 'weights.bin', 'x'), { recursive: true });
    expect(() => c.saveWeights(w(1, 'epoch-b'))).toThrow();
    expect(fs.readdirSync(dir)).toEqual([]);
    expect(new StateCache(dir).loadWeights()).toBeNull();
  });

  it('returns null for an empty, truncated or corrupt cache instead of failing, and says why for a damaged file', () => {
    const c = new StateCache(dir);
    const said: string[] = [];
    const ignored = (why: string) => said.push(why);
    // nothing cached: null, and nothing to say
    expect(c.loadWeights(ignored)).toBeNull();
    expect(c.loadPlacement(ignored)).toBeNull();
    expect(said).toEqual([]);
    c.saveWeights(packWeights([{ shape: [3], data: Float32Array.from([1, 2, 3]) }], 1));
    const f = path.join(dir, 'weights.bin');
    fs.writeFileSync(f, fs.readFileSync(f).subarray(0, 20));
    expect(c.loadWeights(ignored)).toBeNull();
    fs.writeFileSync(path.join(dir, 'placement.json'), '{"version":1,"frame":0,"numServices":1,"numNodes":2,"replicas":[1]}');
    expect(c.loadPlacement(ignored)).toBeNull();
    fs.writeFileSync(path.join(dir, 'placement.json'), '{"version":1,"fra');
    expect(c.loadPlacement(ignored)).toBeNull();
    expect(said).toEqual([
      expect.stringMatching(/weights\.bin: \S/),
      expect.stringMatching(/placement\.json: not a placement/),
      expect.stringMatching(/placement\.json: \S/),
    ]);
  });
});
