import { DETECT_STAGE_COMBINATION, combinedAnomalous, fusedScore } from '../../../../agent/filters/stage-combination';

describe('stage combination (issue 20)', () => {
  it('hard gate: faulty flags, healthy never, ambiguous by the learned score', () => {
    const c = { eta: 0, etaHealthy: Infinity, second: 'vgru' as const };
    expect(combinedAnomalous('faulty', -5, c)).toBe(true);
    expect(combinedAnomalous('healthy', 100, c)).toBe(false);
    expect(combinedAnomalous('ambiguous', 0.1, c)).toBe(true);
    expect(combinedAnomalous('ambiguous', -0.1, c)).toBe(false);
  });

  it('a finite etaHealthy lets a high learned score overrule a healthy verdict; at eta it is the union', () => {
    const soft = { eta: 0, etaHealthy: 2, second: 'vgru' as const };
    expect(combinedAnomalous('healthy', 1.9, soft)).toBe(false);
    expect(combinedAnomalous('healthy', 2.1, soft)).toBe(true);
    const union = { eta: 0.3, etaHealthy: 0.3, second: 'l2' as const };
    for (const s of [-1, 0.2, 0.31, 5]) expect(combinedAnomalous('healthy', s, union)).toBe(s > 0.3);
    // etaHealthy below eta acts as eta (a healthy verdict never needs less evidence)
    expect(fusedScore('healthy', 0.5, { eta: 1, etaHealthy: 0, second: 'l2' })).toBe(0.5);
  });

  it('the fused score ranks faulty above everything and keeps the order of learned scores within a verdict', () => {
    const c = { eta: 0, etaHealthy: 2, second: 'vgru' as const };
    expect(fusedScore('faulty', -1, c)).toBe(Infinity);
    expect(fusedScore('healthy', 3, c)).toBeCloseTo(1, 12);
    expect(fusedScore('ambiguous', 3, c)).toBe(3);
    expect(Number.isFinite(DETECT_STAGE_COMBINATION.eta)).toBe(true);
  });
});
