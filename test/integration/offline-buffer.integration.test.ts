/**
 * The agent's offline buffer (agent/outbox.ts, issue 19 item 4) against the real orchestrator
 * (`startOrchestrator`, its WebSocket hub and intake) on loopback. The agent reaches the
 * orchestrator through a TCP relay the test cuts (every connection closed, new ones refused) and
 * restores; the agent's targets are an emulated cluster, never cut. During the cut the agent
 * answers every request and holds its telemetry intervals and experience frames; after the
 * restore the orchestrator receives them, each once, in order. With a buffer smaller than the cut,
 * the oldest are dropped and counted (healthz and /metrics). When the orchestrator comes back on a
 * new store (a new epoch), the held experience is dropped, counted, and the telemetry goes to it.
 * Every decision is experience here
 * (`--policy lec --experience all`), and every telemetry interval carries the load report
 * (agent/load-report.ts), whose arrivals must add up to the requests sent.
 */
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import type { AddressInfo } from 'node:net';
import { startAgent, type RunningAgent } from '../../agent/main';
import { Outbox, approxBytes } from '../../agent/outbox';
import { EmulatedCluster } from '../../orchestrator/emulated-cluster';
import { readConfig, startOrchestrator, type RunningOrchestrator } from '../../orchestrator/main';
import type { ExperienceBody, TelemetryBody } from '../../shared/protocol/envelope';
import { loadScenario } from '../../shared/scenario';
import { parseMetrics, sample } from '../support/prometheus';
import { postStatus } from '../support/agent-process';

const scenario = loadScenario('tiny');

/** A TCP relay on loopback to `targetPort` that can be cut (every connection closed, new ones refused) and restored. */
class CuttableRelay {
  private readonly server: net.Server;
  private readonly open = new Set<net.Socket>();
  cut = false;
  port = 0;

  constructor(private readonly targetPort: number) {
    this.server = net.createServer((client) => {
      if (this.cut) return void client.destroy();
      const up = net.connect(this.targetPort, '127.0.0.1');
      this.open.add(client).add(up);
      client.pipe(up);
      up.pipe(client);
      const end = () => {
        client.destroy();
        up.destroy();
        this.open.delete(client);
        this.open.delete(up);
      };
      client.on('error', end).on('close', end);
      up.on('error', end).on('close', end);
    });
  }

  async listen(): Promise<void> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.port = (this.server.address() as AddressInfo).port;
  }

  cutNow(): void {
    this.cut = true;
    for (const s of this.open) s.destroy();
  }

  close(): Promise<void> {
    this.cutNow();
    return new Promise((r) => this.server.close(() => r()));
  }
}

function getText(port: number, p: string): Promise<string> {
  return new Promise((resolve, reject) => {
    http
      .get({ host: '127.0.0.1', port, path: p, agent: false }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
      })
      .on('error', reject);
  });
}

