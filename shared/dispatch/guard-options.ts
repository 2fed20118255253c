/**
 * The regime guard's settings as command-line options, declared once for every command that runs
 * the guard: `kais agent --guard` (the live agent), `kais up --guard` (passes them to its agents and
 * its prediction) and `kais eval` (its cmmac+guard pairs), so what an operator sets on an agent can
 * be evaluated in the simulator with the same flags.
 */
import { opt, resolveOptions, type OptionsOf } from '../config';
import { UsageError } from '../errors';
import { DEFAULT_GUARD, GUARD_FALLBACKS, guardOptionsProblem, MEASURED_SPREAD, type RegimeGuardOptions } from './guard';

/** What the --guard-spread-* flags default to: the shipped guard's share, else the measured opt-in. */
const SPREAD_DEFAULT = DEFAULT_GUARD.spread ?? MEASURED_SPREAD;

export const GUARD_SPEC = {
  guardFallback: opt.choice(GUARD_FALLBACKS, {
    default: DEFAULT_GUARD.fallback,
    describe: "the regime guard's (kais agent / kais up --guard, kais eval's cmmac+guard pairs) heuristic that decides in overload",
  }),
  guardEnter: opt.number({
    default: DEFAULT_GUARD.enter,
    min: 0,
    minExclusive: true,
    max: 1,
    describe: 'with the guard: late share at or above which the fallback takes over',
  }),
  guardExit: opt.number({
    default: DEFAULT_GUARD.exit,
    min: 0,
    max: 1,
    describe: 'with the guard: late share at or below which cmmac takes back over (below --guard-enter)',
  }),
  guardMid: opt.choice(['none', ...GUARD_FALLBACKS] as const, {
    default: DEFAULT_GUARD.mid?.fallback ?? 'none',
    describe: "with the guard: the heuristic of the middle level (between --guard-mid-enter and --guard-enter); 'none': two levels",
  }),
  guardMidEnter: opt.number({
    default: DEFAULT_GUARD.mid?.enter ?? 0.2,
    min: 0,
    minExclusive: true,
    max: 1,
    describe: 'with the guard and --guard-mid: late share at or above which the middle heuristic takes over (below --guard-enter)',
  }),
  guardMidExit: opt.number({
    default: DEFAULT_GUARD.mid?.exit ?? 0.15,
    min: 0,
    max: 1,
    describe: 'with the guard and --guard-mid: late share at or below which cmmac takes back over from it (below --guard-mid-enter)',
  }),
  guardSpread: opt.choice(['none', ...GUARD_FALLBACKS] as const, {
    default: DEFAULT_GUARD.spread?.fallback ?? 'none',
    describe:
      "with the guard: the heuristic of the spreading share, which takes a share of the requests (drawn per request) rising with the late share from --guard-spread-from to --guard-spread-to, whatever level decides; 'none': no spreading share",
  }),
  guardSpreadFrom: opt.number({
    default: SPREAD_DEFAULT.from,
    min: 0,
    max: 1,
    maxExclusive: true,
    describe: 'with the guard and --guard-spread: late share at which the spreading share starts to rise from 0',
  }),
  guardSpreadTo: opt.number({
    default: SPREAD_DEFAULT.to,
    min: 0,
    max: 1,
    describe:
      'with the guard and --guard-spread: late share at which the spreading share reaches --guard-spread-max (above --guard-spread-from)',
  }),
  guardSpreadMax: opt.number({
    default: SPREAD_DEFAULT.max,
    min: 0,
    minExclusive: true,
    max: 1,
    describe: 'with the guard and --guard-spread: the largest share of requests the spreading share takes',
  }),
};

/**
 * The guard the flags describe (DEFAULT_GUARD's half-life and dwell; a flag left out keeps
 * DEFAULT_GUARD's value), or a UsageError naming the flag at fault. Values that come in through
 * code are parsed and checked by GUARD_SPEC as the command line's are.
 */
