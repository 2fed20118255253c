/**
 * scripts/guard-tune.ts as a process (the built dist/scripts/guard-tune.js): a guard grid (a
 * spreading share among it) under the shipped GPG against heuristic pairs, each ratio with its
 * paired standard error, the same numbers for the same seeds; bad settings and the held-out seeds
 * exit 2 with one line.
 */
import { expectUsageExit, runScript } from '../support/cli';

const GRID = JSON.stringify([{}, { spread: { fallback: 'round-robin', from: 0.2, to: 0.35, max: 1 } }]);
const run = (env: Record<string, string>) =>
  runScript('guard-tune', {
    SEEDS: '1-2',
    LOADS: '1.5',
    FRAMES: '1',
    ORCHESTRATION: 'gpg',
    HEURISTICS: 'lec/hpa;round-robin/static',
    GRID,
    ...env,
  });

describe('scripts/guard-tune', () => {
  it('runs each guard of the grid under gpg against the pairs, with paired ratios, reproducibly', () => {
    const r = run({});
    expect(r.code).toBe(0);
    const out = r.stdout.split('\n').filter((l) => !/tensorflow|^=+$|^$/i.test(l));
    expect(out[0]).toBe('kais, gpg, p4, 1 frames, seeds 1,2, loads 1.5');
    expect(out[1]).toMatch(/^load 1\.5: lec\/hpa 0\.\d{4}, round-robin\/static 0\.\d{4}, cmmac 0\.\d{4} \(\d\.\d{3}x best\)$/);
    const rows = out.filter((l) => l.startsWith('  {') && l.includes('x best (paired'));
    expect(rows).toHaveLength(2);
    expect(rows[0]).toContain('"spread":null');
    expect(rows[1]).toContain('"spread":{"fallback":"round-robin","from":0.2,"to":0.35,"max":1}');
    for (const row of rows) {
      const m =
        /: (0\.\d{4}) = (\d\.\d{3})x best \(paired (\d\.\d{3}), s\.e\. (\d\.\d{3})\), \d\.\d{3}x cmmac, fallback [\d.]+%, late [\d.]+%$/.exec(
          row,
        );
      expect(m).not.toBeNull();
      // two seeds: a paired ratio with a standard error, near the ratio of the means
      expect(Math.abs(Number(m![3]) - Number(m![2]))).toBeLessThan(0.05);
    }
    // the spreading share decided some requests differently: the two guards' rates differ
    const rate = (row: string) => /: (0\.\d{4}) = /.exec(row)![1];
    expect(rate(rows[1])).not.toBe(rate(rows[0]));
    expect(out.filter((l) => l.startsWith('worst over the loads'))).toHaveLength(1);
    expect(run({}).stdout).toBe(r.stdout);
  }, 180_000);

  it.each([
    [{ SEEDS: '2001-2003' }, /^guard-tune: SEEDS: 2000-2010 are the held-out seeds; tune on others/],
    [{ SEEDS: 'x' }, /^guard-tune: SEEDS: expected a-b or a comma-separated list of integers, got "x"/],
    [{ SEEDS: '' }, /^guard-tune: SEEDS: expected a-b/],
    [{ SEEDS: ',1' }, /^guard-tune: SEEDS: expected a-b/],
    [{ SEEDS: '1,1' }, /^guard-tune: SEEDS: seed 1 is listed twice/],
    [{ SEEDS: '3000-500000' }, /^guard-tune: SEEDS: 497001 seeds, more than 1000/],
    [{ FRAMES: '0' }, /^guard-tune: FRAMES must be a whole number in \[1, 100000\], got 0/],
    [{ FRAMES: '1e9' }, /^guard-tune: FRAMES must be a whole number in \[1, 100000\], got 1e9/],
    [{ LOADS: '1000' }, /^guard-tune: LOADS must be numbers in \(0, 100\], got 1000/],
    [{ LOADS: '1,' }, /^guard-tune: LOADS must be numbers in \(0, 100\], got 1,/],
    [{ TRACE: '/nonexistent/w.csv' }, /^guard-tune: TRACE: cannot read \/nonexistent\/w\.csv/],
    [{ TRACE: '/tmp' }, /^guard-tune: TRACE: folder \/tmp holds/],
    [{ HEURISTICS: 'cmmac/hpa' }, /^guard-tune: HEURISTICS: cmmac is not a dispatch heuristic/],
    [{ HEURISTICS: 'lec/hpa/x' }, /^guard-tune: HEURISTICS: lec\/hpa\/x is not a dispatch heuristic or a dispatch\/orchestration pair/],
    [{ ORCHESTRATION: 'magic' }, /^guard-tune: ORCHESTRATION must be gpg or an orchestration baseline, got magic/],
    [{ ORCHESTRATION: 'magic', HEURISTICS: 'lec' }, /^guard-tune: ORCHESTRATION must be gpg or an orchestration baseline, got magic/],
    [{ GRID: '[{"spread":{"fallback":"round-robin","from":0.4,"to":0.3,"max":1}}]' }, /^guard-tune: GRID\[0\]: spread\.to must be in/],
    [{ GRID: '{' }, /^guard-tune: GRID: not JSON/],
    [{ GRID: '[{"bogus":1}]' }, /^guard-tune: GRID\[0\]: unknown setting "bogus" \(known: /],
    [{ GRID: '[null]' }, /^guard-tune: GRID\[0\]: not an object of guard settings/],
  ])('%j exits 2 with one line', (env, problem) => {
    expectUsageExit(run(env), problem);
  });
});
