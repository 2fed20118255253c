/**
 * The servers' time limits (shared/http-limits.ts) on real servers on loopback: a connection that
 * sends nothing, or headers that never end, is answered 408 and closed once headersTimeout has
 * passed (Node's default kept them about 70 s: 20,000 idle sockets took an agent to its
 * file-descriptor limit); the hub's port answers a plain request 426, as ws's own server did.
 * The tests wait for the close, not for a time.
 */
import * as http from 'node:http';
import * as net from 'node:net';
import { Hub } from '../../orchestrator/hub';
import { EmulatedCluster } from '../../orchestrator/emulated-cluster';
import { HTTP_SERVER_LIMITS } from '../../shared/http-limits';
import { loadScenario } from '../../shared/scenario';

/** A raw connection that sends `bytes` (maybe nothing) and then waits: what the server sent before it closed, and when. */
function idle(port: number, bytes = ''): Promise<{ first: string; ms: number }> {
  return new Promise((resolve, reject) => {
    const t0 = Date.now();
    let got = '';
    const c = net.connect(port, '127.0.0.1', () => (bytes ? c.write(bytes) : undefined));
    c.on('data', (d: Buffer) => (got += d.toString('latin1')));
    c.on('error', reject);
    c.on('close', () => resolve({ first: got.split('\r\n')[0], ms: Date.now() - t0 }));
  });
}

/** Resolves once the hub's server counts connections that satisfy `ok` (it counts one once it has accepted it). */
function connectionsOf(hub: Hub, ok: (n: number) => boolean): Promise<void> {
  return new Promise((resolve) => {
    const poll = () => (hub['server'] as net.Server).getConnections((_e, n) => (ok(n) ? resolve() : setImmediate(poll)));
    poll();
  });
}

/** Sends a plain GET on `c` and resolves with the status line of the answer. */
function plainRequest(c: net.Socket): Promise<string> {
  c.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
  return new Promise((resolve) => {
    let got = '';
    c.on('data', (d: Buffer) => {
      got += d.toString('latin1');
      if (got.includes('\r\n')) resolve(got.split('\r\n')[0]);
    });
  });
}

describe('HTTP time limits', () => {
  let hub: Hub;
  let cluster: EmulatedCluster;
  beforeAll(async () => {
    hub = await Hub.listen({ heartbeatMs: 60_000 });
    cluster = new EmulatedCluster({ scenario: loadScenario('tiny') });
    await cluster.listen();
  });
  afterAll(async () => {
    await hub.close();
    await cluster.close();
  });

  it('an idle connection and one whose headers never end are cut with 408 after headersTimeout, on the hub, a node and the node admin', async () => {
    const ports = [hub.port, Number(new URL(cluster.nodeUrls[0]).port), Number(new URL(cluster.adminUrl).port)];
    const runs = await Promise.all(ports.flatMap((p) => [idle(p), idle(p, 'GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ')]));
    for (const r of runs) {
      expect(r.first).toBe('HTTP/1.1 408 Request Timeout');
      expect(r.ms).toBeGreaterThanOrEqual(HTTP_SERVER_LIMITS.headersTimeout - 100);
    }
  }, 60_000);

  it('a port holds at most maxConnections at once: one more is closed at once, the others stay', async () => {
    const small = await Hub.listen({ heartbeatMs: 60_000, maxConnections: 3 });
    try {
      const open = await Promise.all(
        [0, 1, 2].map(
          () =>
            new Promise<net.Socket>((resolve) => {
              const c = net.connect(small.port, '127.0.0.1', () => resolve(c));
            }),
        ),
      );
      // the server counts a connection once it has accepted it: wait until it has all three
      await connectionsOf(small, (n) => n >= 3);
      const fourth = await idle(small.port);
      expect(fourth.first).toBe(''); // closed without a word
      for (const c of open) expect(c.destroyed).toBe(false);
      open.forEach((c) => c.destroy());
    } finally {
      await small.close();
    }
  });

  it('an address holds at most maxConnectionsPerAddress on the port: one more from it is closed at once, another address still gets in', async () => {
    const small = await Hub.listen({ heartbeatMs: 60_000, maxConnectionsPerAddress: 2 });
    const from = (localAddress: string) =>
      new Promise<net.Socket>((resolve, reject) => {
        const c = net.connect({ port: small.port, host: '127.0.0.1', localAddress }, () => resolve(c));
        c.on('error', reject);
      });
    try {
      const flood = [await from('127.0.0.2'), await from('127.0.0.2')];
      await connectionsOf(small, (n) => n >= 2);
      // a third from the same address: closed without a word, as soon as it is accepted
      const third = await from('127.0.0.2');
      const closed = await new Promise<string>((resolve) => {
        let got = '';
        third.on('data', (d: Buffer) => (got += d.toString('latin1')));
        third.on('close', () => resolve(got));
      });
      expect(closed).toBe('');
      // another address is not held back by the flood: its plain request is answered (426)
      const other = await from('127.0.0.3');
      expect(await plainRequest(other)).toBe('HTTP/1.1 426 Upgrade Required');
      for (const c of flood) expect(c.destroyed).toBe(false);
      // the slots come back when the address closes its connections
      flood.forEach((c) => c.destroy());
      other.destroy();
      await connectionsOf(small, (n) => n === 0);
      const again = await from('127.0.0.2');
      expect(await plainRequest(again)).toBe('HTTP/1.1 426 Upgrade Required');
      again.destroy();
    } finally {
      await small.close();
    }
  });

  it("the hub's port answers a plain request 426 (an upgrade is required)", async () => {
    const status = await new Promise<number>((resolve, reject) =>
      http
        .get(`http://127.0.0.1:${hub.port}/`, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        })
        .on('error', reject),
    );
    expect(status).toBe(426);
    expect(hub.url).toBe(`ws://127.0.0.1:${hub.port}`);
  });
});
