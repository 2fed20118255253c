/**
 * scripts/train-gpg.ts as a process (the built dist/scripts/train-gpg.js): trace windows to train
 * and evaluate on (TRACES, EVAL_TRACE) and GPG's action budget (NODES_PER_FRAME); a bad window or
 * budget, or an INIT model that is missing, malformed or of another scenario, exits 2 with one line
 * before training, and writes nothing. An INIT with hpa's scale-in trains under it and keeps it.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { expectUsageExit, runScript } from '../support/cli';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kais-train-gpg-'));
const out = path.join(dir, 'gpg.json');

const run = (env: Record<string, string>) =>
  runScript('train-gpg', { SCENARIO: 'tiny', UPDATES: '2', ROLLOUTS: '2', FRAMES: '2', EVAL_EVERY: '0', OUT: out, ...env });

/** A made-up v2017 window (not trace rows). */
function window(name: string): string {
  const lines: string[] = [];
  for (let j = 0; j < 30; j++) lines.push(`${j * 4},${j * 4 + 9},${name}${j},${j},1,Terminated,60,0.01`);
  const f = path.join(dir, `${name}.csv`);
  fs.writeFileSync(f, lines.join('\n') + '\n');
  return f;
}

afterEach(() => fs.rmSync(out, { force: true }));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

describe('train-gpg TRACES / EVAL_TRACE / NODES_PER_FRAME', () => {
  it('trains on the windows in turn and records them in the model', () => {
    const a = window('a');
    const b = window('b');
    const r = run({ TRACES: `${a},${b}`, EVAL_TRACE: a });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`u=0 load 1 trace ${a}`);
    expect(r.stdout).toContain(`u=1 load 1 trace ${b}`);
    const model = JSON.parse(fs.readFileSync(out, 'utf8')) as { trainedWith: { traces: string[]; evalTrace: string } };
    expect(model.trainedWith.traces).toEqual([a, b]);
    expect(model.trainedWith.evalTrace).toBe(a);
  });

  it("NODES_PER_FRAME trains GPG with that budget and records it in the model (a fine-tune keeps its init's)", () => {
    const r = run({ NODES_PER_FRAME: '3' });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect((JSON.parse(fs.readFileSync(out, 'utf8')) as { nodesPerFrame?: number }).nodesPerFrame).toBe(3);
    const init = path.join(dir, 'init.json');
    fs.renameSync(out, init);
    expect(run({ INIT: init }).code).toBe(0);
    expect((JSON.parse(fs.readFileSync(out, 'utf8')) as { nodesPerFrame?: number }).nodesPerFrame).toBe(3);
    // the scenario's own budget (tiny: 2) is not written: the model follows its scenario
    expect(run({ INIT: init, NODES_PER_FRAME: '2' }).code).toBe(0);
    expect((JSON.parse(fs.readFileSync(out, 'utf8')) as { nodesPerFrame?: number }).nodesPerFrame).toBeUndefined();
  });

  it('VINE trains on vine rollouts (one sampled branch decision per rollout) and records the horizon', () => {
    const r = run({ VINE: '1', ROLLOUTS: '3', FRAMES: '3' });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/u=1 load 1 throughput /);
    expect((JSON.parse(fs.readFileSync(out, 'utf8')) as { trainedWith: { vine?: { horizon: number } } }).trainedWith.vine).toEqual({
      horizon: 1,
    });
  });

  it("an INIT with hpa's scale-in (scaleIn) trains under it and the model keeps the field", () => {
    expect(run({}).code).toBe(0);
    const init = path.join(dir, 'scale-in.json');
    const scaleIn = { rule: 'hpa', targetUtilisation: 0.5, keepPerEap: true, maxFailedShare: 0.3 };
    fs.writeFileSync(init, JSON.stringify({ ...(JSON.parse(fs.readFileSync(out, 'utf8')) as object), scaleIn }));
    fs.rmSync(out);
    const r = run({ INIT: init, EVAL_EVERY: '1' });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/eval u=0: gpg /);
    expect((JSON.parse(fs.readFileSync(out, 'utf8')) as { scaleIn?: unknown }).scaleIn).toEqual(scaleIn);
  });

  it.each([
    [
      'TRACES',
      'a missing window',
      () => ({ TRACES: `${window('ok')},${path.join(dir, 'none.csv')}` }),
      /^train-gpg: TRACES: .*none\.csv does not exist\n$/,
    ],
    [
      'EVAL_TRACE',
      'a file that is not a trace',
      () => {
        const f = path.join(dir, 'bad.csv');
        fs.writeFileSync(f, 'hello,world\n');
        return { EVAL_TRACE: f };
      },
      /^train-gpg: EVAL_TRACE: /,
    ],
    ['NODES_PER_FRAME', 'zero', () => ({ NODES_PER_FRAME: '0' }), /^train-gpg: NODES_PER_FRAME must be positive, got 0\n$/],
    [
      'VINE',
      'no frames after the branch',
      () => ({ VINE: '2', FRAMES: '2' }),
      /^train-gpg: VINE must be a whole number of frames below FRAMES \(2\), got 2\n$/,
    ],
    [
      'NODES_PER_FRAME',
      'a fraction',
      () => ({ NODES_PER_FRAME: '1.5' }),
      /^train-gpg: NODES_PER_FRAME must be a whole number, got 1\.5\n$/,
    ],
    ['INIT', 'a missing model', () => ({ INIT: path.join(dir, 'none.json') }), /^train-gpg: INIT: .*none\.json: ENOENT/],
    [
      'INIT',
      'a model with a bad nodesPerFrame',
      () => {
        // a good tiny model, then its budget made 0
        expect(run({}).code).toBe(0);
        const f = path.join(dir, 'bad-h.json');
        fs.writeFileSync(f, JSON.stringify({ ...(JSON.parse(fs.readFileSync(out, 'utf8')) as object), nodesPerFrame: 0 }));
        fs.rmSync(out);
        return { INIT: f };
      },
      /^train-gpg: INIT: .*bad-h\.json: .*nodesPerFrame must be a whole number >= 1, got 0\n$/,
    ],
    [
      'INIT',
      'a model of another scenario',
      () => ({ INIT: path.join(__dirname, '..', '..', 'models', 'kais-gpg.json') }),
      /^train-gpg: INIT: .*kais-gpg\.json: made for 30 services, the scenario has 4\n$/,
    ],
    [
      'INIT',
      'a file that is not JSON',
      () => {
        const f = path.join(dir, 'not.json');
        fs.writeFileSync(f, 'hello');
        return { INIT: f };
      },
      /^train-gpg: INIT: .*not\.json: /,
    ],
  ])('%s with %s exits 2 with one line and writes nothing', (_k, _what, env, problem) => {
    expectUsageExit(run(env()), problem, out);
  });
});
