/** AgentLink's reconnect schedule, against a port where nothing listens, and why an attempt got no welcome. */
import * as http from 'node:http';
import { createServer } from 'node:net';
import { WebSocket, WebSocketServer } from 'ws';
import { AgentLink } from '../../../agent/link';
import { Codec } from '../../../shared/protocol/codec';
import { makeFrame } from '../../../shared/protocol/envelope';
import { stall } from '../../support/wait';

async function deadPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

async function retryDelays(port: number, seed: number, count: number): Promise<number[]> {
  const link = new AgentLink({
    url: `ws://127.0.0.1:${port}`,
    seed,
    hello: () => ({ eapId: 0, token: '', agentVersion: 't', weightVersion: null, placementVersion: null }),
    backoff: { initialMs: 1, maxMs: 8, factor: 2, jitter: 0.5 },
  });
  const delays: number[] = [];
  await new Promise<void>((resolve) => {
    link.on('retry', (delayMs) => {
      delays.push(delayMs);
      if (delays.length === count) resolve();
    });
    link.start();
  });
  await link.close();
  return delays;
}

/**
 * A hub stand-in that welcomes with `heartbeatMs` 100 and calls `onPing(ws)` on every ping of the
 * link (ws has already queued its pong when 'ping' fires).
 */
async function welcomingServer(onPing: (ws: WebSocket, n: number) => void) {
  const codec = new Codec();
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await new Promise((resolve) => wss.once('listening', resolve));
  let pings = 0;
  wss.on('connection', (ws) => {
    ws.once('message', () =>
      ws.send(codec.encode(makeFrame('welcome', 0, { sessionId: 's', heartbeatMs: 100, weightVersion: null, placementVersion: null }))),
    );
    ws.on('ping', () => onPing(ws, ++pings));
  });
  const link = new AgentLink({
    url: `ws://127.0.0.1:${(wss.address() as { port: number }).port}`,
    seed: 1,
    hello: () => ({ eapId: 0, token: '', agentVersion: 't', weightVersion: null, placementVersion: null }),
    backoff: { initialMs: 10_000, maxMs: 10_000 },
  });
  const downs: number[] = [];
  link.on('down', (code) => downs.push(code));
  const close = async () => {
    await link.close();
    for (const ws of wss.clients) ws.terminate(); // a paused socket would never see the link's FIN
    await new Promise((resolve) => wss.close(resolve));
  };
  return { link, downs, close };
}

