import { loadScenario } from '../../../shared/scenario';
import { EdgeCloudEnv } from '../../../training/sim/env';
import { buildRequests } from '../../../training/workload';
import { makeOrchestration } from '../../../training/baselines/registry';
import { expectedCompletionS as lecEta } from '../../../shared/dispatch/lec';
import { ObservationBuilder, PER_TARGET_FEATURES, expectedCompletionS, observationDim } from '../../../agent/observation';

function busyEnv(name: string) {
  const scenario = loadScenario(name);
  const requests = buildRequests({ scenario, workload: 'p4', seed: 3, load: 1.5, durationS: 25 });
  const env = new EdgeCloudEnv(scenario, { requests, frames: 1, orchestration: makeOrchestration('hpa', scenario) });
  return { scenario, env };
}

describe('observation builder', () => {
  it('has W + 3 + 14 T + B features', () => {
    expect(observationDim({ numServices: 30, numTargets: 41, numEaps: 5 })).toBe(30 + 3 + 41 * PER_TARGET_FEATURES + 5);
  });

  it('writes finite, bounded features with the one-hots and the mask in their places', () => {
    const { scenario, env } = busyEnv('small');
    const v = env.view;
    const shape = { numServices: v.numServices, numTargets: v.numTargets, numEaps: v.numEaps };
    const ob = new ObservationBuilder(shape, scenario.queueCapPerReplica);
    const out = new Float32Array(ob.dim);
    let { observations } = env.reset({ seed: 3 });
    let checked = 0;
    while (!env.isDone && checked < 600) {
      const actions: number[] = [];
      for (const b of env.agents) {
        const item = observations[b];
        ob.build(item, v, out);
        const bad = Array.from(out).filter((x) => !Number.isFinite(x) || Math.abs(x) > 4);
        expect(bad).toEqual([]);
        expect(out[item.request.service]).toBe(1);
        expect(out.subarray(0, v.numServices).reduce((s, x) => s + x, 0)).toBe(1);
        expect(out[ob.dim - v.numEaps + b]).toBe(1);
        for (let t = 0; t < v.numTargets; t++) expect(out[v.numServices + 3 + t * PER_TARGET_FEATURES]).toBe(item.mask[t]);
        actions[b] = v.cloudTarget - (checked % 2); // alternate cloud / last node when valid
        if (!item.mask[actions[b]]) actions[b] = v.cloudTarget;
        checked++;
      }
      observations = env.step(actions).observations;
    }
    expect(checked).toBeGreaterThan(100);
  });

  it('estimates completion times exactly as the lec heuristic does', () => {
    const { env } = busyEnv('small');
    const v = env.view;
    let { observations } = env.reset({ seed: 3 });
    let n = 0;
    while (!env.isDone && n < 300) {
      const actions: number[] = [];
      for (const b of env.agents) {
        const r = observations[b].request;
        for (let t = 0; t < v.numTargets; t++) {
          expect(expectedCompletionS(v, b, t, r.service, r.inputMB)).toBe(lecEta(v, b, t, r.service, r.inputMB));
        }
        actions[b] = v.cloudTarget;
        n++;
      }
      observations = env.step(actions).observations;
    }
  });

  it('refuses a view of another topology with a clear message', () => {
    const { env } = busyEnv('small');
    const ob = new ObservationBuilder({ numServices: 2, numTargets: 3, numEaps: 1 }, 8);
    const { observations } = env.reset({ seed: 1 });
    const b = env.agents[0] ?? 0;
    const item = observations[b] ?? {
      request: { id: 0, service: 0, eap: 0, arrivalS: 0, deadlineS: 1, workCoreS: 0.1, inputMB: 0.5 },
      eap: 0,
      mask: new Uint8Array(3),
      action: -1,
    };
    expect(() => ob.build(item, env.view, new Float32Array(ob.dim))).toThrow(/built for 2 services/);
  });
});
