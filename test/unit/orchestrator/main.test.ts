import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { AgentLink } from '../../../agent/link';
import { AgentRuntime } from '../../../agent/runtime';
import { readConfig, startOrchestrator } from '../../../orchestrator/main';
import { Store } from '../../../orchestrator/store';
import { checkpointActor } from '../../../shared/nets/actor-file';
import { packWeights } from '../../../shared/protocol/weights';
import { NodeTelemetryModel } from '../../../shared/node-telemetry';
import type { DeviceWindow, VerdictsBody } from '../../../shared/protocol/envelope';
import { Rng } from '../../../shared/rng';
import { loadBackend } from '../../../shared/tf-backend';

describe('readConfig', () => {
  let dir: string;
  beforeEach(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kais-cfg-'))));
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));
  const write = (obj: unknown) => {
    const f = path.join(dir, 'c.json');
    fs.writeFileSync(f, typeof obj === 'string' ? obj : JSON.stringify(obj));
    return f;
  };

  it('fills the defaults: kais, static, one frame = slotS x slotsPerFrame', () => {
    const c = readConfig(write({}));
    expect(c).toMatchObject({
      orchestration: 'static',
      token: '',
      frameS: 25,
      speed: 1,
      executor: null,
      checkpoint: null,
      learner: 'cmmac',
      learnBatch: 2048,
      actorHead: 'softplus1',
      detector: 'vgru',
    });
    expect(c.scenario.name).toBe('kais');
  });

  it('gpg without a gpgModel runs the model that ships for the scenario (models/<scenario>-gpg.json)', () => {
    expect(readConfig(write({ orchestration: 'gpg' })).gpgModel).toMatch(/models[\\/]kais-gpg\.json$/);
    expect(readConfig(write({ orchestration: 'hpa' })).gpgModel).toBeNull();
  });

  it.each([
    [{ orchestration: 'gpo' }, /field "orchestration" must be one of static, hpa, gsp-ss, gpg/],
    [{ scenario: 'tiny', orchestration: 'gpg' }, /field "gpgModel" must name a GPG model file .*none ships for scenario "tiny"/],
    [{ orchestration: 'gpg', gpgModel: '/nonexistent.json' }, /field "gpgModel" \/nonexistent.json is not a file/],
    [{ frameS: -1 }, /field "frameS" must be a positive number/],
    [{ executor: 'ftp://x' }, /field "executor" must be an http:\/\/ URL/],
    [{ learner: 'ppo' }, /field "learner" must be "cmmac" or "none"/],
    [{ detector: 'lstm' }, /field "detector" must be "vgru" or "none"/],
    [{ learnBatch: 0 }, /field "learnBatch" must be a positive number/],
    [{ learnBatch: 1.5 }, /field "learnBatch" must be an integer/],
    [{ actorHead: 'tanh' }, /field "actorHead" must be relu1 or softplus1/],
    [{ colour: 'red' }, /field "colour" is not a config field/],
    [{ checkpoint: '/nonexistent.db' }, /field "checkpoint" \/nonexistent.db does not exist/],
    [{ tls: 'yes' }, /field "tls" must be null or \{"cert"/],
    [{ tls: { cert: 'c.pem' } }, /field "tls.key" must be a file path/],
    [{ tls: { cert: 'c.pem', key: 'k.pem', ca: 'x' } }, /field "tls.ca" is not a field of tls/],
    [{ tls: { cert: 'nope.pem', key: 'k.pem' } }, /field "tls": cannot read the certificate .*nope\.pem: ENOENT/],
  ])('refuses %j naming the file and the field', (cfg, msg) => {
    const f = write(cfg);
    expect(() => readConfig(f)).toThrow(msg);
    expect(() => readConfig(f)).toThrow(f);
  });

  it("reads tls files relative to the config file and checks that the key is the certificate's", async () => {
    const { writeSelfSignedPair } = await import('../../../shared/tls');
    await writeSelfSignedPair(path.join(dir, 'a'));
    await writeSelfSignedPair(path.join(dir, 'b'));
    const c = readConfig(write({ tls: { cert: 'a/cert.pem', key: 'a/key.pem' } }));
    expect(c.tls?.cert).toMatch(/BEGIN CERTIFICATE/);
    expect(() => readConfig(write({ tls: { cert: 'a/cert.pem', key: 'b/key.pem' } }))).toThrow(
      /c\.json: field "tls": the key .*b\/key\.pem is not the key of the certificate .*a\/cert\.pem/,
    );
  });

  it('refuses a file that is not JSON with one line naming it', () => {
    const f = write('{nope');
    expect(() => readConfig(f)).toThrow(new RegExp(`--config: cannot read ${f.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')} as JSON`));
  });
});

