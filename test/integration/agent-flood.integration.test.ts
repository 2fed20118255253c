/**
 * Issue 14, "every request answered": the long-request flood of the adversarial pass against a
 * live agent (agent/main.ts on a real emulated cluster, HTTP on loopback, `tiny`). 600 requests with
 * a one-hour deadline and an hour of work arrive first; then normal requests (2 s deadline) arrive
 * for 1.5 s. Before the fix the long ones held all 256 in-flight slots (the limit then) and no
 * normal request got any answer. Now admission keeps long requests to their share of slots and of the queue (the rest
 * get 503 at once), deadlines are kept by timers, and every normal request is answered (served,
 * 503 or 504) within its deadline + 100 ms; the agent holds a bounded number of requests.
 */
import { AgentMetrics } from '../../agent/metrics';
import { freshHealthState } from '../../agent/health';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { startAgent, type RunningAgent } from '../../agent/main';
import { EmulatedCluster } from '../../orchestrator/emulated-cluster';
import { initialPlacement } from '../../shared/orchestration/placement';
import { placementBody } from '../../shared/protocol/envelope';
import { Dispatcher } from '../../agent/dispatcher';
import { StateCache } from '../../agent/weights-cache';
import { LocalClusterView } from '../../agent/local-view';
import { loadScenario } from '../../shared/scenario';

const scenario = loadScenario('tiny');

interface Answer {
  status: number;
  body: Record<string, unknown>;
  ms: number;
}

function post(port: number, body: unknown, httpAgent: http.Agent): Promise<Answer> {
  const text = JSON.stringify(body);
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        path: '/request',
        method: 'POST',
        agent: httpAgent,
        headers: { 'content-length': Buffer.byteLength(text) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>,
            ms: performance.now() - t0,
          }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(text);
  });
}

