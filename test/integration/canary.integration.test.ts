/**
 * The canary rollout (issue 17 items 2, 4 and 5) against a live orchestrator: real hub on
 * loopback, SQLite store, /metrics and the admin API over HTTP, hand-driven agents that ack what
 * they apply and send telemetry. The agents play what a version does to their devices: the
 * injected random version (the bad-weights drill, gate off) answers 30% of requests in time, any
 * other version 80%, so the verdict is known; the test waits for events, never for a duration.
 *
 * - Drill: the random version goes to the canary eAP only, is rolled back within two windows,
 *   every agent ends on a new version holding v1's weights, the rejected version is kept in the
 *   store with the reason, and the events are stored, counted on /metrics and served by the admin API.
 * - A version as good as the current one is promoted to every agent.
 * - The hub: a canary eAP that reconnects gets the canary version, the others the current one; a
 *   broadcast (a rollback) ends the canary.
 * - An agent's regime-guard switches (in its telemetry) are events naming its eAP.
 * - Config: values out of range are one line naming the file and field (exit 2 from the CLI).
 */
import { execFile, spawnSync } from 'node:child_process';
import Database from 'better-sqlite3';
import WebSocket from 'ws';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Hub } from '../../orchestrator/hub';
import { readConfig, startOrchestrator } from '../../orchestrator/main';
import { Store } from '../../orchestrator/store';
import { actorShapes, initActorWeights } from '../../shared/nets/actor';
import { Codec } from '../../shared/protocol/codec';
import { makeFrame, type Frame } from '../../shared/protocol/envelope';
import { packWeights, unpackWeights } from '../../shared/protocol/weights';
import { loadScenario, topologyOf } from '../../shared/scenario';
import { observationDim } from '../../shared/spaces';
import { rawAgent } from '../support/raw-agent';
import { parseMetrics, sample } from '../support/prometheus';
import { until as waitUntil, httpGet as get } from '../support/wait';
import { expectConfigError } from '../support/config-error';
import { perTestDir } from '../support/tmp';
import { CANARY_ADMIN as ADMIN, canarySetUp, nodeSample, playAgents } from '../support/canary-play';

const ROOT = path.resolve(__dirname, '../..');
const KAIS = path.join(ROOT, 'dist', 'kais.js');

const tmp = perTestDir('kais-canary-');
const { cleanups } = tmp;

const until = (cond: () => boolean, what: string, ms = 60_000): Promise<void> => waitUntil(cond, what, ms);

const small = loadScenario('small');
const topo = topologyOf(small);
const A = topo.numNodes + 1;
const D = observationDim({ numServices: topo.numServices, numTargets: A, numEaps: topo.numEaps });

