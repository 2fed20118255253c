/**
 * The weight gate (issue 17 items 1 and 4), with real parts: the compiled gate worker
 * (dist/training/jobs/gate-worker.js, built by `npm test` before jest), a real SQLite store
 * holding experience, and a live orchestrator (real hub on loopback, the online learner, /metrics
 * and /v1/status over HTTP).
 *
 * - On `kais`: the shipped model passes against lec on one frame of replayed arrivals; random
 *   weights are rejected (worse than the best heuristic) and kept with the reason; one evaluation
 *   (10 s of arrivals, the default) takes at most 10 s and the event loop keeps turning while it runs (it is in a worker).
 * - Too few arrivals: rejected, the reason says so.
 * - Live: a learned update the gate rejects is not published (version unchanged), the verdict is
 *   an event, counted on /metrics and shown in the admin status.
 * - Config: bad gate fields exit 2 with one line naming the field.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { WeightGate, type GateConfig } from '../../orchestrator/gate';
import { readConfig } from '../../orchestrator/main';
import { learningOrchestrator } from '../support/store-seed';
import { initActorWeights } from '../../shared/nets/actor';
import { defaultModelPath, readActorFile } from '../../shared/nets/actor-file';
import { Codec } from '../../shared/protocol/codec';
import type { Transition } from '../../shared/protocol/envelope';
import { rawAgent } from '../support/raw-agent';
import { Rng } from '../../shared/rng';
import { loadScenario, topologyOf, type Scenario } from '../../shared/scenario';
import { observationDim } from '../../shared/spaces';
import { buildRequests } from '../../training/workload';
import { parseMetrics, sample } from '../support/prometheus';
import { until as waitUntil, httpGet as get } from '../support/wait';
import { expectConfigError } from '../support/config-error';
import { perTestDir } from '../support/tmp';

const ROOT = path.resolve(__dirname, '../..');
const WORKER = path.join(ROOT, 'dist', 'training', 'jobs', 'gate-worker.js');

const tmp = perTestDir('kais-gate-');
const { cleanups } = tmp;

const dims = (s: Scenario) => {
  const t = topologyOf(s);
  const A = t.numNodes + 1;
  return { A, D: observationDim({ numServices: t.numServices, numTargets: A, numEaps: t.numEaps }) };
};

/** Every arrival of `seconds` of p4 at load 1 as experience frames (eAP, service, slot), 64 per batch, shown to the gate. */
function feedArrivals(gate: WeightGate, s: Scenario, seconds: number, seed: number): number {
  const { A, D } = dims(s);
  const reqs = buildRequests({ scenario: s, workload: 'p4', seed, load: 1, durationS: seconds });
  const obs = new Float32Array(D);
  const mask = new Uint8Array(A).fill(1);
  // one batch per eAP and 64 arrivals, as the agents send them
  for (let e = 0; e < s.eaps.length; e++) {
    const mine = reqs.filter((r) => r.eap === e);
    for (let i = 0; i < mine.length; i += 64) {
      const transitions: Transition[] = mine.slice(i, i + 64).map((r, k) => ({
        eap: e,
        slot: Math.floor(r.arrivalS / s.slotS),
        service: r.service,
        obs,
        mask,
        action: A - 1,
        logProb: 0,
        reward: k % 2,
        latencyMs: 10,
        metDeadline: k % 2 === 1,
        done: false,
        weightVersion: null,
      }));
      gate.observe({ eap: e, transitions });
    }
  }
  return reqs.length;
}

/** The gate's worker is compiled code: `npm test` builds dist/ first; a bare `npx jest` without a build fails here, saying so. */
function needWorker(): void {
  if (!fs.existsSync(WORKER)) throw new Error(`${WORKER} is missing: run npm run build first (npm test does)`);
}

const until = (cond: () => boolean, what: string, ms = 60_000): Promise<void> => waitUntil(cond, what, ms);

