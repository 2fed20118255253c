/**
 * The `--calibration` block of `kais eval`'s tables (one seed, and --seeds pooled over the seeds):
 * per pair and side, the decisions sent there, the share that finished in time, how often the view's
 * eta of the chosen target met the deadline, and how often those requests then did (rollout.ts
 * ViewCalibration).
 */
import type { CalibrationRow, ViewCalibration } from './rollout';
import { alignedLines } from './text-table';

/** The counts of several runs of one pair, added side by side. */
export function poolCalibration(runs: readonly ViewCalibration[]): ViewCalibration {
  const add = (rows: readonly CalibrationRow[]): CalibrationRow => ({
    sent: rows.reduce((s, r) => s + r.sent, 0),
    unfinished: rows.reduce((s, r) => s + r.unfinished, 0),
    inTime: rows.reduce((s, r) => s + r.inTime, 0),
    predictedInTime: rows.reduce((s, r) => s + r.predictedInTime, 0),
    inTimeWhenPredicted: rows.reduce((s, r) => s + r.inTimeWhenPredicted, 0),
  });
  return { edge: add(runs.map((c) => c.edge)), cloud: add(runs.map((c) => c.cloud)) };
}

/** Two lines per pair that has a calibration (edge, cloud), in the order given, under a header line; none without any. */
export function calibrationLines(
  pairs: readonly { policy: string; viewCalibration?: ViewCalibration }[],
  title = 'view calibration',
): string[] {
  const share = (n: number, d: number) => (d > 0 ? (n / d).toFixed(3) : '-');
  const rows: string[][] = [];
  for (const x of pairs) {
    const c = x.viewCalibration;
    if (!c) continue;
    for (const [side, row] of [
      ['edge', c.edge],
      ['cloud', c.cloud],
    ] as const) {
      rows.push([
        x.policy,
        side,
        String(row.sent),
        share(row.inTime, row.sent - row.unfinished),
        share(row.predictedInTime, row.sent),
        share(row.inTimeWhenPredicted, row.predictedInTime),
      ]);
    }
  }
  if (rows.length === 0) return [];
  return alignedLines([title, 'side', 'sent', 'in time', 'view: in time', 'in time when the view said so'], rows);
}
