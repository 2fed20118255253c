/**
 * The backend child of scripts/bench-hub.ts's ingress runs (`node dist/scripts/bench-hub-backend.js`):
 * answers `POST /serve` at once with the emulated node's answer shape, and prints one JSON line
 * `{ ready: true, port }` once it listens (port 0: the system picks it).
 */
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';

const body = JSON.stringify({ procMs: 0, cpu: 0.1, waiting: null, busy: null });
const server = http.createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    // a plain service: no /telemetry exporter (the agent's device filter stops asking after one 404)
    const status = (req.url ?? '').startsWith('/telemetry') ? 404 : 200;
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  });
});
server.keepAliveTimeout = 65000;
server.listen(0, '127.0.0.1', () =>
  process.stdout.write(JSON.stringify({ ready: true, port: (server.address() as AddressInfo).port }) + '\n'),
);
process.on('SIGTERM', () => process.exit(0));
