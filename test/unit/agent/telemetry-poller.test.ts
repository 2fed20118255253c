/**
 * TelemetryPoller against real HTTP stubs: a node without /telemetry (404) is reported silent once
 * and not polled again; a node answering garbage counts as a failed poll; a repeated `seq` is not a
 * new sample.
 */
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { NodeHealth } from '../../../agent/filters/node-health';
import { TelemetryPoller } from '../../../agent/telemetry-poller';
import { MAX_ANSWER_BYTES, Proxy } from '../../../agent/proxy';

function server(
  handler: (req: http.IncomingMessage, res: http.ServerResponse) => void,
): Promise<{ url: string; hits: () => number; close: () => void }> {
  let hits = 0;
  const s = http.createServer((req, res) => {
    hits++;
    req.resume();
    handler(req, res);
  });
  return new Promise((resolve) =>
    s.listen(0, '127.0.0.1', () =>
      resolve({
        url: `http://127.0.0.1:${(s.address() as AddressInfo).port}`,
        hits: () => hits,
        close: () => (s.closeAllConnections(), s.close()),
      }),
    ),
  );
}

const until = async (cond: () => boolean, ms = 5000) => {
  const t0 = Date.now();
  while (!cond()) {
    if (Date.now() - t0 > ms) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 10));
  }
};

describe('TelemetryPoller', () => {
  it('stops polling a node without /telemetry, counts garbage as failures, and skips a repeated seq', async () => {
    const missing = await server((_q, res) => res.writeHead(404).end());
    const garbage = await server((_q, res) => res.writeHead(200).end('{"cpu": "high"}'));
    const same = await server((_q, res) =>
      res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ seq: 7, cpu: 0.5, mem: 0.4, disk: 0.1, upload: 0.3 })),
    );
    const health = new NodeHealth(['a', 'a', 'a'], [0, 0, 0]);
    const silent: number[] = [];
    const orig = health.silent.bind(health);
    health.silent = (n: number) => {
      silent.push(n);
      orig(n);
    };
    const p = new TelemetryPoller({ nodeUrls: [missing.url, garbage.url, same.url], health, periodMs: 60, nowS: () => 0 });
    p.start();
    try {
      await until(() => p.stats.failed >= 3 && garbage.hits() >= 3 && same.hits() >= 3);
      expect(silent).toEqual([0]);
      expect(missing.hits()).toBe(1); // asked once
      expect(p.stats.samples).toBe(1); // seq 7 again and again: one sample
    } finally {
      p.stop();
      [missing, garbage, same].forEach((s) => s.close());
    }
  });

  it('cuts a node whose /telemetry answer streams past 64 KiB, and the proxy a target whose answer does: a failed poll, unreachable (300 MB took an agent to 1.3 GB)', async () => {
    // streams 16 KiB chunks for as long as the client reads
    const flood = await server((_q, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      const chunk = Buffer.alloc(16 * 1024, 0x20);
      const more = () => {
        while (!res.destroyed && res.write(chunk));
        if (!res.destroyed) res.once('drain', more);
      };
      res.on('close', () => res.removeAllListeners('drain'));
      more();
    });
    const health = new NodeHealth(['a'], [0]);
    const p = new TelemetryPoller({ nodeUrls: [flood.url], health, periodMs: 60, nowS: () => 0 });
    p.start();
    const proxy = new Proxy(4);
    try {
      await until(() => p.stats.failed >= 2);
      expect(p.stats.samples).toBe(0);
      const out = await proxy.forward(flood.url, 0, null, 10_000);
      expect(out).toEqual({ kind: 'unreachable', reason: `an answer over ${MAX_ANSWER_BYTES} bytes` });
    } finally {
      p.stop();
      proxy.close();
      flood.close();
    }
  });
});
