/**
 * The agent's process wiring (agent/main.ts) against a real hub, store and emulated cluster, all
 * in this process on port 0 (the `tiny` scenario: 1 eAP, 3 nodes, 4 services).
 */
import * as fs from 'node:fs';
import * as http from 'node:http';
import { counters, parseMetrics, sample } from '../support/prometheus';
import * as os from 'node:os';
import * as path from 'node:path';
import { startAgent, type AgentOptions, type RunningAgent } from '../../agent/main';
import { observationDim } from '../../agent/observation';
import { EmulatedCluster, initialPlacement } from '../../orchestrator/emulated-cluster';
import type { Hub } from '../../orchestrator/hub';
import { ModelRegistry, startHub } from '../../orchestrator/registry';
import { Store } from '../../orchestrator/store';
import { actorShapes, initActorWeights } from '../../shared/nets/actor';
import { loadScenario } from '../../shared/scenario';
import type { Transition } from '../../shared/protocol/envelope';

const scenario = loadScenario('tiny');

function post(port: number, body: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const text = typeof body === 'string' ? body : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port, path: '/request', method: 'POST', agent: false, headers: { 'content-length': Buffer.byteLength(text) } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown> }),
        );
      },
    );
    req.on('error', reject);
    req.end(text);
  });
}

function get(port: number, p: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    http
      .get({ host: '127.0.0.1', port, path: p, agent: false }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
      })
      .on('error', reject);
  });
}

async function until(cond: () => boolean | Promise<boolean>, timeoutMs = 5000): Promise<void> {
  const t0 = Date.now();
  while (!(await cond())) {
    if (Date.now() - t0 > timeoutMs) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}

const request = { service: 0, deadlineMs: 2000, payloadBytes: 1000, workCoreS: 0.01 };

interface Live {
  dir: string;
  cluster: EmulatedCluster;
  store: Store;
  hub: Hub;
  registry: ModelRegistry;
}

/** A real emulated cluster, store, hub and registry on port 0, the initial placement published. */
async function setUp(prefix: string, clusterOptions: { speed?: number; seed?: number }): Promise<Live> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  const cluster = new EmulatedCluster({ scenario, ...clusterOptions });
  await cluster.listen();
  const store = Store.open(path.join(dir, 'o.db'));
  const hub = await startHub(store, { heartbeatMs: 1000 });
  const registry = new ModelRegistry(store, hub);
  registry.publishPlacement(0, initialPlacement(scenario));
  return { dir, cluster, store, hub, registry };
}

async function tearDown(l: Live, agents: RunningAgent[]): Promise<void> {
  for (const a of agents.splice(0)) await a.drain();
  l.registry.dispose();
  await l.hub.close();
  l.store.close();
  await l.cluster.close();
  fs.rmSync(l.dir, { recursive: true, force: true });
}

