/**
 * The guard's flags (shared/dispatch/guard-options.ts): what kais agent, kais eval and kais up
 * read, and what kais up passes its agents, are one guard both ways.
 */
import { DEFAULT_GUARD, MEASURED_SPREAD, type RegimeGuardOptions } from '../../../shared/dispatch/guard';
import { guardFlags, guardFromFlags, guardSummary } from '../../../shared/dispatch/guard-options';
import { UsageError } from '../../../shared/errors';

/** `--guard-x v ...` as the parsed options yargs would give (camelCase keys, numbers as numbers). */
function parse(flags: string[]): Record<string, string | number> {
  const out: Record<string, string | number> = {};
  for (let k = 0; k < flags.length; k += 2) {
    const key = flags[k].slice(2).replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
    const v = flags[k + 1];
    out[key] = Number.isNaN(Number(v)) ? v : Number(v);
  }
  return out;
}

describe('guard flags', () => {
  it('no flag given: the shipped guard', () => {
    expect(guardFromFlags({})).toEqual(DEFAULT_GUARD);
  });

  it("a guard without a middle level may enter below the middle level's default", () => {
    expect(guardFromFlags({ guardMid: 'none', guardEnter: 0.15, guardExit: 0.1 })).toEqual({
      ...DEFAULT_GUARD,
      mid: null,
      enter: 0.15,
      exit: 0.1,
    });
  });

  const twoLevels: RegimeGuardOptions = { ...DEFAULT_GUARD, fallback: 'p2c', enter: 0.3, exit: 0.2, mid: null };
  const threeLevels: RegimeGuardOptions = { ...DEFAULT_GUARD, enter: 0.3, exit: 0.2, mid: { fallback: 'jsq', enter: 0.1, exit: 0.05 } };
  const spreading: RegimeGuardOptions = { ...DEFAULT_GUARD, spread: { fallback: 'round-robin', from: 0.2, to: 0.4, max: 0.8 } };
  it.each([DEFAULT_GUARD, twoLevels, threeLevels, spreading])('guardFlags and guardFromFlags are inverses: %j', (g) => {
    expect(guardFromFlags(parse(guardFlags(g)))).toEqual(g);
  });

  it('a summary names every level with its hysteresis', () => {
    expect(guardSummary(twoLevels)).toBe('p2c from a late share of 0.3 (back at 0.2); half-life 200 decisions, dwell 200');
    expect(guardSummary(threeLevels)).toBe(
      'jsq from a late share of 0.1 (back at 0.05), round-robin from a late share of 0.3 (back at 0.2); half-life 200 decisions, dwell 200',
    );
    expect(guardSummary(spreading)).toBe(
      'lec from a late share of 0.2 (back at 0.15), round-robin from a late share of 0.45 (back at 0.35); round-robin takes a share rising to 0.8 between late shares 0.2 and 0.4; half-life 200 decisions, dwell 200',
    );
  });

  it('--guard-spread alone: the measured spreading share (round-robin, 0.2 to 0.35, max 1), the levels unchanged', () => {
    expect(MEASURED_SPREAD).toEqual({ fallback: 'round-robin', from: 0.2, to: 0.35, max: 1 });
    expect(guardFromFlags({ guardSpread: 'round-robin' })).toEqual({ ...DEFAULT_GUARD, spread: MEASURED_SPREAD });
  });

  it('--guard-spread with its range: the spreading share, the levels unchanged', () => {
    expect(guardFromFlags({ guardSpread: 'p2c', guardSpreadFrom: 0.1, guardSpreadTo: 0.3 })).toEqual({
      ...DEFAULT_GUARD,
      spread: { fallback: 'p2c', from: 0.1, to: 0.3, max: 1 },
    });
  });

  it.each([
    [{ guardEnter: 0.3, guardExit: 0.3 }, /^--guard-exit: must be below --guard-enter \(0\.3\), got 0\.3$/],
    [{ guardMidEnter: 0.5 }, /^--guard-mid-enter: must be in \(0, --guard-enter=0\.45\), got 0\.5$/],
    [{ guardMidExit: 0.25 }, /^--guard-mid-exit: must be in \[0, --guard-mid-enter=0\.2\), got 0\.25$/],
    // checked by the flag's own parser, as on the command line
    [{ guardFallback: 'greedy' as never }, /^--guard-fallback: expected one of round-robin, lec, p2c, jsq, got "greedy"$/],
    [{ guardEnter: 0 }, /^--guard-enter: expected a number > 0 and <= 1, got 0$/],
    [
      { guardSpread: 'round-robin', guardSpreadFrom: 0.4, guardSpreadTo: 0.3 },
      /^--guard-spread-to: must be in \(--guard-spread-from=0\.4, 1\], got 0\.3$/,
    ],
    [{ guardSpread: 'round-robin', guardSpreadFrom: 1 }, /^--guard-spread-from: expected a number >= 0 and < 1, got 1$/],
    // a level's flags are checked while the level is off, as every guard flag is without --guard
    [{ guardSpreadFrom: 0.5, guardSpreadTo: 0.4 }, /^--guard-spread-to: must be in \(--guard-spread-from=0\.5, 1\], got 0\.4$/],
    [{ guardMid: 'none', guardMidEnter: 0.9 }, /^--guard-mid-enter: must be in \(0, --guard-enter=0\.45\), got 0\.9$/],
    [{ guardMid: 'none', guardMidExit: 0.9 }, /^--guard-mid-exit: must be in \[0, --guard-mid-enter=0\.2\), got 0\.9$/],
    [
      { guardMid: 'none', guardEnter: 0.15, guardExit: 0.1, guardMidEnter: 0.3 },
      /^--guard-mid-enter: must be in \(0, --guard-enter=0\.15\)/,
    ],
    [{ guardSpreadMax: 0 }, /^--guard-spread-max: expected a number > 0 and <= 1, got 0$/],
  ])('%j: a UsageError naming the flag', (given, problem) => {
    expect(() => guardFromFlags(given)).toThrow(UsageError);
    expect(() => guardFromFlags(given)).toThrow(problem);
  });
});
