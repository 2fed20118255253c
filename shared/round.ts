/**
 * x rounded to `digits` decimals (half away from zero as Math.round: up for positive halves),
 * for the figures of reports and JSON output. Default 4 digits.
 */
export function round(x: number, digits = 4): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}
