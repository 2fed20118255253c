/**
 * `kais up --policy`: the prediction runs the agents' policy (one instance per eAP, as the agents
 * hold it), and a bad name exits 2 with one line (the live run is in
 * test/integration/up.integration.test.ts).
 */
import { spawnSync } from 'child_process';
import * as path from 'path';
import { loadScenario } from '../../../shared/scenario';
import { makeDispatch, makeOrchestration } from '../../../training/baselines/registry';
import { predictRate } from '../../../launcher/up';
import { runEpisode } from '../../../training/jobs/rollout';
import { buildRequests } from '../../../training/workload';

const KAIS = path.resolve(__dirname, '../../..', 'dist', 'kais.js');

describe('kais up --policy', () => {
  const small = loadScenario('small');
  const requests = buildRequests({ scenario: small, workload: 'p4', tracePath: null, seed: 1, load: 1, durationS: 20 });

  it('predicts what kais eval reports for a deterministic heuristic (one instance per eAP decides as one for all)', () => {
    const frameS = small.slotS * small.slotsPerFrame;
    const frames = Math.max(1, Math.ceil((requests[requests.length - 1].deadlineS + 1) / frameS));
    for (const name of ['jsq', 'round-robin'] as const) {
      const p = predictRate(small, requests, { seed: 1, orchestration: 'hpa' }, name, undefined);
      expect(p.policy).toBe(`${name}/hpa`);
      const evalRun = runEpisode({
        scenario: small,
        requests,
        frames,
        seed: 1,
        dispatch: makeDispatch(name, small),
        orchestration: makeOrchestration('hpa', small),
        nodeDequeue: 'edf',
      });
      expect(p.rate).toBe(evalRun.throughputRate);
      // the per-frame series the dashboard plots add up to the same run
      const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
      expect(p.frameS).toBe(frameS);
      expect(p.arrivedPerFrame).toHaveLength(p.completedInTimePerFrame.length);
      expect(sum(p.arrivedPerFrame)).toBe(evalRun.arrived);
      expect(sum(p.completedInTimePerFrame)).toBe(evalRun.completedInTime);
    }
  });

  it('names a seeded heuristic and is reproducible', () => {
    const a = predictRate(small, requests, { seed: 1, orchestration: 'static' }, 'p2c', undefined);
    expect(a.policy).toBe('p2c/static');
    expect(predictRate(small, requests, { seed: 1, orchestration: 'static' }, 'p2c', undefined)).toEqual(a);
  });

  it('with --guard predicts cmmac behind the regime guard, as the agents run it', () => {
    const kais = loadScenario('kais');
    const model = path.resolve(__dirname, '../../..', 'models', 'kais-cmmac.bin');
    // twice the default load: the late share rises and the guard hands decisions to its heuristics
    const reqs = buildRequests({ scenario: kais, workload: 'p4', tracePath: null, seed: 2, load: 2, durationS: 20 });
    const guarded = predictRate(kais, reqs, { seed: 2, orchestration: 'hpa', guard: true }, 'cmmac', model);
    const plain = predictRate(kais, reqs, { seed: 2, orchestration: 'hpa' }, 'cmmac', model);
    expect(guarded.policy).toBe('cmmac+guard/hpa');
    expect(plain.policy).toBe('cmmac/hpa');
    expect(guarded.rate).not.toBe(plain.rate);
    expect(predictRate(kais, reqs, { seed: 2, orchestration: 'hpa', guard: true }, 'cmmac', model).rate).toBe(guarded.rate);
    // the --guard-* flags reach the prediction as they reach the agents: another guard, another rate
    const twoLevels = predictRate(
      kais,
      reqs,
      { seed: 2, orchestration: 'hpa', guard: true, guardEnter: 0.3, guardExit: 0.2, guardMid: 'none' },
      'cmmac',
      model,
    );
    expect(twoLevels.policy).toBe('cmmac+guard/hpa');
    expect(twoLevels.rate).not.toBe(guarded.rate);
  });

  it.each([
    [
      ['up', '--policy', 'fastest'],
      /^kais: --policy: unknown policy "fastest" \(known: cmmac, random, round-robin, jsq, p2c, greedy, onsocmax, prob, lec\)$/,
    ],
    [
      ['up', '--guard', '--guard-enter', '0.3', '--guard-exit', '0.5'],
      /^kais: --guard-exit: must be below --guard-enter \(0\.3\), got 0\.5$/,
    ],
  ])('%j exits 2 with one line naming the flag', (args, pattern) => {
    const r = spawnSync(process.execPath, [KAIS, ...args], { encoding: 'utf8', timeout: 60000 });
    expect(r.status).toBe(2);
    const lines = r.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(pattern);
  });
});