describe('long-request flood against a live agent', () => {
  let dir: string;
  let cluster: EmulatedCluster;
  let agent: RunningAgent;

  beforeEach(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kais-flood-'));
    cluster = new EmulatedCluster({ scenario });
    await cluster.listen();
    // the agent starts from a cached placement (the cluster's initial one): no orchestrator here
    new StateCache(path.join(dir, 'cache')).savePlacement(placementBody(1, 0, initialPlacement(scenario)));
  });
  afterEach(async () => {
    await agent?.drain();
    await cluster.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  /** An agent on the cluster with no orchestrator (it dispatches on its own), from the cached placement. */
  const startAlone = (o: Partial<Parameters<typeof startAgent>[0]> = {}) =>
    startAgent({
      scenario,
      eap: 0,
      orchestratorUrl: 'ws://127.0.0.1:1',
      targets: { nodes: cluster.nodeUrls, cloud: cluster.cloudUrl },
      cacheDir: path.join(dir, 'cache'),
      deviceFilters: false,
      drainTimeoutMs: 200,
      ...o,
    });

  it('says so when the cached placement is not of this cluster (it was dropped in silence)', async () => {
    // a placement of 3 services x 3 nodes in the cache of a 4-service scenario
    new StateCache(path.join(dir, 'cache')).savePlacement(
      placementBody(2, 0, [
        [1, 1, 1],
        [1, 1, 1],
        [1, 1, 1],
      ]),
    );
    const lines: string[] = [];
    agent = await startAlone({ log: (l) => lines.push(l) });
    expect(lines.filter((l) => l.startsWith('cached placement ignored: '))).toHaveLength(1);
    expect(agent.health().placementVersion).toBeNull();
  });

  it('answers what is still open when the drain time is up with 503, not a connection reset', async () => {
    agent = await startAlone();
    const open = Array.from({ length: 3 }, () => post(agent.port, { service: 0, deadlineMs: 120_000, payloadBytes: 10, workCoreS: 3000 }));
    while (agent.dispatcher.outstanding < 3) await new Promise((r) => setTimeout(r, 10));
    await agent.drain();
    const answers = await Promise.all(open);
    expect(answers.map((a) => [a.status, a.body.reason])).toEqual(Array(3).fill([503, 'draining: the agent is stopping']));
  });

  it('answers every normal request within its deadline + 100 ms while 600 one-hour requests press on it, holding a bounded number of requests', async () => {
    agent = await startAlone();
    const longAgent = new http.Agent({ keepAlive: true, maxSockets: 1024 });
    const normalAgent = new http.Agent({ keepAlive: true, maxSockets: 1024 }); // never queues a request on the device's side
    const rssBefore = process.memoryUsage().rss;
    const d = agent.dispatcher;
    // long requests may hold their share of the in-flight slots and of the queue (an eighth of each by default)
    const limits = d.admission;
    const longShare = limits.inFlightLong + limits.queuedLong;
    let maxHeldLong = 0;
    const watchLong = setInterval(() => (maxHeldLong = Math.max(maxHeldLong, d.outstanding)), 5);

    // 600 long requests for service 0, all at once
    const _long = Array.from({ length: 600 }, () =>
      post(agent.port, { service: 0, deadlineMs: 3_600_000, payloadBytes: 1000, workCoreS: 3600 }, longAgent).catch(() => null),
    );
    // as in the attack: the long ones are in (held or refused) before the normal ones come
    while (d.counters.received < 600) await new Promise((r) => setTimeout(r, 10));
    clearInterval(watchLong);
    maxHeldLong = Math.max(maxHeldLong, d.outstanding);
    const bound = limits.inFlight + limits.queued;
    let maxOutstanding = 0;
    const watch = setInterval(() => (maxOutstanding = Math.max(maxOutstanding, d.outstanding)), 10);

    // then normal requests for 1.5 s, one every 5 ms
    const normal: Promise<Answer>[] = [];
    const deadlineMs = 2000;
    await new Promise<void>((resolve) => {
      let i = 0;
      const t = setInterval(() => {
        normal.push(
          post(agent.port, { service: i % scenario.services.length, deadlineMs, payloadBytes: 1000, workCoreS: 0.01 }, normalAgent),
        );
        if (++i >= 300) {
          clearInterval(t);
          resolve();
        }
      }, 5);
    });
    const answers = await Promise.all(normal);
    clearInterval(watch);
    const reasons: Record<string, number> = {};
    for (const a of answers) if (a.status !== 200) reasons[String(a.body.reason)] = (reasons[String(a.body.reason)] ?? 0) + 1;
    process.stderr.write(`flood: reasons of the normal requests not served: ${JSON.stringify(reasons)}\n`);

    // every normal request answered, by the agent's clock within deadline + 100 ms
    expect(answers).toHaveLength(300);
    const byStatus: Record<number, number> = {};
    for (const a of answers) byStatus[a.status] = (byStatus[a.status] ?? 0) + 1;
    expect(Object.keys(byStatus).every((s) => ['200', '503', '504'].includes(s))).toBe(true);
    const agentMs = answers.map((a) => a.body.latencyMs as number);
    expect(Math.max(...agentMs)).toBeLessThanOrEqual(deadlineMs + 100);
    // and by the device's clock, HTTP on loopback included, on a machine shared with other tests
    const clientMs = answers.map((a) => a.ms).sort((x, y) => x - y);
    expect(clientMs[clientMs.length - 1]).toBeLessThanOrEqual(deadlineMs + 100 + 150);
    // normal requests of the other services are served: long ones cannot take their slots (those
    // of service 0 compete with the long ones for service 0's replicas and get a timely 503/504)
    const others = answers.filter((_, i) => i % scenario.services.length !== 0);
    expect(others.filter((a) => a.status === 200).length).toBeGreaterThan(0.9 * others.length);
    // the long requests never held more than their share (without the long limit the per-service
    // limits alone would let up to 512 of them be held, twice the share), and the agent's holding is
    // bounded. How many were refused at admission depends on how fast the cluster answers the ones
    // it cannot take ('full') against how fast they arrive: 52-135 on a quiet machine, 0 in a CI run
    // beside two simulations (they arrived slower than the cluster refused them), so it is printed, not asserted
    expect(maxHeldLong).toBeLessThanOrEqual(longShare);
    expect(maxOutstanding).toBeLessThanOrEqual(bound);
    expect(process.memoryUsage().rss - rssBefore).toBeLessThan(200 * 1024 * 1024);
    process.stderr.write(
      `flood: normal answers ${JSON.stringify(byStatus)}, agent-side max ${Math.max(...agentMs).toFixed(0)} ms, client-side p50 ${clientMs[150].toFixed(0)} / max ${clientMs[299].toFixed(0)} ms, ` +
        `long refused ${d.counters.admissionRefused}, max outstanding ${maxOutstanding}, rss +${((process.memoryUsage().rss - rssBefore) / 1048576).toFixed(0)} MB\n`,
    );
    longAgent.destroy();
    normalAgent.destroy();
  });
});

describe('Dispatcher deadlines and admission', () => {
  const view = () => new LocalClusterView(scenario, 0, 1);
  const topo = { nodes: ['http://127.0.0.1:1', 'http://127.0.0.1:1', 'http://127.0.0.1:1'], cloud: 'http://127.0.0.1:1' };

  it('answers a queued request 504 at its deadline by a timer, with no slot freeing up', async () => {
    // one slot, held by a request to a target that never answers within the test
    const server = http.createServer(() => undefined);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    const v = view();
    v.applyPlacement({
      version: 1,
      frame: 0,
      numServices: scenario.services.length,
      numNodes: 3,
      replicas: new Int32Array(scenario.services.length * 3).fill(1),
    });
    const d = new Dispatcher({ scenario, view: v, targets: { nodes: [url, url, url], cloud: url }, maxInFlight: 1, lateAnswerMs: 100 });
    const holder = d.submit({ service: 0, deadlineMs: 600, payloadBytes: 0 });
    const t0 = performance.now();
    const queued = await d.submit({ service: 1, deadlineMs: 150, payloadBytes: 0 });
    const took = performance.now() - t0;
    expect(queued).toMatchObject({ status: 504, reason: 'expired in the eAP queue' });
    expect(took).toBeGreaterThanOrEqual(140);
    expect(took).toBeLessThan(400);
    // the one in flight gets its 504 at deadline + lateAnswerMs, though its target never answered
    const h = await holder;
    expect(h).toMatchObject({ status: 504, reason: 'no answer by the deadline' });
    expect(h.latencyMs).toBeGreaterThanOrEqual(690);
    expect(d.counters.answeredAtDeadline).toBe(1);
    d.close();
    server.closeAllConnections();
    server.close();
  });

  it('refuses beyond the per-service and long-request queue limits with 503 at once', async () => {
    const v = view();
    const d = new Dispatcher({
      scenario,
      view: v,
      targets: topo,
      maxInFlight: 0,
      maxQueued: 8,
      maxQueuedPerService: 3,
      maxQueuedLong: 2,
      longDeadlineMs: 10_000,
    });
    const answers: Promise<{ status: number; reason?: string }>[] = [];
    for (let i = 0; i < 5; i++) answers.push(d.submit({ service: 0, deadlineMs: 300, payloadBytes: 0 }));
    for (let i = 0; i < 4; i++) answers.push(d.submit({ service: 1, deadlineMs: 60_000, payloadBytes: 0 }));
    const refusedNow = await Promise.race([
      Promise.all([answers[3], answers[4], answers[7], answers[8]]),
      new Promise<null>((r) => setTimeout(() => r(null), 100)),
    ]);
    expect(refusedNow).not.toBeNull();
    expect(refusedNow!.map((a) => a.status)).toEqual([503, 503, 503, 503]);
    expect(refusedNow![0].reason).toMatch(/^admission: service 0 has 3 requests queued/);
    expect(refusedNow![2].reason).toMatch(/^admission: 2 long requests/);
    expect(d.counters.admissionRefused).toBe(4);
    // /metrics counts them as their own outcome (they were in no outcome: the outcomes did not sum to the answers)
    const state = freshHealthState(0);
    const text = await new AgentMetrics(d, () => state).text();
    expect(text).toMatch(/^kais_agent_requests_total\{outcome="admission",eap="0"\} 4$/m);
    // the queued short ones still get their answer at the deadline
    expect((await Promise.all(answers.slice(0, 3))).map((a) => a.status)).toEqual([504, 504, 504]);
    expect(d.queued).toBe(2); // the two long ones wait (nothing can be in flight here)
  });
});
