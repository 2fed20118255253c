/**
 * The load view of the Kubernetes executor (issue 19): the orchestrator with `"executor":
 * "kubernetes"` and `hpa` against the local API server (test/support/kube-api.ts), fed only by
 * what agents report in their telemetry's `load` section (orchestrator/load-board.ts). A
 * hand-driven agent session (test/support/raw-agent.ts) reports service 0 as busy on every node
 * that holds it: hpa scales it up through the Deployments; then it reports nothing busy and hpa
 * scales it back down after its stabilisation window. At speed 100: hpa decides every 0.15 s,
 * stabilises over 3 s. gsp-ss (every frame: 0.25 s) places from the reported CPU work.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { deploymentName } from '../../orchestrator/kubernetes-executor';
import { readConfig, startOrchestrator, type RunningOrchestrator } from '../../orchestrator/main';
import type { PlacementLoopOptions } from '../../orchestrator/placement-loop';
import { Codec } from '../../shared/protocol/codec';
import type { LoadBody } from '../../shared/protocol/envelope';
import { loadScenario } from '../../shared/scenario';
import { FakeKubeApi } from '../support/kube-api';
import { rawAgent } from '../support/raw-agent';
import { perTestDir } from '../support/tmp';

const NS = 'kais';
const scenario = loadScenario('tiny'); // 1 eAP, 3 edge nodes, 4 services, 4 replicas per service at most
const W = scenario.services.length;
const N = 3;

let api: FakeKubeApi;
const tmp = perTestDir('kais-k8s-load-');
const { cleanups } = tmp;

beforeEach(async () => {
  api = new FakeKubeApi();
  await api.listen();
  const a = api;
  cleanups.push(() => a.close()); // the first pushed, so the last to run: after every orchestrator has closed
  fs.writeFileSync(path.join(tmp.dir, 'kubeconfig'), api.kubeconfig());
  for (let n = 0; n < N; n++) api.addNode(`edge-${n}`, { 'kais.io/node-index': String(n) });
});

const replicasOf = (w: number) => {
  let s = 0;
  for (let n = 0; n < N; n++) s += (api.deployment(NS, deploymentName(w, n))?.spec as { replicas?: number } | undefined)?.replicas ?? 0;
  return s;
};

async function until(what: string, ok: () => boolean, ms = 15_000): Promise<void> {
  const end = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** One interval's load report: service w busy (`busy` replicas, `waiting` queued) on each of `nodes`. */
function loadBody(
  busyOn: Map<number, { busy: number; waiting: number }>,
  arrivals: number[],
  intervalMs: number,
  coreSPerRequest = 0.12,
): LoadBody {
  const targets = [...busyOn.keys()].sort((a, b) => a - b);
  const zeros = () => new Float32Array(targets.length * W);
  const busy = zeros();
  const waiting = zeros();
  const outstanding = zeros();
  targets.forEach((n, r) => {
    const x = busyOn.get(n)!;
    busy[r * W + 0] = x.busy;
    waiting[r * W + 0] = x.waiting;
    outstanding[r * W + 0] = x.busy + x.waiting;
  });
  return {
    endTs: Date.now(),
    intervalMs,
    numServices: W,
    arrivals: Float32Array.from(arrivals),
    workCoreS: Float32Array.from(arrivals, (a) => a * coreSPerRequest),
    targets: Int32Array.from(targets),
    outstanding,
    busy,
    waiting,
  };
}

