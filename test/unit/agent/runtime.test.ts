/** AgentRuntime over an in-memory link: the orchestrator end is played by the test. */
import { AgentRuntime } from '../../../agent/runtime';
import { Codec } from '../../../shared/protocol/codec';
import { makeFrame, placementBody, type Frame } from '../../../shared/protocol/envelope';
import { createMemoryLinkPair, type FrameEndpoint } from '../../../shared/protocol/memory-link';
import { packWeights } from '../../../shared/protocol/weights';

const codec = new Codec();
const weights = (version: number) => packWeights([{ shape: [2], data: new Float32Array([version, -version]) }], version);

function setup(hooks: Partial<ConstructorParameters<typeof AgentRuntime>[2]> = {}) {
  const [orch, agent] = createMemoryLinkPair();
  const runtime = new AgentRuntime(
    (b) => agent.send(b),
    (cb) => agent.onFrame(cb),
    { eapId: 1, ...hooks },
  );
  const received: Frame[] = [];
  const waiters: (() => void)[] = [];
  orch.onFrame((bytes) => {
    const r = codec.decode(bytes);
    if (!r.ok) throw r.error;
    received.push(r.frame);
    waiters.splice(0).forEach((w) => w());
  });
  /** Resolves once the orchestrator end has received `n` frames in total. */
  const receivedAtLeast = (n: number) =>
    new Promise<Frame[]>((resolve) => {
      const check = () => (received.length >= n ? resolve(received) : waiters.push(check));
      check();
    });
  const sendToAgent = (frame: Frame) => orch.send(codec.encode(frame));
  return { orch: orch as FrameEndpoint, runtime, received, receivedAtLeast, sendToAgent };
}

