/**
 * Canary rollout (issue 17 item 2): a new weight version goes to a share of the eAPs first; the
 * orchestrator compares what those eAPs' devices got (the agents' telemetry: requests, answers,
 * answers in time) with what the other eAPs' got over the same windows, then promotes the version
 * (published to every agent) or rolls it back (every agent gets the last good version again, as
 * a new version number: versions only grow, so the agents apply it as any other).
 *
 * The rule (`canaryDecision`, pure; docs/safe-learning.md), per evaluation window k = 1..maxWindows
 * on the counts accumulated since the canary's start:
 *
 *   p_c, p_k  throughput rate (in time / requests) of the canary eAPs and of the control eAPs
 *   d         p_c - p_k, minus the same difference over the `baselineS` before the start (the
 *             difference-in-differences: eAPs are not alike, a canary on a weaker eAP must not
 *             read as a worse version), when the baseline has `minRequests` per group
 *   se        sqrt of the variance of d: for the difference during the canary (and again for the
 *             baseline's), the larger of the binomial p(1-p)/n_c + p(1-p)/n_k and the
 *             cluster-robust variance from the difference's spread over the seconds
 *             (`clusterDiffVariance`: requests that fail together, as in an overflowing queue,
 *             make rates swing more than independent ones would; swings both groups share cancel;
 *             with the covariance of seconds up to `lagS` apart, since an answer is counted in the
 *             second it came, not its request's: lagS 0 overstated se 1.2-1.9x on replayed runs)
 *   z         (d + margin) / se: the distance of d from the boundary "the canary loses `margin`"
 *   z*        the standard normal quantile of 1 - alpha / maxWindows (one-sided, Bonferroni over
 *             the windows: with up to maxWindows looks, the chance of a wrong verdict either way
 *             stays below alpha when the counts are binomial)
 *
 *   wait      either group has fewer than `minRequests` requests, or -z* <= z <= z*
 *   rollback  z < -z*   (the canary is worse than the control by more than `margin`, one-sided at alpha)
 *   promote   z > z*    (the canary is not worse by more than `margin`: a non-inferiority test)
 *   last window, still undecided: promote if d >= -margin (the estimate is within the margin),
 *             else roll back; fewer than `minRequests` by then: roll back (never published to
 *             every eAP unmeasured).
 *
 * Why these choices: the throughput rate is a proportion of requests, so the two-proportion
 * (Wald) test is the textbook one; the margin is what a version may cost before it is called worse
 * (a learned version that is as good as the last one must be promotable: testing against 0 would
 * never promote it, or roll back every version with a tiny loss once the counts are large); the
 * late and refused shares are reported with every verdict (they are the two parts of 1 - rate).
 * What the rule assumes and does not hold exactly: requests are not independent (a queue that
 * overflows fails many at once), so the binomial variance alone understates the spread of a rate;
 * the per-second clusters catch failures that come together within a second, not a queue that
 * stays long for tens of seconds (seconds are then correlated too), and the margin absorbs part of
 * the rest. A version so bad that the live rate drops by tens of points (the bad-weights drill) is
 * rolled back at the first window.
 *
 * Measurement: each eAP's telemetry counts from `settleS` after it applied the canary version (the
 * canary eAPs, per the agents' acks) or after the start (the others), so requests dispatched by
 * the previous version and answered later are mostly left out. A new version proposed while a
 * canary runs waits (the newest one only); a rollback drops it (it was learned on top of the
 * rolled-back version) and the learner reloads the good one.
 *
 * Every canary starts with its whole baseline (`baselineMissing`): `baselineS` seconds in which every
 * eAP ran the same version, counted from the last canary's end (+ settleS) or the orchestrator's
 * start. A version proposed before then waits (`waiting`, event `canary-baseline`), and so does the
 * one queued behind a canary once that canary is promoted (before session 53 it started at once,
 * with no baseline: the difference between the groups stayed in d).
 *
 * Restart: the running canary is kept in the store (`canaryState`); an orchestrator that starts
 * with a canary version as its latest rolls it back at once (it was never shown good).
 *
 * Under the actor switch (`mainActorSinceMs`): a canary judges the main actor (every placement names
 * it while one runs), so its baseline is measured under the main actor too. A version proposed
 * while the light actor dispatches, or before the main one has dispatched for `settleS +
 * baselineS`, waits (`waiting`; event `canary-baseline`; the placement names the main actor from
 * then on, `onBaselineStarted`) and starts once that baseline is there; the baseline reads only
 * the main actor's seconds. A newer proposal replaces the waiting one (either wait); neither a
 * waiting nor a queued version is kept over a restart (a learned version comes again, a drill does not).
 */
import type { EapId } from '../shared/domain';
import type { ActorHeadName, NodeSample, WeightsBody } from '../shared/protocol/envelope';
import type { WeightTensor } from '../shared/protocol/weights';
import type { RejectionSource } from './store';