describe('canary rollout against a live orchestrator', () => {
  it('rolls the bad-weights drill back within two windows: every agent back on v1 weights, the version kept as rejected, the events stored, counted and served', async () => {
    const { db, cfgFile, v1 } = canarySetUp(tmp.dir, { injectBadWeightsAfterS: 2.5 });
    const o = await startOrchestrator(readConfig(cfgFile), { dbPath: db, httpPort: 0, log: () => undefined });
    cleanups.push(() => o.close());
    expect(o.canary).not.toBeNull();
    const agents = await playAgents(o, (checksum) => checksum !== v1.checksum, cleanups);
    await until(() => o.store.events({ kind: 'canary-rollback' }).length > 0, 'the canary-rollback event');

    const kinds = o.store.events().map((e) => e.kind);
    expect(kinds.filter((k) => ['inject', 'canary-start', 'canary-rollback'].includes(k))).toEqual([
      'inject',
      'canary-start',
      'canary-rollback',
    ]);
    expect(o.store.events({ kind: 'canary-start' })[0].message).toMatch(/^injected \(bad-weights drill\) weights v2 to eAPs 0 first/);
    const rollback = o.store.events({ kind: 'canary-rollback' })[0].message;
    // within two evaluation windows, on the live rates
    expect(rollback).toMatch(
      /^weights v2 rolled back after [12] window\(s\); every eAP gets v1's weights as v3: worse than the control by more than the margin/,
    );
    expect(rollback).toMatch(
      /canary 0\.3000 on \d+ requests \(late 35\.0%, refused 35\.0%\), control 0\.8000 on \d+ requests \(late 10\.0%, refused 10\.0%\)/,
    );
    // and which eAP it rests on
    expect(rollback).toMatch(/ \(per eAP, in time of requests: canary 0 0\.300 of \d+; control 1 0\.800 of \d+\)$/);

    // the random version reached the canary eAP only; both end on v3 = v1's weights
    await until(() => agents.every((a) => a.versions.includes(3)), 'every agent on v3');
    expect(agents[0].versions).toEqual([1, 2, 3]);
    expect(agents[1].versions).toEqual([1, 3]);
    expect(o.store.model(3)!.checksum).toBe(v1.checksum);
    expect(o.canary!.running).toBeNull();
    expect(o.canary!.stats).toMatchObject({ started: 1, promoted: 0, rolledBack: 1 });

    // kept, marked, with the reason
    const rejected = o.store.rejectedModels();
    expect(rejected).toEqual([expect.objectContaining({ version: 2, basedOn: 1, source: 'canary', hasWeights: false })]);
    expect(rejected[0].reason).toMatch(/^worse than the control by more than the margin/);
    expect(o.store.rejectedWeights(2)!.checksum).not.toBe(v1.checksum);

    // counted on /metrics, served by the admin API
    const families = parseMetrics((await get(o.httpPort!, '/metrics')).text);
    expect(sample(families, 'kais_orchestrator_canary_total', { result: 'rolled_back' })).toBe(1);
    expect(sample(families, 'kais_orchestrator_events_total', { kind: 'canary-rollback' })).toBe(1);
    expect(sample(families, 'kais_orchestrator_canary_version')).toBe(-1);
    const ev = await get(o.httpPort!, '/v1/events?kind=canary-rollback', ADMIN);
    expect(ev.status).toBe(200);
    expect((JSON.parse(ev.text) as { events: { message: string }[] }).events[0].message).toBe(rollback);
    const st = JSON.parse((await get(o.httpPort!, '/v1/status', ADMIN)).text) as {
      canary: { rolledBack: number; recent: { version: number; decision: string }[] };
      rejectedVersions: { version: number; source: string }[];
    };
    expect(st.canary.recent[0]).toMatchObject({ version: 2, decision: 'rollback' });
    expect(st.rejectedVersions[0]).toMatchObject({ version: 2, source: 'canary' });
  }, 90_000);

  it('a listed canary group ("eaps": [1]): the drill reaches eAP 1 only and is rolled back there; the status names each eAP', async () => {
    // windows of 6 s: the status and kais status below are read well inside the first one
    const canary = { eaps: [1], windowS: 6, maxWindows: 2, settleS: 0.2, baselineS: 2, minRequests: 200 };
    const { db, cfgFile, v1 } = canarySetUp(tmp.dir, { injectBadWeightsAfterS: 2.5, canary });
    const o = await startOrchestrator(readConfig(cfgFile), { dbPath: db, httpPort: 0, log: () => undefined });
    cleanups.push(() => o.close());
    const agents = await playAgents(o, (checksum) => checksum !== v1.checksum, cleanups);
    await until(() => o.canary!.running !== null, 'the canary start');
    await until(() => o.canary!.perEap().some((r) => r.eap === 1 && r.requests > 0), 'counts from the canary eAP');
    const st = JSON.parse((await get(o.httpPort!, '/v1/status', ADMIN)).text) as {
      canary: { running: { eaps: number[]; perEap: { eap: number; canary: boolean }[] } | null };
    };
    expect(st.canary.running!.eaps).toEqual([1]);
    expect(st.canary.running!.perEap.map((r) => [r.eap, r.canary])).toEqual([
      [1, true],
      [0, false],
    ]);
    // kais status prints it (a child process: the orchestrator answers from this one's event loop)
    const cliOut = await new Promise<string>((resolve, reject) =>
      execFile(
        process.execPath,
        [KAIS, 'status', '--orchestrator', `http://127.0.0.1:${o.httpPort!}`],
        { env: { ...process.env, KAIS_ADMIN_TOKEN: ADMIN }, timeout: 30_000 },
        (err, stdout) => (err ? reject(err) : resolve(stdout)),
      ),
    );
    expect(cliOut).toMatch(/^canary: v2 on eAPs 1 since \S+, 0 of 2 windows judged: no window judged yet$/m);
    expect(cliOut).toMatch(/^ {2}per eAP, in time of requests: canary 1 0\.300 of \d+; control 0 0\.800 of \d+$/m);
    await until(() => o.store.events({ kind: 'canary-rollback' }).length > 0, 'the canary-rollback event');
    expect(o.store.events({ kind: 'canary-start' })[0].message).toMatch(/weights v2 to eAPs 1 first/);
    expect(o.store.events({ kind: 'canary-rollback' })[0].message).toMatch(/canary 1 0\.300 of \d+; control 0 0\.800 of \d+\)$/);
    await until(() => agents.every((a) => a.versions.includes(3)), 'every agent on v3');
    expect(agents[0].versions).toEqual([1, 3]);
    expect(agents[1].versions).toEqual([1, 2, 3]);
  }, 90_000);

  it('holds the placement still while the canary runs: hpa steps that fall due wait, and one runs at the verdict', async () => {
    // hpa decides every 15 scenario s: at speed 150 a step falls due every 100 ms, so the canary spans several
    const { db, cfgFile } = canarySetUp(tmp.dir, { injectBadWeightsAfterS: 2.5, orchestration: 'hpa', speed: 150 });
    const o = await startOrchestrator(readConfig(cfgFile), { dbPath: db, httpPort: 0, log: () => undefined });
    cleanups.push(() => o.close());
    await playAgents(o, () => false, cleanups);
    await until(
      () => o.store.events({ kind: 'canary-rollback' }).length + o.store.events({ kind: 'canary-promote' }).length > 0,
      'a verdict',
    );
    const start = o.store.events({ kind: 'canary-start' })[0].tsMs;
    const verdict = (o.store.events({ kind: 'canary-rollback' })[0] ?? o.store.events({ kind: 'canary-promote' })[0]).tsMs;
    const created = () => {
      const d = new Database(db, { readonly: true });
      try {
        return (d.prepare('SELECT created_ms AS t FROM placements ORDER BY version').all() as { t: number }[]).map((r) => r.t);
      } finally {
        d.close();
      }
    };
    // the deferred step is published at the verdict
    await until(() => created().some((t) => t >= verdict), 'a placement published at the verdict');
    const times = created();
    expect(times.filter((t) => t < start).length).toBeGreaterThan(1); // the loop stepped before the canary
    expect(times.filter((t) => t > start && t < verdict)).toEqual([]); // and not during it
    const families = parseMetrics((await get(o.httpPort!, '/metrics')).text);
    expect(sample(families, 'kais_orchestrator_placement_steps_deferred_total')).toBeGreaterThan(0);
    // and on the admin API's status: how many, and nothing waits once the verdict is in
    const st = JSON.parse((await get(o.httpPort!, '/v1/status', ADMIN)).text) as {
      placementDeferred: { waitingFor: string | null; steps: number };
    };
    expect(st.placementDeferred.steps).toBeGreaterThan(0);
    expect(st.placementDeferred.waitingFor).toBeNull();
  }, 90_000);

  it('promotes a version as good as the current one to every agent', async () => {
    const { db, cfgFile } = canarySetUp(tmp.dir, {});
    const o = await startOrchestrator(readConfig(cfgFile), { dbPath: db, httpPort: 0, log: () => undefined });
    cleanups.push(() => o.close());
    const agents = await playAgents(o, () => false, cleanups);
    // 2.5 s of both on v1 (the baseline), then v1's weights again as a new version
    await until(() => agents.every((a) => a.versions.includes(1)), 'v1 on both agents');
    await new Promise((r) => setTimeout(r, 2500));
    const v1 = o.store.model(1)!;
    expect(o.canary!.propose(unpackWeights(v1), 'relu1', 'test')!.version).toBe(2);
    await until(() => o.store.events({ kind: 'canary-promote' }).length > 0, 'the canary-promote event');
    expect(o.store.events({ kind: 'canary-promote' })[0].message).toMatch(/^weights v2 to every eAP after [12] window\(s\)/);
    await until(() => agents.every((a) => a.versions.includes(2)), 'every agent on v2');
    expect(agents[1].versions).toEqual([1, 2]);
    expect(o.store.rejectedModels()).toEqual([]);
    expect(o.hub.weightVersion).toBe(2);
  }, 90_000);

  it('promotes the same-weights drill (a copy of the current version as if learned): no false alarm on equal versions', async () => {
    const { db, cfgFile, v1 } = canarySetUp(tmp.dir, { injectSameWeightsAfterS: 2.5 });
    const o = await startOrchestrator(readConfig(cfgFile), { dbPath: db, httpPort: 0, log: () => undefined });
    cleanups.push(() => o.close());
    // the agents play a version's effect by its weights: the copy has v1's, so it is as good
    const agents = await playAgents(o, (checksum) => checksum !== v1.checksum, cleanups);
    await until(() => o.store.events({ kind: 'canary-promote' }).length > 0, 'the canary-promote event');
    expect(o.store.events({ kind: 'inject' })[0].message).toBe(
      'same-weights drill: a copy of weights v1 handed to the publish path as weights v2 (no gate: to the canary)',
    );
    expect(o.store.events({ kind: 'canary-start' })[0].message).toMatch(/^injected \(same-weights drill\) weights v2 to eAPs 0 first/);
    await until(() => agents.every((a) => a.versions.includes(2)), 'every agent on v2');
    expect(o.store.model(2)!.checksum).toBe(v1.checksum);
    expect(o.store.events({ kind: 'canary-rollback' })).toEqual([]);
    expect(o.store.rejectedModels()).toEqual([]);
  }, 90_000);

  it('rolls back a canary left running by a restart', async () => {
    const { db, cfgFile, v1 } = canarySetUp(tmp.dir, {});
    const s = Store.open(db);
    const v2 = packWeights(
      unpackWeights(v1).map((t) => ({ shape: t.shape, data: t.data.map((x) => -x) })),
      2,
      'relu1',
    );
    s.putModel(v2);
    s.putCanaryState({ version: 2, good: 1, eaps: [0], startedMs: Date.now() - 1000 });
    s.close();
    const o = await startOrchestrator(readConfig(cfgFile), { dbPath: db, log: () => undefined });
    cleanups.push(() => o.close());
    expect(o.store.latestModel()!).toMatchObject({ version: 3, checksum: v1.checksum });
    expect(o.store.events({ kind: 'canary-rollback' })[0].message).toMatch(/the orchestrator restarted during the canary/);
    expect(o.store.canaryState()).toBeNull();
  });
});

