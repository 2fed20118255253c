/** Seed lists and per-seed statistics shared by the measurement scripts (test-seeds.ts, seed-table.ts). */
import { Problem } from '../shared/config';
import { UsageError } from '../shared/errors';
import { parseSeeds } from '../training/jobs/eval-seeds';

/**
 * A script's seeds (SEEDS, CHECK_SEEDS): one whole number, or `kais eval --seeds`' a-b / a,b,...
 * (parseSeeds: no repeats, at most MAX_SEEDS); a one-line UsageError naming `name` otherwise.
 */
export function seedList(v: string, name = 'SEEDS'): number[] {
  const t = v.trim();
  if (/^\d+$/.test(t) && Number.isSafeInteger(Number(t))) return [Number(t)];
  const seeds = parseSeeds(t);
  if (seeds instanceof Problem) throw new UsageError(`${name}: ${seeds.why}`);
  return seeds;
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