export function guardFromFlags(given: Partial<OptionsOf<typeof GUARD_SPEC>>): RegimeGuardOptions {
  const a = resolveOptions(GUARD_SPEC, given);
  if (a.guardExit >= a.guardEnter) throw new UsageError(`--guard-exit: must be below --guard-enter (${a.guardEnter}), got ${a.guardExit}`);
  const guard: RegimeGuardOptions = {
    ...DEFAULT_GUARD,
    fallback: a.guardFallback,
    enter: a.guardEnter,
    exit: a.guardExit,
    mid: a.guardMid === 'none' ? null : { fallback: a.guardMid, enter: a.guardMidEnter, exit: a.guardMidExit },
    spread:
      a.guardSpread === 'none' ? null : { fallback: a.guardSpread, from: a.guardSpreadFrom, to: a.guardSpreadTo, max: a.guardSpreadMax },
  };
  // a level's flags are checked while the level is 'none' too (as every --guard-* flag is checked
  // with or without --guard), when they were set: the middle level's defaults are not held
  // against a low --guard-enter of a guard without one
  const midSet = a.guardMidEnter !== GUARD_SPEC.guardMidEnter.default || a.guardMidExit !== GUARD_SPEC.guardMidExit.default;
  const checked: RegimeGuardOptions = {
    ...guard,
    mid: guard.mid ?? (midSet ? { fallback: a.guardFallback, enter: a.guardMidEnter, exit: a.guardMidExit } : null),
    spread: guard.spread ?? { fallback: a.guardFallback, from: a.guardSpreadFrom, to: a.guardSpreadTo, max: a.guardSpreadMax },
  };
  const problem = guardOptionsProblem(checked);
  if (problem) {
    // guardOptionsProblem speaks of fields ('mid.enter must be in (0, enter=0.45)'): name the flags instead
    const flag: Record<string, string> = {
      fallback: 'guard-fallback',
      enter: 'guard-enter',
      exit: 'guard-exit',
      'mid.fallback': 'guard-mid',
      'mid.enter': 'guard-mid-enter',
      'mid.exit': 'guard-mid-exit',
      'spread.fallback': 'guard-spread',
      'spread.from': 'guard-spread-from',
      'spread.to': 'guard-spread-to',
      'spread.max': 'guard-spread-max',
    };
    const [field] = problem.split(' ', 1);
    const rest = problem.slice(field.length + 1).replace(/(mid\.enter|spread\.from|enter)=/g, (_m, f: string) => `--${flag[f]}=`);
    throw new UsageError(`--${flag[field] ?? `guard-${field}`}: ${rest}`);
  }
  return guard;
}

/** The command-line flags that make `g` (guardFromFlags' inverse; half-life and dwell are not flags): what `kais up` passes its agents. */
export function guardFlags(g: RegimeGuardOptions): string[] {
  return [
    '--guard-fallback',
    g.fallback,
    '--guard-enter',
    String(g.enter),
    '--guard-exit',
    String(g.exit),
    '--guard-mid',
    g.mid ? g.mid.fallback : 'none',
    ...(g.mid ? ['--guard-mid-enter', String(g.mid.enter), '--guard-mid-exit', String(g.mid.exit)] : []),
    '--guard-spread',
    g.spread ? g.spread.fallback : 'none',
    ...(g.spread
      ? ['--guard-spread-from', String(g.spread.from), '--guard-spread-to', String(g.spread.to), '--guard-spread-max', String(g.spread.max)]
      : []),
  ];
}

/** The guard in one line, for a report: its levels with their hysteresis, half-life and dwell. */
export function guardSummary(g: RegimeGuardOptions): string {
  const level = (name: string, enter: number, exit: number) => `${name} from a late share of ${enter} (back at ${exit})`;
  const levels = [...(g.mid ? [level(g.mid.fallback, g.mid.enter, g.mid.exit)] : []), level(g.fallback, g.enter, g.exit)];
  const sp = g.spread;
  const spread = sp ? `; ${sp.fallback} takes a share rising to ${sp.max} between late shares ${sp.from} and ${sp.to}` : '';
  return `${levels.join(', ')}${spread}; half-life ${g.halfLife} decisions, dwell ${g.minDwell}`;
}
