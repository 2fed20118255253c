/**
 * kais node against bad input: every node server and the admin server answer a client's mistake
 * with a 4xx and a JSON reason naming the field, and stay up (they share one process: one crash
 * took every node down); the admin server checks the token and the size from the headers, before
 * the body; `kais node` refuses faults its timers cannot play and tokens no header can carry at the
 * door (exit 2, one line). In-process: EmulatedCluster, and the command through runCli.
 */
import * as fs from 'fs';
import * as http from 'http';
import * as os from 'os';
import * as path from 'path';
import { runInProcess } from '../../support/in-process';
import { ADMIN_BODY_BYTES, adminBodyCap, EmulatedCluster } from '../../../orchestrator/emulated-cluster';
import type { Placement } from '../../../shared/domain';
import { loadScenario } from '../../../shared/scenario';

const tiny = loadScenario('tiny');
const TOKEN = 's3cret';
const W = tiny.services.length;
const N = tiny.eaps.flatMap((e) => e.nodes).length;

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Record<string, unknown>;
}

/** One raw request (fetch would normalise the target): its answer, the body sent whole unless `keepOpen`. */
function request(
  base: string,
  method: string,
  target: string,
  o: { body?: string | Buffer; headers?: http.OutgoingHttpHeaders; token?: string; keepOpen?: boolean } = {},
): Promise<Answer> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const headers: http.OutgoingHttpHeaders = { ...(o.token ? { authorization: `Bearer ${o.token}` } : {}), ...o.headers };
    const req = http.request({ host: hostname, port, method, path: target, headers, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (text += d));
      res.on('end', () => {
        req.destroy();
        try {
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: JSON.parse(text) as Record<string, unknown> });
        } catch (e) {
          reject(new Error(`${method} ${target}: ${res.statusCode} not JSON: ${text} (${String(e)})`));
        }
      });
    });
    // a server that answers early and drops the rest of the body may reset the upload: the answer is what counts
    req.on('error', (e) => (o.keepOpen ? undefined : reject(e)));
    if (o.body !== undefined) req.write(o.body);
    if (!o.keepOpen) req.end();
  });
}

const admin = (c: EmulatedCluster, method: string, target: string, body?: unknown, token: string | undefined = TOKEN) =>
  request(c.adminUrl, method, target, { body: body === undefined ? undefined : JSON.stringify(body), token });

