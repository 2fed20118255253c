/**
 * The keep-alive race of shared/http-limits.ts (CLIENT_IDLE_MS), played against a real server
 * process on loopback: the server closes an idle connection after its keepAliveTimeout; a client
 * whose event loop is busy when that close arrives takes the closed socket for its next request
 * and gets a reset (the likely end of 26 requests of a 600 s `kais up`: "no answer: read ECONNRESET").
 * With keepAliveAgentOptions' idle timeout below the server's, the client has closed the socket
 * itself by then and the request goes out on a new connection.
 *
 * No timing luck: the server writes a file when the connection has closed on its side, and the
 * client, busy (a synchronous loop: its event loop reads nothing meanwhile), waits for that file.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as path from 'node:path';
import { CLIENT_IDLE_MS, keepAliveAgentOptions, SERVER_KEEP_ALIVE_MS } from '../../shared/http-limits';
import { tmpDir } from '../support/tmp';

/**
 * The server's keepAliveTimeout in this test (every kais server's is 65 s). Not under 2 s: the server
 * announces it (`Keep-Alive: timeout=N`) and Node's client keeps no socket whose hint less 1 s is 0.
 */
const SERVER_IDLE_MS = 2000;

const dir = tmpDir('kais-keep-alive-');
let server: ChildProcess | null = null;
let port = 0;
let closedFile = '';

/** A server process that answers 200 and writes `closedFile` when a connection has closed. */
async function startServer(closed: string): Promise<void> {
  const code = `
    const fs = require('node:fs');
    const http = require('node:http');
    const s = http.createServer((req, res) => { req.resume(); req.on('end', () => res.end('ok')); });
    s.keepAliveTimeout = ${SERVER_IDLE_MS};
    s.on('connection', (sock) => sock.on('close', () => fs.writeFileSync(${JSON.stringify(closed)}, '')));
    s.listen(0, '127.0.0.1', () => console.log(s.address().port));`;
  const child = spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
  server = child;
  port = await new Promise<number>((resolve, reject) => {
    child.once('exit', (c) => reject(new Error(`the server exited (${c})`)));
    child.stdout!.once('data', (b: Buffer) => resolve(Number(b.toString().trim())));
  });
}

beforeEach(async () => {
  closedFile = path.join(dir, `closed-${Date.now()}-${Math.random()}`);
  await startServer(closedFile);
});

afterEach(() => {
  server?.kill();
  server = null;
});

function post(agent: http.Agent): Promise<{ reused: boolean; outcome: string }> {
  return new Promise((resolve) => {
    const req = http.request({ host: '127.0.0.1', port, path: '/', method: 'POST', agent }, (res) => {
      res.resume();
      res.on('end', () => resolve({ reused: req.reusedSocket, outcome: String(res.statusCode) }));
    });
    req.on('error', (e: NodeJS.ErrnoException) => resolve({ reused: req.reusedSocket, outcome: e.code ?? e.message }));
    req.end('{}');
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Busy until the server has closed the connection (its file exists): this process's event loop reads nothing meanwhile. */
function busyUntilServerClosed(): void {
  const giveUp = Date.now() + 60_000;
  while (!fs.existsSync(closedFile)) {
    if (Date.now() > giveUp) throw new Error('the server never closed the connection');
  }
}

/** One request; idle below the server's timeout (a client's own idle timer may fire); busy until the server closed; a second request. */
async function secondAfterServerClosed(agent: http.Agent): Promise<{ reused: boolean; outcome: string }> {
  expect((await post(agent)).outcome).toBe('200');
  await sleep(SERVER_IDLE_MS / 2);
  busyUntilServerClosed();
  const second = await post(agent);
  agent.destroy();
  return second;
}

describe('a keep-alive client against a server that closes idle connections', () => {
  it('without an idle timeout, a busy client reuses the socket the server closed and gets a reset', async () => {
    const second = await secondAfterServerClosed(new http.Agent({ keepAlive: true, maxSockets: 8 }));
    expect(second).toEqual({ reused: true, outcome: 'ECONNRESET' });
  });

  it("with keepAliveAgentOptions' idle timeout below the server's, it closed the socket first: a new connection, answered", async () => {
    const second = await secondAfterServerClosed(new http.Agent(keepAliveAgentOptions(8, SERVER_IDLE_MS / 4)));
    expect(second).toEqual({ reused: false, outcome: '200' });
    // kais's own pair keeps the same order, with room for a client's timer a second late
    expect(CLIENT_IDLE_MS).toBeLessThan(SERVER_KEEP_ALIVE_MS - 1000);
  });
});
