/**
 * The Kubernetes executor (orchestrator/kubernetes-executor.ts, issue 19) against a local API
 * server over real HTTP (test/support/kube-api.ts, which lists the behaviours of kube-apiserver it
 * reproduces: status codes and Status bodies, resourceVersion conflicts, watch events and 410,
 * a controller/kubelet that makes pods ready on Ready nodes, injected 500/429/503).
 *
 * Covered here: creating Deployments pinned to the labelled nodes, scaling up and down (and the
 * simulator's refusal rules: memory, maximum per service, nothing to remove), readiness reported
 * through the watch into observe(), a 409 conflict retried with a fresh read, a node that
 * disappears (failed in the view, creations there refused, ready 0, back when it returns), an API
 * answering 500 and 429 (with Retry-After) for a while, a watch that ends or expires (410), and
 * objects it did not create left byte for byte as they were; the orchestrator config
 * `executor: "kubernetes"` with a kubeconfig file.
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { KubernetesExecutor, deploymentName } from '../../orchestrator/kubernetes-executor';
import { readConfig, startOrchestrator } from '../../orchestrator/main';
import { initialPlacement } from '../../shared/orchestration/placement';
import { loadScenario } from '../../shared/scenario';
import { FakeKubeApi } from '../support/kube-api';

const NS = 'kais';
const scenario = loadScenario('tiny'); // 3 edge nodes, 4 services, 4 replicas per service at most

let api: FakeKubeApi;
let dir: string;
let ex: KubernetesExecutor;
let logs: string[];

async function until(what: string, ok: () => boolean, onChange: (f: () => void) => () => void): Promise<void> {
  if (ok()) return;
  await new Promise<void>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), 10_000);
    const off = onChange(() => {
      if (ok()) {
        clearTimeout(t);
        off();
        resolve();
      }
    });
  });
}

beforeEach(async () => {
  api = new FakeKubeApi();
  await api.listen();
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kais-k8s-'));
  fs.writeFileSync(path.join(dir, 'kubeconfig'), api.kubeconfig());
  for (let n = 0; n < 3; n++) api.addNode(`edge-${n}`, { 'kais.io/node-index': String(n), 'kais.io/eap': '0' });
  api.addNode('control-plane', {}); // no index label: never used
  logs = [];
  ex = new KubernetesExecutor({
    scenario,
    kubeconfig: path.join(dir, 'kubeconfig'),
    namespace: NS,
    image: 'registry.example/kais-service:{service}',
    backoffMs: 20,
    maxBackoffMs: 200,
    log: (l) => logs.push(l),
  });
  await ex.start();
});

afterEach(async () => {
  await ex.close();
  await api.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

const up = (service: number, node: number) => ({ service, node, delta: 1 as const });
const down = (service: number, node: number) => ({ service, node, delta: -1 as const });

describe('Kubernetes executor', () => {
  test('creates one Deployment per (service, node), pinned by node name, and reports readiness from the watch', async () => {
    const rep = await ex.apply([up(0, 0), up(0, 0), up(1, 2)]);
    expect(rep.refused).toBe(0);
    expect(rep.executed).toHaveLength(3);
    const d00 = api.deployment(NS, deploymentName(0, 0))!;
    expect(d00.spec!.replicas).toBe(2);
    expect(d00.spec!.template!.spec!.nodeName).toBe('edge-0');
    expect(d00.metadata.labels).toMatchObject({
      'app.kubernetes.io/managed-by': 'kais',
      'kais.io/service': '0',
      'kais.io/node-index': '0',
    });
    expect((d00.spec!.template!.spec!.containers as { image: string }[])[0].image).toBe('registry.example/kais-service:0');
    expect(api.deployment(NS, deploymentName(1, 2))!.spec!.template!.spec!.nodeName).toBe('edge-2');
    expect(api.listDeployments(NS)).toHaveLength(2);
    // ready only once the "kubelet" says so, and the view reports it
    await until(
      'ready replicas',
      () => ex.readyPlacement()[0][0] === 2 && ex.readyPlacement()[1][2] === 1,
      (f) => ex.onChange(f),
    );
    const view = (await ex.observe())!;
    expect(view.replicas(0, 0)).toBe(2);
    expect(view.readyReplicas(0, 0)).toBe(2);
    expect(view.readyReplicas(2, 1)).toBe(1);
    expect(view.replicas(1, 0)).toBe(0);
    expect(await ex.placement()).toEqual([
      [2, 0, 0],
      [0, 0, 1],
      [0, 0, 0],
      [0, 0, 0],
    ]);
  });

  test("a Deployment follows its node index to a new Node: the next order re-pins its pods (they stayed Pending on the old Node's name)", async () => {
    await ex.apply([up(0, 1)]);
    expect(api.deployment(NS, deploymentName(0, 1))!.spec!.template!.spec!.nodeName).toBe('edge-1');
    api.removeNode('edge-1');
    api.addNode('edge-1b', { 'kais.io/node-index': '1', 'kais.io/eap': '0' });
    expect(await ex.apply([up(0, 1)])).toEqual({ executed: [up(0, 1)], refused: 0 });
    const d = api.deployment(NS, deploymentName(0, 1))!;
    expect([d.spec!.replicas, d.spec!.template!.spec!.nodeName]).toEqual([2, 'edge-1b']);
    await until(
      'ready on the new Node',
      () => ex.readyPlacement()[0][1] === 2,
      (f) => ex.onChange(f),
    );
  });

  test('a Deployment whose node index moved is re-pinned at the next step though it gets no order (its pods stayed Pending until one came)', async () => {
    await ex.apply([up(0, 1)]);
    api.removeNode('edge-1');
    api.addNode('edge-1c', { 'kais.io/node-index': '1', 'kais.io/eap': '0' });
    expect(await ex.apply([])).toEqual({ executed: [], refused: 0 });
    const d = api.deployment(NS, deploymentName(0, 1))!;
    expect([d.spec!.replicas, d.spec!.template!.spec!.nodeName]).toEqual([1, 'edge-1c']);
    const replaced = ex.stats.replaced;
    expect(await ex.apply([])).toEqual({ executed: [], refused: 0 }); // pinned right: no write
    expect(ex.stats.replaced).toBe(replaced);
  });

  test('a new replica counts as starting until it is ready', async () => {
    api.readyDelayMs = 60_000;
    await api.settled();
    await ex.apply([up(3, 0)]);
    const view = (await ex.observe())!;
    expect(view.replicas(0, 3)).toBe(1);
    expect(view.readyReplicas(0, 3)).toBe(0);
  });

  test('scales up and down by replacing spec.replicas, and keeps the simulator rules', async () => {
    await ex.apply([up(1, 0), up(1, 0)]);
    const rv1 = api.deployment(NS, deploymentName(1, 0))!.metadata.resourceVersion;
    const more = await ex.apply([up(1, 0), up(1, 0), up(1, 0)]); // node 0 has 4 GB, service 1 needs 1 GB: the 5th is refused
    expect(more.executed).toHaveLength(2);
    expect(more.refused).toBe(1);
    expect(api.deployment(NS, deploymentName(1, 0))!.spec!.replicas).toBe(4);
    expect(api.deployment(NS, deploymentName(1, 0))!.metadata.resourceVersion).not.toBe(rv1);
    // at the maximum of 4 per service in the cluster: one more elsewhere is refused
    const max = await ex.apply([up(1, 2)]);
    expect(max).toEqual({ executed: [], refused: 1 });
    const less = await ex.apply([down(1, 0), down(1, 0), down(1, 0), down(1, 0), down(1, 0), down(2, 1)]);
    expect(less.executed).toHaveLength(4);
    expect(less.refused).toBe(2); // nothing left to remove
    expect(api.deployment(NS, deploymentName(1, 0))!.spec!.replicas).toBe(0);
    await until(
      'scaled to 0',
      () => ex.readyPlacement()[1][0] === 0,
      (f) => ex.onChange(f),
    );
    // idempotent: the same placement again writes nothing
    const writes = api.requests.filter((r) => r.method === 'PUT' || r.method === 'POST').length;
    expect(await ex.apply([])).toEqual({ executed: [], refused: 0 });
    await ex.apply([up(1, 0), down(1, 0)]);
    expect(api.requests.filter((r) => r.method === 'PUT' || r.method === 'POST').length).toBe(writes);
  });

  test('a resourceVersion conflict is retried with a fresh read', async () => {
    await ex.apply([up(0, 1)]);
    await api.settled(); // no status write of the stand-in controller in between (that would be a third, real, conflict)
    api.conflictNextPuts(2);
    const rep = await ex.apply([up(0, 1)]);
    expect(rep.executed).toHaveLength(1);
    expect(ex.stats.conflicts).toBe(2);
    expect(api.requests.filter((r) => r.method === 'PUT' && r.status === 409)).toHaveLength(2);
    expect(api.deployment(NS, deploymentName(0, 1))!.spec!.replicas).toBe(2);
  });

  test('a Deployment created by another writer between its read and its create (409 AlreadyExists) is read again and set', async () => {
    // our own kind of object, created by another orchestrator replica between this one's GET (404) and POST
    await api.settled();
    api.readyDelayMs = 60_000; // no status write in between (that would be another, real, conflict)
    api.raceNextPost({ ...ex.manifest(2, 0, 3, 'edge-0'), metadata: ex.manifest(2, 0, 3, 'edge-0').metadata as { name: string } });
    const rep = await ex.apply([up(2, 0)]);
    expect(rep.executed).toEqual([up(2, 0)]);
    expect(api.requests.filter((r) => r.method === 'POST').map((r) => r.status)).toEqual([409]);
    expect(ex.stats.conflicts).toBe(1);
    expect(api.deployment(NS, deploymentName(2, 0))!.spec!.replicas).toBe(1);
  });

  test('a node that disappears: failed in the view, no replica created there, its Deployment left alone and ready again when it returns', async () => {
    await ex.apply([up(0, 1), up(2, 1)]);
    await until(
      'ready on node 1',
      () => ex.readyPlacement()[0][1] === 1,
      (f) => ex.onChange(f),
    );
    api.removeNode('edge-1');
    await until(
      'not ready after the node went',
      () => ex.readyPlacement()[0][1] === 0,
      (f) => ex.onChange(f),
    );
    const view = (await ex.observe())!;
    expect(view.readyReplicas(1, 0)).toBe(0);
    expect(view.replicas(1, 0)).toBe(1); // still wanted: starting again when the node is back
    const rep = await ex.apply([up(0, 1), up(3, 1), down(2, 1), up(0, 0)]);
    expect(rep.refused).toBe(2);
    expect(rep.executed).toEqual([down(2, 1), up(0, 0)]);
    expect(api.deployment(NS, deploymentName(0, 1))!.spec!.replicas).toBe(1);
    expect(api.deployment(NS, deploymentName(3, 1))).toBeUndefined();
    // a NotReady node counts as gone too
    api.addNode('edge-2', { 'kais.io/node-index': '2' }, false);
    expect(await ex.apply([up(0, 2)])).toEqual({ executed: [], refused: 1 });
    api.addNode('edge-1', { 'kais.io/node-index': '1' });
    await until(
      'ready when the node is back',
      () => ex.readyPlacement()[0][1] === 1,
      (f) => ex.onChange(f),
    );
    expect((await ex.observe())!.readyReplicas(1, 0)).toBe(1);
  });

  test('an API answering 500 for a while, then 429 with Retry-After: backs off and gets there', async () => {
    api.failNext(4, 500);
    const t0 = Date.now();
    const rep = await ex.apply([up(0, 0)]);
    expect(rep.executed).toHaveLength(1);
    expect(api.failuresLeft).toBe(0);
    expect(ex.stats.backoffs).toBe(4);
    // backoff 20, 40, 80, 160 ms at least
    expect(Date.now() - t0).toBeGreaterThanOrEqual(20 + 40 + 80 + 160);
    api.failNext(2, 429, 1);
    const t1 = Date.now();
    const rep2 = await ex.apply([up(0, 0)]);
    expect(rep2.executed).toHaveLength(1);
    expect(Date.now() - t1).toBeGreaterThanOrEqual(2000); // two Retry-After: 1 s
    expect(api.requests.filter((r) => r.status === 429)).toHaveLength(2);
    expect(api.deployment(NS, deploymentName(0, 0))!.spec!.replicas).toBe(2);
  });

  test('an API that keeps failing: the orders are refused after the attempt budget and the placement stays what the cluster holds', async () => {
    await ex.apply([up(0, 0), up(1, 0)]);
    // the lists answer, every request on Deployment kais-w0-n0 gets 500
    api.failNext(1000, 500, 0, /\/deployments\/kais-w0-n0$/);
    const rep = await ex.apply([up(0, 0), up(1, 0)]);
    expect(rep.executed).toEqual([up(1, 0)]);
    expect(rep.refused).toBe(1);
    expect(ex.stats.backoffs).toBe(7); // 8 attempts
    expect(logs.join('\n')).toMatch(/kais-w0-n0 left at 1 replica\(s\)/);
    expect(api.deployment(NS, deploymentName(0, 0))!.spec!.replicas).toBe(1);
    expect((await ex.placement())![0][0]).toBe(1);
    // and the whole API down: the step fails as a whole (the loop logs it and tries at its next step)
    api.failNext(1000, 503);
    await expect(ex.apply([up(0, 0)])).rejects.toThrow(/503/);
  });

  test('never touches what it did not create', async () => {
    const foreignSame = api.putForeign(NS, {
      metadata: { name: deploymentName(1, 1), labels: { app: 'someone-else' } },
      spec: {
        replicas: 3,
        selector: { matchLabels: { app: 'someone-else' } },
        template: { spec: { containers: [{ name: 'c', image: 'nginx' }] } },
      },
    });
    const foreignOther = api.putForeign(NS, {
      metadata: { name: 'web', labels: { app: 'web', 'kais.io/service': '0' } },
      spec: { replicas: 2, selector: { matchLabels: { app: 'web' } }, template: { spec: { containers: [{ name: 'c', image: 'nginx' }] } } },
    });
    const elsewhere = api.putForeign('other', {
      metadata: { name: deploymentName(0, 0), labels: { 'app.kubernetes.io/managed-by': 'kais' } },
      spec: { replicas: 5, selector: { matchLabels: { a: 'b' } }, template: { spec: { containers: [{ name: 'c', image: 'nginx' }] } } },
    });
    await api.settled(); // the stand-in controller writes their status once
    const snapshot = [api.deployment(NS, deploymentName(1, 1)), api.deployment(NS, 'web'), api.deployment('other', deploymentName(0, 0))];
    expect(snapshot.every(Boolean)).toBe(true);
    // the placement does not count them
    expect((await ex.placement())!.flat().reduce((a, b) => a + b, 0)).toBe(0);
    const rep = await ex.apply([up(1, 1), up(0, 0), down(2, 2)]);
    expect(rep.executed).toEqual([up(0, 0)]);
    expect(rep.refused).toBe(2); // +1 on the foreign name; -1 where kais holds nothing
    expect(ex.stats.foreign).toBe(1);
    expect(logs.join('\n')).toMatch(/kais-w1-n1 .*kais did not create/);
    // nothing else was ever written to them: no PUT or DELETE on their paths, objects unchanged
    const touched = api.requests.filter(
      (r) =>
        (r.method === 'PUT' || r.method === 'DELETE') &&
        (r.path.endsWith(`/${deploymentName(1, 1)}`) || r.path.endsWith('/web') || r.path.includes('/namespaces/other/')),
    );
    expect(touched).toEqual([]);
    expect([api.deployment(NS, deploymentName(1, 1)), api.deployment(NS, 'web'), api.deployment('other', deploymentName(0, 0))]).toEqual(
      snapshot,
    );
    expect(foreignSame.metadata.uid).toBe(snapshot[0]!.metadata.uid);
    expect(foreignOther.spec!.replicas).toBe(2);
    expect(elsewhere.spec!.replicas).toBe(5);
  });

  test('a watch that ends or expires (410 Gone) is listed and watched again', async () => {
    await ex.apply([up(0, 0)]);
    await until(
      'ready',
      () => ex.readyPlacement()[0][0] === 1,
      (f) => ex.onChange(f),
    );
    const watches = ex.stats.watches;
    api.compact();
    api.dropWatches();
    await ex.apply([up(0, 0)]);
    await until(
      'ready after the watch came back',
      () => ex.readyPlacement()[0][0] === 2,
      (f) => ex.onChange(f),
    );
    expect(ex.stats.watches).toBeGreaterThan(watches);
  });
});

describe('Kubernetes executor with a silent watch', () => {
  test('observe() lists again after resyncMs without news, so readiness does not go stale', async () => {
    const quick = new KubernetesExecutor({ scenario, kubeconfig: path.join(dir, 'kubeconfig'), namespace: NS, image: 'x', resyncMs: 300 });
    await quick.start();
    try {
      await quick.apply([up(0, 2)]);
      await api.settled();
      api.silenceWatches(); // the watch stays open and says nothing from now on
      api.readyDelayMs = 20;
      await quick.apply([up(0, 2)]);
      await api.settled(); // the stand-in controller made the second replica ready
      expect(api.deployment(NS, deploymentName(0, 2))!.status!.readyReplicas).toBe(2);
      const listsBefore = api.requests.filter((r) => r.method === 'GET' && r.path.endsWith('/deployments')).length;
      // apply() listed last: within resyncMs the cache is trusted
      await new Promise((r) => setTimeout(r, 400));
      const view = (await quick.observe())!;
      expect(view.readyReplicas(2, 0)).toBe(2);
      expect(api.requests.filter((r) => r.method === 'GET' && r.path.endsWith('/deployments')).length).toBe(listsBefore + 1);
    } finally {
      await quick.close();
    }
  });
});

describe('orchestrator config', () => {
  test('executor "kubernetes" reads its section; a missing kubeconfig or bad namespace exits 2 naming the field', () => {
    const cfgFile = path.join(dir, 'cfg.json');
    const write = (o: object) => fs.writeFileSync(cfgFile, JSON.stringify(o));
    write({
      scenario: 'tiny',
      executor: 'kubernetes',
      kubernetes: { kubeconfig: path.join(dir, 'kubeconfig'), namespace: 'edge', image: 'img:1' },
    });
    const cfg = readConfig(cfgFile);
    expect(cfg.executor).toBe('kubernetes');
    expect(cfg.kubernetes).toEqual({
      kubeconfig: path.join(dir, 'kubeconfig'),
      namespace: 'edge',
      image: 'img:1',
      nodeLabel: 'kais.io/node-index',
    });
    write({ scenario: 'tiny', executor: 'kubernetes', kubernetes: { kubeconfig: path.join(dir, 'nope') } });
    expect(() => readConfig(cfgFile)).toThrow(/"kubernetes.kubeconfig" .*does not exist/);
    write({ scenario: 'tiny', executor: 'kubernetes', kubernetes: { namespace: 'Not_A_Name' } });
    expect(() => readConfig(cfgFile)).toThrow(/"kubernetes.namespace"/);
    write({ scenario: 'tiny', kubernetes: { namespace: 'edge' } });
    expect(() => readConfig(cfgFile)).toThrow(/"kubernetes" .*only with executor "kubernetes"/);
  });
});

describe('kais orchestrator with executor "kubernetes"', () => {
  test('brings the cluster to its start placement, publishes what the cluster holds, and keeps it over a restart', async () => {
    const cfgFile = path.join(dir, 'cfg.json');
    fs.writeFileSync(
      cfgFile,
      JSON.stringify({
        scenario: 'tiny',
        executor: 'kubernetes',
        kubernetes: { kubeconfig: path.join(dir, 'kubeconfig'), namespace: NS, image: 'img:1' },
        learner: 'none',
        detector: 'none',
      }),
    );
    const lines: string[] = [];
    const start = async () => startOrchestrator(readConfig(cfgFile), { dbPath: path.join(dir, 'o.db'), log: (l) => lines.push(l) });
    let o = await start();
    const want = initialPlacement(scenario);
    try {
      expect(o.loop.placement).toEqual(want);
      expect(await ex.placement()).toEqual(want);
      for (let w = 0; w < want.length; w++)
        for (let n = 0; n < want[w].length; n++) expect(api.deployment(NS, deploymentName(w, n))?.spec?.replicas ?? 0).toBe(want[w][n]);
      expect(lines.join('\n')).toMatch(/executor: kubernetes, namespace kais, kubeconfig /);
    } finally {
      await o.close();
    }
    const writes = api.requests.filter((r) => r.method === 'POST' || r.method === 'PUT').length;
    o = await start();
    try {
      expect(o.loop.placement).toEqual(want);
      // idempotent: the cluster already holds the stored placement, nothing is written again
      expect(api.requests.filter((r) => r.method === 'POST' || r.method === 'PUT').length).toBe(writes);
    } finally {
      await o.close();
    }
  });

  test('the kais orchestrator process (Node loads the ES-module client with import()) creates the Deployments', async () => {
    const bin = path.join(__dirname, '..', '..', 'dist', 'kais.js');
    if (!fs.existsSync(bin)) {
      console.warn('dist/kais.js is missing (npm run build): the process case is skipped');
      return;
    }
    const cfgFile = path.join(dir, 'cfg.json');
    fs.writeFileSync(
      cfgFile,
      JSON.stringify({
        scenario: 'tiny',
        executor: 'kubernetes',
        kubernetes: { kubeconfig: path.join(dir, 'kubeconfig'), namespace: NS, image: 'img:1' },
        learner: 'none',
        detector: 'none',
      }),
    );
    const p = spawn(process.execPath, [bin, 'orchestrator', '--config', cfgFile, '--db', path.join(dir, 'p.db')], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    try {
      let err = '';
      p.stderr.on('data', (c: Buffer) => (err += c.toString()));
      await new Promise<void>((resolve, reject) => {
        let out = '';
        p.stdout.on('data', (c: Buffer) => {
          out += c.toString();
          if (out.includes('"ready":true')) resolve();
        });
        p.once('exit', (code) => reject(new Error(`kais orchestrator exited with ${code}: ${err.slice(-1500)}`)));
      });
      const want = initialPlacement(scenario);
      expect(await ex.placement()).toEqual(want);
      expect(err).toMatch(/executor: kubernetes, namespace kais/);
    } finally {
      p.kill('SIGTERM');
      await new Promise((r) => p.once('exit', r));
    }
  });
});
