/**
 * The queueing-blame ledger (training/sim/blame.ts) on hand-made runs, then inside the simulator on
 * a one-node queue whose every time is known, then the learner's charge (train-learn.ts chargeBlame).
 */
import { QueueBlame } from '../../../../training/sim/blame';
import { EdgeCloudEnv } from '../../../../training/sim/env';
import { oneNodeQueue } from '../../../support/scenario';
import type { Request } from '../../../../shared/domain';
import type { DispatchPolicy } from '../../../../shared/policy';
import { StaticOrchestration } from '../../../../shared/orchestration/static';
import { RolloutBuffer } from '../../../../critic/cmmac/buffer';
import { chargeBlame } from '../../../../training/jobs/train-learn';

describe('QueueBlame', () => {
  it('hands a failure to the runs that held the target while it waited, by cores x overlap', () => {
    const q = new QueueBlame(2);
    q.started(0, 0, 0, 1, 1); // id 0 runs [0, 1) on 1 core
    q.started(0, 1, 0.5, 2, 2); // id 1 runs [0.5, 2) on 2 cores
    q.started(1, 2, 0, 5, 4); // another target: never blamed for target 0
    q.failed(0, 3, 0.5, 1.5); // id 3 waited [0.5, 1.5): id 0 overlaps 0.5 x 1 core, id 1 1.0 x 2 cores
    const b = q.blame(5);
    expect(b[0]).toBeCloseTo(0.5 / 2.5, 6);
    expect(b[1]).toBeCloseTo(2 / 2.5, 6);
    expect(b[2]).toBe(0);
    expect(b[3]).toBe(0);
    expect(q.failures).toBe(1);
  });
  it('blames no one for a wait nothing ran in, nor the failed request itself; reset forgets', () => {
    const q = new QueueBlame(1);
    q.started(0, 0, 0, 1, 1);
    q.started(0, 4, 3, 4, 1); // the failing request's own run: never blamed on itself
    q.failed(0, 4, 2, 3.5); // only id 4 itself ran in [2, 3.5)
    q.failed(0, 5, 1, 1); // a zero wait is not recorded
    expect(q.failures).toBe(1);
    expect(Array.from(q.blame(6))).toEqual([0, 0, 0, 0, 0, 0]);
    q.failed(0, 5, 0.5, 0.75);
    expect(q.blame(6)[0]).toBeCloseTo(1, 6);
    q.reset();
    expect(q.failures).toBe(0);
    expect(q.blame(6)[0]).toBe(0);
  });
  it('finds long runs that started well before the wait, across grown arrays', () => {
    const q = new QueueBlame(1);
    q.started(0, 0, 0, 100, 1); // long run
    for (let i = 1; i <= 600; i++) q.started(0, i, i * 0.01, i * 0.01 + 0.001, 1); // grows past 256
    q.failed(0, 999, 50, 60); // only id 0 runs in [50, 60)
    expect(q.blame(1000)[0]).toBeCloseTo(1, 6);
  });
});

const req = (id: number, arrivalS: number, workCoreS: number, deadlineS: number): Request => ({
  id,
  service: 0,
  eap: 0,
  arrivalS,
  deadlineS,
  workCoreS,
  inputMB: 0,
});

// 0 runs [0, 1); 1 waits [0.1, 1), runs to 1.5, late by 0.3 <= its wait: blamed on 0.
// 2 runs [5, 5.1) with no wait and is late by 0.05: nobody's fault.
// 3 runs [6, 8); 4 waits from 6.1 and is dropped unstarted (too late for 7.0): blamed on 3.
const REQUESTS = [req(0, 0, 1, 10), req(1, 0.1, 0.5, 1.2), req(2, 5, 0.1, 5.05), req(3, 6, 2, 100), req(4, 6.1, 0.1, 7)];
const toNode0: DispatchPolicy = { name: 'node-0', decide: () => 0 };

function run(queueBlame: boolean): EdgeCloudEnv {
  const env = new EdgeCloudEnv(oneNodeQueue(1), {
    requests: REQUESTS,
    frames: 2,
    orchestration: new StaticOrchestration(),
    illegalAction: 'throw',
    agentViews: false,
    queueBlame,
  });
  let { observations } = env.reset({ seed: 1 });
  const actions: Record<number, number> = {};
  while (!env.isDone) {
    for (const b of env.agents) actions[b] = toNode0.decide(observations[b], env.view);
    observations = env.step(actions).observations;
  }
  return env;
}

describe('EdgeCloudEnv queueBlame', () => {
  it('charges each waiting failure to the request that held the server, and changes nothing else', () => {
    const env = run(true);
    expect([0, 1, 2, 3, 4].map((i) => env.requestOutcome(i))).toEqual([1, 0, 0, 1, 0]);
    expect(env.outcome).toMatchObject({ completedInTime: 2, late: 2, dropped: 1 });
    const b = Array.from(env.requestBlame());
    expect(b.slice(0, 5).map((x) => +x.toFixed(6))).toEqual([1, 0, 0, 1, 0]);
    const plain = run(false);
    expect(plain.outcome).toEqual(env.outcome);
    expect(Array.from(plain.latencyS)).toEqual(Array.from(env.latencyS));
    expect(() => plain.requestBlame()).toThrow(/queueBlame: true/);
  });
});

describe('chargeBlame', () => {
  it('subtracts share x blame from the resolved outcomes and returns their mean blame', () => {
    const buf = new RolloutBuffer(1, 2, 1, 8);
    buf.beginSlot(new Float32Array(1));
    for (let k = 0; k < 3; k++) buf.record(new Float32Array(1), new Uint8Array([1, 1]), 0, 0, 0);
    buf.tagRequests([2, 0, 1]);
    const outcome = Float32Array.from([1, 0, Number.NaN]);
    const mean = chargeBlame(outcome, Float32Array.from([0.5, 2, 0.25]), buf, 2);
    expect(outcome[0]).toBeCloseTo(1 - 2 * 0.25, 6); // request 2
    expect(outcome[1]).toBeCloseTo(0 - 2 * 0.5, 6); // request 0
    expect(Number.isNaN(outcome[2])).toBe(true); // unresolved: left out
    expect(mean).toBeCloseTo((0.25 + 0.5) / 2, 6);
  });
});
