/**
 * Edge replica-seconds (kais eval's `replicaSeconds`): the time integral of the replicas the edge
 * nodes hold (ready, starting and draining: what reserves their memory), per frame and in total.
 */
import { loadScenario, type Scenario } from '../../../../shared/scenario';
import { makeDispatch, makeOrchestration } from '../../../../training/baselines/registry';
import { EdgeCloudEnv } from '../../../../training/sim/env';
import { buildRequests } from '../../../../training/workload';

function held(env: EdgeCloudEnv): number {
  const c = env.cluster;
  let h = 0;
  for (let n = 0; n < c.numNodes; n++)
    for (let w = 0; w < c.numServices; w++) h += c.ready[n * c.numServices + w] + c.starting[n * c.numServices + w];
  return h;
}

/** Runs a pair and integrates held(env) sampled after every step (requests arrive every few ms, so the samples are dense). */
function run(s: Scenario, pair: string, frames: number): { env: EdgeCloudEnv; sampled: number } {
  const [d, o] = pair.split('/');
  const frameS = s.slotS * s.slotsPerFrame;
  const env = new EdgeCloudEnv(s, {
    requests: buildRequests({ scenario: s, workload: 'p4', seed: 2, load: 1.5, durationS: frames * frameS }),
    frames,
    orchestration: makeOrchestration(o, s),
    seed: 2,
  });
  const policy = makeDispatch(d, s);
  let { observations } = env.reset({ seed: 2 });
  policy.reset?.(2, env.view);
  let sampled = 0;
  let lastS = 0;
  let h = held(env);
  while (!env.isDone) {
    const actions = env.possibleAgents.map((b) => (env.agents.includes(b) ? policy.decide(observations[b], env.viewOf(b)) : -1));
    observations = env.step(actions).observations;
    const now = Math.min(env.cluster.now, frames * frameS);
    sampled += h * (now - lastS);
    lastS = now;
    h = held(env);
  }
  return { env, sampled };
}

describe('replica-seconds', () => {
  const tiny = loadScenario('tiny');

  it('static: the initial replicas times the run, frame by frame', () => {
    const { env } = run(tiny, 'jsq/static', 3);
    expect(env.frames.map((f) => f.replicaS)).toEqual([100, 100, 100]);
    expect(env.replicaSeconds).toBe(300);
  });

  it.each(['lec/hpa', 'jsq/gsp-ss'])('%s: the integral of the replicas held, as sampled along the run', (pair) => {
    const { env, sampled } = run(tiny, pair, 6);
    expect(env.scaleOps).toBeGreaterThan(0);
    expect(env.replicaSeconds).toBeGreaterThan(0);
    expect(Math.abs(env.replicaSeconds - sampled) / sampled).toBeLessThan(0.02);
  });
});
