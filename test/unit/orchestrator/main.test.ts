import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { readConfig, startOrchestrator } from '../../../orchestrator/main';

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
    expect(c).toMatchObject({ orchestration: 'static', token: '', frameS: 25, speed: 1, executor: null, checkpoint: null, learner: 'cmmac', learnBatch: 2048, actorHead: 'softplus1', detector: 'vgru' });
    expect(c.scenario.name).toBe('kais');
  });

  it.each([
    [{ orchestration: 'gpg' }, /field "orchestration" must be one of static, hpa/],
    [{ frameS: -1 }, /field "frameS" must be a positive number/],
    [{ executor: 'ftp://x' }, /field "executor" must be an http:\/\/ URL/],
    [{ learner: 'ppo' }, /field "learner" must be "cmmac" or "none"/],
    [{ detector: 'lstm' }, /field "detector" must be "vgru" or "none"/],
    [{ learnBatch: 0 }, /field "learnBatch" must be a positive number/],
    [{ learnBatch: 1.5 }, /field "learnBatch" must be an integer/],
    [{ actorHead: 'tanh' }, /field "actorHead" must be relu1 or softplus1/],
    [{ colour: 'red' }, /field "colour" is not a config field/],
    [{ checkpoint: '/nonexistent.db' }, /field "checkpoint" \/nonexistent.db does not exist/],
  ])('refuses %j naming the file and the field', (cfg, msg) => {
    const f = write(cfg);
    expect(() => readConfig(f)).toThrow(msg);
    expect(() => readConfig(f)).toThrow(f);
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
