/**
 * 10,000 bad frames from the orchestrator's side of the socket to a real `kais agent` process
 * (dist/kais.js, built by `npm test`): random bytes, truncated and bit-flipped frames, random
 * msgpack, envelopes with a random field, a wrong protocol version, types an orchestrator never
 * sends, weights with a bad checksum, weights and placements that do not fit this agent, hostile
 * length headers, deep nesting, text messages, and a few frames over the 16 MiB limit.
 *
 * The orchestrator is a bare ws server on 127.0.0.1:0 speaking the protocol through the codec. Each
 * bad frame is followed by a probe (a valid `scale` frame, which the agent acks), so the agent's
 * replies between two probe acks are its answer to one bad frame: at most one `error` frame (one
 * for each frame it could not apply, and within its reply budget, 20 at once and 5 a second, for
 * the ones that do not decode or come out of turn: the rest are counted, not answered), or the
 * socket closed (oversized frames only), after which the agent must reconnect with the same
 * versions in its `hello`. Afterwards the process is alive, /healthz reports the weight and
 * placement versions it had before, and requests through its ingress are served by an emulated
 * node. Every frame the agent sends carries the next seq of its connection.
 */
import { parseMetrics, sample } from '../support/prometheus';
import type { ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { Packr } from 'msgpackr';
import { WebSocket, WebSocketServer } from 'ws';
import { observationDim } from '../../agent/observation';
import { EmulatedCluster, initialPlacement } from '../../orchestrator/emulated-cluster';
import { actorShapes, initActorWeights } from '../../shared/nets/actor';
import { Codec } from '../../shared/protocol/codec';
import { makeFrame, placementBody, type Frame } from '../../shared/protocol/envelope';
import { packWeights } from '../../shared/protocol/weights';
import { Rng } from '../../shared/rng';
import { loadScenario } from '../../shared/scenario';
import { spawnAgent, tinyAgentArgs } from '../support/agent-process';

const FRAMES = 10_000;
const BATCH = 250; // bad frames (each with its probe) in flight at once
const AGENT_LIMIT = 16 * 1024 * 1024; // the agent's default maxFrameBytes
const OVERSIZED_EVERY = 2_500;
const codec = new Codec();
const rawPackr = new Packr({ useRecords: false, structuredClone: false });
const scenario = loadScenario('tiny');

// ---------------------------------------------------------------------------------------------
// What the orchestrator holds and what the fuzzer sends
// ---------------------------------------------------------------------------------------------

const dim = observationDim({ numServices: 4, numTargets: 4, numEaps: 1 });
const shapes = actorShapes(dim, 4);
const weightsOf = (seed: number) => initActorWeights(dim, 4, seed).map((data, i) => ({ shape: shapes[i], data }));
const WEIGHTS_V1 = packWeights(weightsOf(1), 1);
const PLACEMENT_V1 = placementBody(1, 0, initialPlacement(scenario));

/** This actor's weights, newer than v1, with data changed after the checksum was computed. */
const corrupted: Buffer[] = Array.from({ length: 16 }, (_, i) => {
  const w = makeFrame('weights', 9, packWeights(weightsOf(3), 3 + i));
  const t = w.body.tensors[i % w.body.tensors.length];
  t[(i * 7919) % t.length] += 0.5;
  return codec.encode(w);
});

/** Plain msgpack of a frame-like value (typed arrays as `bin`), without the codec's validation. */
function packRaw(x: unknown): Buffer {
  const wire = (v: unknown): unknown => {
    if (ArrayBuffer.isView(v)) return Buffer.from(v.buffer, v.byteOffset, v.byteLength);
    if (Array.isArray(v)) return v.map(wire);
    if (v !== null && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, e]) => [k, wire(e)]));
    return v;
  };
  return rawPackr.pack(wire(x));
}

/**
 * Valid frames to mutate: what an orchestrator sends (newer versions than the agent holds). The
 * weights are small (the actor's real ones are ~180 KB, too slow to copy 10,000 times here); the
 * real actor's weights come in `corrupted` below.
 */