describe('kais node servers: bad requests are 4xx with a reason, and every server stays up', () => {
  let cluster: EmulatedCluster;
  beforeAll(async () => {
    cluster = new EmulatedCluster({ scenario: tiny, adminToken: TOKEN });
    await cluster.listen();
  });
  afterAll(() => cluster.close());

  /** Every node, the cloud and the admin server still answer. */
  async function allUp(): Promise<void> {
    for (const u of [...cluster.nodeUrls, cluster.cloudUrl]) expect((await request(u, 'GET', '/healthz')).status).toBe(200);
    expect((await request(cluster.adminUrl, 'GET', '/faults')).status).toBe(200);
  }

  it('a target that is no URL (//[) is 400 on a node and on the admin server, not an uncaught TypeError', async () => {
    for (const base of [cluster.nodeUrls[0], cluster.cloudUrl, cluster.adminUrl]) {
      const r = await request(base, 'POST', '//[');
      expect(r.status).toBe(400);
      expect(r.body.reason).toMatch(/^url: /);
    }
    await allUp();
  });

  it('POST /serve: a missing, empty, fractional or out-of-range service, or an empty or negative ttl, is 400 naming it', async () => {
    const node = cluster.nodeUrls[0];
    const cases: [string, RegExp][] = [
      ['/serve', /^service: must be an integer in 0\.\.3, got null/],
      ['/serve?service=', /^service: must be an integer in 0\.\.3, got ""/],
      ['/serve?service=%200', /^service: /],
      ['/serve?service=1.5', /^service: /],
      ['/serve?service=-1', /^service: /],
      [`/serve?service=${W}`, /^service: /],
      ['/serve?service=0x1', /^service: /],
      ['/serve?service=0&ttl=', /^ttl: must be whole milliseconds >= 0 when given, got ""/],
      ['/serve?service=0&ttl=-5', /^ttl: /],
      ['/serve?service=0&ttl=soon', /^ttl: /],
      ['/serve?service=0&ttl=1e3', /^ttl: /],
      ['/serve?service=0&work=', /^work: /],
      ['/serve?service=0&work=-1', /^work: /],
      ['/serve?service=0&work=Infinity', /^work: /],
    ];
    for (const [target, reason] of cases) {
      const r = await request(node, 'POST', target);
      expect({ target, status: r.status }).toEqual({ target, status: 400 });
      expect(r.body.reason).toMatch(reason);
    }
    // a good request is served (or refused by the service model, not the parser)
    expect([200, 503]).toContain((await request(node, 'POST', '/serve?service=0&work=0.001&ttl=1000')).status);
    await allUp();
  });

  it('a known path with another method is 405 (with Allow), an unknown one 404, on the nodes and the admin server', async () => {
    const node = cluster.nodeUrls[0];
    const r405 = await request(node, 'GET', '/serve?service=0');
    expect([r405.status, r405.headers.allow, r405.body.reason]).toEqual([405, 'POST', '/serve answers POST only']);
    expect((await request(node, 'POST', '/healthz')).status).toBe(405);
    expect((await request(node, 'GET', '/nope')).status).toBe(404);
    expect((await request(cluster.cloudUrl, 'GET', '/telemetry')).status).toBe(404); // the cloud has no telemetry
    const a405 = await admin(cluster, 'DELETE', '/placement');
    expect([a405.status, a405.headers.allow]).toEqual([405, 'GET, PUT']);
    expect(a405.body.reason).toMatch(/^\/placement answers GET, PUT only/);
    expect((await admin(cluster, 'GET', '/scale')).status).toBe(405);
    expect((await admin(cluster, 'POST', '/fault', { node: 0, state: 'ok' })).status).toBe(405);
    const a404 = await admin(cluster, 'GET', '/nope');
    expect(a404.status).toBe(404);
    expect(a404.body.reason).toMatch(/^no such route/);
  });

  it('PUT /fault: node must be an integer in 0..N-1 (no "__proto__", "constructor", "length" or "0"), the body an object', async () => {
    for (const node of ['__proto__', 'constructor', 'length', '0', 1.5, -1, N, null, undefined]) {
      const r = await admin(cluster, 'PUT', '/fault', { node, state: 'ok' });
      expect({ node, status: r.status, reason: r.body.reason }).toEqual({
        node,
        status: 400,
        reason: `node: must be an integer in 0..${N - 1}`,
      });
    }
    const state = await admin(cluster, 'PUT', '/fault', { node: 0, state: 'toString' });
    expect([state.status, state.body.reason]).toEqual([400, 'state: must be ok, abnormal or failed, got "toString"']);
    for (const body of [null, [], 'x', 3]) {
      const r = await admin(cluster, 'PUT', '/fault', body);
      expect([r.status, r.body.reason]).toEqual([400, 'body: must be a JSON object']);
    }
    // a value nested 30000 deep (under the body cap) overflowed JSON.stringify in the reason: uncaught, every node down
    const deep = `{"node":0,"state":${'['.repeat(30000)}${']'.repeat(30000)}}`;
    const nested = await request(cluster.adminUrl, 'PUT', '/fault', { body: deep, token: TOKEN });
    expect([nested.status, nested.body.reason]).toEqual([400, 'state: must be ok, abnormal or failed, got a list']);
    const notJson = await request(cluster.adminUrl, 'PUT', '/fault', { body: '{"node":', token: TOKEN });
    expect([notJson.status, notJson.body.reason]).toEqual([400, 'body: not JSON']);
    expect(((await admin(cluster, 'GET', '/faults')).body.states as string[]).every((s) => s === 'ok')).toBe(true);
    await allUp();
  });

  it('POST /scale: an order that is not {service, node, delta} is 400 naming it, and nothing is carried out', async () => {
    const before = (await admin(cluster, 'GET', '/placement')).body.d;
    const good = { service: 0, node: 0, delta: 1 };
    const cases: [unknown, string][] = [
      [null, 'body: must be a JSON object'],
      [{}, 'ops: must be a list of {service, node, delta}'],
      [{ ops: [null] }, 'ops[0]: must be an object {service, node, delta}'],
      [{ ops: [good, [0, 0, 1]] }, 'ops[1]: must be an object {service, node, delta}'],
      [{ ops: [{ ...good, service: '__proto__' }] }, `ops[0].service: must be an integer in 0..${W - 1}`],
      [{ ops: [{ ...good, node: 'length' }] }, `ops[0].node: must be an integer in 0..${N - 1}`],
      [{ ops: [{ ...good, delta: 2 }] }, 'ops[0].delta: must be 1 or -1'],
    ];
    for (const [body, reason] of cases) {
      const r = await admin(cluster, 'POST', '/scale', body);
      expect([r.status, r.body.reason]).toEqual([400, reason]);
    }
    expect((await admin(cluster, 'GET', '/placement')).body.d).toEqual(before);
    const r = await admin(cluster, 'POST', '/scale', { ops: [] });
    expect([r.status, r.body]).toEqual([200, { executed: [], refused: 0 }]);
  });

  it('PUT /placement: a table is checked as POST /scale checks orders (shape, maxReplicasPerService, CPU, memory, failed nodes)', async () => {
    const held = (await admin(cluster, 'GET', '/placement')).body.d as Placement;
    const zero = (): number[][] => Array.from({ length: W }, () => new Array<number>(N).fill(0));
    const withRow0 = (row: unknown) => [row, ...zero().slice(1)];
    const cases: [unknown, RegExp][] = [
      [undefined, /^d: must be 4 rows \(one per service\) of 3 non-negative integers/],
      [zero().slice(1), /^d: must be 4 rows/],
      [withRow0([0, 0]), /^d\[0\]: must be 3 non-negative integers/],
      [withRow0([0, 0, -1]), /^d\[0\]: /],
      [withRow0([0, 0, 0.5]), /^d\[0\]: /],
      [withRow0(['1', 0, 0]), /^d\[0\]: /],
      [
        withRow0([1_000_000, 0, 0]),
        new RegExp(`^d\\[0\\]: 1000000 replicas of service 0, more than maxReplicasPerService \\(${tiny.maxReplicasPerService}\\)`),
      ],
    ];
    // more replicas on one node than its memory holds (each within maxReplicasPerService)
    const mem = zero();
    const node0 = tiny.eaps[0].nodes[0];
    let used = 0;
    for (let w = 0; w < W && used <= node0.memGB; w++) {
      mem[w][0] = tiny.maxReplicasPerService;
      used += tiny.maxReplicasPerService * tiny.services[w].memGB;
    }
    expect(used).toBeGreaterThan(node0.memGB); // the fixture breaks the memory rule
    cases.push([mem, /^d\[\*\]\[0\]: the replicas need [\d.]+ GB of memory, node 0 has [\d.]+ GB/]);
    for (const [d, reason] of cases) {
      const r = await admin(cluster, 'PUT', '/placement', d === undefined ? {} : { d });
      expect([r.status, r.body.reason]).toEqual([400, expect.stringMatching(reason)]);
    }
    // no new replica on a failed node
    expect((await admin(cluster, 'PUT', '/fault', { node: 1, state: 'failed' })).status).toBe(200);
    const onFailed = zero();
    onFailed[0][1] = held[0][1] + 1;
    const r = await admin(cluster, 'PUT', '/placement', { d: onFailed });
    expect([r.status, r.body.reason]).toEqual([400, 'd[0][1]: node 1 has failed, no new replica there']);
    expect((await admin(cluster, 'PUT', '/fault', { node: 1, state: 'ok' })).status).toBe(200);
    expect((await admin(cluster, 'GET', '/placement')).body.d).toEqual(held); // nothing taken
    // a table within the rules is taken, and the report holds what it says
    const ok = zero();
    ok[0][0] = 1;
    expect((await admin(cluster, 'PUT', '/placement', { d: ok })).status).toBe(200);
    expect((await admin(cluster, 'GET', '/placement')).body.d).toEqual(ok);
    expect((await admin(cluster, 'PUT', '/placement', { d: held })).status).toBe(200);
    await allUp();
  });

  it('the CPU rule of PUT /placement: no replica on a node with fewer cores than one request of the service needs', async () => {
    const small = structuredClone(tiny);
    small.eaps[0].nodes[0].cpuCores = tiny.services[1].cpuCores / 2;
    const c = new EmulatedCluster({ scenario: small, adminToken: TOKEN });
    await c.listen();
    try {
      const d = Array.from({ length: W }, () => new Array<number>(N).fill(0));
      d[1][0] = 1;
      const r = await admin(c, 'PUT', '/placement', { d });
      expect([r.status, r.body.reason]).toEqual([
        400,
        expect.stringMatching(/^d\[1\]\[0\]: a replica of service 1 needs [\d.]+ cores, node 0 has/),
      ]);
    } finally {
      await c.close();
    }
  });

  it('401 from the headers alone: a change without the token is refused before its body is read', async () => {
    // the body is announced (100 MB) and never sent: an answer can only come from the headers
    const r = await request(cluster.adminUrl, 'PUT', '/placement', {
      headers: { 'content-length': String(100 * 1024 * 1024) },
      body: '{"d":',
      keepOpen: true,
    });
    expect(r.status).toBe(401);
    expect(r.headers.connection).toBe('close');
    expect(r.body.reason).toMatch(/admin token required/);
    await allUp();
  });

  it('a target refuses a body unread (its parameters are in the query): 413 and the connection closed, on a node and the cloud', async () => {
    for (const base of [cluster.nodeUrls[0], cluster.cloudUrl]) {
      // 100 GB announced, a few bytes sent: the answer comes from the headers, and the socket goes
      const r = await request(base, 'POST', '/serve?service=0', {
        headers: { 'content-length': String(100 * 1024 ** 3) },
        body: 'xxxx',
        keepOpen: true,
      });
      expect([r.status, r.headers.connection]).toEqual([413, 'close']);
      expect(r.body.reason).toMatch(/^body: a target takes none/);
    }
    await allUp();
  });

  it('413 above the body cap: from the announced length before reading, and while reading a body of unknown length', async () => {
    const cap = adminBodyCap(tiny);
    expect(cap).toBe(ADMIN_BODY_BYTES);
    const announced = await request(cluster.adminUrl, 'PUT', '/placement', {
      token: TOKEN,
      headers: { 'content-length': String(cap + 1) },
      body: '{"d":',
      keepOpen: true,
    });
    expect([announced.status, announced.body.reason]).toEqual([413, `body: over ${cap} bytes`]);
    // chunked: more than the cap is sent and the request left open; the answer comes once the cap is passed
    const streamed = await request(cluster.adminUrl, 'POST', '/scale', {
      token: TOKEN,
      headers: { 'transfer-encoding': 'chunked' },
      body: Buffer.alloc(cap + 1024, 0x20),
      keepOpen: true,
    });
    expect([streamed.status, streamed.headers.connection]).toEqual([413, 'close']);
    // a body under the cap is read
    const padded = `{"ops": []${' '.repeat(cap - 64)}}`;
    expect((await request(cluster.adminUrl, 'POST', '/scale', { token: TOKEN, body: padded })).status).toBe(200);
    await allUp();
  });

  it("the cap holds the executor's largest honest order list (every replica removed and made again)", () => {
    const large = loadScenario('large');
    const ops = [];
    for (let w = 0; w < large.services.length; w++)
      for (let k = 0; k < large.maxReplicasPerService; k++) {
        const node = large.eaps.flatMap((e) => e.nodes).length - 1;
        ops.push({ service: w, node, delta: -1 }, { service: w, node, delta: 1 });
      }
    expect(Buffer.byteLength(JSON.stringify({ ops }))).toBeLessThanOrEqual(adminBodyCap(large));
  });
});

