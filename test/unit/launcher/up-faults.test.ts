/**
 * `kais up --faults` and `kais node --faults`: the failure plan and the flag errors (the live run
 * with failures is measured in docs/runtime.md; the agent's reaction is tested in
 * test/integration/agent.integration.test.ts).
 */
import { spawnSync } from 'child_process';
import * as path from 'path';
import { planFaults } from '../../../launcher/up';

const KAIS = path.resolve(__dirname, '../../..', 'dist', 'kais.js');

function kais(...args: string[]) {
  const r = spawnSync(process.execPath, [KAIS, ...args], { encoding: 'utf8', timeout: 60000 });
  return { code: r.status, lines: r.stderr.trim().split('\n') };
}

describe('kais up --faults', () => {
  it('plans distinct seeded nodes at seeded times after the filters have their baselines', () => {
    const p = planFaults(5, 300, 40, 7);
    expect(planFaults(5, 300, 40, 7)).toEqual(p);
    expect(planFaults(5, 300, 40, 8)).not.toEqual(p);
    expect(new Set(p.map((f) => f.node)).size).toBe(5);
    for (const f of p) {
      expect(f.startS).toBeGreaterThanOrEqual(70);
      expect(f.startS).toBeLessThanOrEqual(290);
      expect(f).toMatchObject({ precursorS: 20, durationS: 30 });
    }
    expect(p.map((f) => f.startS)).toEqual([...p.map((f) => f.startS)].sort((x, y) => x - y));
    expect(planFaults(0, 10, 40, 1)).toEqual([]);
  });

  it.each([
    [['up', '--faults', '2', '--duration', '20'], /^kais: --faults: needs --duration x --speed of at least 80 s/],
    [['up', '--faults', '-1'], /^kais: --faults: expected an integer >= 0, got "-1"$/],
    [
      ['node', '--scenario', 'tiny', '--faults', '[{"node":7,"startS":1,"durationS":1,"precursorS":0}]'],
      /^kais: --faults: fault .*needs a node in 0\.\.2/,
    ],
    [['node', '--scenario', 'tiny', '--faults', '{'], /^kais: --faults: not JSON/],
  ])('%j exits 2 with one line naming --faults', (args, pattern) => {
    const r = kais(...args);
    expect(r.code).toBe(2);
    expect(r.lines).toHaveLength(1);
    expect(r.lines[0]).toMatch(pattern);
  });
});
