/**
 * The weight gate's config check (orchestrator/gate.ts gateConfigProblem): the heuristics a
 * candidate is measured against are the dispatch heuristics the simulator runs, one list for both,
 * so a heuristic added to shared/dispatch is one the gate accepts.
 */
import { DEFAULT_GATE, gateConfigProblem } from '../../../orchestrator/gate';
import { DISPATCH_HEURISTICS } from '../../../shared/dispatch';

describe('gateConfigProblem', () => {
  it('accepts the default and every dispatch heuristic, alone or all together', () => {
    expect(gateConfigProblem(DEFAULT_GATE)).toBeNull();
    for (const h of DISPATCH_HEURISTICS) expect(gateConfigProblem({ ...DEFAULT_GATE, heuristics: [h] })).toBeNull();
    expect(gateConfigProblem({ ...DEFAULT_GATE, heuristics: [...DISPATCH_HEURISTICS] })).toBeNull();
  });

  it('names the field for a learned policy, an unknown name or an empty list', () => {
    for (const heuristics of [['cmmac'], ['lec', 'fastest'], []]) {
      const p = gateConfigProblem({ ...DEFAULT_GATE, heuristics });
      expect(p?.field).toBe('heuristics');
      expect(p?.why).toBe(`must be a non-empty list of ${DISPATCH_HEURISTICS.join(', ')}`);
    }
  });

  it('names each numeric field out of its range', () => {
    expect(gateConfigProblem({ ...DEFAULT_GATE, margin: 0.6 })?.field).toBe('margin');
    expect(gateConfigProblem({ ...DEFAULT_GATE, minRequests: 0 })?.field).toBe('minRequests');
    expect(gateConfigProblem({ ...DEFAULT_GATE, arrivals: 2_000_000 })?.field).toBe('arrivals');
    expect(gateConfigProblem({ ...DEFAULT_GATE, seconds: 0.5 })?.field).toBe('seconds');
  });
});