const templates: Frame[] = [
  makeFrame('weights', 5, packWeights([{ shape: [2, 3], data: new Float32Array([0.1, -0.2, 0.3, 0.4, 0.5, -0.6]) }], 2)),
  makeFrame('placement', 6, placementBody(2, 1, initialPlacement(scenario))),
  makeFrame('scale', 7, { service: 1, node: 2, replicas: 3 }),
  makeFrame('welcome', 8, { sessionId: 's', heartbeatMs: 5000, weightVersion: 2, placementVersion: 2 }),
];
const good = templates.map((f) => codec.encode(f));

/** Frames an orchestrator never sends: valid, and refused by the agent with KAIS_ERR_STATE. */
const wrongDirection: Buffer[] = [
  codec.encode(makeFrame('hello', 3, { eapId: 0, token: '', agentVersion: 'x', weightVersion: null, placementVersion: null })),
  codec.encode(makeFrame('telemetry', 3, { eap: 0, samples: [] })),
  codec.encode(makeFrame('experience', 3, { eap: 0, transitions: [] })),
];

function randomValue(rng: Rng, depth: number): unknown {
  switch (rng.int(depth > 3 ? 5 : 8)) {
    case 0:
      return rng.int(2) === 0 ? null : rng.next() < 0.5;
    case 1:
      return [0, -1, 1.5, NaN, Infinity, 2 ** 53, -(2 ** 31)][rng.int(7)];
    case 2:
      return ['', 'weights', 'placement', '__proto__', 'KAIS_ERR_X', 'x'.repeat(3000)][rng.int(6)];
    case 3:
      return Buffer.from(Array.from({ length: rng.int(40) }, () => rng.int(256)));
    case 4:
      return rng.int(1000);
    case 5:
      return Array.from({ length: rng.int(5) }, () => randomValue(rng, depth + 1));
    default: {
      const keys = ['v', 'type', 'seq', 'ts', 'body', 'version', 'tensors', 'shapes', 'checksum', 'replicas'];
      const o: Record<string, unknown> = {};
      for (let i = rng.int(6); i > 0; i--) o[keys[rng.int(keys.length)]] = randomValue(rng, depth + 1);
      return o;
    }
  }
}

/** `mustAnswer`: a valid frame the agent cannot apply, answered whatever its reply budget. */
type Bad = { bytes: Buffer; text?: string; expect: 'error' | 'close'; mustAnswer?: boolean };

function badFrame(rng: Rng, k: number): Bad {
  if (k % OVERSIZED_EVERY === OVERSIZED_EVERY - 1) return { bytes: Buffer.alloc(AGENT_LIMIT + 1 + rng.int(100), 0x91), expect: 'close' };
  const base = good[rng.int(good.length)];
  let bytes: Buffer;
  switch (k % 12) {
    case 0: // random bytes
      bytes = Buffer.from(Array.from({ length: 1 + rng.int(300) }, () => rng.int(256)));
      break;
    case 1: // a valid frame cut short
      bytes = base.subarray(0, rng.int(base.length));
      break;
    case 2: {
      // a few bits flipped
      bytes = Buffer.from(base);
      for (let i = 1 + rng.int(4); i > 0; i--) bytes[rng.int(bytes.length)] ^= 1 << rng.int(8);
      break;
    }
    case 3: // random msgpack
      bytes = packRaw(randomValue(rng, 0));
      break;
    case 4: {
      // an envelope with one field replaced
      const f: Record<string, unknown> = { ...templates[rng.int(templates.length)] };
      f[['v', 'type', 'seq', 'ts', 'body'][rng.int(5)]] = randomValue(rng, 1);
      bytes = packRaw(f);
      break;
    }
    case 5: // a protocol version this build does not speak
      bytes = packRaw({ ...templates[rng.int(templates.length)], v: [0, 2, 99, '1', null][rng.int(5)] });
      break;
    case 6: // a type the orchestrator never sends, or no type at all
      bytes = rng.int(4) === 0 ? packRaw({ ...templates[0], type: 'nope' }) : wrongDirection[rng.int(wrongDirection.length)];
      break;
    case 7: // weights whose data changed after the checksum was computed
      bytes = corrupted[rng.int(corrupted.length)];
      break;
    case 8: // valid frames this agent cannot apply: another actor's shapes, another cluster's placement
      bytes =
        rng.int(2) === 0
          ? codec.encode(makeFrame('weights', k, packWeights([{ shape: [3, 2], data: new Float32Array(6) }], 3 + k)))
          : codec.encode(
              makeFrame(
                'placement',
                k,
                placementBody(3 + k, 0, [
                  [1, 0],
                  [0, 1],
                ]),
              ),
            );
      break;
    case 9: {
      // a hostile length header spliced into a valid frame
      bytes = Buffer.from(base);
      const at = rng.int(bytes.length);
      bytes[at] = [0xdb, 0xc6, 0xdd, 0xdf, 0xc9][rng.int(5)];
      if (at + 4 < bytes.length) bytes.writeUInt32BE(rng.nextU32(), at + 1);
      break;
    }
    case 10: // deep nesting
      bytes = Buffer.concat([Buffer.alloc(1 + rng.int(20_000), 0x91), Buffer.from([0x01])]);
      break;
    default: {
      // a text message instead of a binary one
      const text = rng.int(2) === 0 ? 'probe' : String.fromCharCode(...Array.from({ length: 1 + rng.int(200) }, () => 32 + rng.int(95)));
      return { bytes: Buffer.from(text), text, expect: 'error' };
    }
  }
  // A mutation that stays a frame the agent may accept (a newer valid weights, a second welcome
  // is refused, but a valid scale or stale version is not "bad") is replaced by random bytes.
  const r = codec.decode(bytes);
  const refusedAnyway = r.ok && (['hello', 'telemetry', 'experience', 'welcome'].includes(r.frame.type) || k % 12 === 8);
  if (r.ok && !refusedAnyway) bytes = Buffer.concat([Buffer.from([0xc1]), bytes]);
  return { bytes, expect: 'error', ...(k % 12 === 8 ? { mustAnswer: true } : {}) };
}