export interface CanaryConfig {
  /** Share of the eAPs that get a new version first (at least one eAP, at most all but one). */
  share: number;
  /** Wall seconds of one evaluation window. */
  windowS: number;
  /** Windows before the verdict is forced (1..100). */
  maxWindows: number;
  /** Throughput-rate loss a version may have before it is called worse (0..0.5). */
  margin: number;
  /** Chance of a wrong verdict over all the windows (one-sided, Bonferroni over the windows), (0, 0.5]. */
  alpha: number;
  /** Fewest requests per group a verdict may rest on. */
  minRequests: number;
  /** Seconds after an eAP applied the version (or, for the others, the start) before its counts are taken. */
  settleS: number;
  /** Seconds before the start whose counts are the baseline difference between the groups (0: none). */
  baselineS: number;
  /** How many seconds apart telemetry seconds may be correlated, for the difference's variance (`clusterDiffVariance`; 0..30). */
  lagS: number;
  /**
   * Which eAPs get a new version first: `first` (the first round(share x eAPs)), `rotate` (as many,
   * the next ones in turn at each canary, so no eAP always bears the risk), or a list of eAP ids
   * (the operator's canary zone; `share` is then not read).
   */
  eaps: CanaryEapChoice;
}

export type CanaryEapChoice = 'first' | 'rotate' | readonly EapId[];

export const DEFAULT_CANARY: CanaryConfig = {
  share: 0.4,
  windowS: 10,
  // 8 since session 54 (4 before), by a rule fixed before its two held-out runs: false alarms 7%
  // against 10% worst case, 5-point losses caught as often, verdicts about 3 windows later
  // (docs/safe-learning.md, "Four, six or eight windows")
  maxWindows: 8,
  margin: 0.03,
  alpha: 0.05,
  minRequests: 300,
  settleS: 2,
  baselineS: 120,
  lagS: 1,
  eaps: 'first',
};

/** The problem with `c` in one phrase naming the field, or null (`numEaps`: the scenario's, when known, for the eAP list). */
export function canaryConfigProblem(c: CanaryConfig, numEaps?: number): { field: string; why: string } | null {
  const num = (x: unknown) => typeof x === 'number' && Number.isFinite(x);
  if (!(num(c.share) && c.share > 0 && c.share < 1)) return { field: 'share', why: `must be a share in (0, 1), got ${String(c.share)}` };
  if (!(num(c.windowS) && c.windowS >= 0.1 && c.windowS <= 3600))
    return { field: 'windowS', why: `must be a number of seconds in [0.1, 3600], got ${String(c.windowS)}` };
  if (!(Number.isInteger(c.maxWindows) && c.maxWindows >= 1 && c.maxWindows <= 100))
    return { field: 'maxWindows', why: `must be an integer in [1, 100], got ${String(c.maxWindows)}` };
  if (!(num(c.margin) && c.margin >= 0 && c.margin <= 0.5)) return { field: 'margin', why: `must be in [0, 0.5], got ${String(c.margin)}` };
  if (!(num(c.alpha) && c.alpha > 0 && c.alpha <= 0.5)) return { field: 'alpha', why: `must be in (0, 0.5], got ${String(c.alpha)}` };
  if (!(Number.isInteger(c.minRequests) && c.minRequests >= 1 && c.minRequests <= 1e9))
    return { field: 'minRequests', why: `must be an integer in [1, 1e9], got ${String(c.minRequests)}` };
  if (!(num(c.settleS) && c.settleS >= 0 && c.settleS <= 600))
    return { field: 'settleS', why: `must be a number of seconds in [0, 600], got ${String(c.settleS)}` };
  if (!(num(c.baselineS) && c.baselineS >= 0 && c.baselineS <= 3600))
    return { field: 'baselineS', why: `must be a number of seconds in [0, 3600], got ${String(c.baselineS)}` };
  if (!(Number.isInteger(c.lagS) && c.lagS >= 0 && c.lagS <= 30))
    return { field: 'lagS', why: `must be an integer number of seconds in [0, 30], got ${String(c.lagS)}` };
  return canaryEapsProblem(c.eaps, numEaps);
}

function canaryEapsProblem(e: unknown, numEaps: number | undefined): { field: string; why: string } | null {
  if (e === 'first' || e === 'rotate') return null;
  const bad = (why: string) => ({ field: 'eaps', why });
  if (!Array.isArray(e)) return bad(`must be "first", "rotate" or a list of eAP ids, got ${JSON.stringify(e) ?? String(e)}`);
  if (e.length === 0) return bad('must name at least one eAP');
  for (const x of e as unknown[])
    if (!(Number.isInteger(x) && (x as number) >= 0))
      return bad(`must list eAP ids (integers from 0), got ${JSON.stringify(x) ?? String(x)}`);
  if (new Set(e).size !== e.length) return bad(`names an eAP twice: ${JSON.stringify(e)}`);
  if (numEaps !== undefined) {
    const out = (e as number[]).find((x) => x >= numEaps);
    if (out !== undefined) return bad(`names eAP ${out}, but the scenario's eAPs are 0-${numEaps - 1}`);
    if (e.length >= numEaps) return bad(`must leave at least one eAP as the control, got all ${numEaps}`);
  }
  return null;
}

/**
 * The longest a version waits for its verdict with `c`, in seconds: up to `maxWindows` windows after
 * `settleS`, and before them, when it waits for a baseline under the main actor, `settleS + baselineS`.
 */
export function canaryLongestS(c: CanaryConfig, baselineWait: boolean): number {
  return c.settleS + c.maxWindows * c.windowS + (baselineWait ? c.settleS + c.baselineS : 0);
}

