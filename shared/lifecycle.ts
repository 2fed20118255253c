/**
 * Process-lifecycle helpers of the long-running commands (`kais agent`, `kais node`,
 * `kais orchestrator`): exit with the parent, tokens from files or the environment, ports that
 * can be listened on. In shared/ because both `agent/` and `orchestrator/` entry points need it and
 * the import rules keep those folders apart; like tf-backend.ts it is for entry points only
 * (`*cli.ts`, `main.ts`, launcher/): test/unit/imports.test.ts checks who imports it.
 */
import * as net from 'node:net';
import { UsageError } from './errors';

/** How often the parent is checked, ms: a child is gone within this long after its parent. */
export const PARENT_CHECK_MS = 500;

/**
 * Calls `onGone` when the parent that started this process has exited (its ppid changed), when
 * the environment sets KAIS_EXIT_WITH_PARENT (`kais up` does), so no child outlives a killed run,
 * even after a SIGKILL of the parent. Does nothing otherwise. The check timer does not keep the
 * process alive.
 */
export function exitWithParent(onGone: () => void): void {
  if (!process.env.KAIS_EXIT_WITH_PARENT) return;
  const ppid = process.ppid;
  setInterval(() => {
    if (process.ppid !== ppid) onGone();
  }, PARENT_CHECK_MS).unref();
}

/**
 * Resolves at the first SIGTERM or SIGINT (or, with KAIS_EXIT_WITH_PARENT, the parent's exit) with
 * what it was. The handlers stay: a later signal, while the process stops, is passed to `again`
 * and nothing else (with process.once it reached Node's default handler, which killed a draining
 * agent, exit 143, its held requests reset, or an orchestrator closing its store).
 */
export function untilStopSignal(again: (signal: 'SIGTERM' | 'SIGINT') => void = () => undefined): Promise<'SIGTERM' | 'SIGINT' | 'parent'> {
  return new Promise((resolve) => {
    let stopping = false;
    const on = (why: 'SIGTERM' | 'SIGINT' | 'parent') => {
      if (!stopping) {
        stopping = true;
        resolve(why);
      } else if (why !== 'parent') again(why); // the parent check repeats every PARENT_CHECK_MS: not said again
    };
    process.on('SIGTERM', () => on('SIGTERM'));
    process.on('SIGINT', () => on('SIGINT'));
    exitWithParent(() => on('parent'));
  });
}

/**
 * A secret given the way that does not show in `ps`: `fromFile` (the value of a --*-token-file
 * option) or the environment variable `env`; `inline` is the visible --token kept for scripts.
 * Two ways at once is a mistake (which one was meant?); none gives ''.
 */
export function resolveSecret(o: {
  inline?: string | null;
  inlineFlag: string;
  fromFile?: string | null;
  fileFlag: string;
  env: string;
}): string {
  // an empty --token '' is a mistake (an unset shell variable), not "no token": say so
  if (o.inline !== undefined && o.inline !== null && o.inline.trim() === '')
    throw new UsageError(`--${o.inlineFlag}: empty (give the token, or leave the flag out)`);
  if (o.inline && o.fromFile)
    throw new UsageError(`--${o.inlineFlag}: give the token once, with --${o.fileFlag} (not shown in ps) or --${o.inlineFlag}, not both`);
  if (o.fromFile) return o.fromFile;
  if (o.inline) return o.inline;
  return process.env[o.env] ?? '';
}

/**
 * A port the command could not listen on is the user's choice, not our bug: the UsageError naming
 * the flag, or null for any other error (rethrow it).
 */
export function listenProblem(e: unknown, flag: string, port: number): UsageError | null {
  const code = (e as NodeJS.ErrnoException | null)?.code;
  if (code === 'EADDRINUSE') return new UsageError(`--${flag}: ${port} is already in use`);
  if (code === 'EACCES') return new UsageError(`--${flag}: ${port} needs privileges this user does not have`);
  if (code === 'EADDRNOTAVAIL') return new UsageError(`--${flag}: cannot listen on ${port} here (address not available)`);
  return null;
}

/**
 * Checks at the door that `host` is an address this machine can listen on (a name that resolves to
 * one of its own addresses, or 0.0.0.0 / ::), so a mistyped --host is one line, not a resolver or
 * bind error after the command has started.
 */
export async function checkHost(flag: string, host: string): Promise<void> {
  const probe = net.createServer();
  const problem = await new Promise<UsageError | null>((resolve) => {
    probe.once('error', (e: NodeJS.ErrnoException) => {
      if (e.code === 'ENOTFOUND' || e.code === 'EAI_AGAIN' || e.code === 'EAI_FAIL')
        resolve(new UsageError(`--${flag}: cannot resolve ${host}`));
      else if (e.code === 'EADDRNOTAVAIL') resolve(new UsageError(`--${flag}: ${host} is not an address of this machine`));
      else resolve(new UsageError(`--${flag}: cannot listen on ${host} (${e.message})`));
    });
    probe.listen(0, host, () => resolve(null));
  });
  await new Promise<void>((resolve) => (probe.listening ? probe.close(() => resolve()) : resolve()));
  if (problem) throw problem;
}

/**
 * Checks at the door that a fixed port can be listened on (0: any free one, nothing to check), so
 * a busy port is one line before the command starts anything. A port taken between this check and
 * the real listen still fails with listenProblem's line.
 */
export async function checkPortFree(flag: string, port: number): Promise<void> {
  if (port === 0) return;
  const probe = net.createServer();
  const problem = await new Promise<UsageError | null>((resolve) => {
    probe.once('error', (e) =>
      resolve(listenProblem(e, flag, port) ?? new UsageError(`--${flag}: cannot listen on ${port} (${(e as Error).message})`)),
    );
    probe.listen(port, () => resolve(null));
  });
  await new Promise<void>((resolve) => (probe.listening ? probe.close(() => resolve()) : resolve()));
  if (problem) throw problem;
}