// ---------------------------------------------------------------------------------------------
// The orchestrator side: one connection at a time, replies sorted per connection
// ---------------------------------------------------------------------------------------------

interface Connection {
  ws: WebSocket;
  hello: Frame & { type: 'hello' };
  /** Frames the agent sent after `hello`, in order. */
  frames: Frame[];
  waiters: Set<() => void>;
  /** Our outbound seq on this connection. */
  seq: number;
}

class FakeOrchestrator {
  readonly wss: WebSocketServer;
  readonly connections: Connection[] = [];
  private readonly waiters = new Set<() => void>();
  undecodable = 0;

  constructor() {
    this.wss = new WebSocketServer({ host: '127.0.0.1', port: 0, perMessageDeflate: false });
    this.wss.on('connection', (ws) => {
      ws.on('error', () => undefined);
      let conn: Connection | null = null;
      ws.on('message', (data: Buffer) => {
        const r = codec.decode(data);
        if (!r.ok) {
          this.undecodable++;
          return;
        }
        if (!conn) {
          if (r.frame.type !== 'hello') return;
          conn = { ws, hello: r.frame, frames: [], waiters: new Set(), seq: 0 };
          // a long heartbeat: a slow moment of a busy machine must not add a reconnect of its own
          this.connections.push(conn);
          const welcome = makeFrame('welcome', conn.seq++, {
            sessionId: `s${this.connections.length}`,
            heartbeatMs: 30_000,
            weightVersion: 1,
            placementVersion: 1,
          });
          ws.send(codec.encode(welcome));
          if (r.frame.body.weightVersion !== 1) ws.send(codec.encode(makeFrame('weights', conn.seq++, WEIGHTS_V1)));
          if (r.frame.body.placementVersion !== 1) ws.send(codec.encode(makeFrame('placement', conn.seq++, PLACEMENT_V1)));
          this.waiters.forEach((w) => w());
          return;
        }
        conn.frames.push(r.frame);
        conn.waiters.forEach((w) => w());
      });
      ws.on('close', () => {
        if (conn) conn.waiters.forEach((w) => w());
      });
    });
  }

  get url(): string {
    return `ws://127.0.0.1:${(this.wss.address() as AddressInfo).port}`;
  }

  get current(): Connection | undefined {
    return this.connections[this.connections.length - 1];
  }

  /** Resolves once `cond` holds, re-checked on every event; rejects after `ms`. */
  until(cond: () => boolean, what: string, ms = 10_000): Promise<void> {
    return new Promise((resolve, reject) => {
      const check = () => {
        if (!cond()) return;
        clearTimeout(timer);
        this.waiters.delete(check);
        this.current?.waiters.delete(check);
        resolve();
      };
      const timer = setTimeout(() => {
        this.waiters.delete(check);
        reject(new Error(`timed out after ${ms} ms waiting for ${what}`));
      }, ms);
      this.waiters.add(check);
      this.current?.waiters.add(check);
      check();
    });
  }

