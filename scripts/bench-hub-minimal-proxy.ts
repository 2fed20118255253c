/**
 * The floor of scripts/bench-hub.ts's ingress runs (`node dist/scripts/bench-hub-minimal-proxy.js
 * <backend port>`): the least a Node.js HTTP proxy does per request (parse the device's JSON, one
 * keep-alive POST to the backend, parse its answer, answer the device), with no queue, policy,
 * view or experience. Prints one JSON line `{ ready: true, port }` once it listens.
 */
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';

const backendPort = Number(process.argv[2]);
const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
const server = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    JSON.parse(Buffer.concat(chunks).toString('utf8'));
    const out = http.request(
      {
        hostname: '127.0.0.1',
        port: backendPort,
        path: '/serve?service=0&work=0',
        method: 'POST',
        agent,
        headers: { 'content-length': 0 },
      },
      (r) => {
        const got: Buffer[] = [];
        r.on('data', (c: Buffer) => got.push(c));
        r.on('end', () => {
          const o = JSON.parse(Buffer.concat(got).toString('utf8')) as { procMs: number };
          const text = JSON.stringify({ target: 0, latencyMs: 0, procMs: o.procMs });
          res.writeHead(r.statusCode!, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
          res.end(text);
        });
      },
    );
    out.end();
  });
});
server.keepAliveTimeout = 65000;
server.listen(0, '127.0.0.1', () =>
  process.stdout.write(JSON.stringify({ ready: true, port: (server.address() as AddressInfo).port }) + '\n'),
);
process.on('SIGTERM', () => process.exit(0));