describe('the hub during a canary', () => {
  /** A client that says hello as `eapId` holding `held`; resolves with the welcome's version and the weights pushed after it. */
  async function connect(hub: Hub, eapId: number, held: number | null, instance: string) {
    const codec = new Codec();
    const ws = new WebSocket(hub.url, { perMessageDeflate: false });
    cleanups.push(() => ws.terminate());
    const frames: Frame[] = [];
    ws.on('message', (d: Buffer) => {
      const r = codec.decode(d);
      if (r.ok) frames.push(r.frame);
    });
    await new Promise((r) => ws.once('open', r));
    ws.send(
      codec.encode(makeFrame('hello', 0, { eapId, token: '', agentVersion: 't', weightVersion: held, placementVersion: null, instance })),
    );
    await until(() => frames.some((f) => f.type === 'welcome'), `eAP ${eapId} welcomed`);
    await new Promise((r) => setTimeout(r, 200)); // what follows the welcome
    const welcome = frames.find((f) => f.type === 'welcome')!;
    return {
      ws,
      frames,
      welcomed: welcome.type === 'welcome' ? welcome.body.weightVersion : undefined,
      pushed: () => frames.filter((f) => f.type === 'weights').map((f) => (f.type === 'weights' ? f.body.version : -1)),
    };
  }

  it('gives the canary version to a canary eAP that reconnects, the current one to the others; a broadcast ends the canary', async () => {
    const shapes = actorShapes(D, A);
    const w = initActorWeights(D, A, 3).map((data, i) => ({ shape: shapes[i], data }));
    const v1 = packWeights(w, 1, 'relu1');
    const hub = await Hub.listen({ port: 0, weights: v1, numEaps: 2 });
    cleanups.push(() => hub.close());
    const a0 = await connect(hub, 0, 1, 'a');
    const a1 = await connect(hub, 1, 1, 'b');
    hub.startCanary([0], packWeights(w, 2, 'relu1'));
    await until(() => a0.pushed().includes(2), 'v2 on eAP 0');
    expect(a1.pushed()).toEqual([]);
    expect(hub.canaryWeights).toEqual({ version: 2, eaps: [0] });
    expect(() => hub.startCanary([1], packWeights(w, 3, 'relu1'))).toThrow(/the canary of version 2 still runs/);
    // reconnects: the canary eAP is told v2 and gets it; the other is told v1 and gets nothing
    a0.ws.terminate();
    a1.ws.terminate();
    await until(() => hub.sessions().length === 0, 'both gone');
    const b0 = await connect(hub, 0, 1, 'a');
    const b1 = await connect(hub, 1, 1, 'b');
    expect([b0.welcomed, b0.pushed()]).toEqual([2, [2]]);
    expect([b1.welcomed, b1.pushed()]).toEqual([1, []]);
    // a rollback (a new version for everyone) ends the canary
    expect(() => hub.broadcastWeights(packWeights(w, 2, 'relu1'))).toThrow(/not above the current 2/);
    hub.broadcastWeights(packWeights(w, 3, 'relu1'));
    expect(hub.canaryWeights).toBeNull();
    await until(() => b0.pushed().includes(3) && b1.pushed().includes(3), 'v3 on both');
    expect(hub.weightsFor(0)!.version).toBe(3);
  });
});

