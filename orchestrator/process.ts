/** Small process helpers of the orchestrator-side commands. */

/**
 * Calls `onGone` when the parent that started this process has exited (its ppid changed), when
 * the environment sets KAIS_EXIT_WITH_PARENT (`kais up` does), so no child outlives a killed run.
 */
export function exitWithParent(onGone: () => void): void {
  if (!process.env.KAIS_EXIT_WITH_PARENT) return;
  const ppid = process.ppid;
  setInterval(() => {
    if (process.ppid !== ppid) onGone();
  }, 500).unref();
}
