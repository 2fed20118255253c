/**
 * The orchestrator's plain-HTTP port (issue 18 item 4): /metrics parses with a real Prometheus
 * text-format parser and its counters only grow, /healthz answers, /readyz says ready once a
 * placement is published, and an unknown path or method is refused.
 */
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { readConfig, startOrchestrator } from '../../orchestrator/main';
import { counters, parseMetrics, sample } from '../support/prometheus';

function get(port: number, p: string, method = 'GET'): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path: p, method, agent: false }, (res) => {
      let t = '';
      res.on('data', (c: Buffer) => (t += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: t }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('orchestrator HTTP port', () => {
  it('serves /metrics, /healthz and /readyz; counters only grow; unknown paths 404', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kais-orch-http-'));
    const cfgFile = path.join(dir, 'c.json');
    fs.writeFileSync(cfgFile, JSON.stringify({ scenario: 'tiny', learner: 'none', detector: 'none' }));
    const o = await startOrchestrator(readConfig(cfgFile), { dbPath: path.join(dir, 'o.db'), httpPort: 0 });
    try {
      expect(o.httpPort).toBeGreaterThan(0);
      const port = o.httpPort!;
      const ready = await get(port, '/readyz');
      expect(ready.status).toBe(200); // a fresh store publishes the initial placement at start
      const h = await get(port, '/healthz');
      expect(h.status).toBe(200);
      expect(JSON.parse(h.text)).toMatchObject({
        ok: true,
        agents: 0,
        placementVersion: 1,
        orchestration: 'static',
        actor: null, // no actor switch without a GPG model naming a light actor
        lightActor: null,
        storeWriteFailures: 0,
        placementsUnstored: 0,
      });
      const m0 = parseMetrics((await get(port, '/metrics')).text);
      expect(sample(m0, 'kais_orchestrator_placement_version')).toBe(1);
      expect(sample(m0, 'kais_orchestrator_agents_connected')).toBe(0);
      expect(sample(m0, 'kais_orchestrator_events_total', { kind: 'epoch' })).toBe(1);
      expect(sample(m0, 'kais_orchestrator_process_resident_memory_bytes')).toBeGreaterThan(1e6);
      o.registry.publishPlacement(1, o.loop.placement); // a new version
      const m1 = parseMetrics((await get(port, '/metrics')).text);
      expect(sample(m1, 'kais_orchestrator_placement_version')).toBe(2);
      const c0 = counters(m0);
      const c1 = counters(m1);
      expect(c0.size).toBeGreaterThan(5);
      for (const [k, v] of c0) expect(c1.get(k) ?? -1).toBeGreaterThanOrEqual(v);
      expect((await get(port, '/nope')).status).toBe(404);
      expect((await get(port, '/metrics', 'POST')).status).toBe(405);
    } finally {
      await o.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