describe("agents' regime-guard switches", () => {
  it('are events naming the eAP, stored, counted on /metrics and served by the admin API', async () => {
    const { db, cfgFile } = canarySetUp(tmp.dir, {});
    const o = await startOrchestrator(readConfig(cfgFile), { dbPath: db, httpPort: 0, log: () => undefined });
    cleanups.push(() => o.close());
    const raw = await rawAgent(
      o.hub.url,
      { eapId: 1, token: 'tok-1', agentVersion: 't', weightVersion: null, placementVersion: null, epoch: null, instance: 'g1' },
      new Codec(),
      cleanups,
    );
    raw.send('telemetry', {
      eap: 1,
      samples: [nodeSample(10, 9, 5)],
      guard: [
        { ts: Date.now(), level: 2, policy: 'round-robin', lateShare: 0.351, decision: 812 },
        { ts: Date.now(), level: 0, policy: 'cmmac', lateShare: 0.249, decision: 1090 },
      ],
    });
    await until(() => o.store.events({ kind: 'guard-switch' }).length === 2, 'two guard-switch events');
    const ev = o.store.events({ kind: 'guard-switch' });
    expect(ev.map((e) => [e.eap, e.message])).toEqual([
      [1, 'regime guard: round-robin decides from decision 812 (late share 0.351)'],
      [1, 'regime guard: cmmac decides from decision 1090 (late share 0.249, back to the learned policy)'],
    ]);
    const families = parseMetrics((await get(o.httpPort!, '/metrics')).text);
    expect(sample(families, 'kais_orchestrator_events_total', { kind: 'guard-switch' })).toBe(2);
    const served = JSON.parse((await get(o.httpPort!, '/v1/events?kind=guard-switch', ADMIN)).text) as { events: { eap: number }[] };
    expect(served.events.map((e) => e.eap)).toEqual([1, 1]);
  });
});