describe('EmulatedCluster refuses faults its timers cannot play', () => {
  const maxTimerMs = 2 ** 31 - 1;

  it('a start or an end past 2^31 - 1 ms of real time (scenario seconds x 1000 / speed), naming the field', () => {
    const f = (startS: number, durationS: number) => [{ node: 0, startS, durationS }];
    expect(() => new EmulatedCluster({ scenario: tiny, faults: f(0, 1e12) })).toThrow(/^faults\[0\]\.durationS: .*2\^31 - 1 ms/);
    expect(() => new EmulatedCluster({ scenario: tiny, faults: f(1e12, 1) })).toThrow(/^faults\[0\]\.startS: /);
    const lastS = Math.floor(maxTimerMs / 1000);
    expect(() => new EmulatedCluster({ scenario: tiny, faults: f(lastS - 10, 20) })).toThrow(/^faults\[0\]\.durationS: /);
    // the same times fit at a higher speed (real ms = scenario s x 1000 / speed)
    expect(() => new EmulatedCluster({ scenario: tiny, faults: f(lastS - 10, 20), speed: 2 })).not.toThrow();
    expect(() => new EmulatedCluster({ scenario: tiny, faults: f(0, lastS) })).not.toThrow();
  });
});

// ----------------------------------------------------------------------- the command, in-process

