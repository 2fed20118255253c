/**
 * Identity at the hub (issue 14), on a real hub on loopback with raw ws clients: a token binds to
 * an eAP, eAPs outside the cluster are refused, a live session is replaced only by its own agent
 * instance (a reconnect over a half-dead socket), and the welcome carries the store's epoch.
 */
import WebSocket from 'ws';
import { Hub, type DenialInfo } from '../../../orchestrator/hub';
import { Codec } from '../../../shared/protocol/codec';
import { useHubs } from '../../support/hubs';
import { makeFrame, type Frame, type HelloBody } from '../../../shared/protocol/envelope';

const codec = new Codec();
const { hub, sockets } = useHubs({ heartbeatMs: 1000 });

/** Says hello; resolves with the frames it got and the close code (null: still open after the welcome). */
async function hello(h: Hub, body: Partial<HelloBody>): Promise<{ ws: WebSocket; frames: Frame[]; code: Promise<number> }> {
  const ws = new WebSocket(h.url, { perMessageDeflate: false });
  sockets.push(ws);
  ws.on('error', () => undefined);
  const frames: Frame[] = [];
  const code = new Promise<number>((resolve) => ws.once('close', (c) => resolve(c)));
  const first = new Promise<void>((resolve) => ws.once('message', () => resolve()));
  ws.on('message', (d: Buffer) => {
    const r = codec.decode(d);
    if (r.ok) frames.push(r.frame);
  });
  await new Promise<void>((resolve) => ws.once('open', () => resolve()));
  ws.send(
    codec.encode(
      makeFrame('hello', 0, { eapId: 0, token: '', agentVersion: 't', weightVersion: null, placementVersion: null, ...body } as HelloBody),
    ),
  );
  await first;
  return { ws, frames, code };
}

describe('hub identity', () => {
  it('binds tokens to eAPs: own token only, no shared fallback for unlisted eAPs, unknown eAPs refused', async () => {
    const h = await hub({ agentTokens: { 0: 'a', 1: 'b' }, numEaps: 3 });
    const denials: DenialInfo[] = [];
    h.on('denied', (d) => denials.push(d));
    const ok = await hello(h, { eapId: 1, token: 'b', instance: 'x' });
    expect(ok.frames[0].type).toBe('welcome');
    const cases: [Partial<HelloBody>, string][] = [
      [{ eapId: 0, token: 'b' }, 'wrong token for eAP 0'], // eAP 1's token for eAP 0
      [{ eapId: 2, token: '' }, 'wrong token for eAP 2'], // listed tokens and no shared one: eAP 2 has none
      [{ eapId: 7, token: 'a' }, 'eAP 7 is not in this cluster (eAPs 0..2)'],
    ];
    for (const [body, message] of cases) {
      const c = await hello(h, body);
      expect(c.frames.map((f) => (f.type === 'error' ? [f.body.code, f.body.message] : f.type))).toEqual([['KAIS_ERR_AUTH', message]]);
      expect(await c.code).toBe(4001);
    }
    expect(h.stats.authFailures).toBe(3);
    expect(denials.map((d) => [d.kind, d.eapId])).toEqual([
      ['auth', 0],
      ['auth', 2],
      ['unknown-eap', 7],
    ]);
  });

  it('keeps a live session against another instance (refused, counted) and lets the same instance take over', async () => {
    const h = await hub({ token: 't', epoch: 'ep-1' });
    const live = await hello(h, { token: 't', instance: 'agent-A' });
    expect(live.frames[0]).toMatchObject({ type: 'welcome', body: { epoch: 'ep-1' } });
    for (const instance of ['agent-B', undefined]) {
      const other = await hello(h, { token: 't', ...(instance ? { instance } : {}) });
      expect(other.frames.map((f) => f.type === 'error' && f.body.code)).toEqual(['KAIS_ERR_DUPLICATE']);
      expect(await other.code).toBe(4009);
    }
    expect(h.stats.duplicateHellos).toBe(2);
    expect(live.ws.readyState).toBe(WebSocket.OPEN);
    // the same agent process reconnecting (its old socket half-dead): replaces it (4002)
    const again = await hello(h, { token: 't', instance: 'agent-A' });
    expect(again.frames[0].type).toBe('welcome');
    expect(await live.code).toBe(4002);
    expect(h.sessions()).toHaveLength(1);
  });

  it('pushes its weights to an agent that holds another epoch or a version above its own', async () => {
    const weights = { version: 2, checksum: 0, shapes: [[2]], tensors: [Float32Array.from([1, 2])], epoch: 'ep-2' };
    const { weightsChecksum } = await import('../../../shared/protocol/weights');
    weights.checksum = weightsChecksum(weights.tensors);
    const h = await hub({ epoch: 'ep-2', weights });
    let n = 0;
    const pushed = async (body: Partial<HelloBody>) => {
      const c = await hello(h, { ...body, instance: `i${n++}` });
      // a second hello is answered with an error, after whatever the first one made the hub push
      c.ws.send(
        codec.encode(makeFrame('hello', 1, { eapId: 0, token: '', agentVersion: 't', weightVersion: null, placementVersion: null })),
      );
      await new Promise<void>((resolve) => {
        const check = () => (c.frames.some((f) => f.type === 'error') ? resolve() : c.ws.once('message', () => setImmediate(check)));
        check();
      });
      c.ws.terminate();
      await c.code;
      return c.frames.filter((f) => f.type !== 'error').map((f) => f.type);
    };
    expect(await pushed({ weightVersion: 2, epoch: 'ep-2' })).toEqual(['welcome']);
    expect(await pushed({ weightVersion: 9, epoch: 'ep-1' })).toEqual(['welcome', 'weights']);
    expect(await pushed({ weightVersion: 9, epoch: 'ep-2' })).toEqual(['welcome', 'weights']);
    expect(await pushed({ weightVersion: 1, epoch: null })).toEqual(['welcome', 'weights']);
  });
});