async function until(what: string, ok: () => boolean, ms = 15_000): Promise<void> {
  const end = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Offline {
  capacity: number;
  held: number;
  flushed: number;
  dropped: { telemetry: number; experience: number };
}

describe('agent offline buffer, real orchestrator on loopback', () => {
  let dir: string;
  let cluster: EmulatedCluster;
  let o: RunningOrchestrator;
  let relay: CuttableRelay;
  let agent: RunningAgent | null = null;
  /** What the orchestrator received from eAP 0, in arrival order. */
  let telemetry: { ts: number; body: TelemetryBody }[];
  let transitions: number;

  beforeEach(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kais-offline-'));
    cluster = new EmulatedCluster({ scenario });
    await cluster.listen();
    const cfgFile = path.join(dir, 'cfg.json');
    fs.writeFileSync(cfgFile, JSON.stringify({ scenario: 'tiny', learner: 'none', detector: 'none', heartbeatMs: 500 }));
    o = await startOrchestrator(readConfig(cfgFile), { dbPath: path.join(dir, 'o.db') });
    relay = new CuttableRelay(o.port);
    await relay.listen();
    telemetry = [];
    transitions = 0;
    o.hub.on('frame', (_session, frame) => {
      if (frame.type === 'telemetry') telemetry.push({ ts: frame.ts, body: frame.body });
      else if (frame.type === 'experience') transitions += frame.body.transitions.length;
    });
  });

  afterEach(async () => {
    await agent?.drain();
    agent = null;
    await relay.close();
    await o.close();
    await cluster.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const start = async (offlineBuffer: number, log?: (line: string) => void) => {
    agent = await startAgent({
      scenario,
      eap: 0,
      orchestratorUrl: `ws://127.0.0.1:${relay.port}`,
      targets: { nodes: cluster.nodeUrls, cloud: cluster.cloudUrl },
      cacheDir: null,
      batchMs: 100,
      policy: 'lec',
      experience: 'all',
      deviceFilters: false,
      offlineBuffer,
      ...(log ? { log } : {}),
    });
    await until('the first placement', () => agent!.runtime.placementVersion !== null);
    return agent;
  };
  const offline = () => agent!.health().offline as Offline;
  const request = { service: 0, deadlineMs: 2000, payloadBytes: 1000, workCoreS: 0.01 };

  /** Cut, `n` requests (all answered), held for `holdMs` more, restore, wait for the buffer to empty; then drain. */
  async function cutDispatchRestore(a: RunningAgent, n: number, holdMs: number): Promise<{ statuses: number[]; maxHeld: number }> {
    relay.cutNow();
    await until('the agent to see the link down', () => a.health().connected === false);
    let maxHeld = 0;
    const watch = setInterval(() => (maxHeld = Math.max(maxHeld, offline().held)), 10);
    const statuses: number[] = [];
    for (let i = 0; i < n; i++) statuses.push(await postStatus(a.port, request));
    await sleep(holdMs);
    relay.cut = false;
    await until('the agent back and its buffer sent', () => a.health().connected === true && offline().held === 0, 20_000);
    clearInterval(watch);
    return { statuses, maxHeld };
  }

  test('holds telemetry and experience while the link is cut and the orchestrator receives them once, in order', async () => {
    const a = await start(200);
    for (let i = 0; i < 5; i++) expect(await postStatus(a.port, request)).toBe(200);
    await until('telemetry before the cut', () => telemetry.length >= 3);
    const { statuses, maxHeld } = await cutDispatchRestore(a, 20, 800);
    expect(statuses.every((s) => s === 200)).toBe(true); // dispatching went on
    expect(maxHeld).toBeGreaterThanOrEqual(8); // ~100 ms intervals through the cut, and the experience
    for (let i = 0; i < 5; i++) expect(await postStatus(a.port, request)).toBe(200);
    const h = a.health() as { offline: Offline; framesSent: { telemetry: number; experience: number }; counters: { received: number } };
    await a.drain(); // the last interval and experience go out, then the link closes
    agent = null;
    await until('the last frames', () => telemetry.length === (a.health().framesSent as { telemetry: number }).telemetry);

    const off = a.health().offline as Offline;
    expect(off.dropped).toEqual({ telemetry: 0, experience: 0 });
    expect(off.flushed).toBeGreaterThanOrEqual(maxHeld);
    expect(h.offline.held).toBe(0);
    // each interval once, in order: the load reports' end times strictly increase
    const ends = telemetry.map((t) => t.body.load!.endTs);
    for (let i = 1; i < ends.length; i++) expect(ends[i]).toBeGreaterThan(ends[i - 1]);
    // some of them were sent well after their interval ended (held through the cut)
    expect(telemetry.filter((t) => t.ts - t.body.load!.endTs >= 500).length).toBeGreaterThanOrEqual(3);
    // nothing lost, nothing twice: every request in a load report, every decision as experience
    const arrivals = telemetry.reduce((s, t) => s + t.body.load!.arrivals[0], 0);
    expect(arrivals).toBe(30);
    // and every answer, in time or not (the orchestration window's completedInTime and failed)
    const sum = (k: 'completedInTime' | 'failed') => telemetry.reduce((s, t) => s + t.body.load![k]![0], 0);
    expect(sum('completedInTime') + sum('failed')).toBe(30);
    expect(sum('completedInTime')).toBe(a.dispatcher.counters.inTime);
    expect(transitions).toBe(a.dispatcher.counters.decisionsFallback);
    expect(transitions).toBeGreaterThanOrEqual(30);
  }, 60_000);

  test('a buffer smaller than the cut keeps the newest records and counts the dropped ones (healthz and /metrics)', async () => {
    const a = await start(4);
    await until('telemetry before the cut', () => telemetry.length >= 2);
    const before = telemetry.length;
    const { statuses, maxHeld } = await cutDispatchRestore(a, 10, 1000);
    expect(statuses.every((s) => s === 200)).toBe(true);
    expect(maxHeld).toBeLessThanOrEqual(4);
    const off = offline();
    expect(off.dropped.telemetry).toBeGreaterThanOrEqual(5);
    const m = parseMetrics(await getText(a.port, '/metrics'));
    expect(sample(m, 'kais_agent_offline_dropped_total', { kind: 'telemetry' })).toBe(off.dropped.telemetry);
    expect(sample(m, 'kais_agent_offline_held')).toBe(0);
    await a.drain();
    agent = null;
    const sent = (a.health().framesSent as { telemetry: number }).telemetry;
    await until('the last frames', () => telemetry.length === sent);
    // what the orchestrator got of the cut: at most the buffer's worth from before the restore
    const ends = telemetry.map((t) => t.body.load!.endTs);
    for (let i = 1; i < ends.length; i++) expect(ends[i]).toBeGreaterThan(ends[i - 1]);
    const held = telemetry.slice(before).filter((t) => t.ts - t.body.load!.endTs >= 300);
    expect(held.length).toBeLessThanOrEqual(4);
    // the dropped intervals are the requests missing from the load reports
    const arrivals = telemetry.reduce((s, t) => s + t.body.load!.arrivals[0], 0);
    expect(arrivals).toBeLessThan(10);
  }, 60_000);

  test('a drain while the link is down drops what it holds, counted and said in one line (it was lost without a count)', async () => {
    const lines: string[] = [];
    const a = await start(200, (l) => lines.push(l));
    relay.cutNow();
    await until('the agent to see the link down', () => a.health().connected === false);
    for (let i = 0; i < 6; i++) expect(await postStatus(a.port, request)).toBe(200);
    await until('records held', () => offline().held >= 3);
    await a.drain();
    agent = null;
    const off = a.health().offline as Offline;
    expect(off.held).toBe(0);
    const dropped = off.dropped.telemetry + off.dropped.experience;
    expect(dropped).toBeGreaterThanOrEqual(4); // what it held, and the last interval with the experience of the 6 requests
    expect(lines.filter((l) => l.startsWith('drain:'))).toEqual([
      `drain: ${dropped} held record(s) not sent (the orchestrator link is down): dropped, counted`,
    ]);
  }, 60_000);

  test('held experience is dropped (counted) when the orchestrator comes back on a new store; the held telemetry goes to it', async () => {
    const a = await start(200);
    for (let i = 0; i < 5; i++) expect(await postStatus(a.port, request)).toBe(200);
    await until('telemetry before the cut', () => telemetry.length >= 2);
    relay.cutNow();
    await until('the agent to see the link down', () => a.health().connected === false);
    for (let i = 0; i < 10; i++) expect(await postStatus(a.port, request)).toBe(200);
    await sleep(500);
    expect(offline().held).toBeGreaterThanOrEqual(3);
    // a new store behind the same address: a new epoch, whose weight versions start again
    const port = o.port;
    await o.close();
    telemetry = [];
    transitions = 0;
    o = await startOrchestrator(readConfig(path.join(dir, 'cfg.json')), { port, dbPath: path.join(dir, 'new.db') });
    o.hub.on('frame', (_session, frame) => {
      if (frame.type === 'telemetry') telemetry.push({ ts: frame.ts, body: frame.body });
      else if (frame.type === 'experience') transitions += frame.body.transitions.length;
    });
    relay.cut = false;
    await until('the agent back and its buffer sent', () => a.health().connected === true && offline().held === 0, 20_000);
    const off = offline();
    expect(off.dropped.experience).toBeGreaterThanOrEqual(1);
    expect(off.dropped.telemetry).toBe(0);
    // the intervals of the cut reached the new orchestrator, in order
    const held = telemetry.filter((t) => t.ts - t.body.load!.endTs >= 300);
    expect(held.length).toBeGreaterThanOrEqual(3);
    const ends = telemetry.map((t) => t.body.load!.endTs);
    for (let i = 1; i < ends.length; i++) expect(ends[i]).toBeGreaterThan(ends[i - 1]);
  }, 60_000);
});

describe('Outbox', () => {
  test('keeps the newest `capacity` records, drops the oldest first and counts them by kind', () => {
    const box = new Outbox(3);
    for (let i = 0; i < 5; i++) box.push({ type: 'telemetry', body: { eap: 0, samples: [{ node: i } as never] } });
    box.push({ type: 'experience', body: { eap: 0, transitions: [] } });
    expect(box.length).toBe(3);
    expect(box.stats.dropped).toEqual({ telemetry: 3, experience: 0 });
    const kept = [box.shift(), box.shift(), box.shift()].map((r) => (r!.type === 'telemetry' ? r!.body.samples[0].node : 'x'));
    expect(kept).toEqual([3, 4, 'x']);
    expect(box.shift()).toBeUndefined();
    const none = new Outbox(0);
    none.push({ type: 'experience', body: { eap: 0, transitions: [] } });
    expect(none.length).toBe(0);
    expect(none.stats.dropped.experience).toBe(1);
    expect(() => new Outbox(-1)).toThrow(/capacity/);
    const mixed = new Outbox(10);
    for (const type of ['telemetry', 'experience', 'telemetry', 'experience'] as const)
      mixed.push(type === 'telemetry' ? { type, body: { eap: 0, samples: [] } } : { type, body: { eap: 0, transitions: [] } });
    expect(mixed.dropAll('experience')).toBe(2);
    expect([mixed.shift()?.type, mixed.shift()?.type, mixed.length]).toEqual(['telemetry', 'telemetry', 0]);
    expect(mixed.stats.dropped).toEqual({ telemetry: 0, experience: 2 });
    expect(mixed.bytes).toBe(0);
  });

  test('is bounded in bytes too: experience frames of large observations drop the oldest before the record count is reached (600 of them were 90 MB)', () => {
    const frame = (k: number) => ({
      type: 'experience' as const,
      body: {
        eap: 0,
        transitions: Array.from({ length: 64 }, (_, i) => ({
          eap: 0,
          slot: k * 64 + i,
          service: 0,
          obs: new Float32Array(500),
          mask: new Uint8Array(41),
          action: 0,
          logProb: 0,
          reward: 0,
          latencyMs: null,
          metDeadline: true,
          done: false,
          weightVersion: 1,
        })),
      },
    });
    const one = approxBytes(frame(0).body);
    expect(one).toBeGreaterThan(64 * 2041); // the typed arrays alone
    expect(one).toBeLessThan(64 * 2041 * 1.5);
    const box = new Outbox(600, 1024 * 1024);
    for (let k = 0; k < 20; k++) box.push(frame(k));
    const kept = Math.floor((1024 * 1024) / one);
    expect(box.length).toBe(kept);
    expect(box.bytes).toBeLessThanOrEqual(1024 * 1024);
    expect(box.stats.dropped.experience).toBe(20 - kept);
    expect((box.peek()!.body as ExperienceBody).transitions[0].slot).toBe((20 - kept) * 64); // the oldest went
    while (box.shift());
    expect(box.bytes).toBe(0);
    const tiny = new Outbox(600, 1000);
    tiny.push(frame(0)); // larger than the whole bound: dropped itself
    expect([tiny.length, tiny.stats.dropped.experience, tiny.bytes]).toEqual([0, 1, 0]);
    expect(() => new Outbox(10, -1)).toThrow(/maxBytes/);
  });
});