describe('AgentLink', () => {
  it('backs off exponentially up to maxMs with seeded jitter: same seed, same schedule', async () => {
    const port = await deadPort();
    const a = await retryDelays(port, 7, 6);
    const b = await retryDelays(port, 7, 6);
    expect(a).toEqual(b);
    const bases = [1, 2, 4, 8, 8, 8];
    a.forEach((d, i) => {
      expect(d).toBeGreaterThanOrEqual(Math.floor(bases[i] * 0.5));
      expect(d).toBeLessThanOrEqual(bases[i]);
    });
  });

  it('names the option in a bad url or backoff', () => {
    const hello = () => ({ eapId: 0, token: '', agentVersion: 't', weightVersion: null, placementVersion: null });
    expect(() => new AgentLink({ url: 'http://x', seed: 1, hello })).toThrow(/options.url.*http:\/\/x/);
    expect(() => new AgentLink({ url: 'ws://x', seed: 1, hello, backoff: { jitter: 2 } })).toThrow(/backoff.jitter.*2/);
  });

  it('drops a text message before welcome and hands one after welcome to its listeners as bytes', async () => {
    const codec = new Codec();
    const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
    await new Promise((resolve) => wss.once('listening', resolve));
    wss.on('connection', (ws) => {
      ws.once('message', () => {
        ws.send('before welcome');
        ws.send(codec.encode(makeFrame('welcome', 0, { sessionId: 's', heartbeatMs: 5000, weightVersion: null, placementVersion: null })));
        ws.send('after welcome');
      });
    });
    const link = new AgentLink({
      url: `ws://127.0.0.1:${(wss.address() as { port: number }).port}`,
      seed: 1,
      hello: () => ({ eapId: 0, token: '', agentVersion: 't', weightVersion: null, placementVersion: null }),
    });
    const got: string[] = [];
    const done = new Promise<void>((resolve) =>
      link.onFrame((bytes) => {
        const r = codec.decode(bytes);
        got.push(r.ok ? r.frame.type : Buffer.from(bytes).toString());
        if (got.length === 2) resolve();
      }),
    );
    link.start();
    await done;
    expect(got).toEqual(['welcome', 'after welcome']);
    await link.close();
    await new Promise((resolve) => wss.close(resolve));
  });

  it('drops an orchestrator that stops answering its heartbeat', async () => {
    let silence: (() => void) | null = null;
    const { link, downs, close } = await welcomingServer((ws, n) => {
      // after the second ping the server stops reading: no pong comes back
      if (n !== 2) return;
      (ws as unknown as { _socket: { pause(): void } })._socket.pause();
      silence?.();
    });
    const down = new Promise<void>((resolve) => link.once('down', () => resolve()));
    const silent = new Promise<void>((resolve) => (silence = resolve));
    link.start();
    try {
      await silent;
      await down;
      expect(downs).toEqual([1006]);
    } finally {
      await close();
    }
  });

  it('keeps the connection through a stall of its own process: a late heartbeat tick judges nobody', async () => {
    // the second ping stalls the process right after the server queued its pong: the link's next
    // tick fires late, before the pong is read; it used to find the peer silent and terminate (1006)
    let pinged: ((n: number) => void) | null = null;
    const { link, downs, close } = await welcomingServer((_ws, n) => {
      if (n === 2) stall(450);
      pinged?.(n);
    });
    const sixPings = new Promise<void>((resolve) => (pinged = (n) => n >= 6 && resolve()));
    link.start();
    try {
      await sixPings; // four more heartbeats after the stall, each answered
      expect(downs).toEqual([]);
      expect(link.ready).toBe(true);
    } finally {
      await close();
    }
  });

  it('send returns false before a welcome', () => {
    const link = new AgentLink({
      url: 'ws://127.0.0.1:1',
      seed: 1,
      hello: () => ({ eapId: 0, token: '', agentVersion: 't', weightVersion: null, placementVersion: null }),
    });
    expect(link.send(new Uint8Array([1]))).toBe(false);
    expect(link.ready).toBe(false);
  });

  it('says why an attempt got no welcome: nothing listening, an HTTP port, an error frame, no answer', async () => {
    const codec = new Codec();
    /** The problem of the first failed attempt against `url`. */
    const problemAt = async (url: string, handshakeTimeoutMs = 10_000): Promise<string | null> => {
      const link = new AgentLink({
        url,
        seed: 1,
        handshakeTimeoutMs,
        hello: () => ({ eapId: 0, token: '', agentVersion: 't', weightVersion: null, placementVersion: null }),
        backoff: { initialMs: 1000, maxMs: 1000 },
      });
      const problem = await new Promise<string | null>((resolve) => {
        link.once('retry', (_d, attempt, p) => {
          expect(attempt).toBe(1);
          resolve(p);
        });
        link.start();
      });
      await link.close();
      return problem;
    };
    expect(await problemAt(`ws://127.0.0.1:${await deadPort()}`)).toMatch(/ECONNREFUSED/);
    // a plain HTTP server (the orchestrator's admin port, an easy mistake)
    const web = http.createServer((_q, res) => res.writeHead(426).end());
    await new Promise<void>((resolve) => web.listen(0, '127.0.0.1', resolve));
    const wss = new WebSocketServer({ host: '127.0.0.1', port: 0 });
    await new Promise((resolve) => wss.once('listening', resolve));
    let mode: 'error' | 'garbage' | 'silent' = 'error';
    wss.on('connection', (ws) => {
      ws.once('message', () => {
        if (mode === 'error') {
          ws.send(codec.encode(makeFrame('error', 0, { code: 'KAIS_ERR_DUPLICATE', message: 'eAP 0 has a live session', of: 0 })));
          ws.close(4009, 'duplicate');
        } else if (mode === 'garbage') {
          ws.send(Buffer.from([1, 2, 3]));
          ws.close();
        }
      });
    });
    try {
      expect(await problemAt(`ws://127.0.0.1:${(web.address() as { port: number }).port}`)).toMatch(/Unexpected server response: 426/);
      const at = `ws://127.0.0.1:${(wss.address() as { port: number }).port}`;
      expect(await problemAt(at)).toBe('refused: KAIS_ERR_DUPLICATE: eAP 0 has a live session');
      mode = 'garbage';
      expect(await problemAt(at)).toBe('it answered with something other than a kais frame');
      mode = 'silent';
      expect(await problemAt(at, 200)).toBe('no welcome within 0.2 s');
    } finally {
      web.close();
      wss.close();
    }
  });
});
