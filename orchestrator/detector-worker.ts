/**
 * Worker-thread entry of the learned device detector (orchestrator/detector.ts): owns a
 * DetectorCore and answers one request at a time. Loads the tfjs backend itself: it is an entry
 * point.
 */
import { parentPort } from 'node:worker_threads';
import { loadBackend } from '../shared/tf-backend';
import { DetectorCore, type DetectorReply, type DetectorRequest } from '../critic/detector/core';

const core = new DetectorCore();

if (parentPort) {
  const port = parentPort;
  port.on('message', (msg: DetectorRequest) => {
    void (async (): Promise<DetectorReply> => {
      try {
        if (msg.kind === 'init') return { ok: true, result: { backend: await loadBackend(), ms: 0 } };
        return { ok: true, result: core.handle(msg) };
      } catch (e) {
        return { ok: false, error: (e as Error).message };
      }
    })().then((reply) => {
      const r = reply.ok ? reply.result : null;
      const transfer = r ? [...(r.weights ?? []), ...(r.scores ? [r.scores] : [])].map((a) => a.buffer as ArrayBuffer) : [];
      port.postMessage(reply, transfer);
    });
  });
}