/** The canary eAPs of a cluster of `numEaps`: the first round(share x numEaps), at least 1, at most numEaps - 1. */
export function canaryEaps(share: number, numEaps: number): EapId[] {
  const k = Math.min(numEaps - 1, Math.max(1, Math.round(share * numEaps)));
  return Array.from({ length: Math.max(0, k) }, (_, i) => i);
}

/**
 * The eAPs of canary number `round` (0 for the first one an orchestrator starts): with `rotate`, as
 * many as `first` takes, starting where the previous canary's group ended (wrapping around), so over
 * numEaps / k canaries every eAP has been in one; in ascending order.
 */
export function canaryGroup(c: Pick<CanaryConfig, 'share' | 'eaps'>, numEaps: number, round: number): EapId[] {
  if (Array.isArray(c.eaps)) return [...(c.eaps as readonly EapId[])].sort((a, b) => a - b);
  const first = canaryEaps(c.share, numEaps);
  if (c.eaps !== 'rotate') return first;
  const from = (round * first.length) % numEaps;
  return first.map((i) => (from + i) % numEaps).sort((a, b) => a - b);
}

/** Each eAP's counts in a canary (CanaryRollout.perEap) in one phrase: "per eAP, in time of requests: canary 0 0.520 of 1030, 1 - of 0; control 2 0.760 of 1544" (the verdicts' events, kais status). */
export function perEapText(rows: readonly { eap: number; canary: boolean; requests: number; inDeadline: number }[]): string {
  const part = (canary: boolean) =>
    rows
      .filter((r) => r.canary === canary)
      .map((r) => `${r.eap} ${r.requests > 0 ? (r.inDeadline / r.requests).toFixed(3) : '-'} of ${r.requests}`)
      .join(', ');
  return `per eAP, in time of requests: canary ${part(true)}; control ${part(false)}`;
}

/** What one group of eAPs' devices got over a stretch of time (the agents' telemetry). */
export interface Outcomes {
  requests: number;
  inDeadline: number;
  /** Answered after the deadline. */
  late: number;
  /** Not answered successfully (refused, timed out, expired). */
  refused: number;
}

export const NO_OUTCOMES: Outcomes = { requests: 0, inDeadline: 0, late: 0, refused: 0 };

export interface CanaryEvidence {
  canary: Outcomes;
  control: Outcomes;
  /**
   * Variance of p_canary - p_control from its spread over the seconds (`clusterDiffVariance`);
   * absent: fewer than 3 seconds.
   */
  diffVar?: number;
  /** The same groups before the start (both on the previous version); null: none. */
  baseline: { canary: Outcomes; control: Outcomes; diffVar?: number } | null;
}

export interface CanaryDecision {
  decision: 'promote' | 'rollback' | 'wait';
  /** d: canary rate - control rate (minus the baseline difference when used). */
  diff: number;
  se: number;
  /** (d + margin) / se. */
  z: number;
  /** z*: the one-sided quantile used. */
  critical: number;
  usedBaseline: boolean;
  reason: string;
}

