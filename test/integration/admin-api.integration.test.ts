/**
 * The admin API (issue 18 items 1-2) on a real orchestrator driving a real emulated cluster over
 * HTTP: a scale override reaches the placement that follows (and the cluster), survives a restart
 * of the orchestrator, ends when released; a held node is emptied and re-admitted; every change is
 * an event naming who and why; a wrong or missing token and bad input are refused.
 */
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { EmulatedCluster } from '../../orchestrator/emulated-cluster';
import { readConfig, startOrchestrator, type RunningOrchestrator } from '../../orchestrator/main';
import { loadScenario } from '../../shared/scenario';

const TOKEN = 'admin-token-of-the-test-0123456789';

/** A body sent as it is (not JSON-encoded). */
class Raw {
  constructor(readonly text: string) {}
}

function call(
  port: number,
  method: string,
  p: string,
  body?: unknown,
  token: string | null = TOKEN,
): Promise<{ status: number; body: any; headers: http.IncomingHttpHeaders }> {
  const text = body === undefined ? '' : body instanceof Raw ? body.text : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const headers: Record<string, string | number> = { 'content-length': Buffer.byteLength(text) };
    if (token !== null) headers.authorization = `Bearer ${token}`;
    const req = http.request({ host: '127.0.0.1', port, path: p, method, agent: false, headers }, (res) => {
      let t = '';
      res.on('data', (c: Buffer) => (t += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: t ? JSON.parse(t) : null, headers: res.headers }));
    });
    req.on('error', reject);
    req.end(text);
  });
}

const total = (placement: number[][], w: number) => placement[w].reduce((a, b) => a + b, 0);