describe('canary config', () => {
  it.each([
    [{ share: 1.5 }, /c\.json: field "canary\.share" must be a share in \(0, 1\), got 1\.5$/],
    [{ windowS: 0 }, /field "canary\.windowS" must be a number of seconds in \[0\.1, 3600\], got 0$/],
    [{ maxWindows: 0 }, /field "canary\.maxWindows" must be an integer in \[1, 100\], got 0$/],
    [{ alpha: 0 }, /field "canary\.alpha" must be in \(0, 0\.5\], got 0$/],
    [{ margin: 0.9 }, /field "canary\.margin" must be in \[0, 0\.5\], got 0\.9$/],
    [{ minRequests: 2.5 }, /field "canary\.minRequests" must be an integer in \[1, 1e9\], got 2\.5$/],
    [{ bogus: 1 }, /field "canary\.bogus" is not a field of canary \(known: share, windowS, /],
    [{ eaps: 'some' }, /field "canary\.eaps" must be "first", "rotate" or a list of eAP ids, got "some"$/],
    [{ eaps: [0, 2] }, /field "canary\.eaps" names eAP 2, but the scenario's eAPs are 0-1$/],
    [{ eaps: [1, 0] }, /field "canary\.eaps" must leave at least one eAP as the control, got all 2$/],
    [
      { eaps: [1], share: 0.5 },
      /field "canary\.share" is not read with a list of canary\.eaps \(the list is the canary group\): give one of them$/,
    ],
    ['yes', /field "canary" must be true, false, null or an object$/],
  ])('%j is a one-line usage error naming the file and field', (canary, problem) => {
    expectConfigError(path.join(tmp.dir, 'c.json'), { scenario: 'small', canary }, problem);
  });

  it('a drill start out of range, or both drills at once, is a one-line usage error', () => {
    const f = path.join(tmp.dir, 'c.json');
    expectConfigError(
      f,
      { scenario: 'small', injectSameWeightsAfterS: -1 },
      /field "injectSameWeightsAfterS" must be null or a number of seconds in \[0, 86400\], got -1$/,
    );
    expectConfigError(
      f,
      { scenario: 'small', injectSameWeightsAfterS: 5, injectBadWeightsAfterS: 5 },
      /field "injectSameWeightsAfterS" cannot be set together with injectBadWeightsAfterS \(one drill a run\)$/,
    );
    fs.writeFileSync(f, JSON.stringify({ scenario: 'small', injectSameWeightsAfterS: 7 }));
    expect(readConfig(f)).toMatchObject({ injectSameWeightsAfterS: 7, injectBadWeightsAfterS: null });
  });

  it('needs a control eAP: a one-eAP scenario is refused', () => {
    const f = path.join(tmp.dir, 'c.json');
    fs.writeFileSync(f, JSON.stringify({ scenario: 'tiny', canary: true }));
    expect(() => readConfig(f)).toThrow(/field "canary" needs at least 2 eAPs \(canary and control\), the scenario has 1$/);
    fs.writeFileSync(f, JSON.stringify({ scenario: 'small', canary: true }));
    expect(readConfig(f).canary).toMatchObject({ share: 0.4, windowS: 10, margin: 0.03 });
    fs.writeFileSync(f, JSON.stringify({ scenario: 'small' }));
    expect(readConfig(f).canary).toBeNull();
  });

  const cli = fs.existsSync(KAIS) ? it : it.skip;
  cli('kais orchestrator exits 2 with that one line (needs dist/: npm run build)', () => {
    const f = path.join(tmp.dir, 'c.json');
    fs.writeFileSync(f, JSON.stringify({ scenario: 'small', canary: { windowS: -3 } }));
    const r = spawnSync(process.execPath, [KAIS, 'orchestrator', '--config', f, '--db', path.join(tmp.dir, 'x.db')], {
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(r.status).toBe(2);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/c\.json: field "canary\.windowS" must be a number of seconds in \[0\.1, 3600\], got -3/);
  });
});
