/**
 * Issue 14, bounded storage: one session floods a live orchestrator (startOrchestrator: real hub,
 * real SQLite file) with maximum-size valid experience frames and telemetry frames as fast as its
 * socket drains, for a few seconds standing in for an hour (the limits are scaled down with it).
 * The intake's rate limit refuses what is over the session's budget, the background prune keeps
 * experience, metrics and events within their limits, and the database file (with its -wal) and
 * the process's RSS stay under the configured bounds. Nothing sleeps for luck: the flood runs for a
 * fixed wall time and the checks read the store.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import WebSocket from 'ws';
import { readConfig, startOrchestrator } from '../../orchestrator/main';
import { Codec } from '../../shared/protocol/codec';
import { makeFrame, type NodeSample, type Transition } from '../../shared/protocol/envelope';
import { Rng } from '../../shared/rng';
import { loadScenario, topologyOf } from '../../shared/scenario';
import { observationDim } from '../../shared/spaces';

const scenario = loadScenario('kais');
const topo = topologyOf(scenario);
const A = topo.numNodes + 1;
const D = observationDim({ numServices: topo.numServices, numTargets: A, numEaps: topo.numEaps });

describe('a flood of maximum-size valid learning input from one session', () => {
  let dir: string;
  const closers: (() => unknown)[] = [];
  beforeEach(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kais-bounds-'))));
  afterEach(async () => {
    for (const c of closers.splice(0).reverse()) await c();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('keeps the database and the RSS under their limits: rate limit at the door, prune in the background', async () => {
    const MB = 1048576;
    const limits = { experienceMaxMB: 4, experienceMaxAgeS: 3, metricsMaxRows: 500, eventsMaxRows: 50 };
    const cfgFile = path.join(dir, 'c.json');
    fs.writeFileSync(
      cfgFile,
      JSON.stringify({
        scenario: 'kais',
        token: 'flood',
        learner: 'none',
        detector: 'none',
        heartbeatMs: 1000,
        pruneS: 0.2,
        limits,
        intake: { maxMBPerS: 2, maxTransitionsPerS: 2000, maxFramesPerS: 400 },
      }),
    );
    const db = path.join(dir, 'o.db');
    const logs: string[] = [];
    const o = await startOrchestrator(readConfig(cfgFile), { dbPath: db, log: (l) => logs.push(l) });
    closers.push(() => o.close());
    // the flooding session: a raw client that encodes its frames once and sends the bytes again and again
    const codec = new Codec();
    const ws = new WebSocket(o.hub.url, { perMessageDeflate: false });
    ws.on('error', () => undefined);
    closers.push(() => ws.terminate());
    await new Promise<void>((resolve) => ws.once('open', () => resolve()));
    ws.send(
      codec.encode(
        makeFrame('hello', 0, {
          eapId: 0,
          token: 'flood',
          agentVersion: 'flood',
          weightVersion: null,
          placementVersion: null,
          epoch: null,
          instance: 'flooder',
        }),
      ),
    );
    await new Promise<void>((resolve) => ws.once('message', () => resolve())); // welcome

    // the largest valid frames: 1024 transitions of the kais observation (~2.5 MB), a sample per target
    const rng = new Rng(5);
    const transitions: Transition[] = Array.from({ length: 1024 }, (_, k) => ({
      eap: 0,
      slot: k,
      service: k % topo.numServices,
      obs: Float32Array.from({ length: D }, () => rng.next()),
      mask: new Uint8Array(A).fill(1),
      action: k % A,
      logProb: -1.5,
      reward: k % 2,
      latencyMs: 100,
      metDeadline: k % 2 === 1,
      done: false,
      weightVersion: null,
    }));
    const samples: NodeSample[] = Array.from({ length: A }, (_, node) => ({
      node,
      ts: Date.now(),
      cpu: 0.5,
      mem: 0.5,
      disk: 0.1,
      upBwMbps: 10,
      requests: 100,
      succeeded: 90,
      inDeadline: 80,
      latencyMsSum: 9000,
    }));
    const experienceBytes = codec.encode(makeFrame('experience', 1, { eap: 0, transitions }));
    const telemetryBytes = codec.encode(makeFrame('telemetry', 2, { eap: 0, samples }));
    const rss0 = process.memoryUsage().rss;
    let peakRss = rss0;
    let peakFile = 0;
    let sent = 0;
    const t0 = Date.now();
    const FLOOD_MS = 4000;
    // as fast as the socket drains (never more than 8 MB queued on our side)
    while (Date.now() - t0 < FLOOD_MS) {
      if (ws.bufferedAmount < 8 * MB) {
        ws.send(experienceBytes);
        for (let k = 0; k < 4; k++) ws.send(telemetryBytes);
        sent++;
      }
      await new Promise((r) => setImmediate(r));
      if (sent % 8 === 0) {
        peakRss = Math.max(peakRss, process.memoryUsage().rss);
        peakFile = Math.max(peakFile, o.store.fileBytes());
      }
    }
    // one more prune pass after the flood (the timer's)
    const prunedBy = Date.now() + 1000;
    while (Date.now() < prunedBy && o.store.experienceBytes > limits.experienceMaxMB * MB) await new Promise((r) => setTimeout(r, 50));
    peakFile = Math.max(peakFile, o.store.fileBytes());

    const stats = o.intake.stats;
    const offeredMB = (sent * 1024 * D * 4) / MB;
    process.stderr.write(
      `storage flood: ${sent} max-size experience frames offered (${offeredMB.toFixed(0)} MB of observations) in ${FLOOD_MS} ms, ` +
        `accepted ${stats.accepted}, rate-limited ${stats.rateLimited}; experience held ${(o.store.experienceBytes / MB).toFixed(1)} MB ` +
        `(limit ${limits.experienceMaxMB}), peak file+wal ${(peakFile / MB).toFixed(1)} MB, peak RSS +${((peakRss - rss0) / MB).toFixed(0)} MB\n`,
    );
    // the session was held to its budget: most of the flood was refused at the door
    expect(stats.rateLimited).toBeGreaterThan(0);
    // what is stored is within the limits (the prune keeps up)
    expect(o.store.experienceBytes).toBeLessThanOrEqual(limits.experienceMaxMB * MB);
    const metricRows = o.store.metrics('agent/requests').length + o.store.metrics('agent/in_deadline').length;
    expect(metricRows).toBeLessThanOrEqual(limits.metricsMaxRows + 2 * 400 * 0.2 + 10); // + one prune interval of telemetry
    expect(o.store.events().length).toBeLessThanOrEqual(limits.eventsMaxRows + 10);
    expect(o.store.events({ kind: 'rate-limit' }).length).toBeGreaterThan(0);
    // the file never held much more than the limits: the experience limit + two frames that arrive
    // between prunes (2 x 2.6 MB) + the metrics and the WAL (a few MB)
    expect(peakFile).toBeLessThan((limits.experienceMaxMB + 6 + 10) * MB);
    expect(peakRss - rss0).toBeLessThan(300 * MB);
  });
});