describe('admin API', () => {
  const scenario = loadScenario('small');
  let dir: string;
  let cluster: EmulatedCluster;
  let cfgFile: string;
  const started: RunningOrchestrator[] = [];

  beforeEach(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kais-admin-'));
    cluster = new EmulatedCluster({ scenario, adminToken: 'node-token' });
    await cluster.listen();
    cfgFile = path.join(dir, 'c.json');
    // hpa: the policy has its own opinion, which the override must win over
    fs.writeFileSync(
      cfgFile,
      JSON.stringify({
        scenario: 'small',
        orchestration: 'hpa',
        learner: 'none',
        detector: 'none',
        executor: cluster.adminUrl,
        executorToken: 'node-token',
        adminToken: TOKEN,
      }),
    );
  });
  afterEach(async () => {
    for (const o of started.splice(0)) await o.close();
    await cluster.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const start = async () => {
    const o = await startOrchestrator(readConfig(cfgFile), { dbPath: path.join(dir, 'o.db'), httpPort: 0 });
    started.push(o);
    return o;
  };

  it('scales a service by hand: the next placement has it, the cluster runs it, a restart keeps it, release ends it', async () => {
    const o = await start();
    const port = o.httpPort!;
    const v0 = o.registry.placementVersion!;
    const r = await call(port, 'POST', '/v1/scale', { service: 3, replicas: 4, reason: 'launch day', by: 'alice' });
    expect(r.status).toBe(200);
    expect(o.registry.placementVersion).toBeGreaterThan(v0);
    expect(total(o.loop.placement, 3)).toBe(4);
    // the cluster holds them (ready or starting, on edge nodes: t < N)
    const rep = cluster.report();
    const W = scenario.services.length;
    const N = rep.ready.length / W - 1;
    let held = 0;
    for (let n = 0; n < N; n++) held += rep.ready[n * W + 3] + rep.starting[n * W + 3] - rep.draining[n * W + 3];
    expect(held).toBe(4);
    const ev = o.store.events({ kind: 'admin-scale' });
    expect(ev).toHaveLength(1);
    expect(ev[0].message).toMatch(/alice: service 3 to 4 replica\(s\) in total: launch day/);
    await o.close();
    started.length = 0;

    const o2 = await start(); // the override is in the store
    expect(total(o2.loop.placement, 3)).toBe(4);
    const st = await call(o2.httpPort!, 'GET', '/v1/status');
    expect(st.body.overrides).toMatchObject([{ service: 3, replicas: 4, node: null, by: 'alice', reason: 'launch day' }]);
    expect([st.body.orchestration, st.body.orchestrationRuns]).toEqual(['hpa', 'hpa']);
    const rel = await call(o2.httpPort!, 'POST', '/v1/scale/release', { service: 3, reason: 'over' });
    expect(rel.status).toBe(200);
    expect((await call(o2.httpPort!, 'GET', '/v1/status')).body.overrides).toEqual([]);
    expect(o2.store.events({ kind: 'admin-release' })[0].message).toMatch(/admin: service 3 back to the policy: over/);
  });

  it('says what places the replicas: the policy, or what the GPG model runs (its file, H and scale-in)', async () => {
    const cfg = JSON.parse(fs.readFileSync(cfgFile, 'utf8')) as Record<string, unknown>;
    const model = path.join(__dirname, '..', '..', 'models', 'small-gpg-lec.json');
    fs.writeFileSync(cfgFile, JSON.stringify({ ...cfg, orchestration: 'gpg', gpgModel: model }));
    const o = await start();
    const st = await call(o.httpPort!, 'GET', '/v1/status');
    expect(st.status).toBe(200);
    expect(st.body.orchestration).toBe('gpg');
    expect(st.body.orchestrationRuns).toMatch(/^gpg .*small-gpg-lec\.json: \d+ nodes a decision, no scale-in$/);
    expect(st.body.actor).toBeNull(); // a model without an actor switch
  });

  it('the answer says what the cluster did; a cluster that does not take the change is 502, the change saved (the next step tries again)', async () => {
    const o = await start();
    const port = o.httpPort!;
    const ok = await call(port, 'POST', '/v1/scale', { service: 2, replicas: 5, reason: 'launch' });
    expect(ok.status).toBe(200);
    expect(ok.body.applied).toEqual({ executed: expect.any(Number), refused: 0 });
    expect(ok.body.applied.executed).toBeGreaterThan(0);
    await cluster.close(); // the executor's cluster is gone
    const r = await call(port, 'POST', '/v1/nodes/hold', { node: 0, reason: 'disk', by: 'ann' });
    expect(r.status).toBe(502);
    expect(r.body.reason).toMatch(/^saved, but the cluster did not take it \(.+\); the next placement step tries again$/);
    expect(r.body.message).toBe('ann: node 0 held out: disk');
    // saved: in the status, in the store, and an event
    expect(r.body.holds).toMatchObject([{ node: 0, by: 'ann', reason: 'disk' }]);
    expect(o.store.events({ kind: 'admin-hold' })).toHaveLength(1);
    // afterEach closes a cluster
    cluster = new EmulatedCluster({ scenario, adminToken: 'node-token' });
    await cluster.listen();
  });

  it('an override on a held node is 409, naming the node (it was accepted and never applied)', async () => {
    const o = await start();
    expect((await call(o.httpPort!, 'POST', '/v1/nodes/hold', { node: 2, reason: 'disk' })).status).toBe(200);
    const r = await call(o.httpPort!, 'POST', '/v1/scale', { service: 1, replicas: 2, node: 2, reason: 'pin' });
    expect(r.status).toBe(409);
    expect(r.body.reason).toBe('node: node 2 is held out (re-admit it first: kais nodes --readmit 2)');
    expect((await call(o.httpPort!, 'GET', '/v1/status')).body.overrides).toEqual([]);
  });

  it('with no executor a change is 409 and changes nothing (it would act on no cluster)', async () => {
    const cfg = JSON.parse(fs.readFileSync(cfgFile, 'utf8')) as Record<string, unknown>;
    delete cfg.executor;
    delete cfg.executorToken;
    fs.writeFileSync(cfgFile, JSON.stringify(cfg));
    const o = await start();
    const v0 = o.registry.placementVersion;
    for (const [p, body] of [
      ['/v1/nodes/hold', { node: 0, reason: 'disk' }],
      ['/v1/scale', { service: 1, replicas: 3, reason: 'launch' }],
    ] as const) {
      const r = await call(o.httpPort!, 'POST', p, body);
      expect(r.status).toBe(409);
      expect(r.body.reason).toMatch(/has no executor/);
    }
    const st = await call(o.httpPort!, 'GET', '/v1/status');
    expect([st.body.holds, st.body.overrides]).toEqual([[], []]);
    expect(o.registry.placementVersion).toBe(v0);
    expect(o.store.events({ kind: 'admin-hold' })).toEqual([]);
  });

  it('an override with a ttl ends by itself, with an event', async () => {
    const o = await start();
    // under 1 s it would end before a step could apply it, and replace the old override for nothing
    const short = await call(o.httpPort!, 'POST', '/v1/scale', { service: 1, replicas: 4, ttlS: 0.2, reason: 'short' });
    expect([short.status, short.body.reason]).toEqual([400, 'ttlS: must be seconds in 1..2592000']);
    await call(o.httpPort!, 'POST', '/v1/scale', { service: 1, replicas: 4, ttlS: 1, reason: 'short' });
    expect(total(o.loop.placement, 1)).toBe(4);
    await new Promise((r) => setTimeout(r, 1050));
    await o.loop.stepNow();
    expect(o.store.events({ kind: 'admin-expired' })).toHaveLength(1);
    expect((await call(o.httpPort!, 'GET', '/v1/status')).body.overrides).toEqual([]);
  });

  it('holds a node out (emptied, no new replica) and re-admits it', async () => {
    const o = await start();
    const port = o.httpPort!;
    const node = o.loop.placement[0].findIndex((x) => x > 0); // a node that holds a replica of service 0
    expect(node).toBeGreaterThanOrEqual(0);
    const h = await call(port, 'POST', '/v1/nodes/hold', { node, reason: 'disk replacement', by: 'bob' });
    expect(h.status).toBe(200);
    for (let w = 0; w < scenario.services.length; w++) expect(o.loop.placement[w][node]).toBe(0);
    await call(port, 'POST', '/v1/scale', { service: 0, replicas: 5, reason: 'more' });
    for (let w = 0; w < scenario.services.length; w++) expect(o.loop.placement[w][node]).toBe(0); // none goes there while held
    expect((await call(port, 'GET', '/v1/status')).body.holds).toMatchObject([{ node, by: 'bob', reason: 'disk replacement' }]);
    expect((await call(port, 'POST', '/v1/nodes/readmit', { node, reason: 'fixed' })).status).toBe(200);
    expect((await call(port, 'POST', '/v1/nodes/readmit', { node, reason: 'again' })).status).toBe(404);
    const kinds = (await call(port, 'GET', '/v1/events?kind=admin-hold')).body.events.map((e: { kind: string }) => e.kind);
    expect(kinds).toEqual(['admin-hold']);
  });

  it('refuses to hold a node an override is pinned to (the service would lose its replicas there for good)', async () => {
    const o = await start();
    const port = o.httpPort!;
    expect((await call(port, 'POST', '/v1/scale', { service: 2, replicas: 2, node: 0, reason: 'pin' })).status).toBe(200);
    const v = o.registry.placementVersion;
    const h = await call(port, 'POST', '/v1/nodes/hold', { node: 0, reason: 'disk' });
    expect(h.status).toBe(409);
    expect(h.body.reason).toBe('node: node 0 carries the override of service 2 (release it first: kais scale --release 2)');
    expect((await call(port, 'GET', '/v1/status')).body.holds).toEqual([]);
    expect(o.registry.placementVersion).toBe(v);
    expect(o.store.events({ kind: 'admin-hold' })).toEqual([]);
    // another node holds, and after the release node 0 does too
    expect((await call(port, 'POST', '/v1/nodes/hold', { node: 1, reason: 'disk' })).status).toBe(200);
    expect((await call(port, 'POST', '/v1/scale/release', { service: 2, reason: 'done' })).status).toBe(200);
    expect((await call(port, 'POST', '/v1/nodes/hold', { node: 0, reason: 'disk' })).status).toBe(200);
  });

  it('refuses a missing or wrong token, and bad input with one reason naming the field', async () => {
    const o = await start();
    const port = o.httpPort!;
    const refused = await call(port, 'GET', '/v1/status', undefined, null);
    expect(refused.status).toBe(401);
    expect(refused.headers['www-authenticate']).toBe('Bearer'); // RFC 9110 11.6.1: where the token goes
    expect((await call(port, 'GET', '/v1/status', undefined, 'wrong-token-wrong-token')).status).toBe(401);
    const cases: [unknown, RegExp][] = [
      [{ service: 99, replicas: 2, reason: 'x' }, /^service: must be an integer in 0\.\.7$/],
      [{ service: 1, replicas: 1e6, reason: 'x' }, /^replicas: must be an integer in 1\.\./],
      [{ service: 1, replicas: 2 }, /^reason: say why/],
      [{ service: 1, replicas: 2, reason: 'x', ttlS: -1 }, /^ttlS: must be seconds/],
      [{ service: 1, replicas: 2, reason: 'x', node: 1000 }, /^node: must be an integer in 0\.\./],
      ['not an object', /^body: must be a JSON object$/],
      // kept in events and printed by kais status: one line, no terminal escapes
      [{ service: 1, replicas: 2, reason: 'line1\nservice  replicas' }, /^reason: one line of text/],
      [{ service: 1, replicas: 2, reason: 'x', by: '\u001b[31mRED' }, /^by: one line of text/],
      // a misspelt field is refused, not dropped: `ttl` would have made a permanent override
      [
        { service: 1, replicas: 2, reason: 'x', ttl: 5 },
        /^ttl: not a field of \/v1\/scale \(its fields: service, replicas, node, ttlS, reason, by\)$/,
      ],
    ];
    for (const [body, msg] of cases) {
      const r = await call(port, 'POST', '/v1/scale', body);
      expect(r.status).toBe(400);
      expect(r.body.reason).toMatch(msg);
    }
    expect(o.store.events({ kind: 'admin-scale' })).toHaveLength(0);
    for (const [p, body] of [
      ['/v1/scale/release', { service: 1, reason: 'x', node: 2 }],
      ['/v1/nodes/hold', { node: 1, reason: 'x', service: 3 }],
      ['/v1/nodes/readmit', { node: 1, reason: 'x', ttlS: 5 }],
    ] as const) {
      const r = await call(port, 'POST', p, body);
      expect(r.status).toBe(400);
      expect(r.body.reason).toMatch(/^(node|service|ttlS): not a field of /);
    }
    expect((await call(port, 'GET', '/v1/status')).body.holds).toEqual([]);
    // the route before the body: a known path with the wrong method is 405, an unknown path 404
    expect((await call(port, 'GET', '/v1/scale')).status).toBe(405);
    expect((await call(port, 'GET', '/v1/scale')).headers.allow).toBe('POST');
    expect((await call(port, 'POST', '/metrics', {})).headers.allow).toBe('GET, HEAD');
    expect((await call(port, 'POST', '/v1/status', {})).status).toBe(405);
    const nope = await call(port, 'POST', '/v1/nope', {});
    expect(nope.status).toBe(404);
    expect(nope.body.reason).toMatch(/^no \/v1\/nope here \(known: /);
    // a body that is not JSON is judged after the route and method too
    const notJson = new Raw('{bad');
    expect((await call(port, 'POST', '/v1/status', notJson)).status).toBe(405);
    expect((await call(port, 'PUT', '/v1/scale', notJson)).status).toBe(405);
    expect((await call(port, 'POST', '/v1/nope', notJson)).status).toBe(404);
    const r = await call(port, 'POST', '/v1/scale', notJson);
    expect([r.status, r.body.reason]).toEqual([400, 'body: not JSON']);
  });
});
