import { EmulatedTarget, initialPlacement } from '../../../orchestrator/emulated-cluster';
import { Cluster } from '../../../training/sim/cluster';
import { loadScenario } from '../../../shared/scenario';

const tiny = loadScenario('tiny');
// tiny: service 0 needs 0.5 cores, service 1 needs 1 core; node 0 has 2 cores
const node = (cpu = 2) => new EmulatedTarget(0, false, cpu, 4, tiny, 1);

describe('EmulatedTarget', () => {
  it('refuses a service it hosts no replica of with 503', async () => {
    const t = node();
    const r = await t.serve(0, 0.001);
    expect(r.status).toBe(503);
    expect(r.body.reason).toMatch(/no replica/);
  });

  it('serves one request per replica at a time, processing time = work / cpuCores of the service', async () => {
    const t = node();
    t.setReplicas(0, 1);
    const t0 = performance.now();
    const [a, b] = await Promise.all([t.serve(0, 0.02), t.serve(0, 0.02)]); // 40 ms each, one replica
    expect(a.status).toBe(200);
    expect(a.body.procMs).toBeCloseTo(40, 5);
    expect(b.body.queuedMs as number).toBeGreaterThanOrEqual(30);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(75);
    t.close();
  });

  it('answers 503 full once queueCapPerReplica x replicas requests wait', async () => {
    const t = node();
    t.setReplicas(0, 1);
    const cap = tiny.queueCapPerReplica;
    const accepted = Array.from({ length: cap + 1 }, () => t.serve(0, 0.01)); // 1 running + cap waiting
    const refused = await t.serve(0, 0.01);
    expect(refused.status).toBe(503);
    expect(refused.body).toMatchObject({ reason: 'full' });
    expect((refused.body.waiting as number[])[0]).toBe(cap);
    expect((await Promise.all(accepted)).every((r) => r.status === 200)).toBe(true);
  });

  it('holds CPU: two 1-core requests on a 1-core node run one after the other even with two replicas', async () => {
    const t = node(1);
    t.setReplicas(1, 2);
    const [, b] = await Promise.all([t.serve(1, 0.03), t.serve(1, 0.03)]);
    expect(b.body.queuedMs as number).toBeGreaterThanOrEqual(20);
  });

  it('drops a waiting request whose ttl passed before it could start (504), without serving it', async () => {
    const t = node();
    t.setReplicas(0, 1);
    const first = t.serve(0, 0.05); // 100 ms
    const late = t.serve(0, 0.05, 20);
    const r = await late;
    expect(r.status).toBe(504);
    expect(r.body.reason).toBe('expired at node');
    expect((await first).status).toBe(200);
  });

  it('starts the earliest deadline first among waiting requests', async () => {
    const t = node();
    t.setReplicas(0, 1);
    const order: string[] = [];
    const busy = t.serve(0, 0.01);
    const relaxed = t.serve(0, 0.01, 5000).then(() => order.push('relaxed'));
    const urgent = t.serve(0, 0.01, 1000).then(() => order.push('urgent'));
    await Promise.all([busy, relaxed, urgent]);
    expect(order).toEqual(['urgent', 'relaxed']);
  });

  it('refuses the waiting requests of a service whose last replica is removed', async () => {
    const t = node();
    t.setReplicas(0, 1);
    const running = t.serve(0, 0.02);
    const waiting = t.serve(0, 0.02);
    t.setReplicas(0, 0);
    expect((await waiting).status).toBe(503);
    expect((await running).status).toBe(200); // a removed replica finishes its request
  });

  it('loses no capacity to timer lag: back-to-back requests start at the exact end of the previous one on the node clock', async () => {
    const t = node();
    t.setReplicas(0, 1);
    // 10 ms each (0.005 core-s on 0.5 cores): setTimeout fires each completion 0.5-7 ms late, so
    // without the node clock the last would have waited (n - 1) x (10 + lag) ms; n: one running, a full queue
    const n = tiny.queueCapPerReplica + 1;
    expect((await t.serve(0, 0.005)).status).toBe(200); // warm the path up: the first call's own time is not the node's
    const t0 = performance.now();
    const pending = Array.from({ length: n }, () => t.serve(0, 0.005));
    const enqueueMs = performance.now() - t0; // every request queued within this
    const answers = await Promise.all(pending);
    expect(answers.every((a) => a.status === 200)).toBe(true);
    // on the node clock each starts at the exact end of the one before: start(n-1) - start(0) = (n - 1) x 10 ms, so
    // queuedMs(n-1) - queuedMs(0) = (n - 1) x 10 - (its arrival - the first's arrival), the latter in [0, enqueueMs]
    const q = answers.map((a) => a.body.queuedMs as number);
    expect(q[n - 1] - q[0]).toBeLessThanOrEqual(10 * (n - 1) + 1e-6);
    expect(q[n - 1] - q[0]).toBeGreaterThanOrEqual(10 * (n - 1) - enqueueMs - 1e-6);
    t.close();
  });

  it('counts a completion in time in the window only when it is done by its latest start (deadline - return), as the simulator', async () => {
    const t = node();
    t.setReplicas(0, 1);
    t.takeStats();
    // one replica: the first runs 0-100 ms (done by its 500 ms), the second starts at 100 ms (before its
    // 150 ms) and is done at 200 ms, too late for its result to be back in time; the third has no ttl
    const [a, b, c] = await Promise.all([t.serve(0, 0.05, 500), t.serve(0, 0.05, 150), t.serve(0, 0.05)]);
    expect([a.status, b.status, c.status]).toEqual([200, 200, 200]);
    const s = t.takeStats();
    expect(s.arrivals[0]).toBe(3);
    expect(s.completed[0]).toBe(2);
    expect(s.failures[0]).toBe(1);
    expect(t.tally.completed).toBe(3); // the per-target tally counts what the node served
    t.close();
  });

  it('reports busy and ready replica-seconds per service over the window', async () => {
    const t = node();
    t.setReplicas(0, 2);
    t.takeStats();
    await t.serve(0, 0.025); // 50 ms on one of two replicas
    const s = t.takeStats();
    expect(s.arrivals[0]).toBe(1);
    expect(s.busyReplicaS[0]).toBeGreaterThan(0.04);
    expect(s.readyReplicaS[0]).toBeGreaterThanOrEqual(2 * s.busyReplicaS[0] - 0.01);
  });
});

describe('initialPlacement', () => {
  it('is the simulator initial placement', () => {
    for (const name of ['tiny', 'small', 'kais']) {
      const s = loadScenario(name);
      expect(initialPlacement(s)).toEqual(new Cluster(s).placement());
    }
  });
});
