/**
 * orchestrator/dashboard.ts without a browser: what a snapshot says from telemetry, experience,
 * holds and events, and the stream and assets on a real HTTP server (the token, the assets from
 * the package, one snapshot a second only while someone watches).
 */
import * as http from 'node:http';
import { DashboardFeed, type DashboardSources } from '../../../orchestrator/dashboard';
import { OrchestratorHttp } from '../../../orchestrator/http';
import { AdminApi } from '../../../orchestrator/admin-api';
import { AdminState } from '../../../orchestrator/admin';
import { loadScenario, topologyOf } from '../../../shared/scenario';
import { initialPlacement } from '../../../shared/orchestration/placement';
import type { Prediction } from '../../../orchestrator/prediction';

const scenario = loadScenario('small');
const topo = topologyOf(scenario);
const TOKEN = 'dashboard-test-admin-token';

function sources(admin: AdminState, over: Partial<DashboardSources> = {}): DashboardSources {
  const placement = initialPlacement(scenario);
  return {
    scenario,
    speed: 2,
    orchestration: 'static',
    sessions: () => [{ eap: 1, session: 's1', weightVersion: 3, placementVersion: 1 }],
    placementVersion: () => 1,
    weightVersion: () => 3,
    placement: () => placement,
    frame: () => 4,
    holds: () => admin.snapshot().holds,
    overrides: () => admin.snapshot().overrides,
    forecast: () => scenario.services.map(() => 1.5),
    learner: () => null,
    ...over,
  };
}

type Snap = {
  nodes: { id: number; eap: number; health: string; requestsPerS: number; inTimeShare: number | null; replicas: number[] }[];
  agents: unknown[];
  numEaps: number;
  trail: { target: number | 'cloud'; outcome: string }[];
  events: { kind: string }[];
  forecast: number[];
  /** [bucket start ms, dispatched, in time, forecast arrivals, predicted in time] (req/s). */
  throughput: [number, number, number, number | null, number | null][];
  prediction: {
    policy: string;
    throughputRate: number;
    frame: number | null;
    frames: number;
    inTimePerS: number | null;
    arrivalsPerS: number | null;
    since: { fromMs: number; liveInTime: number; predictedInTime: number; livePerPredicted: number | null } | null;
  } | null;
};

const round3 = (x: number) => Math.round(x * 1000) / 1000;

const sample = (node: number, requests: number, succeeded: number, inDeadline: number) => ({
  node,
  ts: 0,
  cpu: 0.5,
  mem: 0.2,
  disk: 0.1,
  upBwMbps: 1,
  requests,
  succeeded,
  inDeadline,
  latencyMsSum: succeeded * 100,
});