describe('kais agent (process wiring)', () => {
  let dir: string;
  let cluster: EmulatedCluster;
  let store: Store;
  let hub: Hub;
  let registry: ModelRegistry;
  const agents: RunningAgent[] = [];

  const start = async (cacheDir: string, url = hub.url, more: Partial<AgentOptions> = {}) => {
    const a = await startAgent({
      scenario,
      eap: 0,
      orchestratorUrl: url,
      targets: { nodes: cluster.nodeUrls, cloud: cluster.cloudUrl },
      cacheDir,
      batchMs: 100,
      ...more,
    });
    agents.push(a);
    return a;
  };

  beforeEach(async () => {
    ({ dir, cluster, store, hub, registry } = await setUp('kais-agent-it-', {}));
  });

  afterEach(() => tearDown({ dir, cluster, store, hub, registry }, agents));

  it('dispatches with the lec fallback before weights, then with cmmac once a weights frame arrives, and caches them', async () => {
    const a = await start(path.join(dir, 'cache'));
    await until(() => a.runtime.placementVersion === 1);
    const r1 = await post(a.port, request);
    expect(r1.status).toBe(200);
    expect(a.health().policy).toBe('lec');

    const dim = observationDim({ numServices: 4, numTargets: 4, numEaps: 1 });
    const arrays = initActorWeights(dim, 4, 7);
    const shapes = actorShapes(dim, 4);
    registry.publishWeights(arrays.map((data, i) => ({ shape: shapes[i], data })));
    await until(() => a.runtime.weightVersion === 1);
    await until(() => registry.holders().get(0) === 1); // acked
    const r2 = await post(a.port, request);
    expect(r2.status).toBe(200);
    expect(a.health().policy).toBe('cmmac');
    expect(a.dispatcher.counters.decisionsLearned).toBe(1);
    expect(fs.existsSync(path.join(dir, 'cache', 'weights.bin'))).toBe(true);
  });

  it("draws every decision from the policy when the orchestrator's welcome says its model samples, unless --explore is given", async () => {
    // a hub whose model acts by sampling (kais orchestrator with a checkpoint whose act is sample)
    await tearDown({ dir, cluster, store, hub, registry }, agents);
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kais-agent-act-'));
    cluster = new EmulatedCluster({ scenario });
    await cluster.listen();
    store = Store.open(path.join(dir, 'o.db'));
    hub = await startHub(store, { heartbeatMs: 1000, act: 'sample' });
    registry = new ModelRegistry(store, hub);
    registry.publishPlacement(0, initialPlacement(scenario));
    const dim = observationDim({ numServices: 4, numTargets: 4, numEaps: 1 });
    const shapes = actorShapes(dim, 4);
    registry.publishWeights(initActorWeights(dim, 4, 7).map((data, i) => ({ shape: shapes[i], data })));
    const decide = async (a: RunningAgent) => {
      await until(() => a.runtime.weightVersion === 1 && a.runtime.placementVersion === 1);
      for (let i = 0; i < 6; i++) expect((await post(a.port, request)).status).toBe(200);
      return a.dispatcher.counters;
    };
    const follows = await start(path.join(dir, 'c1'));
    const c1 = await decide(follows);
    expect(follows.health().explore).toBe(1);
    expect(c1.decisionsLearned).toBe(6);
    expect(c1.decisionsDrawn).toBe(6);
    await agents.pop()!.drain();
    const pinned = await start(path.join(dir, 'c2'), hub.url, { explore: 0 });
    const c2 = await decide(pinned);
    expect(pinned.health().explore).toBe(0); // an explicit --explore wins
    expect(c2.decisionsLearned).toBe(6);
    expect(c2.decisionsDrawn).toBe(0);
  });

  it('applies the actor head the weights frame carries, over its own --actor-head, and keeps it in its cache', async () => {
    const cache = path.join(dir, 'cache');
    const a = await start(cache, hub.url, { actorHead: 'softplus1' });
    await until(() => a.runtime.placementVersion === 1);
    const dim = observationDim({ numServices: 4, numTargets: 4, numEaps: 1 });
    const shapes = actorShapes(dim, 4);
    registry.publishWeights(
      initActorWeights(dim, 4, 5).map((data, i) => ({ shape: shapes[i], data })),
      'relu1',
    );
    await until(() => a.runtime.weightVersion === 1);
    expect(a.health()).toMatchObject({ policy: 'cmmac', actorHead: 'relu1' });
    await a.drain();
    const again = await start(cache, 'ws://127.0.0.1:1', { actorHead: 'softplus1' }); // from the cache alone
    expect(again.health()).toMatchObject({ policy: 'cmmac', weightVersion: 1, actorHead: 'relu1' });
  });

  it('sends its decisions as experience (--experience all) and its per-target counts as telemetry, in batches', async () => {
    const transitions: Transition[] = [];
    let served = 0;
    hub.on('frame', (_s, f) => {
      if (f.type === 'experience') transitions.push(...f.body.transitions);
      if (f.type === 'telemetry') for (const x of f.body.samples) served += x.succeeded;
    });
    const a = await start(path.join(dir, 'cache'), hub.url, { experience: 'all' });
    await until(() => a.link.ready);
    await Promise.all(Array.from({ length: 10 }, () => post(a.port, request)));
    await until(() => transitions.length === 10 && served === 10);
    expect(transitions[0]).toMatchObject({ eap: 0, service: 0, weightVersion: null, logProb: 0, metDeadline: true, reward: 1 });
    expect(hub.stats.refused).toBe(0);
  });

  it('keeps dispatching with its cached weights and placement when the orchestrator is unreachable', async () => {
    const cache = path.join(dir, 'cache');
    const first = await start(cache);
    await until(() => first.runtime.placementVersion === 1);
    const dim = observationDim({ numServices: 4, numTargets: 4, numEaps: 1 });
    const shapes = actorShapes(dim, 4);
    registry.publishWeights(initActorWeights(dim, 4, 3).map((data, i) => ({ shape: shapes[i], data })));
    await until(() => first.runtime.weightVersion === 1);
    await first.drain();

    const lines: string[] = [];
    const alone = await start(cache, 'ws://127.0.0.1:1', { log: (l: string) => lines.push(l) }); // nothing listens there
    expect(alone.health()).toMatchObject({ policy: 'cmmac', weightVersion: 1, placementVersion: 1, connected: false });
    const rs = await Promise.all(Array.from({ length: 5 }, () => post(alone.port, request)));
    expect(rs.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
    // and says why it is alone (it was silent), in its log and on /healthz
    await until(() => lines.some((l) => l.includes('not reached (attempt 1)')));
    expect(lines.find((l) => l.includes('not reached'))).toMatch(
      /^orchestrator ws:\/\/127\.0\.0\.1:1 not reached \(attempt 1\): .*ECONNREFUSED.*; retrying in [\d.]+ s, dispatching on$/,
    );
    expect(alone.health()).toMatchObject({ ok: true, linkProblem: expect.stringMatching(/ECONNREFUSED/) });
  });

  it('answers every request it holds when drained, and takes no new connection meanwhile', async () => {
    const a = await start(path.join(dir, 'cache'));
    // 0.3 core-s of work at 0.5 cores: 600 ms each, more than the cluster can start at once
    const slow = { service: 0, deadlineMs: 5000, payloadBytes: 0, workCoreS: 0.3 };
    const pending = Array.from({ length: 12 }, () => post(a.port, slow));
    await until(() => a.dispatcher.counters.received === 12);
    const drained = a.drain();
    await expect(post(a.port, slow)).rejects.toThrow(/ECONNREFUSED/);
    const results = await Promise.all(pending);
    await drained;
    expect(results).toHaveLength(12);
    for (const r of results) expect([200, 503, 504]).toContain(r.status);
    expect(results.filter((r) => r.status === 200).length).toBeGreaterThan(0);
    expect(a.dispatcher.outstanding).toBe(0);
  });

  it('refuses a malformed request with 400 and one line saying why; serves /metrics and /healthz', async () => {
    const a = await start(path.join(dir, 'cache'));
    const bad = await post(a.port, { service: 99, deadlineMs: 100, payloadBytes: 0 });
    expect(bad.status).toBe(400);
    expect(bad.body.reason).toMatch(/service must be an integer in 0\.\.3/);
    expect((await post(a.port, 'not json')).status).toBe(400);
    // a body over the cap is 413; a known path with the wrong method 405; a query string does not change the route
    const big = await post(a.port, `{"pad":"${'x'.repeat(70_000)}"}`);
    expect([big.status, big.body.reason]).toEqual([413, 'body over 65536 bytes']);
    // an announced length over the cap is refused before any of it is read, and the connection is closed
    // (the agent read on: a Content-Length of 1e11 cost a core for minutes)
    const announced = await new Promise<{ status: number; connection: string | undefined; closed: Promise<void> }>((resolve) => {
      const req = http.request(
        { host: '127.0.0.1', port: a.port, method: 'POST', path: '/request', headers: { 'content-length': String(1e11) }, agent: false },
        (res) => {
          res.resume();
          const closed = new Promise<void>((done) => req.socket!.once('close', () => done()));
          resolve({ status: res.statusCode ?? 0, connection: res.headers.connection, closed });
        },
      );
      req.on('error', () => undefined); // the upload is cut: the answer is what counts
      req.write('{"service":'); // and no more: a hang (no answer) ends in the test's timeout
    });
    expect([announced.status, announced.connection]).toEqual([413, 'close']);
    await announced.closed;
    expect((await get(a.port, '/request')).status).toBe(405);
    expect((await get(a.port, '/healthz?verbose=1')).status).toBe(200);
    const before = parseMetrics((await get(a.port, '/metrics')).text);
    await post(a.port, request);
    const m = await get(a.port, '/metrics');
    expect(m.status).toBe(200);
    const after = parseMetrics(m.text);
    expect(sample(after, 'kais_agent_requests_total', { eap: '0', outcome: 'in_time' })).toBe(1);
    expect(sample(after, 'kais_agent_latency_seconds', { eap: '0' })).toBe(1); // the histogram's count
    expect(sample(after, 'kais_agent_queue_wait_seconds', { eap: '0' })).toBe(1); // dispatched once
    expect(sample(after, 'kais_agent_process_resident_memory_bytes', { eap: '0' })).toBeGreaterThan(1e6);
    expect(sample(after, 'kais_agent_nodejs_eventloop_lag_seconds', { eap: '0' })).toBeGreaterThanOrEqual(0);
    // every counter only grows between two scrapes
    const c0 = counters(before);
    const c1 = counters(after);
    expect(c1.size).toBeGreaterThan(5);
    for (const [k, v] of c0) expect(c1.get(k) ?? -1).toBeGreaterThanOrEqual(v);
    const ready = await get(a.port, '/readyz');
    expect(ready.status).toBe(200);
    const h = await get(a.port, '/healthz');
    expect(h.status).toBe(200);
    expect(JSON.parse(h.text)).toMatchObject({ ok: true, eap: 0 });
  });
});

describe('kais agent at a replay speed', () => {
  it("sends the request's own work (scenario core-seconds): the node scales time by the speed once, not twice", async () => {
    const speed = 4;
    const l = await setUp('kais-agent-speed-', { speed });
    const running: RunningAgent[] = [];
    try {
      const a = await startAgent({
        scenario,
        eap: 0,
        orchestratorUrl: l.hub.url,
        targets: { nodes: l.cluster.nodeUrls, cloud: l.cluster.cloudUrl },
        cacheDir: path.join(l.dir, 'cache'),
        batchMs: 100,
        speed,
      });
      running.push(a);
      await until(() => a.runtime.placementVersion === 1);
      const r = await post(a.port, { ...request, workCoreS: 0.8, deadlineMs: 60_000 });
      expect(r.status).toBe(200);
      // the cluster's statistics window (what hpa and gsp-ss read) holds the work in scenario units
      const win = l.cluster.report().window!;
      expect(win.workCoreS[0]).toBeCloseTo(0.8, 9);
    } finally {
      await tearDown(l, running);
    }
  });
});

describe('kais agent device filters and QoS isolation on a real emulated cluster', () => {
  // speed 20: one telemetry sample per 50 ms real, so the 36-sample history takes ~2 s
  const speed = 20;
  let dir: string;
  let cluster: EmulatedCluster;
  let store: Store;
  let hub: Hub;
  let registry: ModelRegistry;
  const agents: RunningAgent[] = [];

  beforeEach(async () => {
    ({ dir, cluster, store, hub, registry } = await setUp('kais-agent-health-', { speed, seed: 3 }));
  });

  afterEach(() => tearDown({ dir, cluster, store, hub, registry }, agents));

  /** An agent of eAP 0 on this cluster and hub, at `speed`, no cache; `more` overrides. */
  const startOn = async (more: Partial<AgentOptions> = {}): Promise<RunningAgent> => {
    const a = await startAgent({
      scenario,
      eap: 0,
      orchestratorUrl: hub.url,
      targets: { nodes: cluster.nodeUrls, cloud: cluster.cloudUrl },
      cacheDir: null,
      speed,
      ...more,
    });
    agents.push(a);
    return a;
  };

  it('excludes a node whose telemetry turns abnormal, says why, and sends it nothing', async () => {
    const lines: string[] = [];
    const a = await startOn({ log: (l) => lines.push(l) });
    await until(() => (a.health().nodes as { filtersStarted: boolean }).filtersStarted, 15000);
    const nodes = () =>
      a.health().nodes as {
        excluded: { node: number; rule: string }[];
        lastEvents: { node: number; kind: string; rule: string; reason: string }[];
      };
    expect(nodes().excluded).toEqual([]); // healthy series: nobody out
    // every service, 8 requests each, one after the other: which targets serve them
    // zero-work requests: they must not move the nodes' CPU level (a level far from the first 36
    // samples' is itself evidence for the filter, and would slow the re-admission checked below)
    const targetsOfABatch = async () => {
      const seen = new Set<number>();
      for (let w = 0; w < 4; w++)
        for (let k = 0; k < 8; k++) seen.add((await post(a.port, { ...request, service: w, workCoreS: 0 })).body.target as number);
      return seen;
    };
    expect((await targetsOfABatch()).has(0)).toBe(true); // the control: node 0 gets work while healthy

    await fetch(`${cluster.adminUrl}/fault`, { method: 'PUT', body: JSON.stringify({ node: 0, state: 'abnormal' }) });
    await until(() => nodes().excluded.some((x) => x.node === 0), 10000);
    const ev = nodes().lastEvents.find((e) => e.node === 0 && e.kind === 'exclude')!;
    expect(ev.rule).toMatch(/^device:(faulty|ambiguous)$/);
    expect(ev.reason).toMatch(/metrics \(cpu, mem, disk, upload\) differ/);
    expect(lines.some((l) => /node 0 excluded \(device:/.test(l))).toBe(true);
    // out of the mask: no decision picks it
    expect((await targetsOfABatch()).has(0)).toBe(false);
    const m = await get(a.port, '/metrics');
    expect(m.text).toMatch(/kais_agent_nodes_excluded\{eap="0"\} 1/);

    // re-admission (5 healthy windows after the abnormal samples leave the window) is tested on
    // NodeHealth (test/unit/agent/filters/node-health.test.ts): on this 3-node cluster the
    // telemetry's slow AR drift soon leaves the range of the 36-sample history and the filters call
    // healthy nodes 'ambiguous' or 'faulty' too, so when a re-admission happens here is chance
  }, 60000);

  it('marks a break in the device filters of the nodes a new placement changes, and none for the same placement again', async () => {
    const a = await startOn();
    const nodes = () => a.health().nodes as { filtersStarted: boolean; placementBreaks: number };
    await until(() => nodes().filtersStarted && a.runtime.placementVersion === 1, 15000);
    // the first placement usually comes before the filters have baselines (nothing to mark), else it marks every hosting node
    const before = nodes().placementBreaks;
    const d = initialPlacement(scenario);
    d[1][2] += 1; // one more replica of service 1 on node 2
    registry.publishPlacement(1, d);
    await until(() => a.runtime.placementVersion === 2);
    expect(nodes().placementBreaks).toBe(before + 1);
    registry.publishPlacement(2, d); // republished unchanged, as the orchestrator does every frame
    await until(() => a.runtime.placementVersion === 3);
    expect(nodes().placementBreaks).toBe(before + 1);
  }, 60000);

  it('isolates a node that fails every request (QoS isolation), and the cluster counts what failed nodes refused', async () => {
    const a = await startOn({
      speed: 1,
      batchMs: 200,
      deviceFilters: true,
      // round-robin spreads every batch over the valid targets whatever the agent has seen, so each
      // batch brings the failed nodes their share; the actor's spread depends on the answers it had,
      // and a batch that sent it everything to the cloud left the isolation to chance (1 run in 5)
      policy: 'round-robin',
    });
    await until(() => a.runtime.placementVersion === 1);
    cluster.setFault(0, 'failed');
    cluster.setFault(1, 'failed');
    cluster.setFault(2, 'failed');
    // every edge node refuses: each answer is a 503 retried on the cloud; QoS isolates (the cap: one
    // node of the eAP) once a node got >= 10 requests in an interval. A batch's requests may straddle
    // two intervals, so send batches until the isolation happens (at most 10)
    const isolated = () => (a.health().nodes as { excluded: { rule: string }[] }).excluded.some((x) => x.rule === 'qos');
    for (let batch = 0; batch < 10 && !isolated(); batch++) {
      const rs = await Promise.all(Array.from({ length: 40 }, () => post(a.port, request)));
      for (const r of rs) expect([200, 503, 504]).toContain(r.status);
      // the QoS interval is batchMs (200 ms): give it two to close before the next batch
      await new Promise((r) => setTimeout(r, 400));
    }
    expect(isolated()).toBe(true);
    const f = await (await fetch(`${cluster.adminUrl}/faults`)).json();
    expect(f.refused).toBeGreaterThan(0);
    expect(f.states).toEqual(['failed', 'failed', 'failed']);
  }, 60000);
});
