/**
 * Worker-thread entry of the online learner: owns a LearnerCore and answers one message at a time
 * (`init`, `update`, `setActor`), so the orchestrator's event loop (hub, heartbeats, fan-out,
 * placement) never waits for a tfjs update. Loads the tfjs backend itself: it is an entry point.
 */
import { parentPort } from 'node:worker_threads';
import { loadBackend } from '../shared/tf-backend';
import { LearnerCore, type CoreConfig, type CoreResult, type PackedBatch } from '../critic/cmmac/online-core';

export type WorkerRequest =
  | { kind: 'init'; config: CoreConfig; actor: Float32Array[]; critic: Float32Array[] | null }
  | { kind: 'update'; batch: PackedBatch; criticOnly: boolean }
  | { kind: 'setActor'; actor: Float32Array[] };

export type WorkerReply = { ok: true; result: CoreResult | null; backend?: string } | { ok: false; error: string };

let core: LearnerCore | null = null;

if (parentPort) {
  const port = parentPort;
  port.on('message', (msg: WorkerRequest) => {
    void (async (): Promise<WorkerReply> => {
      try {
        if (msg.kind === 'init') {
          const backend = await loadBackend();
          core?.dispose();
          core = new LearnerCore(msg.config, msg.actor, msg.critic);
          return { ok: true, result: null, backend };
        }
        if (!core) throw new Error('learner worker: not initialised');
        if (msg.kind === 'setActor') {
          core.setActor(msg.actor);
          return { ok: true, result: null };
        }
        return { ok: true, result: core.update(msg.batch, msg.criticOnly) };
      } catch (e) {
        return { ok: false, error: (e as Error).message };
      }
    })().then((reply) => {
      const transfer =
        reply.ok && reply.result ? [...(reply.result.actor ?? []), ...reply.result.critic].map((a) => a.buffer as ArrayBuffer) : [];
      port.postMessage(reply, transfer);
    });
  });
}
