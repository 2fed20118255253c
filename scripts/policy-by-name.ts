/**
 * The dispatch policies the measurement scripts (load-sweep.ts, test-seeds.ts) take by name,
 * and one episode of `kais eval`'s kind with one of them.
 */
import type { DispatchPolicy } from '../shared/policy';
import type { Scenario } from '../shared/scenario';
import type { DequeueName } from '../shared/dequeue';
import { makeTrainTeacher } from '../training/baselines/teacher';
import { QueueLookaheadDispatch } from '../training/baselines/queue-teacher';
import { makeDispatch, makeOrchestration } from '../training/baselines/registry';
import { buildRequests } from '../training/workload';
import { runEpisode } from '../training/jobs/rollout';
import { guardedDispatch } from '../shared/dispatch/guard';
import { loadActorFile, loadCmmacFromDb, loadDefaultCmmac } from '../training/jobs/checkpoint';

/**
 * `db:<kais train output>[@<frame>]` (its newest checkpoint at or before the frame, argmax; without
 * @, its best), `bin:<exported actor>`, `cmmac` (the shipped model), `{...}` (QueueLookaheadOptions
 * as JSON), `<any of these>+guard` (behind the regime guard, shared/dispatch/guard.ts), a train-only teacher (training/baselines/teacher.ts) or a `kais eval` dispatch baseline.
 */
export function policyByName(n: string, scenario: Scenario): DispatchPolicy {
  const db = /^db:(.+?)(?:@(\d+))?$/.exec(n);
  if (db) return loadCmmacFromDb(db[1], scenario, db[2] ? { maxFrame: Number(db[2]) } : {});
  if (n.startsWith('bin:')) return loadActorFile(n.slice(4), scenario);
  if (n.endsWith('+guard')) {
    const learned = policyByName(n.slice(0, -'+guard'.length), scenario);
    return guardedDispatch(learned, scenario);
  }
  if (n === 'cmmac') {
    const p = loadDefaultCmmac(scenario);
    if (!p) throw new Error(`no shipped ${scenario.name} model`);
    return p;
  }
  if (n.startsWith('{')) return new QueueLookaheadDispatch(JSON.parse(n));
  return makeTrainTeacher(n) ?? makeDispatch(n, scenario);
}

/** Throughput rate of policy `n` on one `frames`-frame episode, hpa, both queues in `dequeue` order. */
export function episodeRate(
  scenario: Scenario,
  n: string,
  o: { frames: number; seed: number; load: number; tracePath: string | null; dequeue: DequeueName; view?: 'global' | 'agent' },
): number {
  const durationS = o.frames * scenario.slotsPerFrame * scenario.slotS;
  const requests = buildRequests({ scenario, workload: 'p4', tracePath: o.tracePath, seed: o.seed, load: o.load, durationS });
  return runEpisode({
    scenario,
    requests,
    frames: o.frames,
    seed: o.seed,
    dispatch: policyByName(n, scenario),
    orchestration: makeOrchestration('hpa', scenario),
    nodeDequeue: o.dequeue,
    view: o.view,
  }).throughputRate;
}
