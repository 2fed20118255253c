/**
 * `kais node` stopping (SIGTERM/SIGINT: EmulatedCluster.close with drainMs): a request running on a
 * node is answered, not reset; a new one is refused 503 "node stopping"; without drainMs (or past
 * it) the running one is cut, as before. In-process, real HTTP on loopback.
 */
import * as http from 'http';
import { EmulatedCluster } from '../../../orchestrator/emulated-cluster';
import { loadScenario } from '../../../shared/scenario';

const tiny = loadScenario('tiny');

/** POST /serve of service 0 with `work` core-seconds on the cloud: its status and reason, or the socket error's code. */
function serve(base: string, work: number): Promise<{ status: number; reason?: string } | { error: string }> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve) => {
    const req = http.request({ host: hostname, port, method: 'POST', path: `/serve?service=0&work=${work}`, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, reason: (JSON.parse(text) as { reason?: string }).reason }));
      res.on('error', (e: NodeJS.ErrnoException) => resolve({ error: e.code ?? e.message }));
    });
    req.on('error', (e: NodeJS.ErrnoException) => resolve({ error: e.code ?? e.message }));
    req.end();
  });
}

/** Resolves once the cluster has a request running (its report counts it busy). */
async function untilRunning(c: EmulatedCluster): Promise<void> {
  for (;;) {
    if (c.report().busy.some((b) => b > 0)) return;
    await new Promise((r) => setImmediate(r));
  }
}

describe('kais node stopping', () => {
  it('with drainMs: the running request is answered 200, a new one gets 503 "node stopping", then the servers close', async () => {
    const c = new EmulatedCluster({ scenario: tiny });
    await c.listen();
    // about 0.5 s of processing on the cloud
    const running = serve(c.cloudUrl, 0.5 * tiny.services[0].cpuCores);
    await untilRunning(c);
    const closed = c.close({ drainMs: 20_000 });
    expect(await serve(c.cloudUrl, 0.01)).toEqual({ status: 503, reason: 'node stopping' });
    expect(await running).toMatchObject({ status: 200 });
    await closed;
  });

  it('without drainMs the running request is cut (the connection closes unanswered)', async () => {
    const c = new EmulatedCluster({ scenario: tiny });
    await c.listen();
    const running = serve(c.cloudUrl, 30 * tiny.services[0].cpuCores);
    await untilRunning(c);
    await c.close();
    expect(await running).toHaveProperty('error');
  });
});
