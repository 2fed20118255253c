import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { DetectorPools } from '../../../critic/detector/pools';
import { LearnedDetector } from '../../../orchestrator/detector';
import { Store } from '../../../orchestrator/store';
import { NodeTelemetryModel } from '../../../shared/node-telemetry';
import type { DeviceWindow, VerdictsBody } from '../../../shared/protocol/envelope';
import { Rng } from '../../../shared/rng';
import { loadBackend } from '../../../shared/tf-backend';

const T = 12;
/** Consecutive 12-sample windows of the simulator's telemetry model for one node. */
function windows(count: number, abnormal: boolean, seed: number, kind: DeviceWindow['kind'], shape = '4/8'): DeviceWindow[] {
  const model = new NodeTelemetryModel(1, 1, new Rng(seed));
  const x = new Float64Array(4);
  const out: DeviceWindow[] = [];
  for (let k = 0; k < count; k++) {
    const values = new Float32Array(T * 4);
    for (let t = 0; t < T; t++) {
      model.sample(0, abnormal, 0.4, 0.5, x);
      values.set(x, t * 4);
    }
    out.push({ node: 3, id: k + 1, kind, shape, steps: T, dims: 4, values });
  }
  return out;
}

const small = {
  minWindows: 48,
  thread: 'in-process' as const,
  vgru: { hidden: 8, latent: 3, components: 2, feature: 8, steps: 30, batchSize: 32, learningRate: 0.01 },
};

describe('LearnedDetector (orchestrator)', () => {
  beforeAll(async () => {
    await loadBackend(); // a test is an entry point (in-process engine; the worker loads its own)
  });
  let dir: string;
  beforeEach(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kais-det-'))));
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('fits a shape on its healthy windows, answers each agent for its ambiguous windows, and a restart scores with the stored detector', async () => {
    const store = Store.open(path.join(dir, 'o.db'));
    const sent: [number, VerdictsBody][] = [];
    const det = new LearnedDetector({ ...small, store, send: (eap, body) => sent.push([eap, body]) });
    try {
      const train = [...windows(20, false, 1, 'train'), ...windows(40, false, 2, 'train')];
      det.add(0, train.slice(0, 20));
      det.add(1, windows(4, false, 9, 'ambiguous')); // no detector for the shape yet: no verdict
      await det.idle();
      expect(det.fittedShapes()).toEqual([]);
      expect(det.stats.unscored).toBe(4);
      det.add(0, train.slice(20));
      await det.idle();
      expect(det.fittedShapes()).toEqual(['4/8|12x4']);
      expect(det.stats.fits).toBe(1);

      const normal = windows(6, false, 7, 'ambiguous');
      const broken = windows(6, true, 8, 'ambiguous').map((w) => ({ ...w, id: w.id + 100 }));
      det.add(2, [...normal, ...broken]);
      det.add(1, windows(1, true, 9, 'ambiguous', '2/4')); // another shape: unscored
      await det.idle();
      expect(sent.map(([eap]) => eap)).toEqual([2]);
      const v = sent[0][1].verdicts;
      expect(v.map((x) => x.id)).toEqual([...normal, ...broken].map((w) => w.id));
      const flagged = (ids: number[]) => v.filter((x) => ids.includes(x.id) && x.anomalous).length;
      expect(flagged(broken.map((w) => w.id))).toBeGreaterThanOrEqual(5);
      expect(flagged(normal.map((w) => w.id))).toBeLessThanOrEqual(1);
      expect(det.stats).toMatchObject({ scored: 12, unscored: 5 });

      // restart: the stored detector scores the same windows the same way, without a fit
      const sent2: VerdictsBody[] = [];
      const again = new LearnedDetector({ ...small, store, send: (_e, body) => sent2.push(body) });
      await again.start();
      expect(again.fittedShapes()).toEqual(['4/8|12x4']);
      again.add(2, [...normal, ...broken]);
      await again.idle();
      expect(again.stats.fits).toBe(0);
      expect(sent2[0].verdicts).toEqual(v);
      again.dispose();
    } finally {
      det.dispose();
      store.close();
    }
  });

  it('same windows, same verdicts (seeded per shape)', async () => {
    const run = async () => {
      const out: VerdictsBody[] = [];
      const det = new LearnedDetector({ ...small, store: null, send: (_e, b) => out.push(b) });
      det.add(0, windows(48, false, 4, 'train'));
      await det.idle();
      det.add(0, windows(3, true, 5, 'ambiguous'));
      await det.idle();
      det.dispose();
      return out;
    };
    expect(await run()).toEqual(await run());
  });

  it('refuses bad options', () => {
    const send = () => undefined;
    expect(() => new LearnedDetector({ store: null, send, minWindows: 1 })).toThrow(/minWindows/);
    expect(() => new LearnedDetector({ store: null, send, refitWindows: 0 })).toThrow(/refitWindows/);
  });
});

describe('DetectorPools', () => {
  const w = (node: number, kind: DeviceWindow['kind'], v: number): DeviceWindow => ({
    node,
    id: 1,
    kind,
    shape: 's',
    steps: 2,
    dims: 2,
    values: new Float32Array([v, 10 * v, v + 1, 10 * v]),
  });
  it("takes each window's own mean off, and scores an ambiguous window only once its shape is fitted", () => {
    const pools = new DetectorPools({ minWindows: 2 });
    expect(Array.from(pools.pack({ steps: 2, dims: 2 }, [w(0, 'ambiguous', 1).values]))).toEqual([-0.5, 0, 0.5, 0]);
    expect(pools.add(w(0, 'ambiguous', 1))).toBe('unscored');
    expect(pools.add(w(0, 'train', 1))).toBe('pooled');
    expect(pools.dueFit()).toBeNull();
    expect(pools.add(w(1, 'train', 3))).toBe('pooled');
    const p = pools.dueFit()!;
    expect(p.key).toBe('s|2x2');
    expect(Array.from(pools.takeFitBatch(p).windows)).toEqual([-0.5, 0, 0.5, 0, -0.5, 0, 0.5, 0]);
    p.fitted = true;
    expect(pools.dueFit()).toBeNull();
    expect(pools.add(w(0, 'ambiguous', 1))).toBe('score');
  });
});