describe('DashboardFeed', () => {
  it('reads node load and health from telemetry, holds, the trail from experience, and bounds its rings', () => {
    const admin = new AdminState();
    admin.hold({ node: 2, reason: 'disk', by: 'ops', setMs: 0 });
    const feed = new DashboardFeed(sources(admin));
    const t0 = 1_000_000;
    // node 0: 20 requests, 18 answered, 9 in time; node 1: 20 requests, 2 answered (failing once 5 s of telemetry came)
    feed.telemetry({ eap: 0, samples: [sample(0, 10, 9, 5), sample(1, 10, 1, 1)] }, t0);
    feed.telemetry({ eap: 1, samples: [sample(0, 10, 9, 4), sample(1, 10, 1, 0)] }, t0 + 6000);
    const cloud = topo.numNodes;
    feed.experience(
      {
        eap: 1,
        transitions: [
          { action: 3, metDeadline: true, latencyMs: 120 },
          { action: cloud, metDeadline: false, latencyMs: null },
          { action: 1, metDeadline: false, latencyMs: 900 },
        ].map((t, i) => ({
          ...t,
          eap: 1,
          slot: i,
          service: 0,
          obs: new Float32Array(1),
          mask: new Uint8Array(cloud + 1),
          logProb: 0,
          reward: 0,
          done: false,
          weightVersion: 3,
        })),
      },
      t0 + 6000,
    );
    for (let i = 0; i < 100; i++) feed.event({ tsMs: t0 + i, kind: i === 99 ? 'admin-hold' : 'epoch', eap: null, message: `m${i}` });
    const s = feed.snapshot(t0 + 6500) as unknown as Snap;
    expect(s.nodes).toHaveLength(topo.numNodes);
    expect(s.nodes.map((n) => n.eap)).toEqual(topo.nodeEap);
    expect(s.nodes[0]).toMatchObject({ health: 'ok', requestsPerS: 2, inTimeShare: 0.5 });
    expect(s.nodes[1].health).toBe('failing');
    expect(s.nodes[2].health).toBe('held');
    expect(s.nodes[3].health).toBe('quiet');
    expect(s.nodes[0].replicas).toEqual(initialPlacement(scenario).map((row) => row[0]));
    expect(s.trail.map((d) => [d.target, d.outcome])).toEqual([
      [3, 'in time'],
      ['cloud', 'dropped'],
      [1, 'late'],
    ]);
    expect(s.events).toHaveLength(60);
    expect(s.events[59].kind).toBe('admin-hold');
    expect(s.forecast).toEqual(scenario.services.map(() => 3)); // per wall second at speed 2
    // 10 s later the telemetry is old: quiet, no load
    const later = feed.snapshot(t0 + 17_000) as unknown as Snap;
    expect(later.nodes[0]).toMatchObject({ health: 'quiet', requestsPerS: 0 });
    // the throughput bucket of t0 holds its 20 requests over 2 s, the one of t0 + 6 s the other 20, the forecast beside them
    const bucket = (t: number) => later.throughput.find((r) => r[0] === t - (t % 2000))!;
    expect(bucket(t0)[1]).toBe(10);
    expect(bucket(t0 + 6000)[1]).toBe(10);
    expect(bucket(t0 + 2000)[1]).toBe(0);
    const bucket0 = bucket(t0);
    expect(bucket0[3]).toBe(scenario.services.length * 1.5 * 2);
    // no simulator prediction configured: none in the snapshot, none beside the buckets
    expect(later.prediction).toBeNull();
    expect(later.throughput.every((r) => r[4] === null)).toBe(true);
  });

  it("plots live throughput against the simulator's prediction, its frames laid on the wall clock by the start and speed", () => {
    const admin = new AdminState();
    const t0 = 2_000_000; // scenario time 0, on a bucket boundary
    // at speed 2 (sources) a frame of 25 scenario seconds lasts 12.5 s: 8 then 16 in time per wall second
    const p: Prediction = {
      policy: 'lec/static',
      throughputRate: 0.75,
      frameS: 25,
      arrivedPerFrame: [150, 250],
      completedInTimePerFrame: [100, 200],
      startMs: null,
    };
    const feed = new DashboardFeed(sources(admin, { prediction: () => p }), t0 - 60_000);
    feed.telemetry({ eap: 0, samples: [sample(0, 5, 5, 5)] }, t0 - 3000); // before the start: not counted
    const before = feed.snapshot(t0 - 2500) as unknown as Snap;
    expect(before.prediction).toMatchObject({ policy: 'lec/static', throughputRate: 0.75, frame: null, since: null });
    p.startMs = t0; // kais up wrote the start
    const cloud = topo.numNodes;
    // in the first bucket: 6 in time on node 0 and 3 in the cloud (which counts, as in the simulator)
    feed.telemetry({ eap: 0, samples: [sample(0, 10, 9, 6), sample(cloud, 4, 4, 3)] }, t0 + 1000);
    feed.telemetry({ eap: 1, samples: [sample(1, 10, 8, 7)] }, t0 + 13_000);
    const s = feed.snapshot(t0 + 14_500) as unknown as Snap;
    const row = (t: number) => s.throughput.find((r) => r[0] === t)!;
    expect(row(t0)).toEqual([t0, 7, 4.5, scenario.services.length * 1.5 * 2, 8]);
    for (let t = t0 + 2000; t <= t0 + 10_000; t += 2000) expect(row(t)[4]).toBe(8);
    // the bucket across the frames' boundary (12.5 s): 0.5 s of frame 0, 1.5 s of frame 1
    expect(row(t0 + 12_000)[4]).toBe(14); // (100 x 0.04 + 200 x 0.12) / 2 s
    expect(row(t0 + 12_000)[2]).toBe(3.5);
    expect(row(t0 - 4000)[4]).toBeNull(); // before the start
    expect(s.prediction).toEqual({
      policy: 'lec/static',
      throughputRate: 0.75,
      frameS: 25,
      startMs: t0,
      frames: 2,
      frame: 1,
      inTimePerS: 16,
      arrivalsPerS: 20,
      // since the start: 16 in time live; predicted the whole frame 0 and 2 s (0.16) of frame 1
      since: { fromMs: t0, liveInTime: 16, predictedInTime: 132, livePerPredicted: round3(16 / 132) },
    });
    // past the last frame: no rate for now, the buckets there have no prediction
    const after = feed.snapshot(t0 + 30_000) as unknown as Snap;
    expect(after.prediction).toMatchObject({ frame: 2, inTimePerS: null, since: { liveInTime: 16, predictedInTime: 300 } });
    expect(after.throughput.find((r) => r[0] === t0 + 26_000)![4]).toBeNull();
  });

  it('skips snapshots for a viewer that has not taken the ones before, and closes its stream after 30 s of that', () => {
    jest.useFakeTimers({ now: 1_000_000 });
    try {
      const feed = new DashboardFeed(sources(new AdminState()));
      /** A stream whose client never reads: everything written stays queued (100 KB a snapshot: kais's is 42-50 KB with a full event ring). */
      const viewer = (reads: boolean) => {
        const closers: (() => void)[] = [];
        const r = {
          writableLength: 0,
          written: 0,
          destroyed: false,
          writeHead: () => r,
          on: (ev: string, f: () => void) => void (ev === 'close' && closers.push(f)),
          write: (chunk: string) => {
            r.written++;
            if (!reads) r.writableLength += Math.max(100_000, Buffer.byteLength(chunk));
            return reads;
          },
          destroy: () => {
            r.destroyed = true;
            closers.forEach((f) => f());
          },
        };
        (feed as unknown as { subscribe(res: unknown): void }).subscribe(r);
        return r;
      };
      const asleep = viewer(false);
      const awake = viewer(true);
      // a snapshot a second: the sleeper's queue passes 256 KiB at its third, then it gets no more
      jest.advanceTimersByTime(10_000);
      expect(awake.written).toBe(11);
      expect(asleep.written).toBe(3);
      expect(feed.skipped).toBe(8);
      expect(asleep.destroyed).toBe(false);
      // 30 s of skipping: its stream is closed; the other goes on
      jest.advanceTimersByTime(30_000);
      expect(asleep.destroyed).toBe(true);
      expect([feed.viewers, feed.stalledClosed, feed.ticking]).toEqual([1, 1, true]);
      expect(awake.written).toBe(41);
      awake.destroy();
      expect(feed.ticking).toBe(false);
    } finally {
      jest.useRealTimers();
    }
  });

  it('shows every eAP a session speaks for, beyond the scenario', () => {
    const admin = new AdminState();
    const feed = new DashboardFeed(
      sources(admin, {
        sessions: () => Array.from({ length: 200 }, (_, b) => ({ eap: b, session: `s${b}`, weightVersion: null, placementVersion: null })),
      }),
    );
    const s = feed.snapshot() as unknown as Snap;
    expect(s.numEaps).toBe(200);
    expect(s.agents).toHaveLength(200);
  });

  it("shows safe learning in kais status's words, and the eAPs a running canary holds", () => {
    const admin = new AdminState();
    type Safe = { safeLearning: { lines: string[]; canaryEaps: number[] } };
    // off: no line, no eAP (the page says it is off)
    expect((new DashboardFeed(sources(admin)).snapshot() as unknown as Safe).safeLearning).toEqual({ lines: [], canaryEaps: [] });
    const startedMs = Date.UTC(2026, 11, 7, 12, 0, 0);
    let running: Record<string, unknown> | null = {
      version: 5,
      eaps: [1, 3],
      startedMs,
      windows: 1,
      last: 'undecided: canary 0.700 vs control 0.800',
      perEap: [
        { eap: 1, canary: true, requests: 100, inDeadline: 70 },
        { eap: 3, canary: true, requests: 0, inDeadline: 0 },
        { eap: 0, canary: false, requests: 200, inDeadline: 160 },
      ],
    };
    const feed = new DashboardFeed(
      sources(admin, {
        safeLearning: () => ({
          learner: { transitionsRead: 512, updates: 2, published: 1 },
          gate: null,
          canary: {
            config: { maxWindows: 4 },
            running,
            waiting: null,
            goodVersion: 4,
            promoted: 1,
            rolledBack: 0,
            superseded: 0,
            recent: running ? [] : [{ version: 5, decision: 'rollback', reason: 'worse than the control' }],
          },
          rejectedVersions: running ? [] : [{ version: 5, source: 'canary', reason: 'worse than the control' }],
          storedVersions: running
            ? [{ version: 5, createdMs: startedMs, rejectedBy: null }]
            : [
                { version: 6, createdMs: startedMs + 45_000, rejectedBy: null },
                { version: 5, createdMs: startedMs, rejectedBy: 'canary' },
              ],
        }),
      }),
    );
    const on = (feed.snapshot() as unknown as Safe).safeLearning;
    expect(on).toEqual({
      lines: [
        'learner: 512 transitions read, 2 updates, 1 version published',
        'canary: v5 on eAPs 1, 3 since 2026-12-07T12:00:00.000Z, 1 of 4 windows judged: undecided: canary 0.700 vs control 0.800',
        '  per eAP, in time of requests: canary 1 0.700 of 100, 3 - of 0; control 0 0.800 of 200',
      ],
      canaryEaps: [1, 3],
    });
    // the verdict: no eAP under canary, the verdict and the rejected version named
    running = null;
    const after = (feed.snapshot() as unknown as Safe).safeLearning;
    expect(after).toEqual({
      lines: [
        'learner: 512 transitions read, 2 updates, 1 version published',
        'canary: none running (good version v4; 1 promoted, 0 rolled back, 0 superseded)',
        'canary: last verdict: v5 rollback: worse than the control',
        'stored (newest first, UTC): v6 12:00:45, v5 12:00:00 (rejected by the canary)',
        'rejected: v5 (canary): worse than the control',
      ],
      canaryEaps: [],
    });
  });
});