describe('kais node refuses at the door (exit 2, one line naming the flag)', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kais-node-bad-input-'));
  const envToken = process.env.KAIS_NODE_ADMIN_TOKEN;
  beforeEach(() => delete process.env.KAIS_NODE_ADMIN_TOKEN);
  afterAll(() => {
    fs.rmSync(dir, { recursive: true, force: true });
    if (envToken === undefined) delete process.env.KAIS_NODE_ADMIN_TOKEN;
    else process.env.KAIS_NODE_ADMIN_TOKEN = envToken;
  });

  const node = (...a: string[]) => runInProcess(['node', '--scenario', 'tiny', ...a]);
  function expectRefused(r: { code: number | null; stderr: string }, line: RegExp): void {
    const lines = r.stderr.trim().split('\n');
    expect({ code: r.code, lines }).toEqual({ code: 2, lines: [expect.stringMatching(line)] });
    expect(r.stderr).not.toMatch(/internal error|\n\s+at |Warning/);
  }

  it.each([
    ['an end past the timer range', '[{"node":0,"startS":0,"durationS":1e12}]', /^kais: --faults: faults\[0\]\.durationS: /],
    ['a start past the timer range', '[{"node":0,"startS":1e12,"durationS":1}]', /^kais: --faults: faults\[0\]\.startS: /],
    ['a time JSON makes Infinity', '[{"node":0,"startS":1e400,"durationS":1}]', /^kais: --faults: fault .*needs/],
    ['an unknown field', '[{"node":0,"startS":0,"durationS":1,"extra":1}]', /^kais: --faults: faults\[0\]\.extra: unknown field/],
    [
      'a misspelt field',
      '[{"node":0,"startS":0,"durationS":1},{"node":1,"startS":0,"durationS":1,"precursor":5}]',
      /^kais: --faults: faults\[1\]\.precursor: /,
    ],
  ])('--faults with %s', async (_what, faults, line) => {
    expectRefused(await node('--faults', faults), line);
  });

  it('an --admin-token-file holding binary bytes', async () => {
    const file = path.join(dir, 'binary-token');
    fs.writeFileSync(file, Buffer.from([0, 1, 2, 3, 255, 254, 0, 7, 10]), { mode: 0o600 });
    expectRefused(
      await node('--admin-token-file', file),
      /^kais: --admin-token-file: the file's first line is not a token an HTTP header can carry/,
    );
    fs.writeFileSync(file, 'caf\u00e9-token\n', { mode: 0o600 });
    expectRefused(await node('--admin-token-file', file), /^kais: --admin-token-file: /);
  });

  it.each([['   '], ['two words'], ['tab\there'], ['caf\u00e9']])('$KAIS_NODE_ADMIN_TOKEN=%j', async (token) => {
    process.env.KAIS_NODE_ADMIN_TOKEN = token;
    expectRefused(await node(), /^kais: --admin-token-file: \$KAIS_NODE_ADMIN_TOKEN is not a token an HTTP header can carry/);
  });
});
