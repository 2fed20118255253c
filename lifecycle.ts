/**
 * Process-lifecycle helpers of the long-running commands (`kais agent`, `kais node`,
 * `kais orchestrator`). A root module next to `kais.ts` because both `agent/` and `orchestrator/`
 * entry points need it, the import rules keep those folders apart, and `shared/` does not know
 * about processes (DESIGN.md section 3). Only CLI entry points (`*cli.ts`) import it.
 */

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