describe('the dashboard on the HTTP port', () => {
  let web: OrchestratorHttp;
  let port: number;
  let feed: DashboardFeed;

  beforeAll(async () => {
    const admin = new AdminState();
    feed = new DashboardFeed(sources(admin));
    const api = new AdminApi({
      scenario,
      state: admin,
      save: () => undefined,
      event: () => undefined,
      stepNow: async () => ({ cluster: true, executed: 0, refused: 0 }),
      status: () => ({}),
      events: () => [],
      forecast: () => null,
    });
    web = new OrchestratorHttp(
      {
        agentsConnected: () => 1,
        weightVersion: () => 3,
        placementVersion: () => 1,
        eventTotals: () => ({}),
        intake: () => ({ accepted: 0, invalid: 0, rateLimited: 0, quarantined: 0 }),
        learner: () => null,
        placementOrders: () => ({ executed: 0, refused: 0, deferredSteps: 0, failedSteps: 0 }),
        storeWriteFailures: () => 0,
        notReady: () => null,
        health: () => ({}),
      },
      { api, token: TOKEN },
      feed,
    );
    port = await web.listen(0);
  });
  afterAll(() => web.close());

  const get = (path: string, headers: Record<string, string> = {}) =>
    new Promise<{ status: number; type: string; body: string }>((resolve, reject) => {
      http
        .get({ host: '127.0.0.1', port, path, headers }, (res) => {
          let body = '';
          res.on('data', (c: Buffer) => (body += c.toString()));
          res.on('end', () => resolve({ status: res.statusCode!, type: String(res.headers['content-type']), body }));
        })
        .on('error', reject);
    });

  it('serves the page and its assets from the package, with no outside source', async () => {
    const page = await get('/dashboard');
    expect(page.status).toBe(200);
    expect(page.type).toMatch(/text\/html/);
    const refs = [...page.body.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]).filter((r) => !r.startsWith('data:'));
    expect(refs.sort()).toEqual(['/dashboard/app.css', '/dashboard/app.js', '/dashboard/uplot.css', '/dashboard/uplot.js']);
    for (const r of refs) expect({ r, status: (await get(r)).status }).toEqual({ r, status: 200 });
    // the page and its script name no other origin
    expect(page.body).not.toMatch(/https?:\/\//);
    expect((await get('/dashboard/app.js')).body).not.toMatch(/https?:\/\//);
    expect((await get('/dashboard/uplot.js')).body).toMatch(/uPlot/);
    expect((await get('/dashboard/nope.js')).status).toBe(404);
  });

  it('streams snapshots with the admin token only, and stops building them when nobody watches', async () => {
    expect((await get('/dashboard/stream')).status).toBe(401);
    expect((await get('/dashboard/stream', { authorization: 'Bearer wrong' })).status).toBe(401);
    const sentBefore = feed.sent;
    const got: Snap[] = [];
    await new Promise<void>((resolve, reject) => {
      const req = http.get({ host: '127.0.0.1', port, path: '/dashboard/stream', headers: { authorization: `Bearer ${TOKEN}` } }, (res) => {
        expect(res.headers['content-type']).toBe('text/event-stream');
        let buf = '';
        res.on('data', (c: Buffer) => {
          buf += c.toString();
          let cut: number;
          while ((cut = buf.indexOf('\n\n')) >= 0) {
            const msg = buf.slice(0, cut);
            buf = buf.slice(cut + 2);
            expect(msg.startsWith('event: snapshot\ndata: ')).toBe(true);
            got.push(JSON.parse(msg.slice('event: snapshot\ndata: '.length)) as Snap);
            if (got.length === 2) {
              req.destroy();
              resolve();
            }
          }
        });
      });
      req.on('error', reject);
    });
    expect(got[0].nodes).toHaveLength(topo.numNodes);
    expect(feed.sent - sentBefore).toBe(2);
    expect(feed.ticking).toBe(true);
    await new Promise<void>((resolve) => {
      const check = () => (feed.viewers === 0 ? resolve() : setImmediate(check));
      check();
    });
    expect(feed.ticking).toBe(false); // no snapshot is built for nobody
  });
});
