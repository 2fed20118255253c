/**
 * A hand-driven agent session for integration tests that must send what a real agent never would
 * (NaN rewards, experience on cue): connect to the hub, say `hello`, resolve once `welcome` came.
 * Every frame the hub sends is kept in `frames`; `send` numbers frames as an agent does.
 */
import WebSocket from 'ws';
import type { Codec } from '../../shared/protocol/codec';
import { makeFrame, type Frame, type HelloBody } from '../../shared/protocol/envelope';

type SentType = 'hello' | 'experience' | 'telemetry' | 'ack';

export interface RawAgent {
  frames: Frame[];
  send(type: SentType, body: unknown): void;
}

/** `cleanups` gets the socket's terminate; rejects if no welcome within `ms`. */
export async function rawAgent(url: string, hello: HelloBody, codec: Codec, cleanups: (() => unknown)[], ms = 20_000): Promise<RawAgent> {
  const ws = new WebSocket(url, { perMessageDeflate: false });
  ws.on('error', () => undefined);
  cleanups.push(() => ws.terminate());
  const frames: Frame[] = [];
  ws.on('message', (data: Buffer) => {
    const r = codec.decode(data);
    if (r.ok) frames.push(r.frame);
  });
  await new Promise<void>((resolve) => ws.once('open', () => resolve()));
  let seq = 0;
  const send = (type: SentType, body: unknown) => ws.send(codec.encode(makeFrame(type, seq++, body as never) as Frame));
  send('hello', hello);
  const end = Date.now() + ms;
  while (!frames.some((f) => f.type === 'welcome')) {
    if (Date.now() > end) throw new Error(`eAP ${hello.eapId} not welcomed within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
  return { frames, send };
}
