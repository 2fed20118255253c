/**
 * scripts/placement-search.ts as a process (the built dist/scripts/placement-search.js): the climb
 * over fixed placements runs, reports each step and the check on other seeds, gives the same numbers
 * for the same seed, and a placement it wrote scores the same when read back; bad settings exit 2
 * with one line.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { expectUsageExit, runScript } from '../support/cli';
import { tmpDir } from '../support/tmp';

const run = (env: Record<string, string>) =>
  runScript('placement-search', { SCENARIO: 'small', SEED: '1', FRAMES: '2', ITERS: '2', RANDOM: '2', ...env });

describe('scripts/placement-search', () => {
  it('climbs from static and hpa, checks the result on other seeds, and reads back what it wrote', () => {
    const dir = tmpDir('kais-psearch-');
    const out = path.join(dir, 'p.json');
    const r = run({ OUT: out, CHECK_SEEDS: '2-3', CHECK_FRAMES: '2' });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^start static: 0\.\d{4} \(replica-s \d+\)\nstart hpa: 0\.\d{4} \(replica-s \d+\)\n/);
    const best = /\nbest on seed 1, 2 frames: (0\.\d{4} \(replica-s \d+\))\n/.exec(r.stdout);
    expect(best).not.toBeNull();
    expect(r.stdout).toMatch(
      /\nseed 2: lec\/fixed 0\.\d{4} \(\d+, \d+ operations\) {2}lec\/hpa 0\.\d{4} \(\d+, \d+ operations\) {2}lec\/static 0\.\d{4} \(\d+, 0 operations\)\nseed 3: /,
    );
    expect(r.stdout).toMatch(/\nlec\/fixed mean 0\.\d{4}\nlec\/hpa mean 0\.\d{4}\nlec\/static mean 0\.\d{4}\n$/);
    // same seed, same numbers
    expect(run({ OUT: out, CHECK_SEEDS: '2-3', CHECK_FRAMES: '2' }).stdout).toBe(r.stdout);
    // on small the climb finds a better placement than both starts: OUT holds it, and read back
    // (FROM, no step) it scores what the climb said, on the same seed
    expect(r.stdout).toMatch(/\nstep 0: \S+ -> 0\.\d{4} \(replica-s \d+\) of \d+\n/);
    const saved = JSON.parse(fs.readFileSync(out, 'utf8')) as { seed: number; rate: number };
    expect(saved.seed).toBe(1);
    expect(`${saved.rate.toFixed(4)} `).toBe(best![1].slice(0, 7));
    const back = run({ FROM: out, ITERS: '0' });
    expect(back.stderr).toBe('');
    expect(back.stdout).toBe(`start FROM: ${best![1]}\nbest on seed 1, 2 frames: ${best![1]}\n`);
  }, 120_000);

  it("checks with mpc: the climb repeated every frame on the last frames' arrivals, the same numbers for the same seed", () => {
    const env = {
      ITERS: '0',
      MPC_STEPS: '1',
      MPC_HISTORY: '2',
      CHECK_SEEDS: '2',
      CHECK_FRAMES: '3',
      CHECK_POLICIES: 'lec/mpc,lec/hpa,lec/static',
    };
    const r = run(env);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const line =
      /\nseed 2: lec\/mpc (0\.\d{4}) \((\d+), (\d+) operations\) {2}lec\/hpa 0\.\d{4} \(\d+, \d+ operations\) {2}lec\/static (0\.\d{4}) \((\d+), 0 operations\)\n/.exec(
        r.stdout,
      );
    expect(line).not.toBeNull();
    // mpc ordered something, and what it ran is not the initial placement static holds
    const [, mpcRate, mpcReplicaS, mpcOps, staticRate, staticReplicaS] = line!;
    expect(Number(mpcOps)).toBeGreaterThan(0);
    expect([mpcRate, mpcReplicaS]).not.toEqual([staticRate, staticReplicaS]);
    expect(run(env).stdout).toBe(r.stdout);
  }, 120_000);

  it("OBJECTIVE=lean: every step holds fewer replica-seconds and keeps FLOOR times hpa's rate", () => {
    const env = { ITERS: '3', OBJECTIVE: 'lean', FLOOR: '0.95' }; // 2 frames: 2 steps, then none better (4 frames: 3 steps, twice the time)
    const r = run(env);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const head = /^lec\/hpa: (0\.\d{4}) \(replica-s (\d+)\); floor (0\.\d{4})\n/.exec(r.stdout);
    expect(head).not.toBeNull();
    const floor = Number(head![3]);
    expect(floor).toBeCloseTo(0.95 * Number(head![1]), 3);
    const steps = [...r.stdout.matchAll(/\nstep \d+: \S+ -> (0\.\d{4}) \(replica-s (\d+)\) of \d+/g)].map((m) => [
      Number(m[1]),
      Number(m[2]),
    ]);
    // small's hpa holds more than it needs at this floor: the climb takes replicas away
    expect(steps.length).toBeGreaterThanOrEqual(2);
    for (let i = 0; i < steps.length; i++) {
      expect(steps[i][0]).toBeGreaterThanOrEqual(floor - 1e-4);
      if (i > 0) expect(steps[i][1]).toBeLessThan(steps[i - 1][1]);
    }
    expect(run(env).stdout).toBe(r.stdout);
  }, 120_000);

  it('mpc with MPC_EVERY=3 plans at frames 1 and 4 only, and MPC_RATE_STEPS climbs for the rate first', () => {
    const env = { ITERS: '0', MPC_STEPS: '1', MPC_HISTORY: '1', CHECK_SEEDS: '2', CHECK_FRAMES: '4', CHECK_POLICIES: 'lec/mpc' };
    const ops = (stdout: string) => Number(/\nseed 2: lec\/mpc 0\.\d{4} \(\d+, (\d+) operations\)\n/.exec(stdout)?.[1]);
    const every = run(env);
    const third = run({ ...env, MPC_EVERY: '3' });
    expect(every.stderr + third.stderr).toBe('');
    expect(ops(third.stdout)).toBeGreaterThan(0);
    expect(ops(third.stdout)).toBeLessThan(ops(every.stdout));
    const rateFirst = run({ ...env, OBJECTIVE: 'lean', MPC_RATE_STEPS: '1' });
    expect(rateFirst.stderr).toBe('');
    expect(rateFirst.stdout).not.toBe(run({ ...env, OBJECTIVE: 'lean' }).stdout);
  }, 120_000);

  it('mpc with OBJECTIVE=lean and FLOOR=1: each frame takes replicas away only where the replay loses nothing, so it holds fewer than the rate mpc', () => {
    const env = { ITERS: '0', MPC_STEPS: '2', MPC_HISTORY: '1', CHECK_SEEDS: '2', CHECK_FRAMES: '4', CHECK_POLICIES: 'lec/mpc,lec/static' };
    const mpcLine = (stdout: string) =>
      /\nseed 2: lec\/mpc 0\.\d{4} \((\d+), (\d+) operations\) {2}lec\/static 0\.\d{4} \((\d+), 0 operations\)\n/.exec(stdout);
    const lean = run({ ...env, OBJECTIVE: 'lean', FLOOR: '1' });
    expect(lean.stderr).toBe('');
    const rate = run(env);
    const [l, r] = [mpcLine(lean.stdout), mpcLine(rate.stdout)];
    expect(l).not.toBeNull();
    expect(r).not.toBeNull();
    expect(Number(l![2])).toBeGreaterThan(0);
    expect(Number(l![1])).toBeLessThan(Number(l![3])); // below static's replica-seconds
    expect(Number(l![1])).toBeLessThan(Number(r![1]));
    expect(run({ ...env, OBJECTIVE: 'lean', FLOOR: '1' }).stdout).toBe(lean.stdout);
  }, 120_000);

  it.each([
    [{ OBJECTIVE: 'cheap' }, /^placement-search: OBJECTIVE must be rate or lean, got cheap/],
    [{ FLOOR: '1.5' }, /^placement-search: FLOOR must be a number in \(0, 1\], got 1\.5/],
    [{ LOAD: '0' }, /^placement-search: LOAD must be a number in \(0, 100\], got 0/],
    [{ FRAMES: '1.5' }, /^placement-search: FRAMES must be a whole number >= 1, got 1\.5/],
    [{ DISPATCH: 'cmmac' }, /^placement-search: DISPATCH must be a dispatch heuristic \(.*lec\), got cmmac/],
    [{ TRACE: 'none.csv' }, /^placement-search: TRACE: none\.csv does not exist/],
    [{ FROM: 'package.json' }, /^placement-search: FROM: package\.json holds no placement of \d+ services x \d+ nodes/],
    [{ MPC_STEPS: '0' }, /^placement-search: MPC_STEPS must be a whole number >= 1, got 0/],
    [{ MPC_HISTORY: '0' }, /^placement-search: MPC_HISTORY must be a whole number >= 1, got 0/],
    [{ MPC_EVERY: '0' }, /^placement-search: MPC_EVERY must be a whole number >= 1, got 0/],
    [{ MPC_RATE_STEPS: '-1' }, /^placement-search: MPC_RATE_STEPS must be a whole number >= 0, got -1/],
    [{ FROM: 'none.json' }, /^placement-search: FROM: cannot read none\.json/],
  ])('%j exits 2 with one line', (env, problem) => {
    expectUsageExit(run(env), problem);
  });
});