describe('hpa on the Kubernetes executor, from the agents’ load reports', () => {
  test('scales up a service its agents report busy and back down when they report it idle', async () => {
    const cfgFile = path.join(tmp.dir, 'cfg.json');
    fs.writeFileSync(
      cfgFile,
      JSON.stringify({
        scenario: 'tiny',
        orchestration: 'hpa',
        speed: 100,
        executor: 'kubernetes',
        kubernetes: { kubeconfig: path.join(tmp.dir, 'kubeconfig'), namespace: NS, image: 'img:1' },
        learner: 'none',
        detector: 'none',
      }),
    );
    const lines: string[] = [];
    const o: RunningOrchestrator = await startOrchestrator(readConfig(cfgFile), {
      dbPath: path.join(tmp.dir, 'o.db'),
      log: (l) => lines.push(l),
    });
    cleanups.push(() => o.close());
    const start = replicasOf(0);
    const others = [1, 2, 3].map(replicasOf);
    expect(start).toBeGreaterThanOrEqual(1);
    expect(start).toBeLessThan(scenario.maxReplicasPerService);

    const agent = await rawAgent(
      o.hub.url,
      { eapId: 0, token: '', agentVersion: 'test', weightVersion: null, placementVersion: null, epoch: null, instance: 'load-test' },
      new Codec(),
      cleanups,
    );
    // every 100 ms: service 0 busy on every node that holds it (more than it has: the board clamps
    // to the cluster's ready replicas), 20 arrivals; the other services idle
    let busy = true;
    const timer = setInterval(() => {
      const on = new Map<number, { busy: number; waiting: number }>();
      if (busy) for (let n = 0; n < N; n++) on.set(n, { busy: 8, waiting: 5 });
      const arrivals = busy ? [20, 0, 0, 0] : [0, 0, 0, 0];
      agent.send('telemetry', { eap: 0, samples: [], load: loadBody(on, arrivals, 100) });
    }, 100);
    cleanups.push(() => clearInterval(timer));

    await until('service 0 scaled up to its maximum', () => replicasOf(0) === scenario.maxReplicasPerService);
    // the load view reached the policy: the loop saw the busy replicas and the queue
    const view = await (o.loop as unknown as { o: PlacementLoopOptions }).o.executor.observe();
    const busyView = view!;
    let busyNow = 0;
    let queued = 0;
    for (let n = 0; n < N; n++) {
      busyNow += busyView.busyReplicas(n, 0);
      queued += busyView.serviceQueueLen(n, 0);
    }
    expect(busyNow).toBeGreaterThan(0);
    expect(queued).toBeGreaterThan(0);
    // the idle services were not scaled up
    expect([1, 2, 3].map(replicasOf).every((r, i) => r <= others[i])).toBe(true);

    busy = false;
    await until('service 0 scaled back down to 1 after the stabilisation window', () => replicasOf(0) === 1);
    expect(lines.join('\n')).toMatch(/executor: kubernetes/);
  }, 40_000);

  test('gsp-ss places from the demand the agents report: the busy service gets replicas, services without arrivals none', async () => {
    const cfgFile = path.join(tmp.dir, 'cfg.json');
    fs.writeFileSync(
      cfgFile,
      JSON.stringify({
        scenario: 'tiny',
        orchestration: 'gsp-ss',
        speed: 100,
        executor: 'kubernetes',
        kubernetes: { kubeconfig: path.join(tmp.dir, 'kubeconfig'), namespace: NS, image: 'img:1' },
        learner: 'none',
        detector: 'none',
      }),
    );
    const o = await startOrchestrator(readConfig(cfgFile), { dbPath: path.join(tmp.dir, 'o.db') });
    cleanups.push(() => o.close());
    const start = replicasOf(0);
    expect([1, 2, 3].some((w) => replicasOf(w) > 0)).toBe(true);
    const agent = await rawAgent(
      o.hub.url,
      { eapId: 0, token: '', agentVersion: 'test', weightVersion: null, placementVersion: null, epoch: null, instance: 'gsp-ss' },
      new Codec(),
      cleanups,
    );
    // service 0: 20 requests of 10 core-s each per 100 ms real (10 scenario s): 20 cores of demand, more than the cluster holds
    const timer = setInterval(
      () => agent.send('telemetry', { eap: 0, samples: [], load: loadBody(new Map(), [20, 0, 0, 0], 100, 10) }),
      100,
    );
    cleanups.push(() => clearInterval(timer));
    await until(
      'service 0 at its maximum and the others at 0',
      () => replicasOf(0) === scenario.maxReplicasPerService && [1, 2, 3].every((w) => replicasOf(w) === 0),
    );
    expect(replicasOf(0)).toBeGreaterThan(start);
  }, 40_000);

  test('a telemetry load section of the wrong shape is refused by the intake (KAIS_ERR_INVALID) and moves nothing', async () => {
    const cfgFile = path.join(tmp.dir, 'cfg.json');
    fs.writeFileSync(
      cfgFile,
      JSON.stringify({
        scenario: 'tiny',
        orchestration: 'hpa',
        speed: 100,
        executor: 'kubernetes',
        kubernetes: { kubeconfig: path.join(tmp.dir, 'kubeconfig'), namespace: NS, image: 'img:1' },
        learner: 'none',
        detector: 'none',
      }),
    );
    const o = await startOrchestrator(readConfig(cfgFile), { dbPath: path.join(tmp.dir, 'o.db') });
    cleanups.push(() => o.close());
    const agent = await rawAgent(
      o.hub.url,
      { eapId: 0, token: '', agentVersion: 'test', weightVersion: null, placementVersion: null, epoch: null, instance: 'bad-load' },
      new Codec(),
      cleanups,
    );
    const body = loadBody(new Map([[7, { busy: 1, waiting: 0 }]]), [1, 0, 0, 0], 100); // node 7: not in tiny
    agent.send('telemetry', { eap: 0, samples: [], load: body });
    await until('the refusal', () => agent.frames.some((f) => f.type === 'error'));
    const err = agent.frames.find((f) => f.type === 'error')!;
    expect(err.body).toMatchObject({ code: 'KAIS_ERR_INVALID' });
    expect((err.body as { message: string }).message).toMatch(/load\.targets/);
  });
});
