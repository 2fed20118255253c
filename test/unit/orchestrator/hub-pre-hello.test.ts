/**
 * What an unauthenticated peer can make the hub hold (real hub on loopback, raw ws clients): a
 * socket that sends more than maxPreHelloBytes before its hello is cut (ws buffered a message's
 * fragments up to the 16 MiB frame limit, per socket, until the hello timeout: 60 such sockets took
 * an orchestrator from 480 MB to 1.1 GB), and sockets waiting for their hello are bounded per
 * address and in all (one more is closed 1013, try again later); a hello frees its place.
 */
import WebSocket from 'ws';
import { Hub, HUB_CLOSE_CODES } from '../../../orchestrator/hub';
import { Codec } from '../../../shared/protocol/codec';
import { useHubs } from '../../support/hubs';
import { makeFrame, type HelloBody } from '../../../shared/protocol/envelope';

const codec = new Codec();
const { hub, sockets } = useHubs({ heartbeatMs: 60_000, helloTimeoutMs: 60_000 });

/** An open socket and the promise of its close code. */
async function connect(h: Hub): Promise<{ ws: WebSocket; closed: Promise<number> }> {
  const ws = new WebSocket(h.url, { perMessageDeflate: false });
  sockets.push(ws);
  ws.on('error', () => undefined);
  const closed = new Promise<number>((resolve) => ws.once('close', (c) => resolve(c)));
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('close', (c) => reject(new Error(`closed ${c} before open`)));
  });
  return { ws, closed };
}

function hello(ws: WebSocket, eapId: number): Promise<void> {
  const body: HelloBody = { eapId, token: '', agentVersion: 't', weightVersion: null, placementVersion: null };
  const welcomed = new Promise<void>((resolve) => ws.once('message', () => resolve()));
  ws.send(codec.encode(makeFrame('hello', 0, body)));
  return welcomed;
}

describe('hub: what a socket can make it hold before its hello', () => {
  it('cuts a socket that sends more than maxPreHelloBytes before its hello (fragments of a message never finished)', async () => {
    const h = await hub({ maxPreHelloBytes: 64 * 1024 });
    const { ws, closed } = await connect(h);
    // 1 MiB as non-final fragments: ws would buffer them, waiting for the message's end
    for (let i = 0; i < 16; i++) ws.send(Buffer.alloc(64 * 1024, 1), { fin: false, binary: true });
    expect(await closed).toBe(1006); // terminated, no close frame
    expect(h.stats.preHelloCut).toBe(1);
  });

  it('a hello within the budget is welcomed, and after it the budget no longer applies', async () => {
    const h = await hub({ maxPreHelloBytes: 4096 });
    const { ws, closed } = await connect(h);
    await hello(ws, 0);
    // a telemetry-sized message after the hello: well over the pre-hello budget, and the socket stays
    ws.send(Buffer.alloc(32 * 1024, 0));
    const refused = new Promise<void>((resolve) => ws.once('message', () => resolve()));
    await refused; // the hub answers the garbage with an error frame, and keeps the session
    expect(h.stats.preHelloCut).toBe(0);
    expect(h.sessions().map((s) => s.eapId)).toEqual([0]);
    ws.close();
    expect(await closed).toBe(1005);
  });

  it('bounds the sockets waiting for their hello per address: one more is closed 1013; a hello frees a place', async () => {
    const h = await hub({ maxPendingHellosPerAddress: 3 });
    const waiting = [await connect(h), await connect(h), await connect(h)];
    const fourth = new WebSocket(h.url, { perMessageDeflate: false });
    sockets.push(fourth);
    fourth.on('error', () => undefined);
    expect(await new Promise<number>((resolve) => fourth.once('close', (c) => resolve(c)))).toBe(HUB_CLOSE_CODES.tryLater);
    expect(h.stats.pendingHelloRefused).toBe(1);
    // one of them says hello: its place is free again
    await hello(waiting[0].ws, 0);
    const again = await connect(h);
    expect(h.stats.pendingHelloRefused).toBe(1);
    // and a closed one frees its place too
    waiting[1].ws.close();
    await waiting[1].closed;
    await connect(h);
    const over = new WebSocket(h.url, { perMessageDeflate: false });
    sockets.push(over);
    over.on('error', () => undefined);
    expect(await new Promise<number>((resolve) => over.once('close', (c) => resolve(c)))).toBe(HUB_CLOSE_CODES.tryLater);
    expect(again.ws.readyState).toBe(WebSocket.OPEN);
  });

  it('bounds them in all', async () => {
    const h = await hub({ maxPendingHellos: 2, maxPendingHellosPerAddress: 10 });
    await connect(h);
    await connect(h);
    const third = new WebSocket(h.url, { perMessageDeflate: false });
    sockets.push(third);
    third.on('error', () => undefined);
    expect(await new Promise<number>((resolve) => third.once('close', (c) => resolve(c)))).toBe(HUB_CLOSE_CODES.tryLater);
  });
});
