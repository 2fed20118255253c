/**
 * A real hub on port 0, real agent links (AgentLink + AgentRuntime) and hostile raw ws clients:
 * welcome, weight fan-out, a wrong token, 2,000 random and malformed frames, dead peers, a slow
 * agent, and a restart of the hub on the same port and SQLite file.
 *
 * No sleeps: every wait is on an event, bounded by a timeout that fails the test.
 */
import { join } from 'node:path';
import { Packr } from 'msgpackr';
import WebSocket from 'ws';
import { AgentLink } from '../../agent/link';
import { AgentRuntime } from '../../agent/runtime';
import { Hub, type HubOptions } from '../../orchestrator/hub';
import { ModelRegistry, startHub } from '../../orchestrator/registry';
import { Store } from '../../orchestrator/store';
import { Codec } from '../../shared/protocol/codec';
import { makeFrame, type Frame, type WelcomeBody } from '../../shared/protocol/envelope';
import { Rng } from '../../shared/rng';
import { sampleFrames } from '../unit/shared/protocol/sample-frames';
import { perTestDir } from '../support/tmp';
import { stall } from '../support/wait';

const TOKEN = 'integration-token';
const MAX_FRAME = 64 * 1024;
const codec = new Codec({ maxFrameBytes: MAX_FRAME });
/** What raw clients decode with: the hub's pushes may be larger than what it accepts. */
const inboundCodec = new Codec();

// ---------------------------------------------------------------------------------------------
// Fixtures
// ---------------------------------------------------------------------------------------------

const tmp = perTestDir('kais-hub-');
const { cleanups } = tmp;

/** Resolves with the listener's arguments the first time `pred` holds; rejects after `ms`. */
function waitFor<A extends unknown[]>(
  emitter: { on(e: string, l: (...a: A) => void): unknown; off(e: string, l: (...a: A) => void): unknown },
  event: string,
  pred: (...args: A) => boolean = () => true,
  ms = 5000,
): Promise<A> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      emitter.off(event, listener);
      reject(new Error(`timed out after ${ms} ms waiting for "${event}"`));
    }, ms);
    const listener = (...args: A) => {
      if (!pred(...args)) return;
      clearTimeout(timer);
      emitter.off(event, listener);
      resolve(args);
    };
    emitter.on(event, listener);
  });
}

async function orchestrator(file = join(tmp.dir, 'orchestrator.db'), options: Partial<HubOptions> = {}) {
  const store = Store.open(file);
  const hub = await startHub(store, { token: TOKEN, heartbeatMs: 1000, maxFrameBytes: MAX_FRAME, ...options });
  const registry = new ModelRegistry(store, hub);
  const stop = async () => {
    registry.dispose();
    await hub.close();
    store.close();
  };
  cleanups.push(stop);
  return { store, hub, registry, stop };
}

function agent(url: string, eapId: number, token = TOKEN) {
  let runtime: AgentRuntime | null = null;
  const link = new AgentLink({
    url,
    seed: 1000 + eapId,
    hello: () => runtime!.helloBody(token, '0.1.0'),
    backoff: { initialMs: 20, maxMs: 200 },
    heartbeatMs: 1000,
    maxFrameBytes: MAX_FRAME * 32,
  });
  runtime = new AgentRuntime(
    (b) => link.send(b),
    (cb) => link.onFrame(cb),
    { eapId },
  );
  const rt = runtime;
  cleanups.push(async () => {
    await link.close();
    rt.dispose();
  });
  return { link, runtime: rt };
}

async function connectedAgents(hub: Hub, eapIds: number[]) {
  const agents = eapIds.map((id) => agent(hub.url, id));
  const ready = agents.map((a) => waitFor(a.link, 'ready'));
  agents.forEach((a) => a.link.start());
  await Promise.all(ready);
  return agents;
}

const tensors = (version: number, size = 6) => [
  { shape: [size], data: Float32Array.from({ length: size }, (_, i) => i * 0.5 + version) },
  { shape: [2], data: new Float32Array([version, -version]) },
];