describe('AgentRuntime', () => {
  it('applies newer weights and acks them with the frame seq, and ignores stale ones', async () => {
    const applied: number[] = [];
    const t = setup({ onWeights: (b) => applied.push(b.version) });
    t.sendToAgent(makeFrame('weights', 3, weights(2)));
    t.sendToAgent(makeFrame('weights', 4, weights(1)));
    t.sendToAgent(makeFrame('weights', 5, weights(2)));
    t.sendToAgent(makeFrame('weights', 6, weights(7)));
    const frames = await t.receivedAtLeast(2);
    expect(frames.map((f) => [f.type, f.body])).toEqual([
      ['ack', { of: 3 }],
      ['ack', { of: 6 }],
    ]);
    expect(applied).toEqual([2, 7]);
    expect(t.runtime.weightVersion).toBe(7);
    expect(t.runtime.stats).toMatchObject({ weightsApplied: 2, stale: 2, refused: 0 });
    t.orch.close();
  });

  it('applies a placement and reports the versions it holds in its hello', async () => {
    const t = setup({ weights: weights(4) });
    t.sendToAgent(makeFrame('placement', 0, placementBody(9, 2, [[1, 2]])));
    await t.receivedAtLeast(1);
    expect(Array.from(t.runtime.placement!.replicas)).toEqual([1, 2]);
    expect(t.runtime.helloBody('tok', '0.1.0')).toEqual({
      eapId: 1,
      token: 'tok',
      agentVersion: '0.1.0',
      weightVersion: 4,
      placementVersion: 9,
      epoch: null,
      features: ['actor-switch'], // it holds a light actor and follows a placement's actor
    });
    t.orch.close();
  });

  it('answers a malformed frame with an error and keeps its state', async () => {
    const t = setup({ weights: weights(1) });
    t.orch.send(new Uint8Array([0xc1, 0x00]));
    const good = codec.encode(makeFrame('weights', 1, weights(2)));
    good[good.length - 1] ^= 0xff; // corrupt the last float: checksum mismatch
    t.orch.send(good);
    const frames = await t.receivedAtLeast(2);
    expect(frames.map((f) => f.type === 'error' && f.body.code)).toEqual(['KAIS_ERR_MALFORMED', 'KAIS_ERR_CHECKSUM']);
    expect(t.runtime.weightVersion).toBe(1);
    expect(t.runtime.stats.refused).toBe(2);
    t.orch.close();
  });

  it('answers a flood of garbage frames within a reply budget (20 at once, 5 a second), and reports the rest folded into the next answered one', async () => {
    const reports: [string, number][] = [];
    const t = setup();
    t.runtime.on('refused', (e, folded) => reports.push([e.code, folded]));
    const t0 = performance.now();
    for (let i = 0; i < 200; i++) t.orch.send(new Uint8Array([0xc1, i]));
    await t.receivedAtLeast(20);
    while (t.runtime.stats.refused < 200) await new Promise((r) => setTimeout(r, 5));
    const elapsedS = (performance.now() - t0) / 1000;
    const answered = t.received.length;
    expect(answered).toBeGreaterThanOrEqual(20);
    expect(answered).toBeLessThanOrEqual(20 + Math.ceil(elapsedS * 5));
    expect(t.runtime.stats.refusedUnanswered).toBe(200 - answered);
    expect(reports).toHaveLength(answered); // one report (one log line) per answer, not per frame
    // a token back (0.2 s): the next refusal is answered, and says how many went unanswered before it
    await new Promise((r) => setTimeout(r, 300));
    t.orch.send(new Uint8Array([0xc1, 0]));
    await t.receivedAtLeast(answered + 1);
    expect(reports.at(-1)).toEqual(['KAIS_ERR_MALFORMED', 200 - answered]);
    t.orch.close();
  });

  it('answers a frame its hook refuses whatever the reply budget (weights that do not fit are never hidden by a flood)', async () => {
    const reports: string[] = [];
    const t = setup({
      onWeights: () => {
        throw new Error('expected 4 tensors, got 1');
      },
    });
    t.runtime.on('refused', (e) => reports.push(e.code));
    for (let i = 0; i < 40; i++) t.orch.send(new Uint8Array([0xc1, i]));
    while (t.runtime.stats.refused < 40) await new Promise((r) => setTimeout(r, 5));
    expect(t.runtime.stats.refusedUnanswered).toBeGreaterThan(0); // the budget is spent
    t.sendToAgent(makeFrame('weights', 1, weights(2)));
    // answered (replies to the flood may still be on their way: wait for this one, whatever comes first)
    const rejected = (f: Frame) => f.type === 'error' && f.body.code === 'KAIS_ERR_REJECTED';
    while (!t.received.some(rejected)) await new Promise((r) => setTimeout(r, 5));
    expect(t.received.filter(rejected)).toHaveLength(1);
    expect(reports.filter((c) => c === 'KAIS_ERR_REJECTED')).toHaveLength(1);
    t.orch.close();
  });

  it('answers every frame its hook refuses, but reports (logs) them within a budget of their own, the rest counted into the next report', async () => {
    const reports: [string, number, number][] = [];
    const t = setup({
      onWeights: () => {
        throw new Error('expected 4 tensors, got 1');
      },
    });
    t.runtime.on('refused', (e, folded, quiet) => reports.push([e.code, folded, quiet]));
    const t0 = performance.now();
    for (let v = 1; v <= 200; v++) t.sendToAgent(makeFrame('weights', v, weights(v + 1)));
    await t.receivedAtLeast(200); // every one answered
    const elapsedS = (performance.now() - t0) / 1000;
    expect(t.received.filter((f) => f.type === 'error' && f.body.code === 'KAIS_ERR_REJECTED')).toHaveLength(200);
    expect(reports.length).toBeGreaterThanOrEqual(20);
    expect(reports.length).toBeLessThanOrEqual(20 + Math.ceil(elapsedS * 5)); // 130,000 log lines in 8 s before
    await new Promise((r) => setTimeout(r, 300)); // a token back
    t.sendToAgent(makeFrame('weights', 201, weights(202)));
    await t.receivedAtLeast(201);
    expect(reports.at(-1)).toEqual(['KAIS_ERR_REJECTED', 0, 200 - (reports.length - 1)]);
    t.orch.close();
  });

  it('refuses weights its hook rejects with KAIS_ERR_REJECTED and keeps the old version', async () => {
    const t = setup({
      weights: weights(1),
      onWeights: () => {
        throw new Error('expected 4 tensors, got 1');
      },
    });
    t.sendToAgent(makeFrame('weights', 8, weights(2)));
    const [f] = await t.receivedAtLeast(1);
    expect(f).toMatchObject({ type: 'error', body: { code: 'KAIS_ERR_REJECTED', of: 8 } });
    expect(f.type === 'error' && f.body.message).toMatch(/expected 4 tensors/);
    expect(t.runtime.weightVersion).toBe(1);
    t.orch.close();
  });

  it('refuses a frame type orchestrators never send, and never answers an error frame', async () => {
    const t = setup();
    t.sendToAgent(makeFrame('error', 0, { code: 'KAIS_ERR_BAD_FIELD', message: 'x', of: 3 }));
    t.sendToAgent(makeFrame('hello', 1, { eapId: 0, token: '', agentVersion: '', weightVersion: null, placementVersion: null }));
    const frames = await t.receivedAtLeast(1);
    expect(frames).toHaveLength(1);
    expect(frames[0]).toMatchObject({ type: 'error', body: { code: 'KAIS_ERR_STATE', of: 1 } });
    expect(t.runtime.stats.errorsReceived).toBe(1);
    t.orch.close();
  });

  it('numbers its frames from 1 after each welcome (hello was seq 0)', async () => {
    const t = setup();
    const welcome = makeFrame('welcome', 0, { sessionId: 's', heartbeatMs: 1000, weightVersion: null, placementVersion: null });
    t.sendToAgent(welcome);
    await new Promise<void>((resolve) => t.runtime.once('welcome', () => resolve()));
    t.runtime.sendFrame('telemetry', { eap: 1, samples: [] });
    t.runtime.sendFrame('telemetry', { eap: 1, samples: [] });
    t.runtime.helloBody('tok', '0.1.0'); // what the link asks for when it dials again
    t.sendToAgent(welcome);
    await new Promise<void>((resolve) => t.runtime.once('welcome', () => resolve()));
    t.runtime.sendFrame('telemetry', { eap: 1, samples: [] });
    const frames = await t.receivedAtLeast(3);
    expect(frames.map((f) => f.seq)).toEqual([1, 2, 1]);
    t.orch.close();
  });

  it('refuses a second welcome on the same connection with KAIS_ERR_STATE and keeps numbering its frames', async () => {
    const t = setup();
    t.runtime.helloBody('tok', '0.1.0');
    const welcome = makeFrame('welcome', 0, { sessionId: 's', heartbeatMs: 1000, weightVersion: null, placementVersion: null });
    t.sendToAgent(welcome);
    await new Promise<void>((resolve) => t.runtime.once('welcome', () => resolve()));
    t.runtime.sendFrame('telemetry', { eap: 1, samples: [] });
    t.sendToAgent({ ...welcome, seq: 5 });
    const frames = await t.receivedAtLeast(2);
    t.runtime.sendFrame('telemetry', { eap: 1, samples: [] });
    await t.receivedAtLeast(3);
    expect(frames.map((f) => [f.type, f.seq])).toEqual([
      ['telemetry', 1],
      ['error', 2],
      ['telemetry', 3],
    ]);
    expect(frames[1].body).toMatchObject({ code: 'KAIS_ERR_STATE', of: 5 });
    expect(t.runtime.stats.refused).toBe(1);
    t.orch.close();
  });

  it('names the option in a bad eapId', () => {
    expect(
      () =>
        new AgentRuntime(
          () => true,
          () => () => undefined,
          { eapId: -1 },
        ),
    ).toThrow(/eapId.*-1/);
  });
});
