/**
 * The files SQLite makes beside a database when it opens one (-wal, -shm, -journal). An open that
 * kais refuses (a damaged, foreign or truncated file) must leave the folder as it found it, so the
 * ones that were not there before the attempt are removed again (orchestrator/store.ts,
 * shared/nets/checkpoint-db.ts).
 */
import * as fs from 'node:fs';

/** The companions of `path` that do not exist yet (none for ':memory:'). */
export function absentCompanions(path: string): string[] {
  if (path === ':memory:' || path === '') return [];
  return [`${path}-wal`, `${path}-shm`, `${path}-journal`].filter((f) => fs.lstatSync(f, { throwIfNoEntry: false }) === undefined);
}

/**
 * After a refused open: removes `made` (absentCompanions before it), unless the refusal says the
 * file is locked, since another process has it open and the companions may be that process's.
 */
export function removeCompanions(made: readonly string[], refusal: unknown): void {
  const message = refusal instanceof Error ? refusal.message : String(refusal);
  if (/\bis locked\b/.test(message)) return;
  for (const f of made) fs.rmSync(f, { force: true });
}
