/**
 * kais status / scale / nodes against a server that is not a well-behaved kais orchestrator: a
 * connection closed mid-answer, JSON of the wrong shape, a redirect, an answer over the cap, a
 * reason with terminal escapes. Each is exit 2 and one line, never a silent success or a stack.
 */
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { runInProcess } from '../../support/in-process';

type Mode = (res: http.ServerResponse) => void;
const MODES: Record<string, Mode> = {
  // Content-Length promises 1000 bytes; the socket closes after 10
  cut: (res) => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': 1000 });
    res.write('{"ok":true,');
    setImmediate(() => res.socket?.destroy());
  },
  empty: (res) => void res.writeHead(200, { 'content-type': 'application/json' }).end('{}'),
  null: (res) => void res.writeHead(200, { 'content-type': 'application/json' }).end('null'),
  list: (res) => void res.writeHead(200, { 'content-type': 'application/json' }).end('[1,2]'),
  redirect: (res) => void res.writeHead(302, { location: '/elsewhere' }).end(),
  huge: (res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    const chunk = Buffer.alloc(1 << 20, 0x20);
    let n = 0;
    const more = () => {
      while (n < 20 && res.write(chunk)) n++;
      if (n < 20) res.once('drain', more);
      else res.end();
    };
    res.write('{"pad":"');
    more();
  },
  escape: (res) =>
    void res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ reason: 'bad\u001b[31m red\nline' })),
};

/** One server per mode (the admin paths are absolute: a mode cannot ride in the URL). */
const servers = new Map<string, http.Server>();
const ports = new Map<string, number>();
const token = process.env.KAIS_ADMIN_TOKEN;
beforeAll(async () => {
  process.env.KAIS_ADMIN_TOKEN = 'a-token-long-enough-for-this';
  for (const [name, mode] of Object.entries(MODES)) {
    const server = http.createServer((req, res) => {
      req.resume();
      mode(res);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    servers.set(name, server);
    ports.set(name, (server.address() as AddressInfo).port);
  }
});
afterAll(async () => {
  if (token === undefined) delete process.env.KAIS_ADMIN_TOKEN;
  else process.env.KAIS_ADMIN_TOKEN = token;
  for (const server of servers.values()) {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
});

const at = (mode: string) => `http://127.0.0.1:${ports.get(mode)}`;

describe('the admin commands against a server that is not a kais orchestrator', () => {
  it.each([
    ['scale', 'cut', /the connection closed before the whole answer$/],
    ['status', 'cut', /the connection closed before the whole answer$/],
    ['status', 'empty', /answered JSON that is not a kais status$/],
    ['nodes', 'empty', /answered JSON that is not a kais status$/],
    ['scale', 'empty', /answered JSON that is not a kais scale answer$/],
    ['status', 'null', /answered JSON that is not an object/],
    ['status', 'list', /answered JSON that is not an object/],
    ['scale', 'redirect', /answered HTTP 302/],
    ['status', 'huge', /an answer over \d+ bytes/],
    ['scale', 'escape', /^kais: bad\?\[31m red\?line$/],
  ])('kais %s, %s: exit 2 and one line', async (cmd, mode, line) => {
    const args = cmd === 'scale' ? ['--service', '0', '--replicas', '2', '--reason', 'x'] : [];
    const r = await runInProcess([cmd, '--orchestrator', at(mode), ...args]);
    const lines = r.stderr.trim().split('\n');
    expect({ code: r.code, lines: lines.length }).toEqual({ code: 2, lines: 1 });
    expect(lines[0]).toMatch(line);
    expect(r.stderr).not.toMatch(/internal error|\n\s+at /);
  });
});
