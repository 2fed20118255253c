/**
 * TelemetryPoller against real HTTP stubs: a node without /telemetry (404) is reported silent once
 * and not polled again; a node answering garbage counts as a failed poll; a repeated `seq` is not a
 * new sample. A node unreachable or stuck on one `seq` while the baselines build is reported
 * silent and still polled: when it sends samples again it gets a filter (a late join). After the
 * start, a node with a filter whose seq stops changing is excluded (device:stale) and re-admitted
 * by healthy windows when it sends again.
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

/** One /telemetry answer: a healthy node's smooth series, numbered by seq. */
const sample = (seq: number) =>
  JSON.stringify({
    seq,
    cpu: 0.5 + 0.05 * Math.sin(seq),
    mem: 0.4 + 0.03 * Math.cos(seq),
    disk: 0.1 + 0.01 * Math.sin(2 * seq),
    upload: 0.3 + 0.02 * Math.cos(3 * seq),
  });

describe('TelemetryPoller', () => {
  it('stops polling a node without /telemetry, counts garbage as failures, and skips a repeated seq', async () => {
    const missing = await server((_q, res) => res.writeHead(404).end());
    const garbage = await server((_q, res) => res.writeHead(200).end('{"cpu": "high"}'));
    const same = await server((_q, res) =>
      res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ seq: 7, cpu: 0.5, mem: 0.4, disk: 0.1, upload: 0.3 })),
    );
    // finite in JSON, not as a float32: its window could not be encoded, and the interval's telemetry was lost
    let seq = 0;
    const huge = await server((_q, res) =>
      res.writeHead(200).end(JSON.stringify({ seq: ++seq, cpu: 4e38, mem: 0.4, disk: 0.1, upload: 0.3 })),
    );
    const health = new NodeHealth(['a', 'a', 'a', 'a'], [0, 0, 0, 0]);
    const silent: number[] = [];
    const orig = health.silent.bind(health);
    health.silent = (n: number) => {
      silent.push(n);
      orig(n);
    };
    const p = new TelemetryPoller({ nodeUrls: [missing.url, garbage.url, same.url, huge.url], health, periodMs: 60, nowS: () => 0 });
    p.start();
    try {
      await until(() => p.stats.failed >= 6 && garbage.hits() >= 3 && same.hits() >= 3 && huge.hits() >= 3);
      expect(silent).toEqual([0]);
      expect(missing.hits()).toBe(1); // asked once
      expect(p.stats.samples).toBe(1); // seq 7 again and again: one sample; cpu 4e38 none
    } finally {
      p.stop();
      [missing, garbage, same, huge].forEach((s) => s.close());
    }
  });

  it('keeps polling a node that was unreachable while the baselines built, and gives it a filter when it answers; a stuck seq does not hold up the others', async () => {
    let okSeq = 0;
    let lateSeq = 0;
    let lateUp = false;
    const ok = await server((_q, res) => res.writeHead(200).end(sample(++okSeq)));
    const late = await server((_q, res) => (lateUp ? res.writeHead(200).end(sample(++lateSeq)) : res.writeHead(503).end()));
    const stuck = await server((_q, res) => res.writeHead(200).end(sample(7)));
    const health = new NodeHealth(['a', 'a', 'a'], [0, 0, 0], { historySamples: 12 });
    const lines: string[] = [];
    const p = new TelemetryPoller({
      nodeUrls: [ok.url, late.url, stuck.url],
      health,
      periodMs: 45,
      nowS: () => 0,
      log: (l) => lines.push(l),
    });
    p.start();
    try {
      // the filters start on node 0 alone: 1 failed 12 polls in a row, 2 sent seq 7 twelve times
      await until(() => health.started);
      expect(health.verdict(1)).toBeUndefined();
      expect(lines.some((l) => l.startsWith('node 1: no new telemetry sample in 12 polls (unreachable or malformed)'))).toBe(true);
      expect(lines.some((l) => l.startsWith('node 2: no new telemetry sample in 12 polls (seq stays 7)'))).toBe(true);
      const hits = late.hits();
      await until(() => late.hits() >= hits + 3); // still polled after the start (it used to be dropped for good)
      lateUp = true;
      await until(() => health.verdict(1) !== undefined); // a filter after 12 new samples, on node 0's baseline
      expect(lateSeq).toBeGreaterThanOrEqual(13);
      expect(lines).toContain('node 1 sends telemetry again: its device filter starts after 12 samples');
      expect(health.verdict(2)).toBeUndefined(); // seq 7 is still one sample
    } finally {
      p.stop();
      [ok, late, stuck].forEach((s) => s.close());
    }
  });

  it('after the start, excludes a node whose seq stops changing (device:stale) and re-admits it after healthy windows once it sends again', async () => {
    let seqA = 0;
    let seqB = 0;
    let frozen = false;
    const a = await server((_q, res) => res.writeHead(200).end(sample(++seqA)));
    const b = await server((_q, res) => res.writeHead(200).end(sample(frozen ? seqB : ++seqB)));
    const health = new NodeHealth(['a', 'a'], [0, 0], { historySamples: 12 });
    const p = new TelemetryPoller({ nodeUrls: [a.url, b.url], health, periodMs: 40, staleAfterPolls: 5, nowS: () => 0 });
    expect(() => new TelemetryPoller({ nodeUrls: [a.url], health, staleAfterPolls: 0, nowS: () => 0 })).toThrow(/staleAfterPolls/);
    p.start();
    try {
      await until(() => health.started && health.verdict(1) !== undefined);
      expect(health.excluded(1)).toBe(false);
      frozen = true; // node 1's exporter sends the same seq from now on
      await until(() => health.excluded(1));
      expect(p.stats.stale).toBe(1);
      expect(health.excludedNow()).toEqual([{ node: 1, rule: 'device:stale' }]);
      const out = health.events.find((e) => e.kind === 'exclude' && e.node === 1)!;
      expect(out.reason).toBe('no new telemetry sample in 5 polls');
      const hits = b.hits();
      await until(() => b.hits() >= hits + 8); // still polled; excluded once, not once per poll
      expect(p.stats.stale).toBe(1);
      expect(health.events.filter((e) => e.node === 1 && e.kind === 'exclude')).toHaveLength(1);
      expect(health.excluded(0)).toBe(false); // node 0 sends on: never judged stale
      frozen = false;
      await until(() => !health.excluded(1)); // healthy windows again: re-admitted by the usual rule
      expect(health.events.find((e) => e.kind === 'readmit' && e.node === 1)!.rule).toBe('device:healthy');
    } finally {
      p.stop();
      [a, b].forEach((s) => s.close());
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
