/**
 * launcher/replay.ts, kais up's load generator (and the namespace harness's), against a local
 * stand-in for two agents' ingress: what each request body carries (deadline left after the
 * upload), and the device-side accounting (in time, late, refused with its reason, unanswered,
 * refused before sending when the upload outlasts the deadline), per eAP and in total.
 */
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Replay } from '../../../launcher/replay';
import type { Request } from '../../../shared/domain';
import { uploadS } from '../../../shared/network';
import { loadScenario } from '../../../shared/scenario';

const scenario = loadScenario('small');

/** Answers by service: 0 at once, 1 a 503 with a reason, 2 never (the socket closes), 3 after 300 ms. */
function ingress(bodies: { eap: number; body: { service: number; deadlineMs: number } }[], eap: number): Promise<http.Server> {
  const server = http.createServer((req, res) => {
    let t = '';
    req.on('data', (c: Buffer) => (t += c.toString()));
    req.on('end', () => {
      const body = JSON.parse(t) as { service: number; deadlineMs: number };
      bodies.push({ eap, body });
      if (body.service === 0) res.end('{}');
      else if (body.service === 1) {
        res.statusCode = 503;
        res.end(JSON.stringify({ reason: 'target full of service 1' }));
      } else if (body.service === 2) req.socket.destroy();
      else setTimeout(() => res.end('{}'), 300);
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

describe('Replay (kais up load generator)', () => {
  it('sends each request at arrival + upload with the deadline left and counts the answers from the device side', async () => {
    const bodies: { eap: number; body: { service: number; deadlineMs: number } }[] = [];
    const servers = await Promise.all([ingress(bodies, 0), ingress(bodies, 1)]);
    const up = uploadS(scenario, 0.1);
    const req = (id: number, eap: number, service: number, arrivalS: number, deadlineAfterUploadS: number): Request => ({
      id,
      eap,
      service,
      arrivalS,
      deadlineS: arrivalS + up + deadlineAfterUploadS,
      workCoreS: 0.01,
      inputMB: 0.1,
    });
    const requests = [
      req(0, 0, 0, 0, 1), // in time
      req(1, 1, 1, 0.05, 1), // refused: 503 target full
      req(2, 0, 2, 0.1, 1), // unanswered: the connection closes
      req(3, 1, 3, 0.15, 0.1), // late: 300 ms against a 100 ms deadline
      req(4, 0, 0, 0.2, -0.001), // the upload outlasts the deadline: refused, never sent
    ];
    try {
      const replay = new Replay({
        scenario,
        requests,
        speed: 1,
        durationS: 0.3,
        agentUrls: servers.map((s) => `http://127.0.0.1:${(s.address() as AddressInfo).port}`),
      });
      const t0 = performance.now();
      await replay.run(t0);
      expect(performance.now() - t0).toBeGreaterThanOrEqual(300);
      expect(replay.outstanding).toBe(0);
      replay.close();
      expect(replay.total).toEqual({ sent: 5, completedInTime: 1, late: 1, refused: 2, unanswered: 1 });
      expect(replay.per).toEqual([
        { sent: 3, completedInTime: 1, late: 0, refused: 1, unanswered: 1 },
        { sent: 2, completedInTime: 0, late: 1, refused: 1, unanswered: 0 },
      ]);
      expect(replay.reasons['503 target full']).toBe(1);
      expect(replay.reasons['deadline passed during the upload']).toBe(1);
      expect(Object.keys(replay.reasons).some((k) => k.startsWith('no answer: '))).toBe(true);
      // latencies of the two 200s, from the device: the upload counts
      expect(replay.latencies).toHaveLength(2);
      for (const ms of replay.latencies) expect(ms).toBeGreaterThanOrEqual(up * 1000);
      // each body went to its eAP with the time left after the upload
      expect(bodies.map((b) => [b.eap, b.body.service]).sort()).toEqual([
        [0, 0],
        [0, 2],
        [1, 1],
        [1, 3],
      ]);
      const late = bodies.find((b) => b.body.service === 3)!;
      expect(late.body.deadlineMs).toBeCloseTo(100, 6);
    } finally {
      await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
    }
  });
});
