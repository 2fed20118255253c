/** Reading a `kais train` SQLite file in tests: what two runs must agree on to be the same run. */
import type Database from 'better-sqlite3';

/** Every frame's metrics row in order, without the wall times (the one part that is not reproducible). */
export function reproducibleMetrics(db: Database.Database): Record<string, unknown>[] {
  const rows = db.prepare('SELECT json FROM metrics ORDER BY frame').all() as { json: string }[];
  return rows.map((r) => {
    const { wallS, learnS, ...rest } = JSON.parse(r.json) as Record<string, unknown>;
    void wallS;
    void learnS;
    return rest;
  });
}