describe('WeightGate on kais (the compiled worker, a real store)', () => {
  const kais = loadScenario('kais');
  const shipped = defaultModelPath(kais);
  beforeAll(() => {
    needWorker();
    if (shipped === null) throw new Error('the shipped kais model (models/kais-cmmac.bin) is missing');
  });

  it('passes the shipped model, rejects random weights and keeps them, without stalling the event loop', async () => {
    const config: GateConfig = { margin: 0.05, minRequests: 500, arrivals: 20_000, seconds: 10, heuristics: ['lec', 'round-robin'] };
    const verdicts: string[] = [];
    const gate = new WeightGate({ config, scenario: kais, workerFile: WORKER, onVerdict: (v) => verdicts.push(v.reason) });
    cleanups.push(() => gate.dispose());
    const n = feedArrivals(gate, kais, 25, 11);
    expect(gate.arrivalsHeld).toBe(n);
    await gate.ready(); // as at an orchestrator's start: the worker loads the simulator once
    const model = readActorFile(shipped!);
    const { A, D } = dims(kais);

    // the event loop while the worker replays: the largest gap between 20 ms ticks
    let maxGap = 0;
    let last = performance.now();
    const tick = setInterval(() => {
      const now = performance.now();
      maxGap = Math.max(maxGap, now - last);
      last = now;
    }, 20);
    cleanups.push(() => clearInterval(tick));

    const t0 = performance.now();
    const good = await gate.check({ version: 2, head: model.head, arrays: model.tensors }, null);
    const goodWall = performance.now() - t0;
    const t1 = performance.now();
    const bad = await gate.check({ version: 3, head: 'relu1', arrays: initActorWeights(D, A, 5) }, null);
    const badWall = performance.now() - t1;
    clearInterval(tick);

    // the newest 10 s of the 25 s seen
    expect(good.numbers!.durationS).toBe(10);
    expect(good.numbers!.requests).toBeGreaterThan(0.25 * n);
    expect(good.numbers!.requests).toBeLessThan(0.6 * n);
    expect(good.pass).toBe(true);
    expect(good.numbers!.candidate).toBeGreaterThanOrEqual(0.95 * good.numbers!.heuristic.rate);
    expect(bad.pass).toBe(false);
    expect(bad.reason).toMatch(/^worse than (lec|round-robin) beyond margin 0.05: candidate 0\.\d+/);
    expect(bad.numbers!.candidate).toBeLessThan(0.95 * bad.numbers!.heuristic.rate);
    expect(gate.rejected.map((r) => r.verdict.candidate)).toEqual([3]);
    expect(gate.stats).toMatchObject({ passed: 1, rejected: 1, failed: 0 });
    expect(verdicts).toHaveLength(2);
    // the hub's loop never waited for the evaluation (it runs in a worker): its largest pause is a small
    // part of one evaluation's wall time. The 10 s bar of issue 17 is a speed target, measured by
    // scripts/bench-gate.ts (node dist/scripts/bench-gate.js), not asserted here (a shared machine's wall time is noise)
    expect(maxGap).toBeLessThan(Math.min(goodWall, badWall) / 4);
  }, 60_000);

  it('rejects when too few arrivals were seen', async () => {
    const few = buildRequests({ scenario: kais, workload: 'p4', seed: 3, load: 1, durationS: 2 }).length;
    const gate = new WeightGate({
      config: { margin: 0.01, minRequests: few + 1, arrivals: 20_000, seconds: 10, heuristics: ['lec'] },
      scenario: kais,
      workerFile: WORKER,
    });
    cleanups.push(() => gate.dispose());
    const n = feedArrivals(gate, kais, 2, 3);
    const model = readActorFile(shipped!);
    const v = await gate.check({ version: 2, head: model.head, arrays: model.tensors }, null);
    expect(v.pass).toBe(false);
    expect(n).toBe(few);
    expect(v.reason).toBe(`too few live arrivals to judge: ${n} < minRequests ${n + 1}`);
  }, 30_000);
});

