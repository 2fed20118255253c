/**
 * A worker thread that answers one request at a time, in the order they were made: the calls
 * queue here, so the caller never has two in the worker at once. The worker replies
 * `{ok: true, ...}` or `{ok: false, error}`; a worker that dies (error, exit, dispose) rejects the
 * pending and every later call with the reason. Used by the online learner and the learned device
 * detector (orchestrator/learner.ts, orchestrator/detector.ts), whose tfjs work must never hold
 * the orchestrator's event loop (hub, heartbeats, fan-out, placement).
 */
import { Worker } from 'node:worker_threads';

export type SerialReply = { ok: true } | { ok: false; error: string };

export class SerialWorker<Req, Rep extends SerialReply> {
  private readonly worker: Worker;
  private readonly queue: { msg: Req; transfer: ArrayBuffer[]; resolve: (r: Rep) => void; reject: (e: Error) => void }[] = [];
  private busy = false;
  private dead: Error | null = null;

  constructor(
    file: string,
    private readonly name: string,
  ) {
    this.worker = new Worker(file);
    this.worker.unref();
    this.worker.on('message', (r: Rep) => {
      const w = this.queue.shift();
      this.busy = false;
      if (w) {
        if (r.ok) w.resolve(r);
        else w.reject(new Error((r as { error: string }).error));
      }
      this.next();
    });
    this.worker.on('error', (e) => this.fail(e));
    this.worker.on('exit', (code) => this.fail(new Error(`${this.name} worker exited (${code})`)));
  }

  /** Posts `msg` (transferring `transfer`) once the calls before it are answered. */
  call(msg: Req, transfer: ArrayBuffer[] = []): Promise<Rep> {
    if (this.dead) return Promise.reject(this.dead);
    return new Promise<Rep>((resolve, reject) => {
      this.queue.push({ msg, transfer, resolve, reject });
      this.next();
    });
  }

  /** Calls made and not answered yet (the one in the worker included). */
  get pending(): number {
    return this.queue.length;
  }

  dispose(): void {
    this.fail(new Error(`${this.name} worker: disposed`));
    void this.worker.terminate();
  }

  private next(): void {
    if (this.busy || this.dead || this.queue.length === 0) return;
    this.busy = true;
    const w = this.queue[0];
    this.worker.postMessage(w.msg, w.transfer);
  }

  private fail(e: Error): void {
    this.dead ??= e;
    for (const w of this.queue.splice(0)) w.reject(this.dead);
    this.busy = false;
  }
}
