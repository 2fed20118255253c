/**
 * Worker-thread entry of the weight gate's shadow evaluation (training/jobs/gate.ts): answers one
 * `evaluate` at a time, so the orchestrator's event loop (hub, heartbeats, fan-out) never waits
 * for the simulator. The orchestrator starts it by file (orchestrator/gate.ts) and imports nothing
 * of it.
 */
import { parentPort } from 'node:worker_threads';
import type { GateWorkerReply, GateWorkerRequest } from '../../shared/gate-contract';
import { shadowEvaluate } from './gate';

if (parentPort) {
  const port = parentPort;
  port.on('message', (msg: GateWorkerRequest) => {
    let reply: GateWorkerReply;
    try {
      reply = { ok: true, result: msg.kind === 'ping' ? null : shadowEvaluate(msg.input) };
    } catch (e) {
      reply = { ok: false, error: (e as Error).message };
    }
    port.postMessage(reply);
  });
}