describe('the gate in a live orchestrator', () => {
  const small = loadScenario('small');
  const { A, D } = dims(small);
  beforeAll(needWorker);

  it('does not publish a learned version the gate rejects; the verdict is an event, on /metrics and in the admin status', async () => {
    const o = await learningOrchestrator(
      tmp.dir,
      D,
      A,
      {
        agentTokens: { 0: 'tok-0' },
        adminToken: 'admin-token-0123456789',
        // v1 is a random actor: neither it nor one update of it comes near lec
        gate: { margin: 0, minRequests: 10, arrivals: 1000, seconds: 10, heuristics: ['lec'] },
      },
      { httpPort: 0, log: () => undefined },
    );
    cleanups.push(() => o.close());
    expect(o.gate).not.toBeNull();

    const codec = new Codec();
    const { send } = await rawAgent(
      o.hub.url,
      { eapId: 0, token: 'tok-0', agentVersion: 't', weightVersion: null, placementVersion: null, epoch: null, instance: 'g0' },
      codec,
      cleanups,
    );
    const rng = new Rng(9);
    let lastSent = 0;
    // explored decisions of v1 until the learner has run an actor update and the gate judged it
    await until(() => {
      if (Date.now() - lastSent > 200) {
        lastSent = Date.now();
        const transitions: Transition[] = Array.from({ length: 64 }, (_, k) => {
          const action = Math.floor(rng.next() * A);
          return {
            eap: 0,
            slot: 1000 + k,
            service: k % small.services.length,
            obs: Float32Array.from({ length: D }, () => rng.next()),
            mask: new Uint8Array(A).fill(1),
            action,
            logProb: Math.log(1 / A),
            reward: action === 0 ? 1 : 0,
            latencyMs: 20,
            metDeadline: action === 0,
            done: false,
            weightVersion: 1,
          };
        });
        send('experience', { eap: 0, transitions });
      }
      return o.gate!.stats.rejected >= 1;
    }, 'a gate verdict');
    expect(o.registry.weightVersion).toBe(1);
    expect(o.learner!.stats.gateRejected).toBeGreaterThanOrEqual(1);
    expect(o.learner!.stats.published).toBe(0);
    const ev = o.store.events().filter((e) => e.kind === 'gate-reject');
    expect(ev.length).toBe(o.gate!.stats.rejected);
    expect(ev[0].message).toMatch(/^weights v2 \(current v1\): worse than/);
    // replayed on the placement the agents dispatch on (the placement loop's), not the scenario's initial one
    expect(ev[0].message).toMatch(/ on the live placement$/);
    // kept in the store, marked with the reason, with its weights (it was never published)
    const kept = o.store.rejectedModels();
    expect(kept).toHaveLength(o.gate!.stats.rejected);
    expect(kept[0]).toMatchObject({
      version: 2,
      basedOn: 1,
      source: 'gate',
      hasWeights: true,
      reason: expect.stringMatching(/^worse than/),
    });
    expect(o.store.rejectedWeights(2)!.shapes).toEqual(o.store.model(1)!.shapes);

    const families = parseMetrics((await get(o.httpPort!, '/metrics')).text);
    expect(sample(families, 'kais_orchestrator_gate_verdicts_total', { verdict: 'reject' })).toBe(o.gate!.stats.rejected);
    expect(sample(families, 'kais_orchestrator_events_total', { kind: 'gate-reject' })).toBe(ev.length);
    const st = await get(o.httpPort!, '/v1/status', 'admin-token-0123456789');
    expect(st.status).toBe(200);
    const gate = (JSON.parse(st.text) as { gate: { rejected: { candidate: number; reason: string }[]; recent: { pass: boolean }[] } }).gate;
    expect(gate.rejected[0]).toMatchObject({ candidate: 2, reason: expect.stringMatching(/^worse than/) });
    expect(gate.recent[0].pass).toBe(false);
  }, 90_000);

  it('the bad-weights drill waits for the live arrivals the gate needs, then is judged on them (not rejected for too few)', async () => {
    const o = await learningOrchestrator(
      tmp.dir,
      D,
      A,
      {
        agentTokens: { 0: 'tok-0' },
        // no learned version in this test: the learner never reaches a batch
        learnBatch: 1_000_000,
        gate: { margin: 0, minRequests: 200, arrivals: 1000, seconds: 10, heuristics: ['lec'] },
        injectBadWeightsAfterS: 0,
      },
      { log: () => undefined },
    );
    cleanups.push(() => o.close());
    const kinds = () => o.store.events().map((e) => `${e.kind}: ${e.message}`);
    await until(() => kinds().some((k) => k.startsWith('inject: bad-weights drill waits')), 'the drill waiting');
    expect(kinds().find((k) => k.startsWith('inject: bad-weights drill waits'))).toMatch(/\(0 of minRequests 200 held: /);
    expect(o.gate!.stats.rejected).toBe(0);
    const { send } = await rawAgent(
      o.hub.url,
      { eapId: 0, token: 'tok-0', agentVersion: 't', weightVersion: null, placementVersion: null, epoch: null, instance: 'g1' },
      new Codec(),
      cleanups,
    );
    const rng = new Rng(3);
    // 4 frames of 64 explored decisions: 256 arrivals, over 200
    for (let f = 0; f < 4; f++) {
      const transitions: Transition[] = Array.from({ length: 64 }, (_, k) => ({
        eap: 0,
        slot: 1000 + f * 8 + (k >> 3),
        service: k % small.services.length,
        obs: Float32Array.from({ length: D }, () => rng.next()),
        mask: new Uint8Array(A).fill(1),
        action: 0,
        logProb: Math.log(1 / A),
        reward: 1,
        latencyMs: 20,
        metDeadline: true,
        done: false,
        weightVersion: 1,
      }));
      send('experience', { eap: 0, transitions });
    }
    await until(() => o.gate!.stats.passed + o.gate!.stats.rejected >= 1, 'the gate judging the drill');
    const verdicts = o.store.events().filter((e) => e.kind === 'gate-reject' || e.kind === 'gate-pass');
    expect(verdicts).toHaveLength(1);
    // judged on the arrivals (one waiting event only), whatever the verdict on a random v1 against random weights
    expect(verdicts[0].message).toMatch(/^weights v2 \(current v1\): .* on 256 replayed arrivals .* on the live placement$/);
    expect(kinds().filter((k) => k.startsWith('inject: bad-weights drill waits'))).toHaveLength(1);
  });
});

describe('gate config', () => {
  it.each([
    [{ margin: 2 }, /field "gate.margin" must be in \[0, 0.5\], got 2$/],
    [{ minRequests: 0 }, /field "gate.minRequests" must be an integer >= 1, got 0$/],
    [{ heuristics: ['cmmac'] }, /field "gate.heuristics" must be a non-empty list of /],
    [{ foo: 1 }, /field "gate.foo" is not a field of gate \(known: margin, minRequests, arrivals, seconds, heuristics\)$/],
    ['yes', /field "gate" must be true, false, null or an object$/],
  ])('%j is a one-line usage error naming the field', (gate, problem) => {
    expectConfigError(path.join(tmp.dir, 'bad.json'), { scenario: 'tiny', gate }, problem);
  });

  it('the bad-weights drill takes null or seconds, anything else is a one-line error', () => {
    const f = path.join(tmp.dir, 'inj.json');
    fs.writeFileSync(f, JSON.stringify({ scenario: 'tiny', injectBadWeightsAfterS: -1 }));
    expect(() => readConfig(f)).toThrow(/field "injectBadWeightsAfterS" must be null or a number of seconds in \[0, 86400\], got -1$/);
    fs.writeFileSync(f, JSON.stringify({ scenario: 'tiny', injectBadWeightsAfterS: 12 }));
    expect(readConfig(f).injectBadWeightsAfterS).toBe(12);
  });

  it('true means the defaults; absent means off', () => {
    const f = path.join(tmp.dir, 'ok.json');
    fs.writeFileSync(f, JSON.stringify({ scenario: 'tiny', gate: true }));
    expect(readConfig(f).gate).toMatchObject({ margin: 0.01, minRequests: 500 });
    fs.writeFileSync(f, JSON.stringify({ scenario: 'tiny' }));
    expect(readConfig(f).gate).toBeNull();
  });
});
