/**
 * scripts/gpg-lookahead.ts as a process (the built dist/scripts/gpg-lookahead.js): the search over
 * GPG's orders runs and reports it beside greedy GPG and hpa; bad settings and a missing model exit 2
 * with one line.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { teacherDecision, type ImitationRecord } from '../../critic/gpg/imitate';
import { runScript } from '../support/cli';
import { writeSyntheticTrace } from '../support/trace';

const ROOT = path.resolve(__dirname, '..', '..');

const run = (env: Record<string, string>) =>
  runScript('gpg-lookahead', {
    SCENARIO: 'small',
    GPG: path.join(ROOT, 'models', 'small-gpg-lec.json'),
    SEEDS: '1',
    FRAMES: '3',
    HORIZON: '1',
    ...env,
  });

describe('scripts/gpg-lookahead', () => {
  it('searches over the orders and reports the search, greedy GPG and hpa per seed and on average', () => {
    const r = run({});
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(
      /^seed 1: search 0\.\d+ \(\d+ orders; greedy kept at \d+ of 2 decisions\) \| greedy gpg 0\.\d+ \(\d+\) \| lec\/hpa 0\.\d+\n/,
    );
    expect(r.stdout).toMatch(/\nmean over 1 seeds: search 0\.\d+ \| greedy gpg 0\.\d+ \| lec\/hpa 0\.\d+\n$/);
    // same seed, same numbers
    expect(run({}).stdout).toBe(r.stdout);
  });

  it("FUTURES scores the candidates on other seeds' arrivals after each decision (no hindsight); CANDIDATES=swaps also tries next-best actions", () => {
    const r = run({ FUTURES: '2', CANDIDATES: 'swaps' });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^seed 1: search 0\.\d+ \(\d+ orders; greedy kept at \d+ of 2 decisions\)/);
    expect(run({ FUTURES: '2', CANDIDATES: 'swaps' }).stdout).toBe(r.stdout);
  });

  it("CANDIDATES=hpa also tries hpa's orders on other nodes, on a TRACE window; its records are valid imitation records", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kais-lookahead-'));
    try {
      const trace = writeSyntheticTrace(path.join(dir, 'tasks.csv'));
      const data = path.join(dir, 'd.jsonl');
      const env = { CANDIDATES: 'swaps,hpa', TRACE: trace, FRAMES: '4', DATA_OUT: data };
      const r = run(env);
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      expect(r.stdout).toMatch(/^seed 1: search 0\.\d+ \(\d+ orders; greedy kept at \d+ of 3 decisions\)/);
      const records = fs
        .readFileSync(data, 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as ImitationRecord & { scores: { hpa: number[] } });
      expect(records).toHaveLength(3);
      for (const rec of records) {
        expect(Array.isArray(rec.scores.hpa)).toBe(true);
        expect(teacherDecision(rec).nodes).toEqual(rec.teacherNodes);
      }
      // the trace, not P4: another workload gives other numbers; same seed, same numbers
      expect(run({ ...env, TRACE: '' }).stdout).not.toBe(r.stdout);
      expect(run(env).stdout).toBe(r.stdout);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it.each([
    [{ CANDIDATES: 'all' }, /^gpg-lookahead: CANDIDATES must list drops, swaps or hpa, got all\n$/],
    [{ TRACE: 'no-such.csv' }, /^gpg-lookahead: TRACE: no-such\.csv does not exist\n$/],
    [{ FUTURES: '-1' }, /^gpg-lookahead: FUTURES must be a whole number >= 0, got -1\n$/],
    [{ HORIZON: '3' }, /^gpg-lookahead: FRAMES and HORIZON must be whole numbers >= 1 with HORIZON < FRAMES, SEEDS integers\n$/],
    [{ GPG: 'none.json' }, /^gpg-lookahead: GPG: cannot read none\.json/],
  ])('%j exits 2 with one line', (env, problem) => {
    const r = run(env);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(problem);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
  });
});