/** A raw ws client that has said hello as `eapId`: for garbage and stalled peers. */
async function rawClient(url: string, eapId: number) {
  const ws = new WebSocket(url, { perMessageDeflate: false });
  ws.on('error', () => undefined);
  const frames: Frame[] = [];
  const listeners = new Set<() => void>();
  ws.on('message', (data: Buffer) => {
    const r = inboundCodec.decode(data);
    if (!r.ok) throw r.error;
    frames.push(r.frame);
    listeners.forEach((l) => l());
  });
  ws.on('close', () => listeners.forEach((l) => l()));
  /** Resolves when `count` frames in total have arrived or the socket has closed. */
  const until = (count: number, ms = 5000) =>
    new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        listeners.delete(check);
        reject(new Error(`raw client: ${frames.length}/${count} frames after ${ms} ms`));
      }, ms);
      const check = () => {
        if (frames.length >= count || ws.readyState >= WebSocket.CLOSING) {
          clearTimeout(timer);
          listeners.delete(check);
          resolve();
        }
      };
      listeners.add(check);
      check();
    });
  /** Resolves once the reply to the text probe (always refused, always last) has arrived, or on close. */
  const untilProbe = (from: number, ms = 5000) =>
    new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        listeners.delete(check);
        reject(new Error(`raw client: no reply to the probe after ${ms} ms`));
      }, ms);
      const check = () => {
        const probed = frames.slice(from).some((f) => f.type === 'error' && f.body.message.startsWith('text message'));
        if (probed || ws.readyState >= WebSocket.CLOSING) {
          clearTimeout(timer);
          listeners.delete(check);
          resolve();
        }
      };
      listeners.add(check);
      check();
    });
  cleanups.push(() => ws.terminate());
  await new Promise((resolve, reject) => {
    ws.once('open', resolve);
    ws.once('close', () => reject(new Error('raw client could not connect')));
  });
  ws.send(codec.encode(makeFrame('hello', 0, { eapId, token: TOKEN, agentVersion: 'raw', weightVersion: null, placementVersion: null })));
  await until(1);
  expect(frames[0].type).toBe('welcome');
  return { ws, frames, until, untilProbe };
}

// ---------------------------------------------------------------------------------------------
// Random and malformed frames
// ---------------------------------------------------------------------------------------------

const templates = sampleFrames();
const good = templates.map((f) => codec.encode(f));
const rawPackr = new Packr({ useRecords: false });

function randomValue(rng: Rng, depth: number): unknown {
  switch (rng.int(depth > 3 ? 5 : 8)) {
    case 0:
      return rng.int(2) === 0 ? null : rng.next() < 0.5;
    case 1:
      return [0, -1, 1.5, NaN, Infinity, 2 ** 53, -(2 ** 31)][rng.int(7)];
    case 2:
      return ['', 'hello', 'weights', '__proto__', 'KAIS_ERR_X', 'x'.repeat(3000)][rng.int(6)];
    case 3:
      return Buffer.from(Array.from({ length: rng.int(40) }, () => rng.int(256)));
    case 4:
      return rng.int(1000);
    case 5:
      return Array.from({ length: rng.int(5) }, () => randomValue(rng, depth + 1));
    default: {
      const keys = ['v', 'type', 'seq', 'ts', 'body', 'of', 'eap', 'eapId', 'token', 'version', 'tensors'];
      const o: Record<string, unknown> = {};
      for (let i = rng.int(6); i > 0; i--) o[keys[rng.int(keys.length)]] = randomValue(rng, depth + 1);
      return o;
    }
  }
}

function randomFrame(rng: Rng, k: number): Uint8Array {
  const base = good[rng.int(good.length)];
  switch (k % 9) {
    case 0:
      return Buffer.from(Array.from({ length: 1 + rng.int(300) }, () => rng.int(256)));
    case 1:
      return base.subarray(0, rng.int(base.length));
    case 2: {
      const b = Buffer.from(base);
      for (let i = 1 + rng.int(4); i > 0; i--) b[rng.int(b.length)] ^= 1 << rng.int(8);
      return b;
    }
    case 3: // oversized now and then (the socket is closed: 1009), else a valid frame of any type
      return rng.int(25) === 0 ? Buffer.alloc(MAX_FRAME + 1 + rng.int(1000), 0x91) : base;
    case 4:
      return rawPackr.pack(randomValue(rng, 0));
    case 5: {
      const f: Record<string, unknown> = { ...templates[rng.int(templates.length)] };
      const keys = ['v', 'type', 'seq', 'ts', 'body'];
      f[keys[rng.int(keys.length)]] = randomValue(rng, 1);
      return rawPackr.pack(f);
    }
    case 6:
      return Buffer.concat([Buffer.alloc(1 + rng.int(5000), 0x91), Buffer.from([0x01])]);
    case 7: {
      const b = Buffer.from(base);
      const at = rng.int(b.length);
      b[at] = [0xdb, 0xc6, 0xdd, 0xdf, 0xc9][rng.int(5)];
      if (at + 4 < b.length) b.writeUInt32BE(rng.nextU32(), at + 1);
      return b;
    }
    default: // a frame the agent may not send, or one claiming another eAP
      return codec.encode(templates[[0, 1, 2, 3, 4, 5][rng.int(6)]]);
  }
}