describe('startOrchestrator', () => {
  it('publishes the checkpoint as v1 with the head it was trained with, kept across a restart', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kais-orch-'));
    const cfgFile = path.join(dir, 'c.json');
    const model = path.resolve(__dirname, '../../../models/kais-cmmac.bin');
    fs.writeFileSync(cfgFile, JSON.stringify({ checkpoint: model, learner: 'none' }));
    const want = (JSON.parse(fs.readFileSync(`${model}.json`, 'utf8')) as { head: string }).head;
    const db = path.join(dir, 'o.db');
    try {
      const a = await startOrchestrator(readConfig(cfgFile), { dbPath: db });
      expect(a.store.latestModel()).toMatchObject({ version: 1, head: want });
      await a.close();
      const b = await startOrchestrator(readConfig(cfgFile), { dbPath: db }); // from the store now
      expect(b.store.latestModel()).toMatchObject({ version: 1, head: want });
      await b.close();
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('startOrchestrator with the actor switch (the shipped GPG model names a light actor)', () => {
  const models = path.resolve(__dirname, '../../../models');
  /** The shipped main actor; the store and the learned parts off. */
  const base = { checkpoint: path.join(models, 'kais-cmmac.bin'), learner: 'none', detector: 'none' };
  let dir: string;
  let db: string;
  /** A config file in the test's folder, read as the orchestrator reads it. */
  const write = (name: string, cfg: unknown) => {
    fs.writeFileSync(path.join(dir, name), JSON.stringify(cfg));
    return readConfig(path.join(dir, name));
  };
  beforeAll(async () => {
    await loadBackend();
  });
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kais-orch-switch-'));
    db = path.join(dir, 'o.db');
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('names an agent that does not announce the actor switch in an event (an older build dispatches with the main actor throughout)', async () => {
    const a = await startOrchestrator(write('gpg.json', { ...base, orchestration: 'gpg' }), { dbPath: db });
    const connect = async (eap: number, features: boolean) => {
      let runtime: AgentRuntime | null = null;
      const hello = () => {
        const { features: _f, ...old } = runtime!.helloBody('', '0.0.9');
        return features ? runtime!.helloBody('', '0.2.0') : old;
      };
      const link = new AgentLink({ url: a.hub.url, seed: 1, hello, backoff: { initialMs: 20, maxMs: 200 } });
      runtime = new AgentRuntime(
        (b) => link.send(b),
        (cb) => link.onFrame(cb),
        { eapId: eap },
      );
      const ready = new Promise((resolve) => link.once('ready', resolve));
      link.start();
      await ready;
      return async () => (await link.close(), runtime!.dispose());
    };
    try {
      const closeOld = await connect(0, false);
      const closeNew = await connect(1, true);
      const events = a.store.events({ kind: 'agent-no-actor-switch' });
      expect(events.map((e) => e.eap)).toEqual([0]);
      expect(events[0].message).toMatch(
        /^eAP 0: agent 0\.0\.9 does not announce the actor switch: it dispatches with the main actor in every frame/,
      );
      await closeOld();
      await closeNew();
    } finally {
      await a.close();
    }
  }, 60_000);

  it('publishes every version with the light actor and names the actor in its placements; a store from before the switch gets its actor again with the light one', async () => {
    // a store of the run before: hpa, one actor
    const before = await startOrchestrator(write('hpa.json', { ...base, orchestration: 'hpa' }), { dbPath: db });
    expect(before.store.latestModel()!.light).toBeUndefined();
    expect(before.store.latestPlacement()!.actor).toBeUndefined();
    await before.close();
    const lines: string[] = [];
    const a = await startOrchestrator(write('gpg.json', { ...base, orchestration: 'gpg' }), { dbPath: db, log: (l) => lines.push(l) });
    const m = a.store.latestModel()!;
    expect(m.version).toBe(2);
    const light = checkpointActor(path.join(models, 'kais-cmmac-drawn.bin'));
    expect(m.light!.shapes).toEqual(light.tensors.map((t) => t.shape));
    expect(Buffer.from(m.light!.tensors[0].buffer).equals(Buffer.from(light.tensors[0].data.buffer))).toBe(true);
    // the main actor is the stored v1's
    expect(m.checksum).toBe(a.store.model(1)!.checksum);
    expect(lines.some((l) => /published weights v2: stored v1's actor with the light actor of \S*kais-gpg\.json/.test(l))).toBe(true);
    // resumed on the stored placement of the hpa run, which named no actor: the agents dispatch with
    // the main one until the next step, and the policy says so
    expect(a.loop.policy.actorFor?.()).toBe('main');
    await a.close();
    const b = await startOrchestrator(write('gpg.json', { ...base, orchestration: 'gpg' }), { dbPath: db });
    expect(b.store.latestModel()!.version).toBe(2); // the stored version holds this light actor: served as it is
    await b.close();
    // a model without the switch: the stored actor again, without the light one
    const c = await startOrchestrator(
      write('lean.json', { ...base, orchestration: 'gpg', gpgModel: path.join(models, 'kais-gpg-lean.json') }),
      {
        dbPath: db,
      },
    );
    expect(c.store.latestModel()!.version).toBe(3);
    expect(c.store.latestModel()!.light).toBeUndefined();
    expect(c.store.latestModel()!.checksum).toBe(c.store.model(1)!.checksum);
    expect(c.loop.policy.actorFor?.()).toBeUndefined();
    await c.close();
    const fresh = await startOrchestrator(write('gpg.json', { ...base, orchestration: 'gpg' }), { dbPath: path.join(dir, 'fresh.db') });
    expect(fresh.store.latestModel()!.light).toBeDefined();
    expect(fresh.store.latestPlacement()!.actor).toBe('light');
    expect(fresh.loop.policy.actorFor?.()).toBe('light');
    await fresh.close();
    // resumed on a stored placement that named light: the policy resumes it
    const again = await startOrchestrator(write('gpg.json', { ...base, orchestration: 'gpg' }), { dbPath: path.join(dir, 'fresh.db') });
    expect(again.loop.policy.actorFor?.()).toBe('light');
    await again.close();
  }, 60_000);

  it('rolls the interrupted canary back first; the stored good actor then gets the light one (the canary version never reaches every agent)', async () => {
    const canary = { ...base, canary: true };
    const before = await startOrchestrator(write('hpa.json', { ...canary, orchestration: 'hpa' }), { dbPath: db });
    await before.close();
    // a canary of v2 (another actor) interrupted by the stop
    const s = Store.open(db);
    const other = checkpointActor(path.join(models, 'kais-cmmac-gpg.bin'));
    s.putModel({ ...packWeights(other.tensors, 2, other.head), epoch: s.epoch });
    s.putCanaryState({ version: 2, good: 1, eaps: [0], startedMs: Date.now() });
    s.close();
    const a = await startOrchestrator(write('gpg.json', { ...canary, orchestration: 'gpg' }), { dbPath: db });
    const latest = a.store.latestModel()!;
    expect(latest.checksum).toBe(a.store.model(1)!.checksum); // v1's actor, not the canary's
    expect(latest.light).toBeDefined();
    expect(a.store.canaryState()).toBeNull();
    expect(a.store.events({ kind: 'canary-rollback' })).toHaveLength(1);
    await a.close();
  }, 60_000);
});

describe('the learned device detector over a real WebSocket', () => {
  beforeAll(async () => {
    await loadBackend(); // a test is an entry point (the in-process engine: no compiled worker next to the sources)
  });

  /** Consecutive 12-sample windows of the simulator's telemetry model for one node. */
  const windows = (count: number, abnormal: boolean, seed: number, kind: DeviceWindow['kind'], firstId = 1): DeviceWindow[] => {
    const model = new NodeTelemetryModel(1, 1, new Rng(seed));
    const x = new Float64Array(4);
    return Array.from({ length: count }, (_, k) => {
      const values = new Float32Array(48);
      for (let t = 0; t < 12; t++) {
        model.sample(0, abnormal, 0.4, 0.5, x);
        values.set(x, t * 4);
      }
      return { node: 2, id: firstId + k, kind, shape: '2/4', steps: 12, dims: 4, values };
    });
  };

  it('fits on the train windows an agent sends, answers its ambiguous windows with a verdicts frame, and a restarted orchestrator answers from the stored detector', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kais-det-'));
    const cfgFile = path.join(dir, 'c.json');
    fs.writeFileSync(cfgFile, JSON.stringify({ learner: 'none', detector: 'vgru', scenario: 'small' }));
    const db = path.join(dir, 'o.db');
    const connect = async (url: string) => {
      const got: VerdictsBody[] = [];
      let runtime: AgentRuntime | null = null;
      const link = new AgentLink({ url, seed: 1, hello: () => runtime!.helloBody('', '0.1.0'), backoff: { initialMs: 20, maxMs: 200 } });
      runtime = new AgentRuntime(
        (b) => link.send(b),
        (cb) => link.onFrame(cb),
        { eapId: 0, onVerdicts: (b) => got.push(b) },
      );
      const ready = new Promise((resolve) => link.once('ready', resolve));
      link.start();
      await ready;
      return { rt: runtime, got, close: async () => (await link.close(), runtime!.dispose()) };
    };
    const until = async (pred: () => boolean, ms: number) => {
      for (const t0 = Date.now(); !pred();) {
        if (Date.now() - t0 > ms) throw new Error(`timed out after ${ms} ms`);
        await new Promise((r) => setTimeout(r, 50));
      }
    };
    const ambiguous = [...windows(3, false, 7, 'ambiguous', 100), ...windows(3, true, 8, 'ambiguous', 200)];
    try {
      const a = await startOrchestrator(readConfig(cfgFile), { dbPath: db });
      const c = await connect(a.hub.url);
      const train = windows(64, false, 1, 'train');
      c.rt.sendFrame('telemetry', { eap: 0, samples: [], windows: train });
      await until(() => a.detector!.fittedShapes().length === 1, 60_000);
      c.rt.sendFrame('telemetry', { eap: 0, samples: [], windows: ambiguous });
      await until(() => c.got.length > 0, 10_000);
      const first = c.got.flatMap((b) => b.verdicts);
      expect(first.map((v) => v.id)).toEqual([100, 101, 102, 200, 201, 202]);
      expect(first.every((v) => v.node === 2 && Number.isFinite(v.score))).toBe(true);
      expect(a.store.detectors().map((d) => [d.key, d.fitWindows])).toEqual([['2/4|12x4', 64]]);
      await c.close();
      await a.close();

      const b = await startOrchestrator(readConfig(cfgFile), { dbPath: db });
      await b.detector!.start();
      const d = await connect(b.hub.url);
      // node levels are not stored: the node's train windows come first (a refit needs 512)
      d.rt.sendFrame('telemetry', { eap: 0, samples: [], windows: [...train, ...ambiguous] });
      await until(() => d.got.length > 0, 10_000);
      expect(b.detector!.stats.fits).toBe(0);
      expect(d.got.flatMap((x) => x.verdicts)).toEqual(first); // same stored detector, same verdicts
      await d.close();
      await b.close();
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }, 90_000);
});
