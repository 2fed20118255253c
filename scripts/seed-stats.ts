/** Seed lists and per-seed statistics shared by the measurement scripts (test-seeds.ts, seed-table.ts). */

/** SEEDS as \`a-b\` (inclusive) or \`a,b,...\`. */
export function seedList(v: string): number[] {
  const range = /^(\d+)-(\d+)$/.exec(v);
  if (range) {
    const out: number[] = [];
    for (let s = Number(range[1]); s <= Number(range[2]); s++) out.push(s);
    return out;
  }
  return v.split(',').map((s) => {
    const n = Number(s);
    if (!Number.isInteger(n)) throw new Error(`SEEDS: not a seed: ${s}`);
    return n;
  });
}

// the same statistics as `kais eval --seeds` (one definition)
export { mean, se } from '../training/jobs/eval-seeds';

/** Per-seed figures of seed-table.ts runs (JSON_OUT): per load, per pair, one value per seed in `seeds` order. */
export interface SeedCells {
  scenario: string;
  seeds: number[];
  frames: number;
  gpg: string | null;
  /** the trace replayed instead of P4 (TRACE), if any */
  trace?: string;
  /** the kais train checkpoint the cmmac pairs ran from (CHECKPOINT), if not the shipped actor */
  checkpoint?: string;
  loads: Record<string, Record<string, { rate: number[]; replicaS: number[]; ops: number[] }>>;
}
