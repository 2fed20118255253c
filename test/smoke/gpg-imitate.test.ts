/**
 * scripts/gpg-lookahead.ts DATA_OUT and scripts/gpg-imitate.ts as processes (the built dist/scripts):
 * the search writes one record per decision, behaviour cloning on them writes a model that loads,
 * the same seed gives the same output, and bad data or settings exit 2 with one line.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { loadGpgModel } from '../../critic/gpg/load';
import { loadScenario } from '../../shared/scenario';

const ROOT = path.resolve(__dirname, '..', '..');
const MODEL = path.join(ROOT, 'models', 'small-gpg-lec.json');

function run(script: string, env: Record<string, string>) {
  const r = spawnSync(process.execPath, [path.join(ROOT, 'dist', 'scripts', script)], {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 120_000,
    env: { ...process.env, SCENARIO: 'small', ...env },
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('imitating the search (scripts/gpg-lookahead.ts DATA_OUT, scripts/gpg-imitate.ts)', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kais-imitate-'));
  const data = path.join(dir, 'd.jsonl');
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('writes a record per decision, clones it into a model that loads, same seed same output', () => {
    const look = run('gpg-lookahead.js', { GPG: MODEL, SEEDS: '1,2', FRAMES: '3', HORIZON: '1', DATA_OUT: data });
    expect(look.stderr).toBe('');
    expect(look.code).toBe(0);
    const records = fs
      .readFileSync(data, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { seed: number; k: number; teacher: number[]; nodes: number[]; scores: { greedy: number } });
    expect(records.map((r) => [r.seed, r.k])).toEqual([
      [1, 0],
      [1, 1],
      [2, 0],
      [2, 1],
    ]);
    for (const r of records) expect(r.teacher).toHaveLength(r.nodes.length);
    const env = {
      DATA: data,
      INIT: MODEL,
      EPOCHS: '2',
      BATCH: '2',
      LR: '1e-3',
      VALIDATE: '0.5',
      EVAL_SEEDS: '901',
      EVAL_FRAMES: '3',
      EVAL_LOADS: '1,1.5',
    };
    const out = path.join(dir, 'm.json');
    const r = run('gpg-imitate.js', { ...env, OUT: out });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^2 training records \(1 seeds\), 2 validation \(1\); the teacher differs from greedy on \d+ of \d+ picks\n/);
    expect(r.stdout).toMatch(
      /\nepoch 2 loss \d+\.\d+: training records: same nodes [\d.]+, kept \d+\/\d+, dropped \d+\/\d+, changed \d+\/\d+ \| validation:/,
    );
    expect(r.stdout).toMatch(
      /\nevaluation load 1, seeds 901, 3 frames, lec: before 0\.\d+ \(\d+ orders\) \| after 0\.\d+ \(\d+\) \| lec\/hpa 0\.\d+\n/,
    );
    expect(r.stdout).toMatch(/\nevaluation load 1\.5, seeds 901, 3 frames, lec: before 0\.\d+ /);
    const m = loadGpgModel(out, loadScenario('small'), 'OUT');
    expect(m.meta.trainedWith).toMatchObject({ script: 'scripts/gpg-imitate.ts', records: 2, epochs: 2, updates: 0, init: MODEL });
    m.net.dispose();
    const again = run('gpg-imitate.js', { ...env, OUT: path.join(dir, 'm2.json') });
    expect(again.stdout.replace(/m2\.json/, 'm.json')).toBe(r.stdout);
  });

  it.each([
    [{ DATA: 'none.jsonl' }, /^gpg-imitate: DATA: cannot read none\.jsonl/],
    [{ DATA: 'BAD' }, /^gpg-imitate: DATA: .*bad\.jsonl line 2: /],
    [{ EPOCHS: '-1' }, /^gpg-imitate: EPOCHS must be a whole number >= 0, got -1\n$/],
    [{ EVAL_LOADS: '1,x' }, /^gpg-imitate: EVAL_LOADS must be positive numbers, got 1,x\n$/],
    [{ INIT: 'none.json' }, /^gpg-imitate: INIT: none\.json: /],
  ])('%j exits 2 with one line', (env, problem) => {
    const bad = path.join(dir, 'bad.jsonl');
    fs.writeFileSync(bad, fs.readFileSync(data, 'utf8').split('\n')[0] + '\n{"state": 1}\n');
    const r = run('gpg-imitate.js', { DATA: data, INIT: MODEL, ...env, ...(env.DATA === 'BAD' ? { DATA: bad } : {}) });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(problem);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
  });
});