  close(): Promise<void> {
    for (const c of this.connections) c.ws.terminate();
    return new Promise((resolve) => this.wss.close(() => resolve()));
  }
}

// ---------------------------------------------------------------------------------------------
// HTTP helpers
// ---------------------------------------------------------------------------------------------

function httpJson(port: number, method: string, p: string, body?: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const text = body === undefined ? '' : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port, path: p, method, agent: false, headers: { 'content-length': Buffer.byteLength(text) } },
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

const request = { service: 0, deadlineMs: 3000, payloadBytes: 1000, workCoreS: 0.005 };

// ---------------------------------------------------------------------------------------------
// The test
// ---------------------------------------------------------------------------------------------

describe('kais agent under 10,000 bad frames from its orchestrator', () => {
  let dir: string;
  let cluster: EmulatedCluster;
  let orchestrator: FakeOrchestrator;
  let agent: ChildProcess | null = null;

  beforeEach(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kais-agent-fuzz-'));
    cluster = new EmulatedCluster({ scenario });
    await cluster.listen();
    orchestrator = new FakeOrchestrator();
    await new Promise((resolve) => orchestrator.wss.once('listening', resolve));
  });

  afterEach(async () => {
    if (agent && agent.exitCode === null) {
      const exited = new Promise((resolve) => agent!.once('exit', resolve));
      agent.kill('SIGKILL');
      await exited;
    }
    await orchestrator.close();
    await cluster.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('answers each with at most one error (within its reply budget; always one for a frame it cannot apply) or a closed socket, counts every refusal, reconnects, keeps its versions and keeps serving', async () => {
    const targets = path.join(dir, 'targets.json');
    fs.writeFileSync(targets, JSON.stringify({ nodes: cluster.nodeUrls, cloud: cluster.cloudUrl }));
    const started = spawnAgent(
      tinyAgentArgs(orchestrator.url, targets, path.join(dir, 'cache')),
      { tail: true }, // the agent logs every refused frame: its last lines only
    );
    agent = started.proc;
    const port = await started.port;

    // ---- before: the agent holds weights v1 and placement v1 and serves through the cluster ----
    const health = async () => (await httpJson(port, 'GET', '/healthz')).body;
    await orchestrator.until(() => orchestrator.connections.length === 1, 'the first hello');
    const acked = () => orchestrator.current!.frames.filter((f) => f.type === 'ack').length >= 2;
    await orchestrator.until(acked, 'acks of weights v1 and placement v1', 30_000); // the first weights load the actor code
    expect(await health()).toMatchObject({ policy: 'cmmac', weightVersion: 1, placementVersion: 1, connected: true });
    expect((await httpJson(port, 'POST', '/request', request)).status).toBe(200);

    // ---- 10,000 bad frames, each followed by a probe ----
    const rng = new Rng(20_261_129);
    let errors = 0;
    let unanswered = 0;
    let batchesMustAnswer = 0;
    let closes = 0;
    const codes = new Map<string, number>();
    for (let start = 0; start < FRAMES; start += BATCH) {
      const conn = orchestrator.current!;
      const from = conn.frames.length;
      const batch: Bad[] = [];
      let probeSeq = -1;
      for (let k = start; k < Math.min(FRAMES, start + BATCH); k++) {
        const bad = badFrame(rng, k);
        batch.push(bad);
        if (bad.mustAnswer) batchesMustAnswer++;
        conn.ws.send(bad.text ?? bad.bytes);
        if (bad.expect === 'close') break; // the agent closes this socket: nothing more on it
        probeSeq = conn.seq++;
        conn.ws.send(codec.encode(makeFrame('scale', probeSeq, { service: 0, node: 0, replicas: 1 })));
      }
      const last = batch[batch.length - 1];
      if (last.expect === 'close') {
        // the agent refuses the oversized message by closing (1009) and dials again
        const before = orchestrator.connections.length;
        await orchestrator.until(() => orchestrator.connections.length > before, 'a reconnect after an oversized frame');
        expect(conn.ws.readyState).toBeGreaterThanOrEqual(WebSocket.CLOSING);
        expect(orchestrator.current!.hello.body).toMatchObject({ eapId: 0, weightVersion: 1, placementVersion: 1 });
        closes++;
      }
      if (probeSeq >= 0) {
        await orchestrator.until(
          () => conn.frames.some((f) => f.type === 'ack' && f.body.of === probeSeq) || conn.ws.readyState >= WebSocket.CLOSING,
          `the probe ack of frame ${start + batch.length - 1}`,
        );
      }
      // replies to bad frame i are the error frames between the acks of probes i-1 and i
      const replies = conn.frames.slice(from).filter((f) => f.type === 'error' || f.type === 'ack');
      let i = 0;
      let errorsHere = 0;
      for (const f of replies) {
        if (f.type === 'error') {
          errorsHere++;
          codes.set(f.body.code, (codes.get(f.body.code) ?? 0) + 1);
        } else {
          // at most one answer; a frame the agent could not apply (valid, but another actor's or cluster's) always gets it
          if (errorsHere > 1 || (errorsHere === 0 && batch[i].mustAnswer))
            throw new Error(`bad frame ${start + i} got ${errorsHere} error replies: ${batch[i].bytes.subarray(0, 40).toString('hex')}`);
          if (errorsHere === 1) errors++;
          else unanswered++;
          errorsHere = 0;
          i++;
        }
      }
      expect(i).toBe(batch.filter((b) => b.expect === 'error').length);
    }
    expect(errors + unanswered + closes).toBe(FRAMES);
    expect(closes).toBe(FRAMES / OVERSIZED_EVERY);
    // the reply budget: the first 20 answered, then about 5 a second, and every frame it could not apply
    expect(errors).toBeGreaterThanOrEqual(20 + Math.floor((FRAMES - closes) / 12));
    expect(unanswered).toBeGreaterThan(FRAMES / 2);
    // the codes of the answered ones (which of the budgeted ones get answered depends on the clock:
    // the runtime's tests check each code); a frame it could not apply is always answered
    const known = [
      'KAIS_ERR_BAD_FIELD',
      'KAIS_ERR_CHECKSUM',
      'KAIS_ERR_MALFORMED',
      'KAIS_ERR_REJECTED',
      'KAIS_ERR_STATE',
      'KAIS_ERR_UNKNOWN_TYPE',
      'KAIS_ERR_VERSION',
    ];
    for (const c of codes.keys()) expect(known).toContain(c);
    expect(codes.get('KAIS_ERR_REJECTED')).toBe(batchesMustAnswer);
    expect(codes.get('KAIS_ERR_MALFORMED')).toBeGreaterThan(0);

    // ---- after: alive, same versions, still serving, connected again ----
    expect(agent.exitCode).toBeNull();
    const h = await health();
    expect(h).toMatchObject({ ok: true, policy: 'cmmac', weightVersion: 1, placementVersion: 1, connected: true });
    const rs = await Promise.all(Array.from({ length: 10 }, () => httpJson(port, 'POST', '/request', request)));
    expect(rs.map((r) => r.status)).toEqual(Array(10).fill(200));
    const metrics = await new Promise<string>((resolve, reject) => {
      http
        .get({ host: '127.0.0.1', port, path: '/metrics', agent: false }, (res) => {
          let t = '';
          res.on('data', (c: Buffer) => (t += c.toString()));
          res.on('end', () => resolve(t));
        })
        .on('error', reject);
    });
    const families = parseMetrics(metrics);
    expect(sample(families, 'kais_agent_weight_version', { eap: '0' })).toBe(1);
    expect(sample(families, 'kais_agent_reconnects_total', { eap: '0' })).toBe(4);
    // every refusal counted, answered or not (the oversized frames are closes, not refusals)
    expect(h.framesRefused).toEqual({ total: errors + unanswered, unanswered });
    expect(sample(families, 'kais_agent_orchestrator_frames_refused_total', { eap: '0', answered: 'false' })).toBe(unanswered);

    // every frame the agent sent carried the next seq of its connection (hello is 0)
    for (const c of orchestrator.connections) {
      expect(c.hello.seq).toBe(0);
      c.frames.forEach((f, i) => {
        if (f.seq !== i + 1)
          throw new Error(`connection ${c.hello.body.eapId}: frame ${i} (${f.type}) has seq ${f.seq}, expected ${i + 1}`);
      });
    }
    expect(orchestrator.undecodable).toBe(0);
  });
});
