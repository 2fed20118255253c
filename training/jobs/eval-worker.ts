/**
 * The worker thread of `kais eval --seeds ... --jobs N` (eval.ts runEvalSeedsParallel): it runs one
 * seed's whole evaluation (runEval) per message and sends the report back, as the same command with
 * `--seed s --json` prints it, with the progress lines runEval said. It loads the tfjs backend once, before the first seed that needs it.
 * A user's mistake comes back as `UsageError: <message>` so the command can exit 2 with it.
 */
import { parentPort } from 'node:worker_threads';
import { loadBackend } from '../../shared/tf-backend';
import { UsageError } from '../../shared/errors';
import { runEval, type EvalArgs } from './eval';

export interface EvalWorkerRequest {
  args: EvalArgs;
  seed: number;
  /** load the tfjs backend first (a gpg pair, or the learned detector) */
  backend: boolean;
}

let backend: Promise<unknown> | null = null;

parentPort?.on('message', (m: EvalWorkerRequest) => {
  void (async () => {
    try {
      if (m.backend) await (backend ??= loadBackend());
      // the lines a run says on the way (a trace's skipped rows, slow pairs), for the command to print
      const lines: string[] = [];
      const report = runEval({ ...m.args, seed: m.seed }, (line) => lines.push(line));
      parentPort!.postMessage({ ok: true, report, lines });
    } catch (e) {
      const msg = e instanceof Error ? e.message : String(e);
      parentPort!.postMessage({ ok: false, error: e instanceof UsageError ? `UsageError: ${msg}` : msg });
    }
  })();
});