// ---------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------

describe('hub with real agent links', () => {
  it('welcomes three agents and a weights broadcast reaches all of them', async () => {
    const { hub, registry, store } = await orchestrator();
    const agents = await connectedAgents(hub, [0, 1, 2]);
    expect(hub.sessions().map((s) => s.eapId)).toEqual([0, 1, 2]);
    expect(agents.every((a) => a.runtime.welcome?.heartbeatMs === 1000)).toBe(true);

    const applied = [0, 1, 2].map((id) =>
      waitFor(hub, 'applied', (s: { eapId: number }, kind: string, v: number) => s.eapId === id && kind === 'weights' && v === 1),
    );
    // the orchestrator's side of the fan-out ends for each agent when its socket took the frame
    const flushed = [0, 1, 2].map((id) =>
      waitFor(hub, 'flushed', (s: { eapId: number }, kind: string, v: number) => s.eapId === id && kind === 'weights' && v === 1),
    );
    const body = registry.publishWeights(tensors(1));
    await Promise.all(flushed);
    await Promise.all(applied);
    for (const a of agents) {
      expect(a.runtime.weightVersion).toBe(1);
      expect(a.runtime.weights!.checksum).toBe(body.checksum);
      expect(Array.from(a.runtime.weights!.tensors[1])).toEqual([1, -1]);
    }
    expect(store.agents().map((r) => [r.eapId, r.connected, r.weightVersion])).toEqual([
      [0, true, 1],
      [1, true, 1],
      [2, true, 1],
    ]);

    const placed = [0, 1, 2].map((id) =>
      waitFor(hub, 'applied', (s: { eapId: number }, kind: string) => s.eapId === id && kind === 'placement'),
    );
    registry.publishPlacement(3, [
      [1, 0],
      [2, 1],
    ]);
    await Promise.all(placed);
    expect(agents.map((a) => Array.from(a.runtime.placement!.replicas))).toEqual([
      [1, 0, 2, 1],
      [1, 0, 2, 1],
      [1, 0, 2, 1],
    ]);
  });

  it("pushes weights as one message per agent, byte for byte encode(frame) with that session's seq", async () => {
    const { hub, registry } = await orchestrator();
    registry.publishPlacement(0, [[1, 1]]);
    const received: Buffer[][] = [[], []];
    const sockets = await Promise.all(
      [0, 1].map(async (eapId) => {
        const ws = new WebSocket(hub.url, { perMessageDeflate: false });
        cleanups.push(() => ws.terminate());
        ws.on('message', (data: Buffer) => received[eapId].push(data));
        await new Promise((resolve) => ws.once('open', resolve));
        // eAP 1 says it already holds placement 1, so its seq runs one behind eAP 0's
        ws.send(
          codec.encode(
            makeFrame('hello', 0, {
              eapId,
              token: TOKEN,
              agentVersion: 'raw',
              weightVersion: null,
              placementVersion: eapId === 1 ? 1 : null,
            }),
          ),
        );
        return ws;
      }),
    );
    await waitFor(hub, 'session', () => hub.sessions().length === 2);
    const body = registry.publishWeights(tensors(1, 1000));
    const weightsMessage = (msgs: Buffer[]) =>
      msgs.find((b) => {
        const r = inboundCodec.decode(b);
        return r.ok && r.frame.type === 'weights';
      });
    const deadline = Date.now() + 5000;
    while (received.some((msgs) => !weightsMessage(msgs))) {
      if (Date.now() > deadline) throw new Error('weights push not received');
      await new Promise((r) => setTimeout(r, 10));
    }
    const seqs = received.map((msgs) => {
      const bytes = weightsMessage(msgs)!;
      const r = inboundCodec.decode(bytes);
      if (!r.ok || r.frame.type !== 'weights') throw new Error('not a weights frame');
      expect(r.frame.body).toEqual(body);
      expect(Buffer.compare(bytes, inboundCodec.encode(r.frame))).toBe(0);
      return r.frame.seq;
    });
    expect(seqs).toEqual([2, 1]); // after welcome (and placement for eAP 0)
    sockets.forEach((ws) => ws.close());
  });

  it('refuses a wrong token with KAIS_ERR_AUTH and the link stops', async () => {
    const { hub } = await orchestrator();
    const intruder = agent(hub.url, 4, 'not-the-token');
    const refused = waitFor(intruder.link, 'refused');
    const closed = new Promise<[number, string]>((resolve) => intruder.link.onClose((c, r) => resolve([c, r])));
    intruder.link.start();
    const [error] = await refused;
    expect(error).toMatchObject({ code: 'KAIS_ERR_AUTH', of: 0 });
    const [code] = await closed;
    expect(code).toBe(4001);
    expect(intruder.link.closed).toBe(true);
    expect(hub.sessions()).toEqual([]);
    expect(hub.stats.refused).toBe(1);
  });

  it('answers 2,000 random and malformed frames with an error or a closed socket and keeps serving the others unchanged', async () => {
    const { hub, registry, store } = await orchestrator();
    const agents = await connectedAgents(hub, [0, 1, 2]);
    const v1 = [0, 1, 2].map((id) => waitFor(hub, 'applied', (s: { eapId: number }) => s.eapId === id));
    registry.publishWeights(tensors(1));
    registry.publishPlacement(0, [[1, 1]]);
    await Promise.all(v1);
    const sessionsBefore = hub.sessions();

    const rng = new Rng(4242);
    const probe = 'probe'; // a text message: always refused, and its reply marks the end of one frame's replies
    let client = await rawClient(hub.url, 9);
    let errors = 0;
    let accepted = 0;
    let closes = 0;
    for (let k = 0; k < 2000; k++) {
      const bytes = randomFrame(rng, k);
      const before = client.frames.length;
      client.ws.send(bytes);
      client.ws.send(probe);
      await client.untilProbe(before);
      if (client.ws.readyState >= WebSocket.CLOSING) {
        closes++;
        expect(bytes.length).toBeGreaterThan(MAX_FRAME); // only oversized frames close the socket
        client = await rawClient(hub.url, 9);
        continue;
      }
      const replies = client.frames.slice(before);
      const last = replies[replies.length - 1];
      expect(last).toMatchObject({
        type: 'error',
        body: { code: 'KAIS_ERR_MALFORMED', of: null, message: expect.stringMatching(/^text message/) },
      });
      if (replies.length === 2) {
        expect(replies[0].type).toBe('error');
        errors++;
      } else {
        // no reply: the frame was valid and allowed (ack, scale, error from the agent)
        expect(replies).toHaveLength(1);
        const r = codec.decode(bytes);
        expect(r.ok && ['ack', 'scale', 'error'].includes(r.frame.type)).toBe(true);
        accepted++;
      }
    }
    expect(errors + accepted + closes).toBe(2000);
    expect(errors).toBeGreaterThan(1500);
    expect(closes).toBeGreaterThan(0);

    // unchanged: versions, the three sessions, what the agents hold
    expect(hub.weightVersion).toBe(1);
    expect(hub.placementVersion).toBe(1);
    expect(store.latestModelVersion()).toBe(1);
    expect(hub.sessions().filter((s) => s.eapId !== 9)).toEqual(sessionsBefore);
    expect(agents.map((a) => [a.runtime.weightVersion, a.runtime.placementVersion, a.runtime.stats.refused])).toEqual([
      [1, 1, 0],
      [1, 1, 0],
      [1, 1, 0],
    ]);
    // and still serving
    const v2 = [0, 1, 2].map((id) => waitFor(hub, 'applied', (s: { eapId: number }, _k: string, v: number) => s.eapId === id && v === 2));
    registry.publishWeights(tensors(2));
    await Promise.all(v2);
    expect(agents.every((a) => a.runtime.weightVersion === 2)).toBe(true);
  });

  it('drops a peer that stops answering heartbeats', async () => {
    const { hub } = await orchestrator(undefined, { heartbeatMs: 100 });
    const stalled = await rawClient(hub.url, 7);
    const closed = waitFor(hub, 'sessionClosed', (s: { eapId: number }) => s.eapId === 7, 3000);
    // stop reading: no pongs go back (ws answers pings only when it reads them)
    (stalled.ws as unknown as { _socket: { pause(): void } })._socket.pause();
    await closed;
    expect(hub.stats.deadPeers).toBeGreaterThan(0);
    expect(hub.sessions()).toEqual([]);
  });

  it('keeps a peer through a stall of the hub process: a late heartbeat tick terminates nobody', async () => {
    const { hub } = await orchestrator(undefined, { heartbeatMs: 100 });
    const client = await rawClient(hub.url, 7);
    // the second ping stalls the (shared) process right after the client queued its pong: the hub's
    // next tick fires late, before that pong is read; it used to find the peer silent and end it
    let pings = 0;
    const sixPings = new Promise<void>((resolve) =>
      client.ws.on('ping', () => {
        if (++pings === 2) stall(450);
        if (pings >= 6) resolve();
      }),
    );
    await sixPings; // four more heartbeats after the stall, each answered
    expect(hub.stats.deadPeers).toBe(0);
    expect(hub.sessions().map((s) => s.eapId)).toEqual([7]);
  });

  it('coalesces weight pushes to a slow agent without holding back the others', async () => {
    const { hub, registry } = await orchestrator(undefined, { heartbeatMs: 60_000, maxBufferedBytes: 16 * 1024 });
    const fast = await connectedAgents(hub, [0, 1]);
    const slow = await rawClient(hub.url, 5);
    const socket = (slow.ws as unknown as { _socket: { pause(): void; resume(): void } })._socket;
    socket.pause(); // reads nothing: the kernel buffers fill, then the hub's
    const big = 256 * 1024; // 1 MiB of float32 per push
    const publish = async (v: number) => {
      const got = fast.map((a) => waitFor(a.runtime, 'weights', (b: { version: number }) => b.version === v));
      registry.publishWeights(tensors(v, big));
      await Promise.all(got); // the fast agents get every version, whatever the slow one does
    };
    let v = 0;
    let firstCoalesced = 0;
    while (firstCoalesced === 0) {
      await publish(++v);
      if (hub.pendingPushes(5).weights !== null) firstCoalesced = v;
      if (v > 64) throw new Error('64 MiB pushed and the slow socket never backed up');
    }
    await publish(++v);
    await publish(++v);
    expect(hub.pendingPushes(5).weights).toBe(v); // one pending push, the newest
    expect(hub.pendingPushes(0).weights).toBeNull();

    // the slow one reads again: it gets the newest weights, not every version in between
    socket.resume();
    const received = () => slow.frames.filter((f) => f.type === 'weights').map((f) => (f.body as { version: number }).version);
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`slow agent got ${received().join(',')}, never ${v}`)), 10_000);
      const check = () => {
        if (received().includes(v)) {
          clearTimeout(timer);
          slow.ws.off('message', check);
          resolve();
        }
      };
      slow.ws.on('message', check);
      check();
    });
    const versions = received();
    expect(versions[versions.length - 1]).toBe(v);
    expect(versions).not.toContain(v - 1); // replaced while pending
    expect(hub.pendingPushes(5).weights).toBeNull();
  });

  it('an agent reconnects after the hub restarts on the same port and SQLite file, with the same model version', async () => {
    const file = join(tmp.dir, 'restart.db');
    const first = await orchestrator(file);
    const port = first.hub.port;
    const [a] = await connectedAgents(first.hub, [0]);
    const applied = waitFor(first.hub, 'applied', (_s: unknown, kind: string) => kind === 'placement');
    first.registry.publishWeights(tensors(1));
    first.registry.publishWeights(tensors(2));
    first.registry.publishPlacement(7, [[2, 0, 1]]);
    await applied;
    expect([a.runtime.weightVersion, a.runtime.placementVersion]).toEqual([2, 1]);

    const down = waitFor(a.link, 'down');
    await first.stop();
    await down;

    const reconnected = waitFor(a.link, 'ready', (_w: WelcomeBody) => true, 10_000);
    const second = await orchestrator(file, { port });
    const [welcome] = await reconnected;
    expect(welcome.weightVersion).toBe(2);
    expect(welcome.placementVersion).toBe(1);
    expect(second.hub.sessions()).toMatchObject([{ eapId: 0, weightVersion: 2, placementVersion: 1 }]);
    expect(a.link.connections).toBe(2);

    // a new agent with nothing cached gets the resumed weights and placement right after welcome
    const fresh = agent(second.hub.url, 1);
    const gotWeights = waitFor(fresh.runtime, 'weights');
    const gotPlacement = waitFor(fresh.runtime, 'placement');
    fresh.link.start();
    await Promise.all([gotWeights, gotPlacement]);
    expect([fresh.runtime.weightVersion, fresh.runtime.placementVersion]).toEqual([2, 1]);

    // and the next version continues from the stored one
    const v3 = waitFor(a.runtime, 'weights', (b: { version: number }) => b.version === 3);
    expect(second.registry.publishWeights(tensors(3)).version).toBe(3);
    await v3;
  });
});