/** Standard normal quantile (Acklam's rational approximation, relative error < 1.2e-9), 0 < p < 1. */
export function normalQuantile(p: number): number {
  if (!(p > 0 && p < 1)) throw new RangeError(`normalQuantile: p must be in (0, 1), got ${p}`);
  const a = [-39.69683028665376, 220.9460984245205, -275.9285104469687, 138.357751867269, -30.66479806614716, 2.506628277459239];
  const b = [-54.47609879822406, 161.5858368580409, -155.6989798598866, 66.80131188771972, -13.28068155288572];
  const c = [-0.007784894002430293, -0.3223964580411365, -2.400758277161838, -2.549732539343734, 4.374664141464968, 2.938163982698783];
  const d = [0.007784695709041462, 0.3224671290700398, 2.445134137142996, 3.754408661907416];
  const lo = 0.02425;
  if (p < lo) {
    const q = Math.sqrt(-2 * Math.log(p));
    return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  }
  if (p > 1 - lo) return -normalQuantile(1 - p);
  const q = p - 0.5;
  const r = q * q;
  return (
    ((((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q) /
    (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1)
  );
}

/** Rate and its binomial variance; the variance uses (x + 0.5) / (n + 1) so that a rate of 0 or 1 still has some. */
function rateOf(o: Outcomes): { p: number; v: number } {
  const p = o.requests > 0 ? o.inDeadline / o.requests : 0;
  const q = (o.inDeadline + 0.5) / (o.requests + 1);
  return { p, v: (q * (1 - q)) / Math.max(1, o.requests) };
}

/** One second of both groups' telemetry: requests and in-time answers of the canary (c) and control (k) eAPs. */
export interface SecondCounts {
  nc: number;
  xc: number;
  nk: number;
  xk: number;
}

/**
 * Cluster-robust (linearisation) variance of d = Xc/Nc - Xk/Nk with each second a cluster, allowing
 * for the correlation of seconds up to `lagS` apart (the truncated kernel: every lag up to lagS at
 * full weight, floored at 0):
 *   u_b = (xc_b - p_c nc_b) / Nc - (xk_b - p_k nk_b) / Nk,
 *   var(d) = B / (B - 1) x max(0, sum_b u_b^2 + 2 sum_{l=1..lagS} sum_b u_b u_{b-l}).
 * `seconds` are consecutive (a second with no telemetry: all zero). Requests that fail together
 * (an overflowing queue) make the rates swing from second to second more than independent requests
 * would; swings both groups share (the machine, a burst of the workload) cancel in u_b. Neighbouring
 * seconds are not independent: an agent counts a request in the second it dispatched it and its
 * answer in the second the answer came, so a second's in-time count runs ahead of or behind its
 * requests and the next second makes up for it (negative correlation: lagS 0 overstates the spread
 * of the total, by twice or more in simulated telemetry with a fifth of the answers a second late),
 * and a queue that stays long makes seconds fail together (positive correlation: lagS 0 understates
 * it). Bartlett weights (Newey-West), which keep the sum positive by construction, take out only
 * part of a negative neighbour's share (two thirds at lag 1 with lagS 2), so they leave most of the
 * overstatement; the floor at 0 and the binomial floor in canaryDecision guard the truncated sum.
 * Undefined below 3 seconds or with a group empty.
 */
export function clusterDiffVariance(seconds: readonly SecondCounts[], lagS = 0): number | undefined {
  const B = seconds.length;
  const Nc = seconds.reduce((t, b) => t + b.nc, 0);
  const Nk = seconds.reduce((t, b) => t + b.nk, 0);
  if (B < 3 || Nc <= 0 || Nk <= 0) return undefined;
  const pc = seconds.reduce((t, b) => t + b.xc, 0) / Nc;
  const pk = seconds.reduce((t, b) => t + b.xk, 0) / Nk;
  const u = seconds.map((b) => (b.xc - pc * b.nc) / Nc - (b.xk - pk * b.nk) / Nk);
  let ss = u.reduce((t, x) => t + x * x, 0);
  for (let l = 1; l <= Math.min(lagS, B - 1); l++) for (let b = l; b < B; b++) ss += 2 * u[b] * u[b - l];
  return (B / (B - 1)) * Math.max(0, ss);
}

/** A map's seconds in order, with the seconds between them that had no telemetry as zeros. */
function consecutive(bySecond: ReadonlyMap<number, SecondCounts>): SecondCounts[] {
  if (bySecond.size === 0) return [];
  const keys = [...bySecond.keys()];
  const from = Math.min(...keys);
  return Array.from({ length: Math.max(...keys) - from + 1 }, (_, i) => bySecond.get(from + i) ?? { nc: 0, xc: 0, nk: 0, xk: 0 });
}

const pct = (x: number) => `${(100 * x).toFixed(1)}%`;

function describe(o: Outcomes): string {
  const n = Math.max(1, o.requests);
  return `${(o.inDeadline / n).toFixed(4)} on ${o.requests} requests (late ${pct(o.late / n)}, refused ${pct(o.refused / n)})`;
}

/**
 * The verdict after evaluation window `window` (1-based) on the counts accumulated so far; see the
 * file's comment for the rule.
 */
export function canaryDecision(
  e: CanaryEvidence,
  rule: Pick<CanaryConfig, 'margin' | 'alpha' | 'minRequests' | 'maxWindows'>,
  window: number,
): CanaryDecision {
  const last = window >= rule.maxWindows;
  const critical = normalQuantile(1 - rule.alpha / rule.maxWindows);
  const shown = `canary ${describe(e.canary)}, control ${describe(e.control)}`;
  if (e.canary.requests < rule.minRequests || e.control.requests < rule.minRequests) {
    const why = `too few requests to judge (${e.canary.requests} canary, ${e.control.requests} control; minRequests ${rule.minRequests})`;
    return {
      decision: last ? 'rollback' : 'wait',
      diff: NaN,
      se: NaN,
      z: NaN,
      critical,
      usedBaseline: false,
      reason: last ? `${why} after ${window} window(s): never published to every eAP unmeasured` : why,
    };
  }
  const c = rateOf(e.canary);
  const k = rateOf(e.control);
  let diff = c.p - k.p;
  let binomial = c.v + k.v;
  let variance = Math.max(binomial, e.diffVar ?? 0);
  const b = e.baseline;
  const usedBaseline = b !== null && b.canary.requests >= rule.minRequests && b.control.requests >= rule.minRequests;
  let base = '';
  if (usedBaseline) {
    const bc = rateOf(b.canary);
    const bk = rateOf(b.control);
    diff -= bc.p - bk.p;
    binomial += bc.v + bk.v;
    variance += Math.max(bc.v + bk.v, b.diffVar ?? 0);
    base = `; before the start canary eAPs ${bc.p.toFixed(4)}, control ${bk.p.toFixed(4)} (difference ${(bc.p - bk.p).toFixed(4)} taken out)`;
  } else if (b !== null) {
    base = `; no baseline (fewer than ${rule.minRequests} requests per group before the start)`;
  }
  const se = Math.sqrt(variance);
  const z = (diff + rule.margin) / se;
  const stat = `difference ${diff.toFixed(4)} (se ${se.toFixed(4)}, binomial alone ${Math.sqrt(binomial).toFixed(4)}), z ${z.toFixed(2)} against +-${critical.toFixed(2)} at margin ${rule.margin}`;
  const text = `${shown}${base}; ${stat}`;
  if (z < -critical)
    return { decision: 'rollback', diff, se, z, critical, usedBaseline, reason: `worse than the control by more than the margin: ${text}` };
  if (z > critical)
    return { decision: 'promote', diff, se, z, critical, usedBaseline, reason: `within the margin of the control: ${text}` };
  if (!last) return { decision: 'wait', diff, se, z, critical, usedBaseline, reason: `undecided: ${text}` };
  return diff >= -rule.margin
    ? {
        decision: 'promote',
        diff,
        se,
        z,
        critical,
        usedBaseline,
        reason: `undecided after ${window} windows, the estimate is within the margin: ${text}`,
      }
    : {
        decision: 'rollback',
        diff,
        se,
        z,
        critical,
        usedBaseline,
        reason: `undecided after ${window} windows, the estimate is beyond the margin: ${text}`,
      };
}

/** What the rollout needs of the registry (orchestrator/registry.ts). */
export interface CanaryRegistry {
  /** Next version, stored, pushed to every agent (no canary). */
  publishWeights(tensors: readonly WeightTensor[], head?: ActorHeadName): WeightsBody;
  /** Next version, stored, pushed to `eaps` only. */
  publishCanary(tensors: readonly WeightTensor[], head: ActorHeadName | undefined, eaps: readonly EapId[]): WeightsBody;
  /** The canary becomes every agent's version. */
  promoteCanary(): void;
  /** A new version holding `good`'s weights, pushed to every agent. */
  restore(good: number): WeightsBody;
}

/** What the rollout keeps in the store (orchestrator/store.ts). */
export interface CanaryStore {
  putCanaryState(s: { version: number; good: number | null; eaps: EapId[]; startedMs: number } | null): void;
  putRejectedModel(r: { version: number; basedOn: number | null; source: RejectionSource; reason: string; body: WeightsBody | null }): void;
}

export interface CanaryStats {
  started: number;
  promoted: number;
  rolledBack: number;
  /** Proposals replaced by a newer one, or dropped by a rollback, while a canary ran. */
  superseded: number;
}

export interface ActiveCanary {
  version: number;
  /** The last good version (null: none before it). */
  good: number | null;
  eaps: EapId[];
  startedMs: number;
  /** Windows judged so far. */
  windows: number;
  /** The last window's verdict (null before the first). */
  last: CanaryDecision | null;
}

interface Proposal {
  tensors: readonly WeightTensor[];
  head: ActorHeadName | undefined;
  source: string;
}

interface Sample {
  tsMs: number;
  eap: EapId;
  o: Outcomes;
}

export interface CanaryRolloutOptions {
  config: CanaryConfig;
  numEaps: number;
  registry: CanaryRegistry;
  store: CanaryStore;
  /** The latest version every agent holds now (the good one). */
  current: number | null;
  event: (kind: string, message: string) => void;
  /** A line per window that decides nothing (the verdicts are events). */
  log?: (line: string) => void;
  /** Every window's verdict, as judged (before it is acted on): the replay's calibration (scripts/canary-replay.ts). */
  onWindow?: (d: CanaryDecision, window: number) => void;
  /** A version started as a canary, with the source its proposal named (the learner learns from a learned one's decisions). */
  onStarted?: (body: WeightsBody, source: string) => void;
  /** After a rollback (the learner goes back to the restored version). */
  onRolledBack?: (restored: WeightsBody) => void;
  /** A canary ended (promoted or rolled back), before a waiting version starts: the placement loop's hold ends. */
  onFinished?: () => void;
  /**
   * The actor switch: since when every placement published has named the main actor (the one a
   * version changes; -Infinity: always, as for a model without the switch), or null while the light
   * one is named. Absent: no switch, the baseline is the `baselineS` before the start, as it was.
   */
  mainActorSinceMs?: () => number | null;
  /** A version waits for its baseline under the main actor: the placement must name the main actor now (main.ts republishes it). */
  onBaselineStarted?: () => void;
  now?: () => number;
  /** How often the windows are checked (ms). @defaultValue min(250, windowS x 250) */
  tickMs?: number;
}

export class CanaryRollout {
  readonly stats: CanaryStats = { started: 0, promoted: 0, rolledBack: 0, superseded: 0 };
  /** The last verdicts (promote / rollback), newest first, at most 20. */
  readonly recent: { version: number; decision: 'promote' | 'rollback'; reason: string; atMs: number }[] = [];
  private active: ActiveCanary | null = null;
  /** eAP -> when its counts start to count for the running canary (absent: not yet, for a canary eAP that has not applied it). */
  private countFrom = new Map<EapId, number>();
  private pending: Proposal | null = null;
  /** A version waiting for its baseline under the main actor (no canary runs meanwhile), and since when. */
  private waitingFor: (Proposal & { sinceMs: number }) | null = null;
  private good: number | null;
  /** Since when every eAP has run the same version (the baseline never reaches before it). */
  private stableSinceMs: number;
  private samples: Sample[] = [];
  private readonly timer: NodeJS.Timeout;
  private readonly now: () => number;

  constructor(private readonly o: CanaryRolloutOptions) {
    const problem = canaryConfigProblem(o.config, o.numEaps);
    if (problem) throw new TypeError(`CanaryRollout: canary.${problem.field} ${problem.why}`);
    if (!(Number.isInteger(o.numEaps) && o.numEaps >= 2))
      throw new TypeError(`CanaryRollout: numEaps must be an integer >= 2 (a canary needs a control), got ${o.numEaps}`);
    this.now = o.now ?? Date.now;
    this.good = o.current;
    this.stableSinceMs = this.now();
    this.timer = setInterval(() => this.tick(), o.tickMs ?? Math.min(250, o.config.windowS * 250));
    this.timer.unref();
  }

  /** The running canary, or null. */
  get running(): Readonly<ActiveCanary> | null {
    return this.active;
  }

  /**
   * A version waiting for its canary's baseline (no canary runs meanwhile): its source, since when,
   * and what it waits for now, as the `canary-baseline` event words it (null: none).
   */
  get waiting(): { source: string; sinceMs: number; waitsFor: string } | null {
    const w = this.waitingFor;
    // what it waits for now (null only for the moment before the tick that starts it)
    return w ? { source: w.source, sinceMs: w.sinceMs, waitsFor: this.baselineMissing()?.what ?? 'its start' } : null;
  }

  /** The version every eAP holds when no canary runs (null: none yet). */
  get goodVersion(): number | null {
    return this.good;
  }
  /** A version published to every agent outside the canary (the orchestrator's start: the stored actor with another light actor) is the good one now. */
  adoptGood(version: number): void {
    if (this.active === null) this.good = version;
  }

  /**
   * A new version to roll out: started now (returns its body, already pushed to the canary eAPs),
   * or, while a canary runs, kept as the next one (null; a newer proposal replaces it).
   */
  propose(tensors: readonly WeightTensor[], head: ActorHeadName | undefined, source: string): WeightsBody | null {
    if (this.active) {
      // one event per canary: a newer proposal replaces the waiting one (counted as superseded)
      if (this.pending) this.stats.superseded++;
      else
        this.o.event('canary-queued', `${source} version waits for the canary of v${this.active.version} to end (newer ones replace it)`);
      this.pending = { tensors, head, source };
      return null;
    }
    if (this.waitingFor) {
      // the newest version replaces the one waiting for its baseline; the wait goes on
      this.stats.superseded++;
      this.waitingFor = { tensors, head, source, sinceMs: this.waitingFor.sinceMs };
      return null;
    }
    if (this.good === null) {
      // nothing to compare with, nothing to roll back to: the first version goes to every agent
      const body = this.o.registry.publishWeights(tensors, head);
      this.good = body.version;
      this.o.event('canary-skip', `${source} weights v${body.version} to every eAP at once: no previous version to compare it with`);
      return body;
    }
    const w = this.baselineMissing();
    if (w) {
      this.waitingFor = { tensors, head, source, sinceMs: this.now() };
      this.o.event('canary-baseline', `${source} version waits for ${w.what} before its canary: ${w.why}`);
      this.o.onBaselineStarted?.();
      return null;
    }
    return this.start(tensors, head, source);
  }

  /**
   * What a canary starting now still lacks of its whole baseline, in the words of the
   * `canary-baseline` event, or null when it has it (always without a baseline). Under the actor
   * switch, a baseline under the main actor: it has dispatched, settled, for `settleS + baselineS`, so
   * the baseline reads only its seconds. And `baselineS` seconds in which every eAP ran the same
   * version, since the last canary's end and its settleS or the orchestrator's start (the telemetry
   * before it is not here). Before session 53 a version queued behind a canary started at its verdict
   * with no baseline at all (the difference between the groups left in d), and one proposed soon
   * after the start with what there was.
   */
  private baselineMissing(): { what: string; why: string } | null {
    const c = this.o.config;
    if (c.baselineS === 0) return null;
    const now = this.now();
    if (this.o.mainActorSinceMs) {
      // a placement step may have named the main actor already (a heavy window): then the wait is the rest
      const since = this.o.mainActorSinceMs();
      if (since === null || since + (c.settleS + c.baselineS) * 1000 > now) {
        const dispatching =
          since === null ? 'the light actor dispatches now' : `the main actor has dispatched for ${((now - since) / 1000).toFixed(1)} s`;
        return { what: `a baseline under the main actor (${c.settleS + c.baselineS} s of it)`, why: dispatching };
      }
    }
    if (this.stableSinceMs + c.baselineS * 1000 <= now) return null;
    const stable = Math.max(0, (now - this.stableSinceMs) / 1000).toFixed(1);
    const ended = this.stats.promoted + this.stats.rolledBack > 0;
    return {
      what: `a baseline of ${c.baselineS} s with every eAP on the same version`,
      why: `${stable} s so far, since ${ended ? 'the last canary ended' : 'the orchestrator started'}`,
    };
  }

  /** One telemetry frame of `eap` (the agents send one a second). */
  observe(eap: EapId, samples: readonly NodeSample[]): void {
    let requests = 0;
    let succeeded = 0;
    let inDeadline = 0;
    for (const s of samples) {
      requests += s.requests;
      succeeded += s.succeeded;
      inDeadline += s.inDeadline;
    }
    // requests are counted when dispatched and answers when they come: a frame may hold more answers than requests
    const n = Math.max(requests, succeeded);
    const o: Outcomes = { requests: n, inDeadline, late: succeeded - inDeadline, refused: n - succeeded };
    const now = this.now();
    this.samples.push({ tsMs: now, eap, o });
    const keepMs =
      1000 * (Math.max(this.o.config.baselineS, this.o.config.windowS * this.o.config.maxWindows) + this.o.config.settleS + 60);
    let drop = 0;
    while (drop < this.samples.length && this.samples[drop].tsMs < now - keepMs) drop++;
    if (drop > 0) this.samples.splice(0, drop);
  }

  /** An agent acked a weights version (the hub's 'applied'). */
  applied(eap: EapId, version: number): void {
    const a = this.active;
    if (a && version === a.version && a.eaps.includes(eap) && !this.countFrom.has(eap))
      this.countFrom.set(eap, this.now() + this.o.config.settleS * 1000);
  }

  /** Checks whether a window has ended and decides; the timer calls it, tests may too. */
  tick(): void {
    const a = this.active;
    if (!a) {
      const w = this.waitingFor;
      if (w && !this.baselineMissing()) {
        this.waitingFor = null;
        this.start(w.tensors, w.head, w.source);
      }
      return;
    }
    const c = this.o.config;
    const due = a.startedMs + (c.settleS + (a.windows + 1) * c.windowS) * 1000;
    if (this.now() < due) return;
    a.windows++;
    const d = canaryDecision(this.evidence(), c, a.windows);
    a.last = d;
    this.o.onWindow?.(d, a.windows);
    if (d.decision === 'promote') this.promote(d);
    else if (d.decision === 'rollback') this.rollback(d.reason, 'canary-rollback');
    else this.o.log?.(`canary: weights v${a.version} after window ${a.windows} of ${c.maxWindows}: ${d.reason}`);
  }

  /** At a start whose latest stored version is a canary that never ended (a restart): roll it back. */
  resumeInterrupted(s: { version: number; good: number | null; eaps: EapId[]; startedMs: number }, latest: number | null): void {
    if (latest !== s.version || s.good === null) {
      this.o.store.putCanaryState(null);
      return;
    }
    this.active = { ...s, windows: 0, last: null };
    this.rollback('the orchestrator restarted during the canary: the version was never shown good', 'canary-rollback');
  }

  dispose(): void {
    clearInterval(this.timer);
  }

  /** The counts of both groups since the start (each eAP from its own start time), and before it. */
  evidence(): CanaryEvidence {
    const a = this.active!;
    const isCanary = new Set(a.eaps);
    const sum = (into: Outcomes, o: Outcomes) => {
      into.requests += o.requests;
      into.inDeadline += o.inDeadline;
      into.late += o.late;
      into.refused += o.refused;
    };
    const canary = { ...NO_OUTCOMES };
    const control = { ...NO_OUTCOMES };
    const before: { canary: Outcomes; control: Outcomes; diffVar?: number } = { canary: { ...NO_OUTCOMES }, control: { ...NO_OUTCOMES } };
    // both groups' requests and in-time answers per second (the clusters of the difference's variance)
    const during = new Map<number, SecondCounts>();
    const earlier = new Map<number, SecondCounts>();
    const add = (into: Outcomes, s: Sample) => {
      sum(into, s.o);
      const m = into === canary || into === control ? during : earlier;
      const key = Math.floor((s.tsMs - a.startedMs) / 1000);
      const b = m.get(key) ?? { nc: 0, xc: 0, nk: 0, xk: 0 };
      if (into === canary || into === before.canary) {
        b.nc += s.o.requests;
        b.xc += s.o.inDeadline;
      } else {
        b.nk += s.o.requests;
        b.xk += s.o.inDeadline;
      }
      m.set(key, b);
    };
    const baseFrom = Math.max(this.stableSinceMs, a.startedMs - this.o.config.baselineS * 1000);
    for (const s of this.samples) {
      const mine = isCanary.has(s.eap);
      if (s.tsMs < a.startedMs) {
        if (s.tsMs >= baseFrom) add(mine ? before.canary : before.control, s);
        continue;
      }
      if (this.counts(s, isCanary)) add(mine ? canary : control, s);
    }
    const lag = this.o.config.lagS;
    const diffVar = clusterDiffVariance(consecutive(during), lag);
    const baseVar = clusterDiffVariance(consecutive(earlier), lag);
    if (baseVar !== undefined) before.diffVar = baseVar;
    return { canary, control, ...(diffVar !== undefined ? { diffVar } : {}), baseline: this.o.config.baselineS > 0 ? before : null };
  }

  /** Whether sample `s` counts for the running canary: a canary eAP's from `settleS` after its ack, the others' from `settleS` after the start. */
  private counts(s: Sample, isCanary: ReadonlySet<EapId>): boolean {
    const from = isCanary.has(s.eap) ? this.countFrom.get(s.eap) : this.active!.startedMs + this.o.config.settleS * 1000;
    return from !== undefined && s.tsMs >= from;
  }

  /**
   * Each eAP's counts so far in the running canary (as `evidence` counts them), canary eAPs first,
   * each group in eAP order: which eAP a verdict rests on, and which one suffered most.
   */
  perEap(): { eap: EapId; canary: boolean; requests: number; inDeadline: number }[] {
    const a = this.active;
    if (!a) return [];
    const isCanary = new Set(a.eaps);
    const by = new Map<EapId, { requests: number; inDeadline: number }>();
    for (let e = 0; e < this.o.numEaps; e++) by.set(e, { requests: 0, inDeadline: 0 });
    for (const s of this.samples) {
      if (s.tsMs < a.startedMs || !this.counts(s, isCanary)) continue;
      // an eAP outside the scenario's count is in the control, as evidence() counts it
      const b = by.get(s.eap) ?? { requests: 0, inDeadline: 0 };
      by.set(s.eap, b);
      b.requests += s.o.requests;
      b.inDeadline += s.o.inDeadline;
    }
    const rows = [...by].sort((x, y) => x[0] - y[0]).map(([eap, b]) => ({ eap, canary: isCanary.has(eap), ...b }));
    return [...rows.filter((r) => r.canary), ...rows.filter((r) => !r.canary)];
  }

  /** The per-eAP counts as a phrase for a verdict's event, " (per eAP, in time of requests: ...)", or "" when nothing was counted. */
  private perEapPhrase(): string {
    const rows = this.perEap();
    return rows.some((r) => r.requests > 0) ? ` (${perEapText(rows)})` : '';
  }

  private start(tensors: readonly WeightTensor[], head: ActorHeadName | undefined, source: string): WeightsBody {
    // canary number stats.started: with `rotate`, the next eAPs in turn
    const eaps = canaryGroup(this.o.config, this.o.numEaps, this.stats.started);
    const body = this.o.registry.publishCanary(tensors, head, eaps);
    this.active = { version: body.version, good: this.good, eaps, startedMs: this.now(), windows: 0, last: null };
    this.countFrom = new Map();
    this.stats.started++;
    this.o.store.putCanaryState({ version: body.version, good: this.good, eaps: [...eaps], startedMs: this.active.startedMs });
    const c = this.o.config;
    this.o.event(
      'canary-start',
      `${source} weights v${body.version} to eAPs ${eaps.join(', ')} first (the others stay on v${this.good ?? 'none'}); ` +
        `up to ${c.maxWindows} windows of ${c.windowS} s after ${c.settleS} s, margin ${c.margin}, alpha ${c.alpha}, at least ${c.minRequests} requests per group, ` +
        `baseline ${c.baselineS > 0 ? `the ${c.baselineS} s before` : 'none'}, se over seconds up to ${c.lagS} apart`,
    );
    this.o.onStarted?.(body, source);
    return body;
  }

  private promote(d: CanaryDecision): void {
    const a = this.active!;
    const perEap = this.perEapPhrase();
    this.o.registry.promoteCanary();
    this.good = a.version;
    this.finish();
    this.stats.promoted++;
    this.remember(a.version, 'promote', d.reason);
    this.o.event('canary-promote', `weights v${a.version} to every eAP after ${a.windows} window(s): ${d.reason}${perEap}`);
    // the version queued behind it waits for a baseline of its own (the seconds before this verdict
    // had the canary eAPs on another version): `propose` starts it once that is there
    const next = this.pending;
    this.pending = null;
    if (next) this.propose(next.tensors, next.head, next.source);
  }

  /**
   * The admin's rollback (`kais weights --rollback`) while a canary runs: the canary version is
   * rolled back now, as a verdict would (event `admin-rollback`, kept as rejected by the admin); the
   * restored body and the event's message, or null when no canary runs.
   */
  rollBackNow(reason: string): { restored: WeightsBody; message: string } | null {
    if (!this.active) return null;
    return this.rollback(reason, 'admin-rollback', 'admin');
  }

  /**
   * Drops a version waiting for its baseline (no canary runs; the admin rolled back the version it
   * was learned from); whether one was dropped. A version queued behind a running canary goes with
   * the canary's rollback.
   */
  dropWaiting(): boolean {
    if (!this.waitingFor) return false;
    this.waitingFor = null;
    this.stats.superseded++;
    return true;
  }

  private rollback(reason: string, kind: string, source: 'canary' | 'admin' = 'canary'): { restored: WeightsBody; message: string } {
    const a = this.active!;
    const perEap = this.perEapPhrase();
    const restored = this.o.registry.restore(a.good!); // a canary starts only with a good version to go back to
    this.good = restored.version;
    this.o.store.putRejectedModel({ version: a.version, basedOn: a.good, source, reason, body: null });
    if (this.pending) this.stats.superseded++;
    const dropped = this.pending !== null;
    this.pending = null;
    this.finish();
    this.stats.rolledBack++;
    this.remember(a.version, 'rollback', reason);
    const message = `weights v${a.version} rolled back after ${a.windows} window(s); every eAP gets v${a.good}'s weights as v${restored.version}${dropped ? ' (the version waiting behind it is dropped)' : ''}: ${reason}${perEap}`;
    this.o.event(kind, message);
    this.o.onRolledBack?.(restored);
    return { restored, message };
  }

  private finish(): void {
    this.active = null;
    this.countFrom = new Map();
    this.stableSinceMs = this.now() + this.o.config.settleS * 1000;
    this.o.store.putCanaryState(null);
    this.o.onFinished?.();
  }

  private remember(version: number, decision: 'promote' | 'rollback', reason: string): void {
    this.recent.unshift({ version, decision, reason, atMs: this.now() });
    this.recent.length = Math.min(this.recent.length, 20);
  }
}
